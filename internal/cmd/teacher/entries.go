package teacher

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/mcpconfig"
)

// studentEntry is config's entry for one student (--host), the notes for
// stderr, and a name to suggest when the default one is taken.
func studentEntry(ctx context.Context, opts *ConfigOptions) (mcpconfig.Entry, []string, string, error) {
	tg, notes, err := opts.Target.target(ctx, opts.F)
	if err != nil {
		return mcpconfig.Entry{}, nil, "", err
	}
	name := opts.Name
	if name == "" {
		name = defaultName(tg.Host)
	}
	if err := checkEntryName(name); err != nil {
		return mcpconfig.Entry{}, nil, "", err
	}
	e, err := Entry(tg, name, opts.Instance)
	if err != nil {
		return mcpconfig.Entry{}, nil, "", err
	}
	if transientPath(tg.Dial) {
		// The entry is kept and run later; status runs now and needs no such note.
		notes = append(notes, fmt.Sprintf("warning: the entry names %s, a temporary build (go run?) that will be gone: install stemctl and stem-dial (make build, then copy bin/ somewhere lasting) and run this again, or use --direct", tg.Dial))
	}
	return e, notes, suggestName(tg.Host), nil
}

// classEntry is config's entry for a whole class (--class): stem-mcp class
// on this machine, which reaches each student itself.
func classEntry(opts *ConfigOptions) (mcpconfig.Entry, []string, error) {
	if opts.Target.Host != "" || opts.Target.Key != "" || opts.Target.Port != 0 || len(opts.Target.SSHOptions) > 0 || opts.Instance != "" {
		return mcpconfig.Entry{}, nil, cmdutil.FlagErrorf("--class takes no --host, --key, --port, --ssh-option or --instance: the roster says how to reach each student (stemctl class list %s)", opts.Class)
	}
	d, err := opts.F.Dirs()
	if err != nil {
		return mcpconfig.Entry{}, nil, err
	}
	r, err := class.Load(d.Config, opts.Class)
	if err != nil {
		return mcpconfig.Entry{}, nil, err
	}
	bin, err := opts.F.MCPBinary()
	if err != nil {
		return mcpconfig.Entry{}, nil, err
	}
	name := opts.Name
	if name == "" {
		name = "stem-class-" + r.Name
	}
	if err := checkEntryName(name); err != nil {
		return mcpconfig.Entry{}, nil, err
	}
	// The agent CLI may run stem-mcp with another HOME or XDG_CONFIG_HOME
	// than this shell's: the entry names where the roster and the keys are.
	e := mcpconfig.Entry{Name: name, Command: bin, Args: []string{"class", "--class", r.Name},
		Env: map[string]string{"STEM_CONFIG_DIR": d.Config, "HOME": d.Home}}
	var notes []string
	if transientPath(bin) {
		notes = append(notes, fmt.Sprintf("warning: the entry names %s, a temporary build (go run?) that will be gone: install stem-mcp and run this again", bin))
	}
	if len(r.Students) == 0 {
		notes = append(notes, fmt.Sprintf("class %s has no students yet: add them with `stemctl class add %s USER@HOST`", r.Name, r.Name))
	}
	return e, notes, e.Validate()
}

// checkEntryName refuses a name "claude mcp add ... NAME -- CMD" would
// take for an option.
func checkEntryName(name string) error {
	if strings.HasPrefix(name, "-") {
		return cmdutil.FlagErrorf("--name %q: an entry name must not start with '-'", name)
	}
	return nil
}

// classOf is the class an entry of ours serves, or "".
func classOf(e mcpconfig.Entry) string {
	if filepath.Base(e.Command) != "stem-mcp" || len(e.Args) != 3 || e.Args[0] != "class" || e.Args[1] != "--class" {
		return ""
	}
	return e.Args[2]
}

// sameClass reports whether writing e over old serves the same class.
func sameClass(old, e mcpconfig.Entry) bool {
	c := classOf(old)
	return c != "" && c == classOf(e)
}

// reaches says what an entry reaches, for a refusal to overwrite it.
func reaches(e mcpconfig.Entry) string {
	if s := studentOf(e); s != "" {
		return s
	}
	if c := classOf(e); c != "" {
		return "class " + c
	}
	return "something else (" + e.Command + " " + strings.Join(slices.Clone(e.Args), " ") + ")"
}
