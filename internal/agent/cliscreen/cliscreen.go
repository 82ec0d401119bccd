// Package cliscreen reads an agent CLI's window: whether the CLI (Claude
// Code, Codex, Gemini CLI) shows its empty input, runs a turn, or asks its
// user something. The supervisor types session events into a CLI only at
// its idle screen, and the launcher tells an agent about those lines only
// when its CLI's screen is known here.
//
// The text comes from the tmux server the container runs, which can make
// it claim anything (the container can type into the agent's window
// anyway): it is only matched here, and State.Asked, the one part of it
// returned, is for a log that sanitizes it.
package cliscreen

import (
	"regexp"
	"strings"
)

// State is what the agent's window shows, read from its text.
type State struct {
	// Idle: the CLI shows its empty input, no turn running, no dialog.
	Idle bool
	// Busy: a turn is running (the CLI offers to interrupt it).
	Busy bool
	// Waiting names what the CLI asks its user (a dialog, a permission
	// prompt), or "".
	Waiting string
	// Asked is the window's line that showed it (for the log).
	Asked string
}

// cliScreen is how one adapter's CLI shows its states.
type cliScreen struct {
	// ready matches only when the input is shown and empty.
	ready *regexp.Regexp
	// busy shows while a turn runs.
	busy []string
}

// screens per adapter, as seen with Claude Code 2.1, Codex 0.169 and
// Gemini CLI 0.61 in the agent's window. A custom CLI has none: nothing
// is typed into it.
var screens = map[string]cliScreen{
	// Claude Code: an empty "❯" line between two rules.
	"claude": {ready: regexp.MustCompile(`(?m)^─{8,}[ \t]*\n❯[ \t\x{a0}]*\n─{8,}`), busy: []string{"esc to interrupt"}},
	"codex":  {ready: regexp.MustCompile(`\? for shortcuts`), busy: []string{"esc to interrupt"}},
	"gemini": {ready: regexp.MustCompile(`Type your message`), busy: []string{"esc to cancel"}},
}

// dialogs are the questions the CLIs put to their user: first-run
// dialogs and permission prompts. The first match names the state.
var dialogs = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`(?i)do you trust|trust (the files|this folder|the contents)`), "asks whether to trust the folder"},
	{regexp.MustCompile(`(?i)detected a custom api key|use this api key`), "asks whether to use the API key"},
	{regexp.MustCompile(`(?i)choose the text style|select login method|sign in with|log ?in with|how would you like to authenticate`), "a first-run dialog (theme, login)"},
	// A CLI started without its key or login stops at its own screen for
	// it (Claude Code's notice, Gemini CLI's key prompt, Codex's own-key
	// choice): the student must act on the host, not type in the sandbox.
	{regexp.MustCompile(`(?i)not logged in|please run /login|invalid api key|enter (your )?(gemini |openai |anthropic )?api key|paste (your )?api key|provide your own api key|waiting for auth`), "asks for a login or an API key"},
	{regexp.MustCompile(`(?i)update available|new version (of [^
]+ )?is available|update now`), "offers an update"},
	{regexp.MustCompile(`(?i)do you want to (proceed|make this edit|allow|run|create|use)|would you like to (run|make|apply|allow)|allow execution|apply this change|permission to|approve this|waiting for (user )?(confirmation|approval)`), "asks permission"},
	{regexp.MustCompile(`(?m)^[\s│|>❯●›]*1\. (Yes|Allow|Trust)`), "a question with choices"},
	{regexp.MustCompile(`(?i)press enter to (continue|confirm)|enter to confirm`), "a question (Enter to confirm)"},
}

// Known reports whether the adapter's CLI has a known screen (a custom
// CLI has none: nothing is typed into it).
func Known(adapter string) bool {
	_, ok := screens[adapter]
	return ok
}

// Classify reads the agent window's text for the adapter's CLI.
func Classify(adapter, text string) State {
	var st State
	for _, d := range dialogs {
		if loc := d.re.FindStringIndex(text); loc != nil {
			st.Waiting = d.what
			start := strings.LastIndexByte(text[:loc[0]], '\n') + 1
			end := strings.IndexByte(text[loc[0]:], '\n')
			if end < 0 {
				end = len(text) - loc[0]
			}
			st.Asked = strings.TrimSpace(text[start : loc[0]+end])
			break
		}
	}
	sc, ok := screens[adapter]
	if !ok {
		return st
	}
	for _, b := range sc.busy {
		if strings.Contains(text, b) {
			st.Busy = true
		}
	}
	st.Idle = sc.ready.MatchString(text) && !st.Busy && st.Waiting == ""
	return st
}
