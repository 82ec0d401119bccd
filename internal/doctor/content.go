package doctor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/workspace"
)

// checkImages looks up every image stem needs and returns the reference
// of the first one present (for the runtime check). A profile's missing
// image fails the account only when no profile has one: a course may
// use one profile.
func checkImages(ctx context.Context, e *Env, eng Engine, connErr error) ([]Result, string) {
	var out []Result
	present, profiles := "", 0
	for _, img := range e.Images {
		r := Result{Name: "image " + img.Name}
		if connErr != nil {
			r.Status, r.Detail, r.Fix = Fail, "not checked: no Podman service", "see podman-service"
			out = append(out, r)
			continue
		}
		got, err := eng.ImageInspect(ctx, img.Ref)
		switch {
		case errors.Is(err, engine.ErrNotFound):
			r.Status, r.Detail, r.Fix = Fail, img.Ref+" is missing", imageFix(e, img)
		case err != nil:
			r.Status, r.Detail, r.Fix = Fail, img.Ref+": "+firstLine(err.Error()), imageFix(e, img)
		default:
			r.Status, r.Detail = OK, describe(img.Ref, got)
			if img.Label != "" && got.Labels[img.Label] != img.Value {
				r.Status = Warn
				r.Detail += fmt.Sprintf(": not a stem image (label %s=%q, want %q)", img.Label, got.Labels[img.Label], img.Value)
				r.Fix = imageFix(e, img)
			}
			if present == "" { // profiles come first: the image up uses
				present = img.Ref
			}
			if !img.Agent {
				profiles++
			}
		}
		out = append(out, r)
	}
	for i, img := range e.Images {
		if out[i].Status != Fail || connErr != nil {
			continue
		}
		switch {
		case img.Agent:
			out[i].Status, out[i].Detail = Warn, out[i].Detail+" (needed only for `stemctl agent start`: the image carries the agent CLIs)"
		case profiles > 0:
			out[i].Status, out[i].Detail = Warn, out[i].Detail+" (needed only for tasks on this profile)"
		default:
			out[i].Required = true
		}
	}
	return out, present
}

// describe names an image's id, build date and, when it carries one,
// its version label.
func describe(ref string, img engine.Image) string {
	id := strings.TrimPrefix(img.ID, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	s := fmt.Sprintf("%s (%s, built %s", ref, id, img.Created.UTC().Format("2006-01-02 15:04"))
	if v := img.Labels["org.opencontainers.image.version"]; v != "" {
		s += ", version " + v
	}
	return s + ")"
}

func imageFix(e *Env, img Image) string {
	target := "images"
	if img.Agent {
		target = "agent-image"
	}
	if !e.Rootless() {
		return "make " + target + "   (in the stem checkout)"
	}
	tar := "/var/tmp/stem-" + strings.ReplaceAll(img.Name, "/", "-") + ".tar"
	return fmt.Sprintf("podman load -i %s   (after root's `podman save -o %s %s && chmod 0644 %s`)", tar, tar, img.Ref, tar)
}

func checkWorkspace(e *Env) Result {
	r := Result{Name: "workspace", Required: true}
	ws, err := workspace.Open(e.Workspace)
	if err != nil {
		r.Status, r.Detail = Fail, err.Error()
		r.Fix = "mkdir -p " + e.Workspace + "   (then copy the course's cards into it; STEM_WORKSPACE names another directory)"
		return r
	}
	series, err := ws.Series()
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, err.Error(), "chmod u+rx "+ws.Root
		return r
	}
	var cards int
	var bad []string
	for _, s := range series {
		cs, _ := ws.Cards(s)
		for _, c := range cs {
			cards++
			if _, err := workspace.LoadManifest(filepath.Join(ws.Root, s, c)); err != nil {
				bad = append(bad, s+"/"+c+": "+firstLine(err.Error()))
			}
		}
	}
	switch {
	case cards == 0:
		r.Status, r.Detail = Fail, ws.Root+" holds no cards (SERIES/CARD/stem.toml)"
		r.Fix = "cp -r COURSE/. " + ws.Root + "/   (the course's cards; `make demo` installs the examples)"
	case len(bad) > 0:
		r.Status, r.Required = Warn, false
		r.Detail = fmt.Sprintf("%s: %d cards, %d whose stem.toml does not load: %s", ws.Root, cards, len(bad), strings.Join(bad, "; "))
		r.Fix = "fix stem.toml of those cards (see docs/manifest.md)"
	default:
		r.Status, r.Detail = OK, fmt.Sprintf("%s: %d cards in %d series", ws.Root, cards, len(series))
	}
	return r
}

func checkGit(ctx context.Context, e *Env) Result {
	r := Result{Name: "git-identity", Status: Warn}
	if _, err := e.LookPath("git"); err != nil {
		r.Detail, r.Fix = "git is not installed: stemctl commit needs it", e.asRoot("apt-get install git")
		return r
	}
	name, _ := e.Output(ctx, "git", "config", "--get", "user.name")
	email, _ := e.Output(ctx, "git", "config", "--get", "user.email")
	name, email = strings.TrimSpace(name), strings.TrimSpace(email)
	if name == "" || email == "" {
		r.Detail = "user.name or user.email is not set: stemctl commit needs both"
		r.Fix = `git config --global user.name "Your Name" && git config --global user.email you@example.org`
		return r
	}
	r.Status, r.Detail = OK, fmt.Sprintf("%s <%s>", name, email)
	return r
}

func checkMCP(e *Env) Result {
	r := Result{Name: "stem-mcp", Required: true}
	p, err := e.MCP()
	if err != nil {
		r.Status, r.Detail = Fail, err.Error()
		r.Fix = "make build   (or put stem-mcp next to stemctl; STEM_MCP_BIN names another)"
		return r
	}
	r.Status, r.Detail = OK, p
	return r
}

func checkSSHD(e *Env) Result {
	r := Result{Name: "sshd", Status: OK}
	if p, err := e.LookPath("sshd"); err == nil {
		r.Detail = p + ": a teacher's grant can reach this account"
		return r
	}
	if exists(e.SSHD) {
		r.Detail = e.SSHD + ": a teacher's grant can reach this account"
		return r
	}
	r.Status = Warn
	r.Detail = "no sshd: needed only for a teacher's access (stemctl access grant)"
	r.Fix = e.asRoot("apt-get install openssh-server")
	return r
}
