package agentcli

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/stem-edu/stem/internal/agent/sandbox"
	"github.com/stem-edu/stem/internal/mcpconfig"
)

// SandboxEnv is what the adapter's CLI needs in the sandbox besides its
// key: Claude lists MCP tools directly (by default it defers them behind
// its ToolSearch tool, and the model would not see stem's); Gemini trusts
// the sandbox's working directory (it keeps MCP servers off in a folder it
// does not trust; the sandbox is the boundary, not its trust list).
//
// Gemini CLI otherwise starts a second Node.js process running the whole
// CLI again, only to give it a heap of half the host's memory: that costs
// a second Node start-up (over a second on 2 cores) and a resident parent
// (about 100 MiB), and the heap it asks for exceeds the sandbox's memory
// limit, so the kernel would end the CLI before V8 collected. One process
// with a heap bounded below the limit instead; what Gemini relaunches for
// (a restart after a settings change, a Google login) then ends the CLI,
// and the student starts the agent again. The agent image fills Node's
// compile cache of Gemini's bundle with this same NODE_OPTIONS
// (containers/Containerfile): Node keys the cache by the V8 flags, so the
// two change together.
func SandboxEnv(adapter string) map[string]string {
	switch adapter {
	case AdapterClaude:
		return map[string]string{"ENABLE_TOOL_SEARCH": "false", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
	case AdapterGemini:
		return map[string]string{"GEMINI_CLI_TRUST_WORKSPACE": "true", "GEMINI_CLI_NO_RELAUNCH": "true",
			"NODE_OPTIONS": fmt.Sprintf("--max-old-space-size=%d", sandbox.MemoryMiB*3/4)}
	}
	return nil
}

// HomeSeeds pre-answers the first-run dialogs an interactive CLI would
// stop at in a fresh home: Claude Code's onboarding, the folder trust of
// the card (in the sandbox) and "use this API key?" (it keeps the last 20
// characters of an approved key); Gemini's trust of stem's context
// directory; Codex's trust of the card.
func HomeSeeds(adapter, card string, getenv func(string) string) (map[string][]byte, error) {
	if adapter == AdapterGemini {
		// Gemini asks whether to trust the directory of stem's context
		// (an include directory) before its first prompt.
		data, err := json.Marshal(map[string]string{
			filepath.Join(sandbox.ConfDir, GeminiContextDir): "TRUST_FOLDER", card: "TRUST_FOLDER"})
		if err != nil {
			return nil, err
		}
		return map[string][]byte{".gemini/trustedFolders.json": data}, nil
	}
	if adapter == AdapterCodex {
		// Codex asks whether to trust a git working tree before its first
		// prompt; in the sandbox the card's .codex/ (and .claude/,
		// .gemini/) are hidden, so trusting it takes no settings from it.
		return map[string][]byte{".codex/config.toml": []byte("[projects." + mcpconfig.TOMLKey(card) + "]\ntrust_level = \"trusted\"\n")}, nil
	}
	if adapter != AdapterClaude {
		return nil, nil
	}
	cfg := map[string]any{
		"hasCompletedOnboarding": true,
		"projects":               map[string]any{card: map[string]any{"hasTrustDialogAccepted": true}},
	}
	if key := getenv("ANTHROPIC_API_KEY"); key != "" {
		cfg["customApiKeyResponses"] = map[string]any{"approved": []string{key[max(0, len(key)-20):]}, "rejected": []string{}}
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{".claude.json": data}, nil
}
