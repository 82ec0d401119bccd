#!/usr/bin/env bash
# make bench: run the Go benchmarks that carry the product's performance
# targets, time the real stemctl binary, and print one table of figures.
# Everything runs against real Podman, tmux, Neovim, gdb and sshd.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
export STEM_MCP_BIN=${STEM_MCP_BIN:-$ROOT/bin/stem-mcp}
N=${BENCH_N:-200}

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

bench() { # package regex count
  say "go test -bench '$2' $1"
  go test -run '^$' -bench "$2" -benchtime "$3x" -timeout 20m "$1" 2>&1 | tee -a "$OUT/bench.txt" | grep -E '^Benchmark|FAIL|panic' >&2
}

bench ./internal/mcpserver/ 'ColdStart|PaneWaitNotice' "$N"
# Round trips are short: more samples give a steadier p50 and a real p99.
bench ./internal/mcpserver/ 'RawPaneCapture|RawBufferRead1000' "${BENCH_RT_N:-2000}"
bench ./internal/instance/ 'UpCreate' 10
bench ./internal/instance/ 'UpReuse' 50
bench ./internal/instance/ 'IdleMemory' 1
bench ./internal/cmd/e2e/ 'Attach' 20
# stemctl up of a new instance as root and as a non-root student with
# rootless Podman (the benchmark makes the account: needs root).
bench ./internal/cmd/e2e/ 'UpNew' 10
bench ./internal/cardgit/ 'Check' 2000
bench ./internal/cmd/debug/ 'StopToSign' 100
bench ./internal/cmd/debug/ 'DebugReady' 10
bench ./internal/gate/ 'SSHInitialize$|GateLocalInitialize|Poll30$|Poll30Warm' 10
if ls internal/agent/*_test.go >/dev/null 2>&1 && grep -qh '^func Benchmark' internal/agent/*_test.go internal/agent/*/*_test.go 2>/dev/null; then
  bench ./internal/agent/... '.' 10
fi

# The CLI as a user runs it: a private account, the demo card, wall clock.
say "timing bin/stemctl (wall clock, $ROOT/bin)"
acct=$(mktemp -d); rt=$(mktemp -d /tmp/sb.XXXX); chmod 700 "$rt"
cp -a examples/workspace "$acct/ws"
run() { env XDG_RUNTIME_DIR="$rt" STEM_STATE_DIR="$acct/state" STEM_CONFIG_DIR="$acct/config" STEM_WORKSPACE="$acct/ws" "$ROOT/bin/stemctl" "$@"; }
# A failed command must not pass for a fast one: it prints FAIL, which the
# median then shows.
ms() { local s e; s=$(date +%s%N); if ! "$@" >/dev/null 2>&1; then echo FAIL; return; fi; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }

