#!/usr/bin/env bash
# Runs the benchmarks against the local control plane (started and stopped unless one is up) and
# writes the results table to docs/performance.md. Benchmarks measure; nothing here fails on a
# timing. Each scenario is its own `go test` run with a fresh provider process (bin/provider, its
# default flags); BENCH_COUNT (default 3) repeats the short scenarios and BENCH_FANOUT_COUNT
# (default 5) the fan-out; their table rows give the median and, in brackets, the spread
# (lowest–highest) over the runs. BENCH_RATE sets the
# provider's --max-reconcile-rate and BENCH_PROVIDER_ARGS adds flags (such as --debug);
# BENCH_APPBUNDLES, BENCH_COPY_NAMESPACES, BENCH_IDLE_MRS, BENCH_MEM_SELECTED and
# BENCH_MEM_UNSELECTED size the scenarios. BENCH_SCENARIOS (benchmark names, space-separated) runs
# only those again and keeps the other results of the last run. BENCH_TABLE_ONLY=1 runs nothing and
# writes docs/performance.md again from the committed results (after editing bench/notes.md).
# Each scenario's result lines land in bench/results/bench/<benchmark>.txt (committed, with took
# and the commit measured), the table is generated from those; raw output and profiles stay in
# .cache/bench.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
source "$here/common.sh"
out="$CACHE_DIR/bench"
results="$root/bench/results/bench"
table_only="${BENCH_TABLE_ONLY:-}"
[[ -n "${BENCH_SCENARIOS:-}" || -n "$table_only" ]] || rm -rf "$out"
mkdir -p "$out" "$results"
[[ -n "$table_only" ]] || commit="$(measured_commit)"
count="${BENCH_COUNT:-3}"
started=$(date +%s)
cd "$root"
export BENCH_PROVIDER="$root/bin/provider"

if [[ -z "$table_only" ]]; then
  # The control plane builds first (on a fresh machine), then the provider, the benchmarks and pprof
  # with its compiler flags: the libraries they share, which build-tools.sh pins to the provider's
  # versions, then come out of the build cache. Side by side, both builds would compile them. No
  # cgo and no -trimpath (the test's RepoRoot needs paths) for all three, so they share the rest.
  "$here/build-tools.sh" controlplane
  starting=
  if ! cluster_healthy; then
    trap '"$here/cluster-down.sh" >&2' EXIT
    # It starts while the provider compiles.
    "$here/cluster-up.sh" >/dev/null &
    starting=$!
    # The control plane goes when the bench ends: scenarios leave their namespaces to it.
    export BENCH_DISPOSABLE=1
  fi
  gcflags=-gcflags=all=-dwarf=false
  make --no-print-directory build-provider GO_BUILD_FLAGS="$gcflags" >/dev/null
  CGO_ENABLED=0 go test -tags bench -vet=off "$gcflags" -c -o "$out/bench.test" ./test/bench/
  # `go tool pprof` would compile pprof after the scenarios.
  CGO_ENABLED=0 go build "$gcflags" -o "$out/pprof" cmd/pprof
  [[ -z "$starting" ]] || wait "$starting"
  export KUBECONFIG="$kubeconfig" BENCH_OUT="$out"
fi

run() { # run <benchmark> <benchtime> <count>
  [[ -z "$table_only" ]] || return 0
  [[ -z "${BENCH_SCENARIOS:-}" || " $BENCH_SCENARIOS " == *" $1 "* ]] || return 0
  echo "bench: $1 ($2 × $3)" >&2
  local t0=$SECONDS rc=0 log="$out/$1.log"
  [[ ! -f "$out/failed" ]] || sed -i "/^$1\$/d" "$out/failed"
  (cd test/bench && "$out/bench.test" -test.run '^$' -test.bench "^$1\$" -test.benchtime "$2" -test.count "$3" -test.timeout 60m) \
    >"$log" 2>&1 || rc=$?
  cat "$log" >>"$out/raw.txt"
  { grep -E "^Benchmark" "$log" || true; } >"$results/$1.txt"
  if ((rc != 0)); then
    # A scenario that fails shows as failed in the table and fails make bench, never as n/a.
    echo "bench: $1 FAILED (exit $rc); the end of its output:" >&2
    tail -20 "$log" >&2
    echo "$1" >>"$out/failed"
  fi
  echo "bench: $1 took $((SECONDS - t0)) s" | tee -a "$out/raw.txt" >&2
}
[[ -n "${BENCH_SCENARIOS:-}" || -n "$table_only" ]] || : >"$out/raw.txt"
[[ -n "${BENCH_SCENARIOS:-}" || -n "$table_only" ]] || rm -f "$out/failed"
# The fan-out's floor swings run to run (the same 1,000 writes take 0.7 s, then 1.0 s or more), so it
# runs more often.
run BenchmarkCopyRuleFanOut 1x "${BENCH_FANOUT_COUNT:-5}"
run BenchmarkCopyRuleNewNamespace 100x "$count"
run BenchmarkConfigRolloutChangeToTemplate 100x "$count"
run BenchmarkImmortalContainerRecreate 100x "$count"
run BenchmarkConfigRolloutStaggered 1x 1
run BenchmarkMemory 1x 1
# What the scenarios before leave slows the throughput one (1,000 AppBundles: about 105 s alone,
# 124 s after the memory scenario, 160 s after the idle one too); the idle one, last, counts only
# the provider's requests.
run BenchmarkAppBundlesToReady 1x 1
run BenchmarkIdleCost 1x 1

