#!/usr/bin/env bash
# The demo: install the example cards into the workspace (never overwriting a
# card that is already there: it may hold a student's work), start the spec's
# own example instance, select it for MCP, and show an MCP client talking to it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH=$ROOT/bin:$PATH
WS=${STEM_WORKSPACE:-$HOME/dev/workspace/stem}
export STEM_WORKSPACE=$WS

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

mkdir -p "$WS"
for card in examples/workspace/*/*/; do
  card=${card%/}
  series=$(basename "$(dirname "$card")"); name=$(basename "$card")
  dst=$WS/$series/$name
  if [ -e "$dst" ]; then
    say "keeping the existing card $dst"
    continue
  fi
  mkdir -p "$WS/$series"
  cp -a "$card" "$dst"   # -a keeps dotfiles and the executable bits
  git -C "$dst" init -q
  git -C "$dst" add -A
  git -C "$dst" -c user.name=stem -c user.email=stem@localhost commit -qm "card $series/$name as shipped"
  say "installed card $series/$name in $dst"
done

say "starting the demo instance (the spec's example: hazard3-sim inf bss 4)"
stemctl up hazard3-sim inf bss 4 --select
stemctl mcp status

say "an MCP client (stemctl mcp call, built on mcp-go's client) talking to stem-mcp at the observe level"
stemctl mcp call --level observe session_status
stemctl mcp call --level observe pane_list

cat <<TXT

The demo instance is running.

stemctl and stem-mcp are in $ROOT/bin, which this script put on its own PATH
only. Put it on yours first (or use the full paths, $ROOT/bin/stemctl ...):

  export PATH="$ROOT/bin:\$PATH"

Then:

  Join the student's session:       stemctl attach hazard3-sim-inf-bss-t4
  Open the debugger layout:          stemctl debug hazard3-sim inf bss 4
  Build / test / run the task:       stemctl build hazard3-sim-inf-bss-t4   (test, run)
  What an agent sees (any tool):     stemctl mcp call --level observe pane_capture pane=%0
  Tools at each level:               stem-mcp tools --level assist

Point an MCP client at it (stdio), for example in a client's JSON config:

  "stem": { "command": "$ROOT/bin/stem-mcp", "args": ["serve", "--level", "assist"] }

or start an agent inside the session: stemctl agent start codex hazard3-sim inf bss 4
Stop it with: stemctl down hazard3-sim-inf-bss-t4      Remove it: stemctl rm hazard3-sim-inf-bss-t4
TXT
