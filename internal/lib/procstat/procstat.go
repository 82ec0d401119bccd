// Package procstat reads a process's start time and state from
// /proc/PID/stat. A pid and its start time together name one process: a pid
// the kernel reuses later has another start time.
package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Start returns the start time of process pid (field 22 of /proc/PID/stat,
// in clock ticks since boot). A zombie is an error: it no longer runs.
func Start(pid int) (uint64, error) {
	fields, err := stat(pid)
	if err != nil {
		return 0, err
	}
	if fields[0] == "Z" {
		return 0, fmt.Errorf("process %d is a zombie", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// Stopped reports whether process pid is stopped (by SIGSTOP or a
// debugger): it cannot act until someone continues it.
func Stopped(pid int) bool {
	fields, err := stat(pid)
	return err == nil && (fields[0] == "T" || fields[0] == "t")
}

// stat returns the fields of /proc/PID/stat from field 3 (the state) on.
func stat(pid int) ([]string, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	// The command name (field 2) is in parentheses and may hold spaces
	// and parentheses of its own.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state); the start time is field 22.
	if len(fields) < 20 {
		return nil, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return fields, nil
}

// Same reports whether pid still runs and started at start.
func Same(pid int, start uint64) bool {
	got, err := Start(pid)
	return err == nil && got == start
}
