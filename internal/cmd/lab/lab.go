// Package lab implements `stemctl lab`, the administrator's commands for
// a lab's student accounts (the work is internal/lab's).
package lab

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/lab"
	"github.com/stem-edu/stem/internal/termtext"
)

// DefaultDir keeps the lab's roster and archives.
const DefaultDir = "/var/lib/stem/lab"

// NewCmdLab builds the command group.
func NewCmdLab(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab <command>",
		Short: "Administer a lab's student accounts (root)",
		Long: `lab prepares student accounts on this machine for stem, as root: add or
import students, see which accounts are ready, remove one (its work archived
first). Every step checks before it acts, so running a command again changes
nothing. The accounts are listed in the lab's roster (` + DefaultDir + `/roster.csv),
which the teacher imports with stemctl class import.`,
		Example: `  stemctl lab init --cards /srv/course/cards
  stemctl lab add anna ben
  stemctl lab import students.csv --cards /srv/course/cards --grant kowalski.pub --teacher kowalski --level observe
  stemctl lab status
  stemctl lab update --image localhost/stem-native-amd64:latest
  stemctl lab rm anna
  stemctl lab doctor anna`,
	}
	cmd.AddCommand(NewCmdDoctor(f, nil), NewCmdInit(f, nil), NewCmdAdd(f, nil), NewCmdImport(f, nil),
		NewCmdUpdate(f, nil), NewCmdStatus(f, nil), NewCmdRm(f, nil))
	return cmd
}

// common are the settings every lab command shares.
type common struct {
	Dir string
	// Store is the shared image store ("none": each account its own).
	Store string
	// storeGiven: --shared-store was on the command line; else the lab
	// directory's recorded choice, then the default, applies.
	storeGiven bool
	// Records: the command enrols or changes accounts, so a store it is
	// given is recorded for the others.
	Records bool
	// Geteuid is os.Geteuid (tests).
	Geteuid func() int
}

func (c *common) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.Dir, "lab-dir", DefaultDir, "the lab's directory: its roster and the removed accounts' archives")
	c.Store = lab.DefaultShared.Root
	cmd.Flags().Var(storeFlag{c}, "shared-store", `the image store every account reads ("none": each account loads its own copy); default: what init, add or import were last given`)
}

// storeFlag is --shared-store, noting that it was given.
type storeFlag struct{ c *common }

func (s storeFlag) String() string { return s.c.Store }
func (s storeFlag) Type() string   { return "path" }
func (s storeFlag) Set(v string) error {
	s.c.Store, s.c.storeGiven = v, true
	return nil
}

func (c *common) needRoot(what string) error {
	if c.Geteuid() != 0 {
		return fmt.Errorf("stemctl lab %s needs root: it changes other accounts (run it with sudo)", what)
	}
	return nil
}

// options are the lab's settings on this host.
func (c *common) options(f *cmdutil.Factory) (*lab.Options, error) {
	self, err := f.Self()
	if err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("host name: %w", err)
	}
	o := &lab.Options{
		Dir: c.Dir, CacheDir: "/var/cache/stem/images", Host: host, Stemctl: self,
		SubIDs: idmap.DefaultFiles, LingerDir: "/var/lib/systemd/linger", SystemdDir: "/run/systemd/system",
		TmpfilesDir: "/etc/tmpfiles.d", Lock: "/run/stem-lab.lock",
	}
	if err := c.storeChoice(); err != nil {
		return nil, err
	}
	switch c.Store {
	case "none":
	case "", lab.DefaultShared.Root:
		sh := lab.DefaultShared
		o.Shared = &sh
	default:
		if !filepath.IsAbs(c.Store) {
			return nil, cmdutil.FlagErrorf("--shared-store %q: give an absolute path or none", c.Store)
		}
		sh := lab.DefaultShared
		// Another store, another run directory: two stores must not
		// share Podman's locks.
		sh.Root, sh.RunRoot = filepath.Clean(c.Store), filepath.Clean(c.Store)+".run"
		o.Shared = &sh
	}
	if cc := f.Getenv("CONTAINERS_CONF"); cc != "" {
		data, err := os.ReadFile(cc)
		if err != nil {
			return nil, fmt.Errorf("CONTAINERS_CONF: %w", err)
		}
		o.ContainersConf = string(data)
	}
	return o, nil
}

// storeChoice settles Store: the flag when given (recorded by a command
// that enrols), else the lab directory's record, else the default.
func (c *common) storeChoice() error {
	if !c.storeGiven {
		rec, err := lab.StoreChoice(c.Dir)
		if err != nil {
			return err
		}
		if rec != "" {
			c.Store = rec
		}
		return nil
	}
	if c.Store != "none" && !filepath.IsAbs(c.Store) {
		return cmdutil.FlagErrorf("--shared-store %q: give an absolute path or none", c.Store)
	}
	if c.Records {
		return lab.SetStoreChoice(c.Dir, filepath.Clean(c.Store))
	}
	return nil
}

// progress prints each step as it ends: "anna: image ... ok (detail)".
func progress(w io.Writer) func(lab.Step) {
	return func(s lab.Step) {
		line := fmt.Sprintf("%s: %s ... %s", s.Account, s.Name, s.Result)
		if s.Detail != "" {
			line += " (" + s.Detail + ")"
		}
		fmt.Fprintln(w, termtext.OneLine(line, 0))
	}
}

// failure is the exit for a run whose steps already said what failed.
func failure(w io.Writer, err error) error {
	if err == nil {
		return nil
	}
	var fe *cmdutil.ExitError
	if errors.As(err, &fe) {
		return err
	}
	fmt.Fprintln(w, err)
	return &cmdutil.ExitError{Code: 1}
}
