#!/usr/bin/env bash
# make bench-fleet: many managed resources at once, every kind, N = 100, 1,000 and
# 10,000 (AppBundle and ImmortalContainer up to 2,000: kwok and the controller-manager
# set their pace), in one namespace and spread over N/10, plus ConfigRollout in auto mode
# (each picks its Deployment out of the namespace's), CopyRule as 1,000 rules ×
# 10 targets and as 1 rule × 10,000 namespaces. Each scenario is one run of
# BenchmarkFleet (test/bench/fleet_test.go) in a process of its own with a fresh provider;
# its result lands in docs/fleet/<kind>-<layout>-<n>.json (committed: a narrowed run
# replaces only its own scenarios' results, and the report can be written again on any
# machine), and hack/fleetreport turns them into docs/fleet/report.md and
# docs/fleet.svg, appended to docs/performance.md. bench/results/fleet/took says when each was run.
#
# On 2 cores a scenario at 100 takes half a minute, at 1,000 one to three
# (AppBundle's), at 10,000 (2,000) 2 to 10.5: the raw client alone takes 1 to 2 minutes a
# scenario at 10,000, the provider longer, its restart is measured too, and in one namespace
# the controller-manager's catching up with 10,000 Deployments takes minutes. The whole tier
# took 124 minutes in its last run (bench/results/fleet/took); each result's Phases say where the time goes.
# FLEET_KINDS, FLEET_SIZES (and FLEET_SIZES_PODS for the two kinds with pods) and
# FLEET_LAYOUTS narrow the run; FLEET_SHARDED adds the sharded tier's kinds (make
# bench-sharded sets it, with no FLEET_KINDS), FLEET_SHARDED_REPLICAS its replica counts;
# FLEET_DEADLINE stops a sharded fleet that has not converged by then and records how far it got
# (with FLEET_TIMEOUT, default 60m, the whole scenario's bound); FLEET_REPORT_ONLY=1 only writes
# the report again.
# FLEET_RESULTS writes the results elsewhere (a profiling run's: FLEET_PROFILE=<dir> saves the
# API server's CPU profiles of the floor and the converge, the provider's of the converge and its
# heap after; FLEET_PROFILE_SECONDS, default 60, and FLEET_PROFILE_FLOOR_SECONDS for the floor's).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
source "$here/common.sh"
out="$CACHE_DIR/bench"
results="${FLEET_RESULTS:-$root/bench/results/fleet}"
mkdir -p "$out/fleet" "$results"
cd "$root"
# A profiling run (FLEET_RESULTS elsewhere) may measure a tree with changes; the report's may not.
if [[ -n "${FLEET_RESULTS:-}" ]]; then
  commit="$(git rev-parse --short HEAD)"
  git diff --quiet HEAD -- ':!bench/results' ':!docs' || commit+="+changes"
else
  commit="$(measured_commit)"
fi
export BENCH_PROVIDER="${BENCH_PROVIDER:-$root/bin/provider}" BENCH_OUT="$out" FLEET_OUT="$results" BENCH_COMMIT="${BENCH_COMMIT:-$commit}"
bench_test="${FLEET_BENCH_TEST:-$out/bench.test}"
kinds="${FLEET_KINDS-configrollout configrollout-auto copyrule chaosagent appbundle immortalcontainer copyrule-x10 copyrule-fanout}"
sizes="${FLEET_SIZES:-100 1000 10000}"
pod_sizes="${FLEET_SIZES_PODS:-100 1000 2000}"
layouts="${FLEET_LAYOUTS:-one spread}"
started=$(date +%s)
failed=()