# stat <benchmark> <unit> [scale]: the median of the unit's values over the runs, then the spread in
# brackets when there was more than one run; values are divided by scale.
stat() {
  if grep -qx "$1" "$out/failed" 2>/dev/null; then echo "failed"; return; fi
  { grep -oE "[0-9.e+]+ $2([[:space:]]|$)" "$results/$1.txt" 2>/dev/null || true; } | cut -d' ' -f1 | sort -g | awk -v s="${3:-1}" '
    { v[NR] = $1 / s }
    END {
      if (NR == 0) { print "n/a"; exit }
      m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      if (NR == 1) printf "%.4g", m; else printf "%.4g [%.4g–%.4g]", m, v[1], v[NR]
    }'
}
mib=1048576
[[ -n "$table_only" ]] || {
  took="$(awk -v s="$(( $(date +%s) - started ))" 'BEGIN { printf "%.1f min", s / 60 }')"
  [[ -z "${BENCH_SCENARIOS:-}" ]] || took="$BENCH_SCENARIOS re-run in $took"
  echo "$(date -u +%F) at $commit, $took" >"$results/took"
}
pprof_top() { "$out/pprof" -top -nodecount=12 "$BENCH_PROVIDER" "$1" 2>/dev/null | sed -n '/flat%/,$p' || true; }
[[ -n "$table_only" ]] || {
  echo "CPU profile of the provider during the fan-out (first run):"
  pprof_top "$out/fanout.cpu.pprof"
  echo "Live heap of the provider after the memory scenario:"
  pprof_top "$out/memory.heap.pprof"
} >>"$out/raw.txt"

