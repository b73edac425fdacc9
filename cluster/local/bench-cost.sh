#!/usr/bin/env bash
# make bench-cost: what a change costs the fleet. Runs make bench-fleet's scenarios from the
# trees of two commits, COST_BASE (required) and HEAD, one after the other and in
# COST_ROUNDS rounds (default 2), so that base and head share the machine's state as far
# as runs can. Results land in bench/results/fleet-cost/<base|head>-<round>/ (committed);
# hack/fleetreport -cost turns them into docs/fleet/cost.md, which links the dated decision
# records in docs/decisions/ that name them (a line "Results: bench/results/fleet-cost").
#
# COST_KINDS (default "copyrule configrollout"), COST_N (10000) and COST_LAYOUT (one) pick
# the scenarios; each run takes 5 to 8 minutes on 2 cores.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
source "$here/common.sh"
cd "$root"
: "${COST_BASE:?COST_BASE names the commit to compare HEAD with}"
results="$root/bench/results/fleet-cost"
trees="$CACHE_DIR/cost"
rm -rf "$results" "$trees"
mkdir -p "$results" "$trees"
git worktree prune
# Each side runs its own tree: its provider, its CRDs (admission is part of the cost)
# and its bench, against the control plane and tools cached here.
git worktree add --detach "$trees/base" "$COST_BASE" >/dev/null
git worktree add --detach "$trees/head" HEAD >/dev/null
trap 'git worktree remove --force "$trees/base"; git worktree remove --force "$trees/head"' EXIT
failed=0
for round in $(seq "${COST_ROUNDS:-2}"); do
  for kind in ${COST_KINDS:-copyrule configrollout}; do
    for side in base head; do
      echo "bench-cost: round $round, $kind, $side" >&2
      (cd "$trees/$side" && CACHE_DIR="$CACHE_DIR" FLEET_RESULTS="$results/$side-$round" \
        FLEET_KINDS="$kind" FLEET_SIZES="${COST_N:-10000}" FLEET_LAYOUTS="${COST_LAYOUT:-one}" \
        cluster/local/bench-fleet.sh) || failed=1
    done
  done
done
go run ./hack/fleetreport -cost "$results" -md docs/fleet/cost.md
exit "$failed"
