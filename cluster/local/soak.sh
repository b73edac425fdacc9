#!/usr/bin/env bash
# make soak: 10,000 managed resources of three kinds under steady churn for an hour
# (BenchmarkSoak, test/bench/soak_test.go): 1% of their sources change each minute and a
# namespace comes and goes. Its samples land in bench/results/soak/soak-<n>.json (committed), and
# hack/faultreport turns them into the soak section of docs/faults.md and docs/soak.svg: the
# slope of the provider's heap, goroutines, watches and open files, and what a change costs.
# SOAK_N and SOAK_MINUTES narrow the run; SOAK_REPORT_ONLY=1 only writes the report again.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
source "$here/common.sh"
out="$CACHE_DIR/bench"
results="$root/bench/results/soak"
mkdir -p "$out" "$results"
cd "$root"

if [[ -z "${SOAK_REPORT_ONLY:-}" ]]; then
  commit="$(measured_commit)"
  "$here/build-tools.sh" controlplane
  export CONTROLLERS_QPS="${CONTROLLERS_QPS:-2000}"
  if ! cluster_healthy; then
    trap '"$here/cluster-down.sh" >&2' EXIT
    export BENCH_DISPOSABLE=1
    "$here/cluster-up.sh" >/dev/null
  fi
  gcflags=-gcflags=all=-dwarf=false
  make --no-print-directory build-provider GO_BUILD_FLAGS="$gcflags" >/dev/null
  CGO_ENABLED=0 go test -tags bench -vet=off "$gcflags" -c -o "$out/bench.test" ./test/bench/
  minutes="${SOAK_MINUTES:-60}"
  (cd test/bench && KUBECONFIG="$kubeconfig" BENCH_PROVIDER="$root/bin/provider" BENCH_OUT="$out" \
    BENCH_COMMIT="$commit" SOAK_OUT="$results" "$out/bench.test" -test.run '^$' -test.bench '^BenchmarkSoak$' \
    -test.benchtime 1x -test.count 1 -test.timeout "$((minutes + 90))m" -test.v) 2>&1 | tee "$out/soak.txt"
fi
go run ./hack/faultreport -faults bench/results/faults -soak "$results" -md docs/faults.md -svg docs/soak.svg