rate="${BENCH_RATE:-100 (default)}"
{
  echo "# Benchmarks"
  echo
  took="$(cat "$results/took" 2>/dev/null || echo "time unknown")"
  echo "Written by \`make bench\` from bench/results/bench/ (measured $took); raw output, CPU and heap"
  echo "profiles in \`.cache/bench/\`. Measured on the local control plane (kube-apiserver $KUBERNETES_VERSION,"
  echo "etcd $ETCD_VERSION, kwok $KWOK_VERSION fake node) on $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(go version | cut -d' ' -f3). The provider is"
  echo "\`bin/provider\` as its own process with \`--max-reconcile-rate=$rate\`, a fresh one per scenario; the control"
  echo "plane runs on the same machine. Rows with several runs give the median and [lowest–highest] over $count runs (the fan-out: ${BENCH_FANOUT_COUNT:-5})."
  echo
  echo "| # | scenario | result | target |"
  echo "|---|---|---|---|"
  echo "| 1 | CopyRule: 1 ConfigMap → $(stat BenchmarkCopyRuleFanOut namespaces) namespaces, rule created → all copies exist; a raw client doing the same writes (16 parallel, with the provider's authorization and flow-control level) in the same run is the floor | $(stat BenchmarkCopyRuleFanOut s-initial) s vs floor $(stat BenchmarkCopyRuleFanOut s-raw-create) s: **$(stat BenchmarkCopyRuleFanOut x-floor-initial)× the floor** | ≤ 1.5× |"
  echo "| 1 | the same, source updated → all copies updated (in parentheses: the first copy) | $(stat BenchmarkCopyRuleFanOut s-update) s ($(stat BenchmarkCopyRuleFanOut s-update-first) s) vs floor $(stat BenchmarkCopyRuleFanOut s-raw-update) s: **$(stat BenchmarkCopyRuleFanOut x-floor-update)× the floor** | ≤ 1.5× |"
  echo "| 2 | CopyRule: new namespace → copy in it, 100 namespaces created one by one | p50 $(stat BenchmarkCopyRuleNewNamespace p50-ms) ms, p99 $(stat BenchmarkCopyRuleNewNamespace p99-ms) ms | p50 ≤ 100 ms, p99 ≤ 500 ms |"
  echo "| 3 | ConfigRollout: ConfigMap changed → pod template patched, 100 changes | p50 $(stat BenchmarkConfigRolloutChangeToTemplate p50-ms) ms, p99 $(stat BenchmarkConfigRolloutChangeToTemplate p99-ms) ms | p50 ≤ 200 ms |"
  echo "| 4 | ImmortalContainer: pod deleted → successor created, 100 deletions | p50 $(stat BenchmarkImmortalContainerRecreate p50-ms) ms, p99 $(stat BenchmarkImmortalContainerRecreate p99-ms) ms | p50 ≤ 200 ms |"
  pass=$(stat BenchmarkIdleCost pass-requests)
  echo "| 5 | Idle: $(stat BenchmarkIdleCost MRs) converged MRs (a fifth of each kind), 60 s window: writes; requests/s counted by the provider (client-go) and by the API server (its FlowSchema) | $(stat BenchmarkIdleCost writes) writes; $(stat BenchmarkIdleCost client-req/s) req/s (client), $(stat BenchmarkIdleCost server-req/s) req/s (server) | 0 writes, < 1 req/s |"
  echo "| 5 | the same MRs, one safety-net poll round (each checked once) | $pass requests, $(stat BenchmarkIdleCost pass-writes) of them writes: at the default \`--poll=10m\` $(awk -v p="${pass%% *}" 'BEGIN{printf "%.2g", p/600}') req/s on average | — |"
  echo "| 6 | Memory: 1000 ConfigMaps of 1 KiB ($(stat BenchmarkMemory selected-raw-B $mib) MiB raw) become selected by a converged CopyRule and are copied, among 10,000 unselected ones: live heap (after a GC) / RSS, fresh provider → rule converged with nothing selected (the base) → all copied | heap $(stat BenchmarkMemory start-heap-B $mib) → $(stat BenchmarkMemory base-heap-B $mib) → $(stat BenchmarkMemory heap-B $mib) MiB, RSS $(stat BenchmarkMemory start-rss-B $mib) → $(stat BenchmarkMemory base-rss-B $mib) → $(stat BenchmarkMemory rss-B $mib) MiB; heap growth over the base = **$(stat BenchmarkMemory heap-growth/selected-raw)× the selected raw bytes** | unselected not cached; ≤ 1.5× selected + base |"
  echo "| 8 | ConfigRollout staggered: one ConfigMap read by $(stat BenchmarkConfigRolloutStaggered deployments) Deployments of one replica, \`strategy.maxConcurrent: $(stat BenchmarkConfigRolloutStaggered max-concurrent)\`; ConfigMap changed → every Deployment rolled, each wave once the previous is available again (kwok runs the pods); the most seen rolling at once, from a list every 250 ms | $(stat BenchmarkConfigRolloutStaggered s-to-all-rolled) s, at most $(stat BenchmarkConfigRolloutStaggered most-in-flight) in flight | ≤ maxConcurrent in flight |"
  echo "| 7 | Throughput: ${BENCH_APPBUNDLES:-1000} AppBundles applied at once → all Ready (claim bound, Deployment Available) | $(stat BenchmarkAppBundlesToReady s-to-all-ready) s, $(stat BenchmarkAppBundlesToReady MRs/s) MRs/s | — |"
  echo
  cat "$root/bench/notes.md"
  # make bench-fleet's report stays at the end.
  [[ ! -f "$root/docs/fleet/report.md" ]] || { echo "<!-- fleet -->"; cat "$root/docs/fleet/report.md"; }
} >"$root/docs/performance.md"
cat "$root/docs/performance.md"
if [[ -s "$out/failed" ]]; then
  echo "bench: failed scenarios: $(tr '\n' ' ' <"$out/failed")(see $out/raw.txt)" >&2
  exit 1
fi
