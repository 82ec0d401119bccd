#!/usr/bin/env bash
# make bench: run the Go benchmarks that carry the product's performance
# targets, time the real stemctl binary, and write docs/benchmarks.md (the
# machine, the date, each figure's median with its sample count and what it
# times) and the same table into README.md between its bench markers.
# Everything runs against real Podman, tmux, Neovim, gdb and sshd.
#
# BENCH_REPORT=FILE measures nothing: it writes the two documents from the
# benchmark output FILE (a run's bench.txt, kept with BENCH_KEEP=FILE), the
# last line of each benchmark counting, so a benchmark run again alone and
# appended replaces its figure.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$(mktemp -d)
trap 'if [ -n "${BENCH_KEEP:-}" ]; then cp "$OUT/bench.txt" "$BENCH_KEEP"; fi; rm -rf "$OUT"' EXIT
export STEM_MCP_BIN=${STEM_MCP_BIN:-$ROOT/bin/stem-mcp}
N=${BENCH_N:-200}
RT_N=${BENCH_RT_N:-2000}
DOC=${BENCH_DOC:-$ROOT/docs/benchmarks.md}
README=${BENCH_README:-$ROOT/README.md}

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

bench() { # package regex count [timeout]
  say "go test -bench '$2' -benchtime $3x $1"
  go test -run '^$' -bench "$2" -benchtime "$3x" -timeout "${4:-30m}" "$1" 2>&1 | tee -a "$OUT/bench.txt" | grep -E '^Benchmark|FAIL|panic' >&2
}