if [[ -z "${FLEET_REPORT_ONLY:-}" ]]; then
  "$here/build-tools.sh" controlplane
  # The control planes it starts let the controller-manager and the scheduler send 2,000
  # requests a second: at 200 (make bench's) new Deployments got their ReplicaSets at 62 a
  # second with the cores not busy. Both phases run with the same controllers.
  export CONTROLLERS_QPS="${CONTROLLERS_QPS:-2000}"
  if ! cluster_healthy; then
    trap '"$here/cluster-down.sh" >&2' EXIT
    export BENCH_DISPOSABLE=1
  fi
  # FLEET_BENCH_TEST names binaries built already (make bench-ab's, which must not
  # change between its settings).
  if [[ -z "${FLEET_BENCH_TEST:-}" ]]; then
    gcflags=-gcflags=all=-dwarf=false
    make --no-print-directory build-provider GO_BUILD_FLAGS="$gcflags" >/dev/null
    CGO_ENABLED=0 go test -tags bench -vet=off "$gcflags" -c -o "$bench_test" ./test/bench/
  fi
  export KUBECONFIG="$kubeconfig"
  : >"$out/fleet/raw.txt"

  scenario() { # scenario <benchmark> <label> [VAR=value...]
    local bench=$1 label=$2
    shift 2
    echo "bench-fleet: $label" >&2
    local t0=$SECONDS
    # A control plane of its own: what earlier scenarios left (thousands of
    # Deployments for the controller-manager, objects in etcd) would slow this
    # one, and the provider's first list would find them.
    if [[ -n "${BENCH_DISPOSABLE:-}" ]]; then
      "$here/cluster-down.sh" >/dev/null 2>&1
      "$here/cluster-up.sh" >/dev/null
    fi
    if ! (cd test/bench && env "$@" "$bench_test" -test.run '^$' -test.bench "^$bench\$" -test.benchtime 1x -test.count 1 -test.timeout "${FLEET_TIMEOUT:-60m}") >>"$out/fleet/raw.txt" 2>&1; then
      echo "bench-fleet: $label FAILED; the end of its output:" >&2
      tail -20 "$out/fleet/raw.txt" >&2
      failed+=("$label")
    fi
    echo "bench-fleet: $label took $((SECONDS - t0)) s" | tee -a "$out/fleet/raw.txt" >&2
  }
  ran=()
  for kind in $kinds; do
    if [[ "$kind" == copyrule-fanout ]]; then
      # 1 rule × 10,000 namespaces is make bench's fan-out at fleet size.
      n=$(echo "$sizes" | tr ' ' '\n' | sort -n | tail -1)
      scenario BenchmarkCopyRuleFanOut "copyrule 1 rule × $n namespaces" BENCH_COPY_NAMESPACES="$n"
      ran+=("copyrule 1 rule × $n namespaces")
      grep -E "^BenchmarkCopyRuleFanOut" "$out/fleet/raw.txt" | tail -1 >"$results/copyrule-fanout-$n.txt" || true
      continue
    fi
    ns="$sizes"
    case "$kind" in appbundle | immortalcontainer) ns="$pod_sizes" ;; copyrule-x10) ns=1000 ;; esac
    for n in $ns; do
      for layout in $layouts; do
        scenario BenchmarkFleet "$kind $n $layout" FLEET_KIND="$kind" FLEET_N="$n" FLEET_LAYOUT="$layout"
        ran+=("$kind $n $layout")
      done
    done
  done
  # The sharded tier (make bench-sharded): FLEET_SHARDED's kinds at the largest size, spread,
  # shared by 1, 2 and 4 replicas, by 4 with one SIGKILLed mid-converge, and a replica joining
  # and leaving once converged; results in
  # bench/results/fleet/sharded/.
  n=$(echo "$sizes" | tr ' ' '\n' | sort -n | tail -1)
  # FLEET_SHARDED_REPLICAS narrows the replica counts ("kill" is 4 with one killed; "join" is
  # 3 converged and idle, then a fourth joins; "leave" is 4, then the last one stops).
  for kind in ${FLEET_SHARDED:-}; do
    for r in ${FLEET_SHARDED_REPLICAS:-1 2 4 kill join leave}; do
      case "$r" in
      kill)
        scenario BenchmarkShardedFleet "$kind $n shared by 4, one killed" FLEET_KIND="$kind" FLEET_N="$n" FLEET_REPLICAS=4 FLEET_KILL=1
        ran+=("$kind $n shared by 4, one killed")
        continue
        ;;
      join)
        scenario BenchmarkShardedFleet "$kind $n shared by 3, a fourth joins" FLEET_KIND="$kind" FLEET_N="$n" FLEET_REPLICAS=3 FLEET_CHANGE=join
        ran+=("$kind $n shared by 3, a fourth joins")
        continue
        ;;
      leave)
        scenario BenchmarkShardedFleet "$kind $n shared by 4, one leaves" FLEET_KIND="$kind" FLEET_N="$n" FLEET_REPLICAS=4 FLEET_CHANGE=leave
        ran+=("$kind $n shared by 4, one leaves")
        continue
        ;;
      esac
      scenario BenchmarkShardedFleet "$kind $n shared by $r" FLEET_KIND="$kind" FLEET_N="$n" FLEET_REPLICAS="$r"
      ran+=("$kind $n shared by $r")
    done
  done
  took="$(date -u +%F) at $commit: $(IFS=,; echo "${ran[*]}" | sed 's/,\([^ ]\)/, \1/g') ($(( ($(date +%s) - started) / 60 )) min)"
  if [[ -z "${FLEET_KINDS+x}${FLEET_SIZES:-}${FLEET_SIZES_PODS:-}${FLEET_LAYOUTS:-}${FLEET_SHARDED:-}" ]]; then
    printf 'every scenario %s' "$took" >"$results/took"
  else
    printf '; %s' "$took" >>"$results/took"
  fi
fi

# Results written elsewhere (FLEET_RESULTS) are not the report's.
[[ "$results" == "$root/bench/results/fleet" ]] || exit "$((${#failed[@]} > 0))"
go run ./hack/fleetreport -in "$results" -md docs/fleet/report.md -svg docs/fleet.svg -sizing docs/operations.md
# docs/performance.md ends with the fleet report; make bench keeps it there.
sed -i '/^<!-- fleet -->$/,$d' docs/performance.md
{ echo "<!-- fleet -->"; cat docs/fleet/report.md; } >>docs/performance.md
if [[ -n "${failed[*]:-}" ]]; then
  echo "bench-fleet: failed scenarios: ${failed[*]}" >&2
  exit 1
fi
