package nvimtest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestStartRestart(t *testing.T) {
	for _, opts := range []Options{{}, {NoUI: true}, {Terminal: true}} {
		n := Start(t, opts)
		if len(n.Socket) >= MaxSocketPath {
			t.Errorf("socket path is %d bytes", len(n.Socket))
		}
		if fi, err := os.Stat(filepath.Dir(n.Socket)); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("socket directory: %v %v", fi, err)
		}
		var cwd string
		var modeline bool
		n.Lua(t, &cwd, `return vim.loop.cwd()`)
		n.Lua(t, &modeline, `return vim.go.modeline`)
		if cwd != n.Dir || modeline {
			t.Errorf("%+v: cwd %q (want %q), modeline %v (sysinit not sourced?)", opts, cwd, n.Dir, modeline)
		}
		pid := n.PID()
		n.Exec(t, "let g:marker = 1")
		n.Restart(t)
		var marker int
		n.Lua(t, &marker, `return vim.g.marker or 0`)
		if n.PID() == pid || marker != 0 {
			t.Errorf("%+v: restart kept pid %d / state", opts, pid)
		}
	}
}

func TestSysinitFlag(t *testing.T) {
	n := Start(t, Options{NoSysinit: true, NoUI: true, Cmd: []string{"set modeline"}})
	var modeline bool
	n.Lua(t, &modeline, `return vim.go.modeline`)
	if !modeline {
		t.Error("--cmd 'set modeline' without sysinit.vim: modeline is off")
	}
}
