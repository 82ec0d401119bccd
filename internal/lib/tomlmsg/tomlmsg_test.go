package tomlmsg

import (
	"errors"
	"strings"
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

func TestExplainInFindsTheValuesLine(t *testing.T) {
	var v struct {
		Tasks []struct {
			ID string `toml:"id"`
		} `toml:"tasks"`
	}
	data := "[[tasks]]\nid = 1\n\n[[tasks]]\nid = \"2\"\n\n[[tasks]]\nid = \"3\"\n"
	_, err := toml.Decode(data, &v)
	got := ExplainIn([]byte(data), err)
	if got == nil || !strings.HasPrefix(got.Error(), "line 2: tasks.id must be a string") {
		t.Fatalf("%v (decoder: %v)", got, err)
	}
}

func TestUnknown(t *testing.T) {
	type commands struct {
		Build string `toml:"build"`
		Test  string `toml:"test"`
	}
	var v struct {
		Schema   int      `toml:"schema"`
		Defaults commands `toml:"defaults"`
		Tasks    []struct {
			ID     string `toml:"id"`
			Agents struct {
				MaxLevel string `toml:"max_level"`
			} `toml:"agents"`
		} `toml:"tasks"`
	}
	data := "schema = 1\n[defaults]\nbulid = \"make\"\n\n[[tasks]]\nid = \"1\"\n[tasks.agents]\nmax_levl = \"observe\"\ncolour = 1\n"
	md, err := toml.Decode(data, &v)
	if err != nil {
		t.Fatal(err)
	}
	got := Unknown([]byte(data), v, md.Undecoded())
	want := `line 3: unknown key defaults.bulid (did you mean "build"?); line 8: unknown key tasks.agents.max_levl (did you mean "max_level"?); line 9: unknown key tasks.agents.colour`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
