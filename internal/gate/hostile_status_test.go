package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/nvim/nvimtest"
	"github.com/stem-edu/stem/internal/probe"
	"github.com/stem-edu/stem/internal/registry"
)

// The gate's status asks each instance's nvim with probe.Nvim, as the
// real gate does. A taken-over nvim (one that claims an array of 2³²−1
// elements, one that answers with escape sequences) is reported as not
// answering, in one clean line, and the gate answers for every instance.
func TestStatusOfHostileServers(t *testing.T) {
	f := newFixture(t, levels.Observe.String(), "huge-t1", "text-t2")
	reg, err := registry.Open(f.state)
	if err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]string{"huge-t1": nvimtest.HostileHuge, "text-t2": nvimtest.HostileText} {
		sd := filepath.Join(f.runtime, name)
		if err := os.MkdirAll(sd, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := reg.Put(context.Background(), registry.Record{Instance: name, Profile: "native-amd64", ContainerID: strings.Repeat("a", 64), SocketDir: sd}); err != nil {
			t.Fatal(err)
		}
		listen(t, filepath.Join(sd, "t.sock"))
		ln, err := net.Listen("unix", filepath.Join(sd, "n.sock"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go (&nvimtest.Hostile{Mode: mode}).Serve(ln)
	}
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"--grant", f.grant.ID, "--config-dir", f.config}, Options{
		Getenv: f.env("status"), In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Serve: (&recorder{}).serve,
		Nvim: probe.Nvim,
	})
	if code != 0 {
		t.Fatalf("status: %d %s", code, errOut.String())
	}
	var st Status
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("status is not JSON: %v\n%s", err, out.String())
	}
	got := map[string]InstanceStatus{}
	for _, is := range st.Instances {
		got[is.Instance] = is
		if is.Nvim || is.Answers || strings.ContainsAny(is.Error, "\x1b\x07\n") || strings.ContainsRune(is.Error, 0x9b) {
			t.Errorf("%s: %+v", is.Instance, is)
		}
	}
	if e := got["huge-t1"].Error; !strings.Contains(e, "array of 4294967295 elements") {
		t.Errorf("huge-t1: %q", e)
	}
	if e := got["text-t2"].Error; !strings.Contains(e, nvimtest.EvilVisible) {
		t.Errorf("text-t2: %q", e)
	}
}
