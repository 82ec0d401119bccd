package tomlmsg

import (
	"errors"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestExplain(t *testing.T) {
	var v struct {
		Schema int
		Tasks  []struct {
			ID       string   `toml:"id"`
			Profiles []string `toml:"profiles"`
			Debug    bool     `toml:"debug"`
		} `toml:"tasks"`
	}
	for _, tc := range []struct{ in, want string }{
		{"[[tasks]]\nid = 4\n", `line 2: tasks.id must be a string, not a number (put it in quotes, e.g. id = "4")`},
		{"schema = \"1\"\n", "line 1: schema must be a number, not a string"},
		{"[[tasks]]\nprofiles = \"native-amd64\"\n", `line 2: tasks.profiles must be a list, not a string (put it in brackets, e.g. ["native-amd64"])`},
		{"[[tasks]]\ndebug = 1\n", "line 2: tasks.debug must be true or false, not a number"},
	} {
		_, err := toml.Decode(tc.in, &v)
		if got := Explain(err); got == nil || got.Error() != tc.want {
			t.Errorf("%q: %v, want %q", tc.in, got, tc.want)
		}
	}
	// Anything else passes through unchanged.
	_, err := toml.Decode("schema = = 1", &v)
	if got := Explain(err); got != err {
		t.Errorf("syntax error rewritten: %v", got)
	}
	if Explain(nil) != nil {
		t.Error("Explain(nil) != nil")
	}
	other := errors.New("x")
	if Explain(other) != other {
		t.Error("other error rewritten")
	}
}
