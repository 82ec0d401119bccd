#!/usr/bin/env bash
# The fault-injection suite, counted by kind: each kind's tests (real
# processes; the part that fails is never a mock) run once, and a line
#   BenchmarkFaults/KIND INJECTED SURVIVED survived
# is printed per kind, in the shape scripts/bench.sh reads. A fault is a
# leaf test (a test without subtests, or one subtest): it injects the
# fault with the action in flight and asserts what the user sees, what the
# audit log holds and what still works. Needs what `make test` needs.
set -uo pipefail
cd "$(dirname "$0")/.."

# kind package regex
count() {
  local kind=$1 pkg=$2 re=$3 out
  printf '\033[1m==> faults: %s (%s %s)\033[0m\n' "$kind" "$pkg" "$re" >&2
  out=$(go test -count=1 -json -timeout 30m -run "$re" "$pkg" 2>/dev/null)
  # Leaf tests only: a parent passes when its subtests do.
  awk -v kind="$kind" '
    match($0, /"Action":"(pass|fail)"/) && match($0, /"Test":"[^"]*"/) {
      t = substr($0, RSTART + 8, RLENGTH - 9)
      res[t] = ($0 ~ /"Action":"pass"/)
    }
    END {
      for (t in res) for (u in res) if (index(u, t "/") == 1) { delete res[t]; break }
      n = 0; ok = 0
      for (t in res) { n++; ok += res[t]; if (!res[t]) printf "faults: %s: %s failed\n", kind, t > "/dev/stderr" }
      printf "BenchmarkFaults/%s %d %d survived\n", kind, n, ok
    }' <<<"$out"
}

count service ./internal/engine/podman/ '^TestServiceKilled'
count service-cli ./internal/cmd/e2e/ '^TestServiceKilled'
count parts ./internal/mcpserver/ '^TestParts'
count oom-stop ./internal/cmd/e2e/ '^TestOOMAndStopUnderARunningCall$'
count audit-disk ./internal/audit/ '^TestAuditOn'
count damaged-files ./internal/cmd/e2e/ '^TestDamaged'
count damaged-grants ./internal/gate/ '^TestRefusedWhenGrantGoneExpiredOrStoreUnsafe$/^store_cut_short$'
count damaged-roster ./internal/cmd/class/ '^TestListWithADamagedRoster$'
count interrupt-up ./internal/cmd/e2e/ '^TestUpInterruptedAtEachStep$'
count interrupt-agent ./internal/agent/ '^Test(AgentStart|Rm)InterruptedAtEachStep$'
count ssh-dropped ./internal/gate/ '^TestSSHDroppedMidCallEndsTheSession$'
count student-gone ./internal/cmd/class/ '^TestClassServeStudent(Gone|Silent)MidStream$'
count stem-mcp-killed ./internal/mcpserver/ '^TestStemMCPKilledMidWorkLeavesTheSession$'
