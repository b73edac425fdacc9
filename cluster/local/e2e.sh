#!/usr/bin/env bash
# Runs the e2e tests (test/e2e, build tag e2e) against $KUBECONFIG if set, else against the local
# control plane: an already running one is used and left running; otherwise one is started for the
# run and always stopped afterwards. Extra arguments go to `go test`.
#
#   cluster/local/e2e.sh [-run TestX ...]
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# The Crossplane tier installs the configuration package with the Crossplane CLI, as the README
# does: built (before any control plane starts) unless `make tools` built it already.
"$here/build-tools.sh" crank

if [[ -z "${KUBECONFIG:-}" ]]; then
  if ! cluster_healthy; then
    teardown() {
      local rc=$?
      if ((rc != 0)) && [[ -d "$state/logs" ]]; then
        rm -rf "$CACHE_DIR/e2e-logs" && cp -r "$state/logs" "$CACHE_DIR/e2e-logs"
        echo "e2e: control plane logs kept in $CACHE_DIR/e2e-logs" >&2
      fi
      "$here/cluster-down.sh" || true
      exit "$rc"
    }
    trap teardown EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    "$here/cluster-up.sh" >/dev/null
  fi
  export KUBECONFIG="$kubeconfig"
fi

cd "$root"
export CROSSPLANE_DIR CRANK_DIR PROMETHEUS_DIR
CROSSPLANE_DIR="$("$here/build-tools.sh" crossplane-dir)"
CRANK_DIR="$("$here/build-tools.sh" crank-dir)"
PROMETHEUS_DIR="$("$here/build-tools.sh" prometheus-dir)"
# The Crossplane tier keeps core's, the provider's and the function's logs with the control plane's.
export CROSSPLANE_E2E_LOGS="${CROSSPLANE_E2E_LOGS:-$state/logs/crossplane}"
# The output is kept, and a failing run repeats each failed test's own lines at its end: with -v
# the Crossplane tier's long output comes after the first package's failure and would bury it.
log="$(mktemp)"
rc=0
# One package at a time: the in-process providers of test/e2e and test/e2e/monitoring and the one
# Crossplane installs in test/e2e/crossplane must not reconcile the same cluster at once.
# test/e2e/monitoring runs Prometheus, last: make test builds it in the background meanwhile, and
# build-tools.sh waits for that build (or builds it) before the package starts.
pkgs=()
while read -r p; do [[ "$p" == */test/e2e/monitoring ]] || pkgs+=("$p"); done < <(go list -tags e2e ./test/e2e/...)
go test -tags e2e -count=1 -p 1 -timeout 30m "${pkgs[@]}" -v "$@" 2>&1 | tee "$log" || rc=$?
"$here/build-tools.sh" prometheus
go test -tags e2e -count=1 -timeout 10m ./test/e2e/monitoring -v "$@" 2>&1 | tee -a "$log" || rc=$?
if ((rc != 0)); then
  echo "e2e: failed; each failed test's output again (its last 200 lines):"
  # A test's lines run from its "=== RUN" to its "--- FAIL" (packages run one at a time, and the
  # tests of a package one after another).
  for t in $(sed -n 's/^ *--- FAIL: \([^ ]*\) .*/\1/p' "$log" | sort -u); do
    echo "----- $t"
    awk -v t="$t" '$0 ~ "^=== RUN +"t"$" {on=1; n=0} on {buf[n++]=$0} on && $0 ~ "--- FAIL: "t" " {on=0; s=(n>200?n-200:0); for (i=s; i<n; i++) print buf[i]}' "$log"
  done
fi
rm -f "$log"
exit "$rc"
