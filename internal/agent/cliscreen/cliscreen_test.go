package cliscreen

import (
	"strings"
	"testing"
)

// Claude Code 2.1.328's window in the sandbox (captured by the e2e test).
const claudeIdle = ` ▐▛███▛█   Claude Code v2.1.328
▝▜██████▀  Opus 5.5 · API Usage Billing

❯ hello

● stem-ready

✻ Crunched for 0s · done 6:36 AM

────────────────────────────────────────────────────────────────────────────────
❯
────────────────────────────────────────────────────────────────────────────────
  ⏵⏵ auto mode on (shift+tab to cycle)`

func TestClassify(t *testing.T) {
	typed := strings.Replace(claudeIdle, "\n❯\n───", "\n❯ half a sentence\n───", 1)
	busy := strings.Replace(claudeIdle, "✻ Crunched for 0s · done 6:36 AM", "✻ Thinking… (3s · esc to interrupt)", 1)
	trust := "Do you trust the files in this folder?\n\n❯ 1. Yes, proceed\n  2. No, exit\n\nEnter to confirm · Esc to exit"
	perm := claudeIdle + "\n Do you want to proceed?\n ❯ 1. Yes\n   2. No"
	for _, c := range []struct {
		name, adapter, text string
		idle, busy          bool
		waiting             string
	}{
		{"claude idle", "claude", claudeIdle, true, false, ""},
		{"claude input not empty", "claude", typed, false, false, ""},
		{"claude turn running", "claude", busy, false, true, ""},
		{"claude trust dialog", "claude", trust, false, false, "asks whether to trust the folder"},
		{"claude permission", "claude", perm, false, false, "asks permission"},
		{"gemini idle", "gemini", "────\n >   Type your message or @path/to/file\n────", true, false, ""},
		{"gemini busy", "gemini", "⠏ Thinking (esc to cancel, 2s)\n >   Type your message or @path/to/file", false, true, ""},
		{"gemini asks", "gemini", "Allow execution of MCP tool \"pane_list\" from server \"stem\"?\n● 1. Allow once\n  2. Allow always\n >   Type your message", false, false, "asks permission"},
		{"codex idle", "codex", "› Ask Codex to do anything\n\n  ? for shortcuts", true, false, ""},
		{"codex working", "codex", "• Working (2s • esc to interrupt)\n\n  ? for shortcuts", false, true, ""},
		{"custom never idle", "custom", claudeIdle, false, false, ""},
		// Started without a key or a login, each CLI stops at its own
		// screen; an update offer stops it too.
		{"claude not logged in", "claude", strings.Replace(claudeIdle, "Opus 5.5 · API Usage Billing", "Not logged in · Please run /login", 1), false, false, "asks for a login or an API key"},
		{"gemini key prompt", "gemini", "╭────╮\n│ Enter Gemini API Key │\n│ Paste your API key here, or press Esc │\n╰────╯\n >   Type your message or @path/to/file", false, false, "asks for a login or an API key"},
		{"codex sign in", "codex", "  Sign in with ChatGPT to use Codex as part of your paid plan\n  > 1. Sign in with ChatGPT\n    2. Provide your own API key\n\n  Press Enter to continue", false, false, "a first-run dialog (theme, login)"},
		{"codex update", "codex", "  ✨ Update available! 0.169.0 -> 0.170.0\n\n  > 1. Update now (runs npm install -g @openai/codex)\n    2. Skip\n\n  Press enter to continue", false, false, "offers an update"},
		// A conversation that only talks about keys is not a key prompt.
		{"claude idle talking about keys", "claude", strings.Replace(claudeIdle, "● stem-ready", "● set ANTHROPIC_API_KEY before you start an agent", 1), true, false, ""},
	} {
		st := Classify(c.adapter, c.text)
		if st.Idle != c.idle || st.Busy != c.busy || st.Waiting != c.waiting {
			t.Errorf("%s: %+v, want idle=%v busy=%v waiting=%q", c.name, st, c.idle, c.busy, c.waiting)
		}
	}
}
