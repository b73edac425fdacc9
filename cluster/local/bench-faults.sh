#!/usr/bin/env bash
# make bench-faults: the fleet-wide fault scenarios at full size (CLUSTEROPS_FAULT_SCALE=10),
# against envtest's API server and etcd as their short versions in make test are:
#   - 10,000 managed resources of three kinds through a change of every source they read,
#     with three SIGKILLs of the provider, and with two API server restarts, in its middle;
#   - 2,000 resources whose provider is cut off while etcd compacts past what it saw;
#   - a remote cluster dark for five minutes under 1,000 CopyRules and 1,000 ConfigRollouts;
#   - a source rewritten every second for ten minutes under a CopyRule and a ConfigRollout.
# Each writes its figures to bench/results/faults/<test>.json (committed), and hack/faultreport turns
# them into docs/faults.md (with the soak's section, from make soak's committed result).
# FAULTS_TESTS narrows the run (a regular expression of test names); FAULTS_REPORT_ONLY=1
# only writes the report again.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
source "$here/common.sh"
cd "$root"
results="$root/bench/results/faults"
mkdir -p "$results"

if [[ -z "${FAULTS_REPORT_ONLY:-}" ]]; then
  "$here/build-tools.sh" envtest
  KUBEBUILDER_ASSETS="$("$here/build-tools.sh" envtest-dir)"
  BENCH_COMMIT="$(measured_commit)"
  export KUBEBUILDER_ASSETS BENCH_COMMIT CLUSTEROPS_FAULT_SCALE=10 CLUSTEROPS_FAULT_RESULTS="$results"
  process='^(TestFleetWaveSurvivesKills|TestFleetWaveSurvivesAPIServerRestarts|TestProviderRelistsAfterCompaction)$'
  integration='^(TestRemoteClusterGoesDark|TestCopyRuleFollowsAFlappingSource|TestConfigRolloutLimitsAFlappingSource)$'
  if [[ -n "${FAULTS_TESTS:-}" ]]; then
    process="$FAULTS_TESTS" integration="$FAULTS_TESTS"
  fi
  rc=0
  # One package at a time: each scenario has the machine to itself.
  # The filter shows progress; go test's status decides (a narrowed run may
  # have nothing to show for a package).
  show() { grep -E '^(=== RUN|--- |\s+\S+_test\.go:[0-9]+: )' || true; }
  go test -p 1 -count 1 -timeout 150m -v -run "$process" ./test/reliability/process/ 2>&1 |
    tee "$CACHE_DIR/bench-faults-process.txt" | show || rc=1
  go test -p 1 -count 1 -timeout 90m -v -run "$integration" ./test/integration/ 2>&1 |
    tee "$CACHE_DIR/bench-faults-integration.txt" | show || rc=1
  grep -q -- '--- FAIL' "$CACHE_DIR"/bench-faults-*.txt && rc=1
fi
go run ./hack/faultreport -faults "$results" -soak bench/results/soak -md docs/faults.md -svg docs/soak.svg
exit "${rc:-0}"
