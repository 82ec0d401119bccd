package access

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Problem is one inconsistency `access check` found.
type Problem struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Grant   string `json:"grant,omitempty"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	var where []string
	if p.File != "" {
		w := p.File
		if p.Line > 0 {
			w += fmt.Sprintf(":%d", p.Line)
		}
		where = append(where, w)
	}
	if p.Grant != "" {
		where = append(where, "grant "+p.Grant)
	}
	if len(where) == 0 {
		return p.Message
	}
	return strings.Join(where, ", ") + ": " + p.Message
}

// Report is the result of Check.
type Report struct {
	Grants   int       `json:"grants"`
	Lines    int       `json:"stem_lines"`
	Problems []Problem `json:"problems"`
}

// OK reports whether nothing was found.
func (r Report) OK() bool { return len(r.Problems) == 0 }

// Check compares the grants with authorized_keys: stem lines that match no
// grant (or whose key, options or command differ from it), grants without
// a line, keys with more than one grant, grant keys that also log in some
// other way, and lines that cannot be read.
func (m *Manager) Check(ctx context.Context) (Report, error) {
	st, err := m.Store.Load(ctx)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Grants: len(st.Grants), Problems: []Problem{}}
	paths := map[string]bool{m.AuthorizedKeys: true}
	for _, g := range st.Grants {
		if g.AuthorizedKeys != "" {
			paths[g.AuthorizedKeys] = true
		}
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)

	add := func(p Problem) { rep.Problems = append(rep.Problems, p) }
	lineCount := map[string]int{} // grant ID -> stem lines
	grantsByFP := map[string][]string{}
	for _, g := range st.Sorted() {
		grantsByFP[g.KeyFP] = append(grantsByFP[g.KeyFP], g.Name)
	}
	stemLinesByFP := map[string][]int{}
	seen := map[string]bool{}
	for _, path := range sorted {
		kf, err := ReadKeysFile(path)
		if err != nil {
			return Report{}, err
		}
		if seen[kf.Path] {
			continue
		}
		seen[kf.Path] = true
		for _, l := range kf.Lines {
			if l.Blank {
				continue
			}
			if l.Err != nil {
				add(Problem{File: kf.Path, Line: l.Num, Message: fmt.Sprintf("not a key line this tool can read (%v); stem will not rewrite this file until it is fixed", l.Err)})
				continue
			}
			if !l.Stem {
				if names := grantsByFP[l.FP]; len(names) > 0 && !l.CertAuth {
					what := "with another forced command"
					if !l.HasCommand {
						what = "without a forced command (a full shell)"
					}
					add(Problem{File: kf.Path, Line: l.Num, Grant: names[0], Message: "the grant's automation key also logs in here " + what + "; sshd uses the first matching line, so remove this line or revoke the grant"})
				}
				continue
			}
			rep.Lines++
			stemLinesByFP[l.FP] = append(stemLinesByFP[l.FP], l.Num)
			if l.GrantID == "" {
				add(Problem{File: kf.Path, Line: l.Num, Message: "stem-mcp gate line without --grant: remove it"})
				continue
			}
			g, ok := st.Grants[l.GrantID]
			if !ok {
				add(Problem{File: kf.Path, Line: l.Num, Message: fmt.Sprintf("forces grant %s, which does not exist (revoked, or copied by hand); the gate refuses it: remove the line", l.GrantID)})
				continue
			}
			if l.FP != g.KeyFP {
				add(Problem{File: kf.Path, Line: l.Num, Grant: g.Name, Message: fmt.Sprintf("the line's key %s is not the granted key %s: remove the line", l.FP, g.KeyFP)})
				continue
			}
			lineCount[g.ID]++
			if !l.Restrict {
				add(Problem{File: kf.Path, Line: l.Num, Grant: g.Name, Message: "the line lacks `restrict` (pty and forwarding are allowed): revoke and grant again"})
			}
			if prog := strings.Fields(l.Command)[0]; !isExecutable(prog) {
				add(Problem{File: kf.Path, Line: l.Num, Grant: g.Name, Message: fmt.Sprintf("the forced command's program %s is missing or not executable (was stem-mcp moved?), so the key cannot work: revoke and grant again", prog)})
			}
			if want := optionsOf(g.Line(l.Key)); !sameOptions(want, l.Options) {
				add(Problem{File: kf.Path, Line: l.Num, Grant: g.Name, Message: fmt.Sprintf("the line's options differ from the grant (want %s): revoke and grant again", strings.Join(want, ","))})
			}
		}
	}
	for _, g := range st.Sorted() {
		if lineCount[g.ID] == 0 {
			add(Problem{Grant: g.Name, Message: "no authorized_keys line forces this grant, so its key cannot log in: revoke and grant again"})
		}
		if lineCount[g.ID] > 1 {
			add(Problem{Grant: g.Name, Message: fmt.Sprintf("%d authorized_keys lines force this grant: revoke and grant again", lineCount[g.ID])})
		}
		if g.Expired(m.now()) {
			add(Problem{Grant: g.Name, Message: "expired (the gate refuses it): revoke it"})
		}
	}
	fps := make([]string, 0, len(grantsByFP))
	for fp := range grantsByFP {
		fps = append(fps, fp)
	}
	sort.Strings(fps)
	for _, fp := range fps {
		if names := grantsByFP[fp]; len(names) > 1 {
			add(Problem{Message: fmt.Sprintf("key %s has %d grants (%s): keep one", fp, len(names), strings.Join(names, ", "))})
		}
		if n := stemLinesByFP[fp]; len(n) > 1 && len(grantsByFP[fp]) == 1 {
			add(Problem{Grant: grantsByFP[fp][0], Message: fmt.Sprintf("key %s appears in %d stem lines; sshd uses only the first", fp, len(n))})
		}
	}
	// Keys without a grant, in fingerprint order (not map order), so the
	// report is the same from one run to the next.
	ungranted := make([]string, 0, len(stemLinesByFP))
	for fp := range stemLinesByFP {
		if len(grantsByFP[fp]) == 0 {
			ungranted = append(ungranted, fp)
		}
	}
	sort.Strings(ungranted)
	for _, fp := range ungranted {
		if nums := stemLinesByFP[fp]; len(nums) > 1 {
			add(Problem{Message: fmt.Sprintf("key %s appears in %d stem lines (%v) with no grant", fp, len(nums), nums)})
		}
	}
	return rep, nil
}

// optionsOf returns the options of a rendered line.
func optionsOf(line string) []string {
	kl := parseKeyLine(1, 0, len(line), line)
	return kl.Options
}

func sameOptions(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x := append([]string(nil), a...)
	y := append([]string(nil), b...)
	for i := range x {
		x[i], y[i] = normOption(x[i]), normOption(y[i])
	}
	sort.Strings(x)
	sort.Strings(y)
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

// normOption lower-cases an option's name (sshd ignores its case) and
// keeps its value as written.
func normOption(o string) string {
	name, val, ok := strings.Cut(o, "=")
	if !ok {
		return strings.ToLower(o)
	}
	return strings.ToLower(name) + "=" + val
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
