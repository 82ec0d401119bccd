package teacher

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
)

// teacher dial takes an IPv6 address bare or in brackets (as a Hostname
// in ~/.ssh/config may give it) and relays to it.
func TestDialIPv6Forms(t *testing.T) {
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Fatalf("listen on [::1]: %v", err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 5)
				io.ReadFull(c, b)
				c.Write(append([]byte("echo:"), b...))
			}()
		}
	}()
	for _, host := range []string{"::1", "[::1]"} {
		ios, _, out, _ := iostreams.Test()
		pr, pw := io.Pipe()
		ios.In = pr
		go pw.Write([]byte("hello"))
		cmd := NewCmdDial(&cmdutil.Factory{IOStreams: ios}, nil)
		cmd.SetArgs([]string{host, port})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cmd.ExecuteContext(ctx)
		cancel()
		pw.Close()
		if err != nil || out.String() != "echo:hello" {
			t.Errorf("dial %s %s: %v, relayed %q", host, port, err, out.String())
		}
	}
	// Not an address: the error says what was dialled.
	ios, _, _, _ := iostreams.Test()
	pr, pw := io.Pipe()
	defer pw.Close()
	ios.In = pr
	cmd := NewCmdDial(&cmdutil.Factory{IOStreams: ios}, nil)
	cmd.SetArgs([]string{"[::1", port})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "connect to [[::1]:"+port) {
		t.Errorf("dial [::1: %v", err)
	}
}
