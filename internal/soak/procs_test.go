package soak_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// usage is what the soak watches of a process (or a set of them, summed).
type usage struct {
	rssKiB, fds int
}

func (u usage) add(v usage) usage { return usage{u.rssKiB + v.rssKiB, u.fds + v.fds} }

// sample reads a process's resident memory and open descriptors from
// /proc; a process that is gone is an error, not a zero.
func sample(pid int) (usage, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return usage{}, fmt.Errorf("process %d: %w", pid, err)
	}
	var u usage
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			u.rssKiB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return usage{}, fmt.Errorf("process %d: %w", pid, err)
	}
	u.fds = len(fds)
	return u, nil
}

// sampleAll sums the usage of pids.
func sampleAll(pids []int) (usage, error) {
	var sum usage
	for _, p := range pids {
		u, err := sample(p)
		if err != nil {
			return usage{}, err
		}
		sum = sum.add(u)
	}
	return sum, nil
}

// childrenNamed returns the children of pid whose command name is comm.
func childrenNamed(pid int, comm string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		id, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(data)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) && s[open+1:end] == comm {
			out = append(out, id)
		}
	}
	return out
}
