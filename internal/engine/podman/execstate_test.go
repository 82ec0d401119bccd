//go:build remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package podman

import (
	"strings"
	"testing"

	"github.com/containers/podman/v5/libpod/define"
)

// A session the service never recorded as started (it was killed between
// streaming the first output and saving the session) reads as not running
// with exit code 0 on the service started again: that is no exit.
func TestExecStateOfASessionNeverRecordedAsStarted(t *testing.T) {
	for _, c := range []struct {
		name string
		s    *define.InspectExecSession
		want string
	}{
		{"unknown", nil, "may still be running"},
		{"created", &define.InspectExecSession{}, "may still be running"},
		{"running", &define.InspectExecSession{Running: true, Pid: 42}, "still runs"},
		{"stopped", &define.InspectExecSession{CanRemove: true, ExitCode: 3}, "has ended with exit code 3"},
	} {
		if got := execState(c.s); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
