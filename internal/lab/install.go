package lab

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// Programs are the binaries a lab installs, found beside stemctl.
var Programs = []string{"stemctl", "stem-mcp", "stem-dial"}

// Install copies each program from srcDir into dir (mode 0755, root's),
// where every account can run it; a file with the same bytes is left.
// A program missing beside stemctl fails its step.
func Install(srcDir, dir string, progress func(Step)) ([]Step, error) {
	var steps []Step
	var failed bool
	for _, p := range Programs {
		st := installOne(srcDir, dir, p)
		failed = failed || st.Result == Failed
		steps = append(steps, st)
		if progress != nil {
			progress(st)
		}
	}
	if failed {
		return steps, fmt.Errorf("not every program is installed: build them (make build) and run it again")
	}
	return steps, nil
}

func installOne(srcDir, dir, name string) Step {
	st := Step{Account: "system", Name: "install " + name}
	src, dst := filepath.Join(srcDir, name), filepath.Join(dir, name)
	data, err := os.ReadFile(src)
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	if have, err := os.ReadFile(dst); err == nil && bytes.Equal(have, data) {
		if fi, err := os.Lstat(dst); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() == 0o755 {
			st.Result, st.Detail = Already, dst
			return st
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	// A new file renamed over the old: a running program keeps its copy.
	tmp, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	st.Result, st.Detail = Done, dst
	return st
}
