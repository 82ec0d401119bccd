package debug

import (
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/workspace"
)

func buildSpec(r *workspace.Resolved) engine.ExecSpec {
	return engine.ExecSpec{Cmd: []string{"bash", "-c", r.Commands.Build}, WorkDir: r.TaskDir}
}