median() { local v; v=$(cat); if grep -q FAIL <<<"$v"; then echo FAIL; return; fi; sort -n <<<"$v" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
create=(); reuse=()
for i in 1 2 3 4 5; do
  run rm native-amd64-demo-hello-t1 >/dev/null 2>&1
  create+=("$(ms run up native-amd64 demo hello 1)")
  for j in 1 2 3 4; do reuse+=("$(ms run up native-amd64 demo hello 1)"); done
done
run rm native-amd64-demo-hello-t1 >/dev/null 2>&1
rm -rf "$acct" "$rt"
echo "CLI up-create-wall $(printf '%s\n' "${create[@]}" | median) ms" >> "$OUT/bench.txt"
echo "CLI up-reuse-wall $(printf '%s\n' "${reuse[@]}" | median) ms" >> "$OUT/bench.txt"

metric() { # benchmark-name unit
  grep -E "^$1(-[0-9]+)? " "$OUT/bench.txt" | tail -1 | awk -v u="$2" '{for (i=1;i<NF;i++) if ($(i+1)==u) {print $i; exit}}'
}
nsms() { metric "$1" ns/op | awk '{ if ($1 != "") printf "%.0f\n", $1 / 1e6 }'; }
cli() { grep "^CLI $1 " "$OUT/bench.txt" | awk '{print $3}'; }
row() { printf '%-58s %12s %-8s %s\n' "$1" "${2:-n/a}" "$3" "$4"; }

echo
printf '%-58s %12s %-8s %s\n' "figure" "measured" "unit" "target"
row "stem-mcp cold start to initialize reply, p50"      "$(metric BenchmarkColdStart p50-ms)" ms "< 15"
row "pane_capture round trip over stdio, p50"          "$(metric BenchmarkRawPaneCapture p50-ms)" ms "< 0.3"
row "pane_capture round trip over stdio, p99"          "$(metric BenchmarkRawPaneCapture p99-ms)" ms ""
row "nvim_buffer_read 1,000 lines over stdio, p50"     "$(metric BenchmarkRawBufferRead1000 p50-ms)" ms "< 1"
row "nvim_buffer_read 1,000 lines over stdio, p99"     "$(metric BenchmarkRawBufferRead1000 p99-ms)" ms ""
row "pane_wait: output appears -> call returns, p50"   "$(metric BenchmarkPaneWaitNotice p50-ms)" ms "< 20"
row "pane_wait: output appears -> call returns, p99"   "$(metric BenchmarkPaneWaitNotice p99-ms)" ms ""
row "up, image built, to both sockets (in stemctl), p50" "$(metric BenchmarkUpCreate p50-ms)" ms "< 1500"
row "stemctl up, new instance, wall clock, median"     "$(cli up-create-wall)" ms "< 1500"
row "stemctl up, new instance, rootful (root's Podman), p50" "$(metric BenchmarkUpNew/rootful p50-ms)" ms "< 1500"
row "stemctl up, new instance, rootless (a student), p50" "$(metric BenchmarkUpNew/rootless p50-ms)" ms "< 1500"
row "card git check (identity + nested scan, inf/bss)" "$(metric BenchmarkCheck ns/op | awk '{ if ($1 != "") printf "%.3f\n", $1 / 1e6 }')" ms ""
row "up of a healthy instance (in stemctl), p50"       "$(metric BenchmarkUpReuse p50-ms)" ms "< 150"
row "stemctl up, healthy instance, wall clock, median" "$(cli up-reuse-wall)" ms "< 150"
row "stemctl attach to a terminal client in tmux, p50"  "$(metric BenchmarkAttach p50-ms)" ms "< 150"
row "gdb stop -> sign moved in Neovim: stepi typed -> sign, p50" "$(metric BenchmarkStopToSign keys-to-sign-p50-ms)" ms "< 100"
row "  the editor's share: *stopped read -> sign placed, p50" "$(metric BenchmarkStopToSign in-editor-p50-ms)" ms ""
row "debug of an up instance -> task file shown, p50"    "$(metric BenchmarkDebugReady file-shown-p50-ms)" ms "< 1000"
row "debug of an up instance -> command returns, p50"    "$(metric BenchmarkDebugReady debug-returned-p50-ms)" ms ""
row "idle instance memory, native-amd64 (cgroup+conmon)" "$(metric BenchmarkIdleMemory native-amd64-total-MiB)" MiB "< 40"
row "idle instance memory, hazard3-sim (cgroup+conmon)"  "$(metric BenchmarkIdleMemory hazard3-sim-total-MiB)" MiB "< 40"
row "idle instance memory, RSS upper bound (native)"     "$(metric BenchmarkIdleMemory native-amd64-rss-upper-MiB)" MiB ""
row "SSH connect -> initialize (teacher dial, default kex)" "$(nsms BenchmarkSSHInitialize/bashrc-skipped/kex-default/dial)" ms "< 150"
row "SSH connect -> initialize (teacher dial, curve25519)" "$(nsms BenchmarkSSHInitialize/bashrc-skipped/kex-curve25519/dial)" ms "< 150"
row "SSH connect -> initialize (ssh alone, default kex)"  "$(nsms BenchmarkSSHInitialize/bashrc-skipped/kex-default)" ms ""
row "poll 30 students, new SSH sessions (dial, default)" "$(nsms BenchmarkPoll30/bashrc-skipped/kex-default/dial)" ms "< 2000"
row "poll 30 students, new SSH sessions (dial, curve25519)" "$(nsms BenchmarkPoll30/bashrc-skipped/kex-curve25519/dial)" ms "< 2000"
row "poll 30 students, new SSH sessions (ssh alone, curve)" "$(nsms BenchmarkPoll30/bashrc-skipped/kex-curve25519)" ms ""
echo
echo "Raw benchmark lines (SSH, agents and the rest):"
grep -E '^Benchmark' "$OUT/bench.txt"
