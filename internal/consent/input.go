package consent

import (
	"fmt"
	"os"

	"golang.org/x/term"
)

// By names the host input behind a decision for the audit log and the
// record: the command and the terminal it was typed on, e.g.
// "stemctl allow on /dev/pts/3". Without a terminal it says so, so that a
// decision a script made is told apart from one the student typed.
func By(command string, in any) string {
	f, ok := in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return command + " without a terminal"
	}
	tty, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil || tty == "" {
		return command + " on a terminal"
	}
	return command + " on " + tty
}
