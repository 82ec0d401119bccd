package cmdutil

import (
	"os"
	"os/user"
	"strconv"
)

// LocalAccount names the local Unix account for audit entries.
func LocalAccount() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid:" + strconv.Itoa(os.Getuid())
}
