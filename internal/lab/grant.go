package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/stem-edu/stem/internal/access"
)

// Grant is the teacher's access lab gives every account.
type Grant struct {
	Teacher string
	// Key is the teacher's automation public key (authorized_keys form).
	Key   string
	Level string
}

// ensureGrant runs the account's own `stemctl access grant` (so the grant
// is the student's, listed and revocable by them), unless a grant of that
// key at that level is in place.
func ensureGrant(ctx context.Context, o *Options, a *Account) Step {
	st := Step{Account: a.Name, Name: "teacher grant"}
	if o.Grant == nil {
		st.Result, st.Detail = Skipped, "no --grant"
		return st
	}
	g := o.Grant
	key, err := access.ParsePublicKey(g.Key)
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	fp := ssh.FingerprintSHA256(key)
	out, err := a.as(ctx, nil, o.Stemctl, "access", "list", "--json")
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	var list []access.GrantStatus
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		st.Result, st.Detail = Failed, fmt.Sprintf("stemctl access list --json as %s: %v", a.Name, err)
		return st
	}
	for _, have := range list {
		if have.KeyFP == fp && have.Lines > 0 {
			st.Result = Already
			st.Detail = fmt.Sprintf("%s at %s", have.Name, have.Level)
			if have.Level != g.Level || have.Name != g.Teacher {
				st.Result = Failed
				st.Detail += fmt.Sprintf(", not %s at %s: the student's grant is theirs to change (stemctl access revoke %s)", g.Teacher, g.Level, have.Name)
			}
			return st
		}
	}
	if _, err := a.as(ctx, strings.NewReader(g.Key+"\n"), o.Stemctl, "access", "grant", "--name", g.Teacher, "--key", "-", "--level", g.Level); err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	st.Result, st.Detail = Done, fmt.Sprintf("%s at %s (%s)", g.Teacher, g.Level, fp)
	return st
}
