package agentcli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// HostLogin is where a built-in CLI's own sign-in, done once on the host,
// keeps its credential, and what the CLI needs in the sandbox to use a
// copy of it. Only that one file is carried (docs/agents.md, "A login
// from the host"): the sandbox can use and refresh the sign-in, and
// nothing else of the host's configuration reaches it.
type HostLogin struct {
	// Command is how the student signs in on the host.
	Command string
	// Dir is the CLI's directory below a home and File the credential in
	// it; the sandbox gets the copy at the same place below its home.
	Dir, File string
	// DirEnv, when set on the host, is the CLI's directory itself
	// (CLAUDE_CONFIG_DIR, CODEX_HOME); HomeEnv replaces the home above
	// Dir (GEMINI_CLI_HOME). As the CLIs read them.
	DirEnv, HomeEnv string
	// Egress are the endpoints the CLI reaches with the sign-in besides
	// its API-key default (sandbox.DefaultEgress): where it refreshes the
	// token, and the model API it uses when signed in, where that differs.
	Egress []string
	// signedIn reports whether the file's JSON holds a sign-in (a CLI
	// that signed out keeps the file, emptied of its tokens).
	signedIn func(map[string]any) bool
}

// hostLogins, verified against the CLIs stem pins
// (scripts/install-agent-clis.sh).
var hostLogins = map[string]HostLogin{
	// Claude Code 2.1: its OAuth token is sent as a bearer to the model
	// API (ANTHROPIC_BASE_URL too); it refreshes at platform.claude.com.
	AdapterClaude: {
		Command: "claude auth login", Dir: ".claude", File: ".credentials.json", DirEnv: "CLAUDE_CONFIG_DIR",
		Egress: []string{"platform.claude.com:443"},
		signedIn: func(m map[string]any) bool {
			o, _ := m["claudeAiOauth"].(map[string]any)
			return nonEmpty(o, "accessToken") || nonEmpty(o, "refreshToken")
		},
	},
	// Codex 0.169: a ChatGPT sign-in talks to chatgpt.com's backend, not
	// api.openai.com, and refreshes at auth.openai.com; `codex login
	// --with-api-key` keeps a key in the same file.
	AdapterCodex: {
		Command: "codex login", Dir: ".codex", File: "auth.json", DirEnv: "CODEX_HOME",
		Egress: []string{"chatgpt.com:443", "auth.openai.com:443"},
		signedIn: func(m map[string]any) bool {
			tok, _ := m["tokens"].(map[string]any)
			return nonEmpty(tok, "access_token") || nonEmpty(tok, "refresh_token") || nonEmpty(m, "OPENAI_API_KEY")
		},
	},
	// Gemini CLI 0.61 (file storage, its default): a Google sign-in checks
	// and refreshes the token at oauth2.googleapis.com and talks to Code
	// Assist (cloudcode-pa). Its user-info call (www.googleapis.com, which
	// serves many other APIs) is left out: Gemini goes on without it.
	AdapterGemini: {
		Command: "gemini (choose \"Sign in with Google\")", Dir: ".gemini", File: "oauth_creds.json", HomeEnv: "GEMINI_CLI_HOME",
		Egress: []string{"oauth2.googleapis.com:443", "cloudcode-pa.googleapis.com:443"},
		signedIn: func(m map[string]any) bool {
			return nonEmpty(m, "access_token") || nonEmpty(m, "refresh_token")
		},
	},
}

func nonEmpty(m map[string]any, k string) bool {
	s, _ := m[k].(string)
	return s != ""
}

// LoginOf is the adapter's host login (false for custom providers).
func LoginOf(adapter string) (HostLogin, bool) {
	l, ok := hostLogins[adapter]
	return l, ok
}

// HostPath is the credential file on the host of home with the caller's
// environment getenv.
func (l HostLogin) HostPath(home string, getenv func(string) string) string {
	if l.DirEnv != "" {
		if d := getenv(l.DirEnv); d != "" {
			return filepath.Join(d, l.File)
		}
	}
	if l.HomeEnv != "" {
		if h := getenv(l.HomeEnv); h != "" {
			home = h
		}
	}
	return filepath.Join(home, l.Dir, l.File)
}

// SandboxPath is where the copy goes, relative to the sandbox's home.
func (l HostLogin) SandboxPath() string { return filepath.Join(l.Dir, l.File) }

// Carried is a host login read to be copied into one agent's sandbox.
type Carried struct {
	Login HostLogin
	// HostPath is the file it was read from; Data its content.
	HostPath string
	Data     []byte
}

// maxLogin bounds what is read: the CLIs' files are a few KiB.
const maxLogin = 1 << 20

// ReadHostLogin reads adapter's credential file on the host. It returns
// nil and no error when there is none to carry: no such adapter login, no
// file, or a file that holds no sign-in.
func ReadHostLogin(adapter, home string, getenv func(string) string) (*Carried, error) {
	l, ok := LoginOf(adapter)
	if !ok || home == "" {
		return nil, nil
	}
	path := l.HostPath(home, getenv)
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read your %s sign-in: %w", adapter, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read your %s sign-in: %s is not a regular file", adapter, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxLogin+1))
	if err != nil {
		return nil, fmt.Errorf("read your %s sign-in: %w", adapter, err)
	}
	if len(data) > maxLogin {
		return nil, fmt.Errorf("read your %s sign-in: %s is larger than %d bytes", adapter, path, maxLogin)
	}
	var m map[string]any
	if json.Unmarshal(data, &m) != nil || !l.signedIn(m) {
		return nil, nil
	}
	return &Carried{Login: l, HostPath: path, Data: data}, nil
}

// NoKeyError is a built-in CLI started in its sandbox with none of the
// credentials it could sign in with there: no key in the environment and
// no sign-in of its own on the host.
type NoKeyError struct {
	Provider string
	Vars     []string
	Where    string // where to get a key
	// Login is how to sign in on the host and LoginFile the file stem
	// would then carry ("" for none).
	Login, LoginFile string
}

func (e *NoKeyError) Error() string {
	alt := ""
	if len(e.Vars) > 1 {
		alt = " (or " + strings.Join(e.Vars[1:], ", ") + ")"
	}
	msg := fmt.Sprintf("agent provider %s needs an API key or a sign-in done on the host, and has neither: export %s=...%s in the shell you run stemctl from (a key: %s)",
		e.Provider, e.Vars[0], alt, e.Where)
	if e.Login != "" {
		msg += fmt.Sprintf(", or sign in once on the host with `%s` (stem then copies only %s into the sandbox)", e.Login, e.LoginFile)
	}
	return msg + "; then start it again. Signing in with a browser inside the sandbox does not work: it reaches only the model's API"
}
