#!/usr/bin/env bash
# Runs the e2e tests (test/e2e, build tag e2e) against $KUBECONFIG if set, else against the local
# control plane: an already running one is used and left running; otherwise one is started for the
# run and always stopped afterwards. Extra arguments go to `go test`.
#
#   cluster/local/e2e.sh [-run TestX ...]
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

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
go test -tags e2e -count=1 ./test/e2e/... -v "$@"