measure() {
bench ./internal/mcpserver/ 'ColdStart|PaneWaitNotice' "$N"
# Round trips are short: more samples give a steadier p50 and a real p99.
bench ./internal/mcpserver/ 'RawPaneCapture|RawBufferRead1000' "$RT_N"
# A capture's parts: the transport (a ping), tmux alone, the server's own
# work on a fake tmux in process, and stem-mcp's CPU time per call.
bench ./internal/mcpserver/ 'RawPing|TmuxCapture|ServerPaneCapture|PerCallPaired' "$RT_N"
bench ./internal/nvim/ 'ReadBuffer1000' "$RT_N"
bench ./internal/tmux/ 'WaitNoticeLatency' 100
# Faults: the agent's next editor call after Neovim is restarted, and
# control clients SIGKILLed during captures against tmux 3.3a, the images'
# (BENCH_STORM_KILLS kills, default 10,000: about half a second each on a
# busy two-core machine, most of it waiting for the server to stall).
bench ./internal/mcpserver/ 'EditorRestartNextCall' 20
STEM_STORM_KILLS=${BENCH_STORM_KILLS:-10000} bench ./internal/tmux/ 'SIGKILLStorm' 1 240m
# stem-mcp itself SIGKILLed mid-work against tmux, Neovim and gdb
# (BENCH_MCP_KILLS, default 2,000), and the fault-injection suite counted
# by kind (scripts/faults.sh).
STEM_MCP_KILLS=${BENCH_MCP_KILLS:-2000} bench ./internal/mcpserver/ 'StemMCPKillStorm' 1 120m
say "the fault-injection suite, by kind"
scripts/faults.sh | tee -a "$OUT/bench.txt" >&2
bench ./internal/gdbmi/ 'StopEventLatency' 50
bench ./internal/instance/ 'UpCreate' 10
bench ./internal/instance/ 'UpReuse' 50
bench ./internal/instance/ 'IdleMemory' 1
bench ./internal/cmd/e2e/ 'Attach$' 20
# stemctl attach's guarded relay beside the plain one it replaced (stemctl
# built from the commit before the host relay), on the same instance.
base=$OUT/baseline
if git worktree add -q --detach "$base" 6870b26 2>/dev/null &&
  (cd "$base" && go build -o "$OUT/stemctl-baseline" ./cmd/stemctl); then
  STEM_ATTACH_BASELINE=$OUT/stemctl-baseline bench ./internal/cmd/e2e/ 'AttachRelay' 5
else
  say "no baseline stemctl (not a git checkout?): the relay alone"
  bench ./internal/cmd/e2e/ 'AttachRelay' 5
fi
git worktree remove --force "$base" 2>/dev/null
# stemctl up of a new instance as root and as a non-root student with
# rootless Podman (the benchmark makes the account: needs root).
bench ./internal/cmd/e2e/ 'UpNew' 10
# A student's first up of an image: a new account from stemctl lab add,
# as after a reboot, its Podman service started by that up (needs root).
bench ./internal/cmd/lab/ 'FirstRootlessUp' 3 60m
bench ./internal/cardgit/ 'Check' 2000
bench ./internal/cardaccess/ 'CardUnchanged' 200
bench ./internal/cmd/debug/ 'StopToSign' 100
bench ./internal/cmd/debug/ 'DebugReady' 10
bench ./internal/agent/ 'GDBStopToNotification' 50
bench ./internal/agent/ 'AgentStartToFirstMCPCall' 10
bench ./internal/gate/ 'SSHInitialize$|GateLocalInitialize' 20
bench ./internal/gate/ 'Poll30$|Poll30Warm' 10
# The whole class: the built stem-mcp class against stand-in gates on
# loopback (package standin), 30 and 200 students.
bench ./internal/cmd/class/ 'ClassOverviewOpen' 50
bench ./internal/cmd/class/ 'ClassOverviewCold' 5
bench ./internal/cmd/class/ 'UnderAttack' 20
# A student gone silent (a relay that holds their bytes, closes nothing):
# the hub's heartbeat, and without it (35 s a sample).
bench ./internal/class/ 'SilentStudentGone' 5
bench ./internal/cmd/audit/blame/ 'BlameCommand' 50
# The student in charge: proposals and approvals, through the server.
bench ./internal/nvim/ 'Propose$' 200
bench ./internal/mcpserver/ 'ProposalCreate|ApprovalRoundTrip' 200
bench ./internal/cmd/attach/ 'DecisionRoundTrip' 200
# An event reaching an idle real CLI's model (sandboxed, scripted model).
bench ./internal/agent/ 'EventToModel' 5
# The real CLIs' start in their sandbox (scripted model): to the MCP
# session, to the input prompt, idle memory; Gemini CLI also without
# stem's start-up settings (relaunch-), paired in each iteration.
bench ./internal/agent/ 'SandboxedAgentStart/rootful' 5
# The dashboard's server: 30 students busy and idle, one student's page.
bench ./internal/class/dashboard/ 'ThirtyBusy|ThirtyIdle|StudentPage' 500
# A lab of 30 real accounts on one shared image store: one lab import of
# the class's CSV, each student's first up, the disk each costs, lab status
# and lab update after an image change (the accounts are removed after).
bench ./internal/cmd/lab/ 'LabThirty' 1 60m
# The task's make on the shared store (fuse-overlayfs) and on an account's
# own copy of the image (kernel overlay), paired.
bench ./internal/cmd/lab/ 'LabCompile' 10
# The soak: 30 MCP clients on one instance, an agent through its relay and
# the class server over 30 sessions, for BENCH_SOAK (default 30m) after a
# warm-up; memory and descriptors of each process at its start and end.
# BENCH_SOAK is a number of seconds, minutes or hours (90s, 30m, 1h).
SOAK=${BENCH_SOAK:-30m}
case $SOAK in
*s) soak_s=${SOAK%s} ;; *m) soak_s=$(( ${SOAK%m} * 60 )) ;; *h) soak_s=$(( ${SOAK%h} * 3600 )) ;;
*) echo "BENCH_SOAK=$SOAK: want 90s, 30m or 1h" >&2; exit 2 ;;
esac
# The test's own limit: the soak, its warm-up and setting up the rest.
STEM_SOAK_DURATION=$SOAK bench ./internal/soak/ 'Soak' 1 "$(( soak_s * 2 + 1800 ))s"

# The CLI as a user runs it: a private account, the demo card, wall clock.
say "timing bin/stemctl (wall clock, $ROOT/bin)"
acct=$(mktemp -d); rt=$(mktemp -d /tmp/sb.XXXX); chmod 700 "$rt"
cp -a examples/workspace "$acct/ws"
run() { env XDG_RUNTIME_DIR="$rt" STEM_STATE_DIR="$acct/state" STEM_CONFIG_DIR="$acct/config" STEM_WORKSPACE="$acct/ws" XDG_CACHE_HOME="$acct/cache" "$ROOT/bin/stemctl" "$@"; }
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
echo "CLI up-create-wall ${#create[@]} $(printf '%s\n' "${create[@]}" | median)" >> "$OUT/bench.txt"
echo "CLI up-reuse-wall ${#reuse[@]} $(printf '%s\n' "${reuse[@]}" | median)" >> "$OUT/bench.txt"
}

if [ -n "${BENCH_REPORT:-}" ]; then
  cp "$BENCH_REPORT" "$OUT/bench.txt" || exit 1
else
  measure
fi

# line NAME: the last result line of benchmark NAME (the -CPUS suffix aside).
line() { grep -E "^$1(-[0-9]+)? " "$OUT/bench.txt" | tail -1; }
metric() { line "$1" | awk -v u="$2" '{for (i=1;i<NF;i++) if ($(i+1)==u) {print $i; exit}}'; }
samples() { line "$1" | awk '{print $2}'; }

# row FIGURE BENCHMARK METRIC UNIT TARGET WHAT: one figure of the table.
# BENCHMARK "CLI:name" is a wall-clock series timed above.
rows=()
row() {
  local fig=$1 b=$2 m=$3 unit=$4 target=$5 what=$6 v n
  if [[ $b == CLI:* ]]; then
    read -r n v < <(grep "^CLI ${b#CLI:} " "$OUT/bench.txt" | awk '{print $3, $4}')
  else
    v=$(metric "$b" "$m"); n=$(samples "$b")
  fi
  # Go reports ns/op; the table says what a reader compares.
  if [[ $m == ns/op && -n $v ]]; then
    case $unit in
    ms) v=$(awk -v x="$v" 'BEGIN {printf "%.2f", x / 1e6}') ;;
    µs) v=$(awk -v x="$v" 'BEGIN {printf "%.1f", x / 1e3}') ;;
    esac
  fi
  rows+=("| $fig | ${v:-n/a} $unit | ${n:-n/a} | ${target:--} | $what |")
}
row "stem-mcp cold start" BenchmarkColdStart p50-ms ms "< 15 ms" "process start of \`stem-mcp serve\` (observe) to its initialize reply over stdio"
row "\`pane_capture\` round trip" BenchmarkRawPaneCapture p50-ms ms "< 0.2 ms" "request written to stem-mcp's stdin to the reply read, a 160x48 pane, a minimal client"
row "\`pane_capture\` round trip, p99" BenchmarkRawPaneCapture p99-ms ms "" "as above, 99th percentile"
row "ping round trip" BenchmarkRawPing p50-ms ms "" "a JSON-RPC ping through stem-mcp, same client: the pipes, the transport, mcp-go"
row "tmux capture alone" BenchmarkTmuxCapture p50-ms ms "" "the same capture over a control client of the instance's tmux from the benchmark's process: tmux's share"
row "\`pane_capture\`, the server alone" BenchmarkServerPaneCapture/capture p50-ms ms "" "stem-mcp's stdio transport on pipes in process, tmux a fake answering from memory: verification, policy, tool, encoding"
row "ping, the server alone" BenchmarkServerPaneCapture/ping p50-ms ms "" "as above, a ping: the transport and mcp-go"
row "\`pane_capture\`, stem-mcp's CPU per call" BenchmarkPerCallPaired capture-cpu-us µs "" "the server process's threads' time on a CPU (/proc schedstat) per pane_capture over stdio, calls in blocks beside pings"
row "ping, stem-mcp's CPU per call" BenchmarkPerCallPaired ping-cpu-us µs "" "as above, per ping"
row "\`nvim_buffer_read\` of 1,000 lines" BenchmarkRawBufferRead1000 p50-ms ms "< 1 ms" "as above, 1,000 lines (85 KB) of an open buffer"
row "\`nvim_buffer_read\` of 1,000 lines, p99" BenchmarkRawBufferRead1000 p99-ms ms "" "as above, 99th percentile"
row "Neovim read alone (1,000 lines)" BenchmarkReadBuffer1000 p50-ms ms "" "internal/nvim's ReadBuffer over Neovim's RPC socket (two round trips), no MCP"
row "\`pane_wait\` notices output" BenchmarkPaneWaitNotice p50-ms ms "< 20 ms" "the shell's timestamp as it prints the awaited line to pane_wait's reply"
row "tmux Wait notices output" BenchmarkWaitNoticeLatency p50-ms ms "< 20 ms" "internal/tmux: %output carrying the token at the client to Wait returning"
row "agent's next call after Neovim is restarted" BenchmarkEditorRestartNextCall p50-ms ms "< 1 s" "Neovim killed (a call refused meanwhile) and started again: the new Neovim answering to the same MCP session's next nvim_status answered"
row "SIGKILLs of a control client during captures" BenchmarkSIGKILLStorm/mixed sigkills kills "10,000" "control clients of a real tmux 3.3a (the images' version) SIGKILLed at random points of dialing and capturing a busy pane, a quarter of them stopped first"
row "student sessions ended by the SIGKILL storm" BenchmarkSIGKILLStorm/mixed server-deaths deaths "0" "the student's tmux server gone after any of those kills"
row "SIGKILLs of a stopped control client" BenchmarkSIGKILLStorm/stalled sigkills kills "10,000" "as above, every client stopped after a capture so that the server holds output for it"
row "student sessions ended by those" BenchmarkSIGKILLStorm/stalled server-deaths deaths "0" "the student's tmux server gone after any of those kills"
row "SIGKILLs of stem-mcp mid-work" BenchmarkStemMCPKillStorm sigkills kills "thousands" "\`stem-mcp serve\` killed at random points of its start, pane captures, a \`pane_wait\` on a printing pane, buffer reads and gdb calls, against one instance"
row "student processes ended by those" BenchmarkStemMCPKillStorm parts-ended parts "0" "the student's tmux server, Neovim or gdb ended (or replaced) after any of those kills"
fault() { row "faults survived: $1" "BenchmarkFaults/$2" survived faults "all" "$3"; }
fault "Podman service killed (engine)" service "the service SIGKILLed during a command and while it holds a call: stem starts it again and the command completes"
fault "Podman service killed (stemctl, stem-mcp)" service-cli "during \`up\`, \`exec\` and an MCP call"
fault "a part down" parts "the editor quit, hostile, hung, restarted or its socket replaced, no debugger, the debugger without the editor: the tools that need the part fail with what is down, the others work"
fault "container OOM-killed or stopped" oom-stop "under a running call"
fault "audit log's disk full or read-only" audit-disk "the effect refused, the error says what to free, the chain still verifies"
fault "state files damaged" damaged-files "registry, grants, agent record cut short: the file, the line and the repair, no panic"
fault "grants cut short, at the gate" damaged-grants "every teacher refused with the file and its repair"
fault "a roster cut short" damaged-roster "the other classes listed, the file, line and repair"
fault "Ctrl-C of \`up\`" interrupt-up "at each step: exit 130, nothing half-made"
fault "Ctrl-C of \`agent start\` and \`rm\`" interrupt-agent "at each step"
fault "the teacher's SSH dropped mid-call" ssh-dropped "the gate's session ends, its tmux client released, the audit chain intact"
fault "a student gone mid-stream" student-gone "on the class dashboard (real browser): gone or silent"
fault "stem-mcp SIGKILLed mid-work" stem-mcp-killed "60 kills in make test's version, the student's processes unchanged"
row "\`up\`, new instance (in stemctl)" BenchmarkUpCreate p50-ms ms "< 1.5 s" "instance.Manager.Up with the image built: create, start, both sockets answering"
row "\`stemctl up\`, new instance (wall clock)" CLI:up-create-wall "" ms "< 1.5 s" "bin/stemctl process start to exit, after \`stemctl rm\`"
row "\`stemctl up\`, new instance, root's Podman" BenchmarkUpNew/rootful p50-ms ms "< 1.5 s" "bin/stemctl process start to exit, as root with rootful Podman"
row "\`stemctl up\`, new instance, a student's rootless Podman" BenchmarkUpNew/rootless p50-ms ms "< 1.5 s" "as above, as a non-root account with its own rootless Podman"
row "first rootless \`stemctl up\` of an image, own store" BenchmarkFirstRootlessUp/own p50-ms ms "< 2 s" "a new account from \`stemctl lab add\` (image loaded, stored as the containers' ids), as after a reboot: bin/stemctl process start to exit, the Podman service's start included"
row "… of it, the Podman service's start" BenchmarkFirstRootlessUp/own service-p50-ms ms "" "\`podman system service\` started by that up to its socket answering (stemctl's service log)"
row "… of it, \`up\` in stemctl" BenchmarkFirstRootlessUp/own manager-up-p50-ms ms "" "instance.Manager.Up: create, start, both sockets answering"
row "first rootless \`stemctl up\`, own store without remap" BenchmarkFirstRootlessUp/own-unmapped p50-ms ms "" "as above, storage.conf with the overlay driver alone (what lab wrote before): Podman copies the image for stem's ids"
row "first rootless \`stemctl up\`, shared store" BenchmarkFirstRootlessUp/shared p50-ms ms "< 2 s" "as above, the account reading lab's shared store through fuse-overlayfs"
row "… of it, the Podman service's start" BenchmarkFirstRootlessUp/shared service-p50-ms ms "" "as above"
row "card git check" BenchmarkCheck ns/op µs "" "the card's .git identity and the nested-repository scan (inf/bss)"
row "card ACL walk, nothing to change" BenchmarkCardUnchanged ns/op ms "" "what every \`up\` pays for the container's access to the card: 1,000 files in 50 directories, each ACL read through its descriptor"
row "\`up\` of a healthy instance (in stemctl)" BenchmarkUpReuse p50-ms ms "< 150 ms" "instance.Manager.Up that reuses: resolve, inspect, probe both servers"
row "\`stemctl up\`, healthy instance (wall clock)" CLI:up-reuse-wall "" ms "< 150 ms" "bin/stemctl process start to exit"
row "\`stemctl attach\`" BenchmarkAttach p50-ms ms "< 150 ms" "process start on a real pty to tmux listing its terminal client (the client runs in the container)"
row "\`stemctl attach\`, \`cat\` of 10 MB" BenchmarkAttachRelay/relay cat10MB-ms ms "within 10 % of the plain relay" "a pane's \`cat\` of 10 MB (base64 lines) to its last line on the student's pty, through the guarded host relay"
row "\`stemctl attach\`, \`cat\` of 10 MB, plain relay" BenchmarkAttachRelay/baseline cat10MB-ms ms "" "as above, stemctl built from the commit before the guarded relay (bytes copied as they come)"
row "\`stemctl attach\`, keystroke echo" BenchmarkAttachRelay/relay echo-ms ms "within 10 % of the plain relay" "a key written to the student's pty to the shell's echo back on it, through the guarded relay"
row "\`stemctl attach\`, keystroke echo, plain relay" BenchmarkAttachRelay/baseline echo-ms ms "" "as above, the plain relay"
row "idle instance memory, native-amd64" BenchmarkIdleMemory native-amd64-total-MiB MiB "< 40 MB" "container cgroup plus conmon, settled"
row "idle instance memory, hazard3-sim" BenchmarkIdleMemory hazard3-sim-total-MiB MiB "< 40 MB" "as above"
row "gdb stop → sign moved in Neovim" BenchmarkStopToSign keys-to-sign-p50-ms ms "< 100 ms" "stepi typed in the gdb pane to the editor's sign on the new line (hazard3-sim)"
row "gdb stop record → sign placed" BenchmarkStopToSign in-editor-p50-ms ms "" "the editor's share: *stopped read to sign placed"
row "\`debug\` of an up instance → file shown" BenchmarkDebugReady file-shown-p50-ms ms "< 1 s" "stemctl debug started to the task's file shown in the editor"
row "\`debug\` of an up instance → command returns" BenchmarkDebugReady debug-returned-p50-ms ms "" "as above, to stemctl debug's exit (gdb-multiarch attached)"
row "gdb stop → notification" BenchmarkGDBStopToNotification p50-ms ms "< 50 ms" "the student's stepi keys sent to the gdb pane to the MCP client holding gdb_stopped (native-amd64)"
row "gdb stop record → notification" BenchmarkGDBStopToNotification publish-p50-ms ms "" "gdb's stop record at the bridge to the MCP client holding the notification"
row "gdbmi stop → second client" BenchmarkStopEventLatency client-p50-ms ms "" "internal/gdbmi: one client's -exec-next to another client's stopped event"
row "\`agent start\` → first MCP call" BenchmarkAgentStartToFirstMCPCall p50-ms ms "< 2 s" "\`stemctl agent start\` (instance up) to the test agent's first successful tool call, the agent in its sandbox"
row "SSH → initialize, stem-dial, default kex" BenchmarkSSHInitialize/bashrc-skipped/kex-default/dial p50-ms ms "< 150 ms" "ssh through the entries' ProxyCommand (stem-dial) to the gate's initialize reply, loopback sshd, quiet .bashrc"
row "SSH → initialize, stem-dial, curve25519" BenchmarkSSHInitialize/bashrc-skipped/kex-curve25519/dial p50-ms ms "< 150 ms" "as above, KexAlgorithms=curve25519-sha256"
row "SSH → initialize, ssh alone, default kex" BenchmarkSSHInitialize/bashrc-skipped/kex-default p50-ms ms "" "as above without stem-dial"
row "SSH → initialize, root's .bashrc as is" BenchmarkSSHInitialize/bashrc-as-is/kex-default p50-ms ms "" "ssh alone, the account's own ~/.bashrc run by sshd"
row "gate alone → initialize" BenchmarkGateLocalInitialize p50-ms ms "" "\`stem-mcp gate\` started as sshd would, no SSH, to its initialize reply"
row "poll 30 students, stem-dial, default kex" BenchmarkPoll30/bashrc-skipped/kex-default/dial p50-ms ms "< 2 s" "30 parallel SSH sessions: connect, initialize, pane_capture (all on this one machine)"
row "poll 30 students, stem-dial, curve25519" BenchmarkPoll30/bashrc-skipped/kex-curve25519/dial p50-ms ms "< 2 s" "as above"
row "poll 30 students, ssh alone, curve25519" BenchmarkPoll30/bashrc-skipped/kex-curve25519 p50-ms ms "" "as above without stem-dial"
row "poll 30 open sessions" BenchmarkPoll30Warm p50-ms ms "" "one pane_capture in each of 30 MCP sessions already open over SSH"
row "\`audit blame\`, 1,000 lines, 200 changes" BenchmarkBlameCommand p50-ms ms "< 100 ms" "stemctl audit blame's run, process start aside: find the card, read the file and its 200 records, check their chain, walk them"
row "proposal created, in Neovim" BenchmarkPropose p50-ms ms "< 5 ms" "internal/nvim's Propose of a 3-line change to a 1,000-line buffer (the plugin diffs, anchors, draws)"
row "proposal created, through the server" BenchmarkProposalCreate p50-ms ms "< 5 ms" "nvim_buffer_edit under edits = \"propose\" over stdio, audited"
row "an effectful call (nvim_hint), same run" BenchmarkProposalCreate hint-p50-ms ms "" "the fixed cost every effectful call pays: full verification, fsync'd audit intent and outcome"
row "approval round trip, stem's share" BenchmarkApprovalRoundTrip approval-p50-ms ms "< 20 ms" "a call needing approval minus the same call without, the student's answer typed at once"
row "decision round trip, on the host" BenchmarkDecisionRoundTrip roundtrip-ms ms "< 20 ms" "a question shown on the host line of stemctl attach to the asker holding the answer, the student's chord (Ctrl-] y) typed at once"
row "event → the idle CLI's next model request, Claude Code" BenchmarkEventToModel/claude median-ms ms "< 1 s" "a crash in the student's shell to the marked line in the real CLI's next request to the scripted model"
row "event → model, Codex" BenchmarkEventToModel/codex median-ms ms "< 1 s" "as above"
row "event → model, Gemini CLI" BenchmarkEventToModel/gemini median-ms ms "< 1 s" "as above"
row "\`agent start\` → MCP session, Claude Code" BenchmarkSandboxedAgentStart/rootful/claude start-to-mcp-p50-ms ms "< 1.5 s" "\`stemctl agent start --background\` (instance up) to the real CLI's session_start in the audit log, in its sandbox behind the egress proxy, scripted model"
row "\`agent start\` → MCP session, Codex" BenchmarkSandboxedAgentStart/rootful/codex start-to-mcp-p50-ms ms "< 1.5 s" "as above"
row "\`agent start\` → MCP session, Gemini CLI" BenchmarkSandboxedAgentStart/rootful/gemini start-to-mcp-p50-ms ms "< 1.5 s" "as above"
row "\`agent start\` → MCP session, Gemini CLI relaunching" BenchmarkSandboxedAgentStart/rootful/gemini relaunch-start-to-mcp-p50-ms ms "" "as above without stem's start-up settings (Gemini's second Node.js process), each start paired with one of the row above"
row "\`agent start\` → ready for input, Claude Code" BenchmarkSandboxedAgentStart/rootful/claude start-to-ready-p50-ms ms "< 3 s" "\`stemctl agent start --background\` to the CLI's input prompt in the agent window"
row "\`agent start\` → ready for input, Codex" BenchmarkSandboxedAgentStart/rootful/codex start-to-ready-p50-ms ms "< 3 s" "as above"
row "\`agent start\` → ready for input, Gemini CLI" BenchmarkSandboxedAgentStart/rootful/gemini start-to-ready-p50-ms ms "< 3 s" "as above"
row "\`agent start\` → ready for input, Gemini CLI relaunching" BenchmarkSandboxedAgentStart/rootful/gemini relaunch-start-to-ready-p50-ms ms "" "as above without stem's start-up settings, paired"
row "idle agent sandbox memory, Claude Code" BenchmarkSandboxedAgentStart/rootful/claude idle-MiB MiB "" "the sandbox's container cgroup with the CLI at its prompt, settled"
row "idle agent sandbox memory, Codex" BenchmarkSandboxedAgentStart/rootful/codex idle-MiB MiB "" "as above"
row "idle agent sandbox memory, Gemini CLI" BenchmarkSandboxedAgentStart/rootful/gemini idle-MiB MiB "" "as above"
row "idle agent sandbox memory, Gemini CLI relaunching" BenchmarkSandboxedAgentStart/rootful/gemini relaunch-idle-MiB MiB "" "as above without stem's start-up settings, paired"
row "dashboard round, 30 students changed" BenchmarkThirtyBusy ns/op ms "" "30 tiles updated and sent to one page (server side)"
row "dashboard round, 30 students idle" BenchmarkThirtyIdle ns/op ms "" "30 screens looked at, none changed"
row "\`class_overview\`, 30 students, open sessions" BenchmarkClassOverviewOpen/30 p50-ms ms "< 300 ms" "the teacher's client calling \`stem-mcp class\` to its answer, every row over an open session (gate_status); stand-in gates on loopback"
row "\`class_overview\`, 200 students, open sessions" BenchmarkClassOverviewOpen/200 p50-ms ms "" "as above, 200 stand-in students"
row "\`class_overview\`, 30 students, from nothing" BenchmarkClassOverviewCold/30 p50-ms ms "< 3 s" "\`stem-mcp class\` process start to its first class_overview answered, every student over a new SSH connection"
row "\`class_overview\`, 200 students, from nothing" BenchmarkClassOverviewCold/200 p50-ms ms "" "as above, 200 stand-in students"
row "\`stem-mcp class\` memory, 30 sessions" BenchmarkClassOverviewOpen/30 rss-MiB MiB "< 60 MB" "resident memory of the server holding 30 open sessions (its ssh and stem-dial children apart)"
row "\`stem-mcp class\` memory, 200 sessions" BenchmarkClassOverviewOpen/200 rss-MiB MiB "" "as above, 200 sessions"
row "ssh children of \`stem-mcp class\`, 30 sessions" BenchmarkClassOverviewOpen/30 ssh-rss-MiB MiB "" "summed resident memory of its ssh and stem-dial processes (shared pages counted in each)"
row "\`class_overview\`, 30 students, one flooding" BenchmarkClassUnderAttack/attack p50-ms ms "< 300 ms" "as the open-sessions row, one of the 30 a hostile gate flooding the teacher's side with 1 MB requests (cut off, its row shown broken)"
row "\`stem-mcp class\` peak memory, 30, calm" BenchmarkClassUnderAttack/calm peak-rss-MiB MiB "" "peak resident memory from start, 30 honest stand-in students"
row "\`stem-mcp class\` peak memory, 30, one flooding" BenchmarkClassUnderAttack/attack peak-rss-MiB MiB "< 2x calm" "as above, one of the 30 flooding"
row "\`stem-mcp class\` exit on SIGTERM, one flooding" BenchmarkClassUnderAttack/attack exit-s s "< 2 s" "SIGTERM to the process's end, during the flood"
row "silent student → gone" BenchmarkSilentStudentGone/heartbeat p50-s s "< 8 s" "the relay between the teacher's ssh and a stand-in student's gate stops passing bytes without closing anything, to the hub ending that session as \"stopped answering\" (the dashboard's tile says gone within its next look); OpenSSH's ssh, the other student's session open"
row "silent student → gone, no heartbeat" BenchmarkSilentStudentGone/off p50-s s "" "as above without the heartbeat: the open session_events call's deadline (its 20 s wait plus the 15 s timeout)"
row "\`class serve\` peak memory, 30, calm" BenchmarkServeUnderAttack/calm peak-rss-MiB MiB "" "peak resident memory of stemctl class serve from start"
row "\`class serve\` peak memory, 30, one flooding" BenchmarkServeUnderAttack/attack peak-rss-MiB MiB "< 2x calm" "as above, one of the 30 flooding"
row "\`lab import\` of 30 students" BenchmarkLabThirty enrol30-s s "" "one \`stemctl lab import\` of a CSV of 30 new accounts onto a new shared image store (the native image loaded into it once), process start to exit"
row "enrolment, per student" BenchmarkLabThirty enrol-per-student-ms ms "" "as above, divided by 30"
row "first \`stemctl up\` of an enrolled student" BenchmarkLabThirty first-up-p50-ms ms "< 10 s" "each new account's first \`stemctl up\` (demo hello 1) right after the import, four students at a time, median of the 30"
row "first \`stemctl up\` of an enrolled student, slowest" BenchmarkLabThirty first-up-max-ms ms "" "as above, the slowest of the 30"
row "disk per enrolled student" BenchmarkLabThirty disk-per-student-MB MB "< 200 MB" "the student's home after one up (Podman's storage included) plus 1/30 of the shared store"
row "a student's home after one up" BenchmarkLabThirty home-KB KB "" "du of the home: cards, configuration, the container's changes"
row "the shared image store" BenchmarkLabThirty store-MB MB "" "du of the store holding the native image once"
row "\`lab status\` of 30" BenchmarkLabThirty status30-s s "" "root's checks and \`stemctl doctor\` as each of the 30 (four at a time), process start to exit"
row "\`lab update\` of 30, image changed" BenchmarkLabThirty update30-s s "" "a rebuilt image (a new id under the same name) loaded into the shared store and seen by each of the 30"
row "the task's \`make\`, shared store" BenchmarkLabCompile shared-make-ms ms "" "demo hello 1's \`make\` after \`make clean\`, timed in the container, the image's files read through fuse-overlayfs"
row "the task's \`make\`, own store" BenchmarkLabCompile own-make-ms ms "" "as above in an account with its own copy of the image (kernel overlay), paired"
row "the task's first \`make\`, shared store" BenchmarkLabCompile shared-first-make-ms ms "" "the first \`make\` after \`stemctl up\`, one sample"
row "the task's first \`make\`, own store" BenchmarkLabCompile own-first-make-ms ms "" "as above, own store"
row "soak length" BenchmarkSoak minutes min "≥ 30 min" "30 MCP clients on one instance (each its own \`stem-mcp serve\`, one call every 500 ms), an agent calling through its relay at the same pace, \`stem-mcp class\` over 30 sessions (class_overview every 2 s)"
row "soak warm-up" BenchmarkSoak warmup-minutes min "" "before the start is read: every caller has called and every \`stem-mcp\` the soak starts has run a collection its heap's growth set off (its gctrace), so memory is at its working size"
row "soak calls" BenchmarkSoak calls calls "" "tool calls answered during the soak, all callers"
row "soak failed calls" BenchmarkSoak errors calls "0" "any failed call fails the soak"
for p in "serve|30 \`stem-mcp serve\`, summed" "agent-mcp|the agent's \`stem-mcp serve\` (relay's host side)" "supervisor|the agent's supervisor" "class|\`stem-mcp class\`, 30 sessions"; do
  k=${p%%|*} w=${p#*|}
  row "soak: $w, memory at start" BenchmarkSoak "$k-rss-start-MiB" MiB "" "resident memory after the warm-up, every caller held between calls"
  row "soak: $w, memory at end" BenchmarkSoak "$k-rss-end-MiB" MiB "" "resident memory when the soak ends, held the same way"
  row "soak: $w, memory growth" BenchmarkSoak "$k-rss-growth-MiB" MiB "≈ 0" "resident memory at the end minus at the start, held the same way"
  row "soak: $w, descriptors at start" BenchmarkSoak "$k-fds-start" fds "" "open descriptors (/proc/PID/fd) after the warm-up"
  row "soak: $w, descriptors at end" BenchmarkSoak "$k-fds-end" fds "" "open descriptors when the soak ends"
  row "soak: $w, descriptor growth" BenchmarkSoak "$k-fds-growth" fds "0" "at the end minus at the start"
done
row "\`class serve\` exit on SIGTERM, one flooding" BenchmarkServeUnderAttack/attack exit-s s "< 2 s" "SIGTERM to the process's end, during the flood"

table() {
  echo "| figure | median | samples | target | what is timed |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
}

cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
mem=$(awk '/^MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)
ver() { "$@" 2>&1 | head -1; }
{
  echo "# Benchmarks"
  echo
  echo "Written by \`make bench\` (scripts/bench.sh); do not edit by hand. Each figure"
  echo "is the median of its samples (a Go benchmark's iterations, or runs of"
  echo "bin/stemctl), measured against real Podman, tmux, Neovim, gdb and sshd."
  echo
  if [ -n "${BENCH_REPORT:-}" ]; then
    echo "- date: $(date -u -r "$BENCH_REPORT" '+%Y-%m-%d %H:%M UTC') (the saved run's last write)"
    echo "- machine: $cpu, $(nproc) cores, $mem; $(uname -sr)"
  else
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $cpu, $(nproc) cores, $mem; $(uname -sr); load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
  fi
  echo "- $(ver go version); $(ver podman --version); $(ver tmux -V); $(ver nvim --version); $(ver gdb --version); $(ver ssh -V)"
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo
  table
  echo
  cat <<'NOTES'
Reading the figures: the machine is shared and its speed drifts, so compare
figures from one run, and read a single run's change of 10-20 % as noise. An
effectful call (an edit, keys) also pays one fsync'd audit append before it runs
and a full verification of the instance. The 30-student polls run all 30 sshd,
gates and clients on this one machine; on a lab each student's machine serves
one. Where SSH time goes (delayed ACKs that stem-dial avoids, the default
post-quantum key exchange, the account's shell start-up) and how to choose the
key exchange: docs/teacher-setup.md. The class figures run the built
`stem-mcp class` and OpenSSH's ssh against stand-in gates on one loopback
port (internal/class/standin: the gate's SSH verbs and MCP tools, one fsync'd
log line per status, no tmux or Neovim probe): real accounts for 30 students
would take most of an hour to set up on this machine, and 200 do not fit on it.

NOTES
  echo "Raw benchmark lines:"
  echo
  echo '```'
  grep -E '^(Benchmark|CLI )' "$OUT/bench.txt"
  echo '```'
} > "$DOC"
say "wrote $DOC"

# README shows the same table between its markers.
if grep -q '^<!-- bench:begin -->$' "$README" && grep -q '^<!-- bench:end -->$' "$README"; then
  table > "$OUT/table.md"
  awk -v t="$OUT/table.md" '
    /^<!-- bench:begin -->$/ {print; while ((getline l < t) > 0) print l; skip=1; next}
    /^<!-- bench:end -->$/ {skip=0}
    !skip {print}' "$README" > "$OUT/README.md" && cat "$OUT/README.md" > "$README"
  say "updated the table in $README"
fi
echo
table
