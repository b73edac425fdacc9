#!/usr/bin/env bash
# Builds the local control plane from source through the Go module proxy (no Docker, no downloads of
# prebuilt binaries) and caches every tool under $CACHE_DIR/tools/<tool>-<version>/. A tool whose
# cache directory is complete is not built again.
#
#   cluster/local/build-tools.sh [kubernetes|etcd|kwok|crossplane|envtest ...]   (default: all)
#
# Prints nothing but progress on stderr; `cluster/local/build-tools.sh envtest-dir` prints the
# directory to use as KUBEBUILDER_ASSETS.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
CACHE_DIR="${CACHE_DIR:-$root/.cache}"
tools="$CACHE_DIR/tools"
mkdir -p "$tools"

log() { echo "build-tools: $*" >&2; }

# The compiler spends much of a cold build collecting garbage; these machines have memory to spare.
export GOGC="${GOGC:-400}"

# wrapper <dir> <module path>: a throwaway module from which tools are built, because a module with
# replace directives cannot be `go install`ed directly.
wrapper() {
  rm -rf "$1" && mkdir -p "$1"
  (cd "$1" && go mod init "$2" >/dev/null 2>&1)
}

build_kubernetes() {
  local out="$tools/kubernetes-$KUBERNETES_VERSION"
  [[ -x "$out/kube-apiserver" && -x "$out/kube-controller-manager" && -x "$out/kube-scheduler" ]] && return
  log "building kube-apiserver, kube-controller-manager, kube-scheduler $KUBERNETES_VERSION (~5 min cold)"
  local w="$tools/.work/kubernetes" staging="v0${KUBERNETES_VERSION#v1}"
  wrapper "$w" clusterops.local/kubetools
  cat >"$w/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
GO
  (
    cd "$w"
    go mod edit -require="k8s.io/kubernetes@$KUBERNETES_VERSION"
    # k8s.io/kubernetes replaces every staging module with a local path; point each at its
    # published version instead.
    local mod
    mod="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$mod" | while read -r m; do
      go mod edit -replace="$m=$m@$staging"
    done
    go mod tidy -e >/dev/null 2>&1 || true
    mkdir -p "$out.tmp"
    # One invocation: the three share most packages, and their links run side by side.
    CGO_ENABLED=0 go build -tags tools -o "$out.tmp/" \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
  )
  rm -rf "$out" && mv "$out.tmp" "$out"
}

build_etcd() {
  local out="$tools/etcd-$ETCD_VERSION"
  [[ -x "$out/etcd" ]] && return
  log "building etcd $ETCD_VERSION"
  local w="$tools/.work/etcd"
  wrapper "$w" clusterops.local/etcdtool
  cat >"$w/tools.go" <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  (
    cd "$w"
    go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    go mod tidy -e >/dev/null 2>&1 || true
    mkdir -p "$out.tmp"
    CGO_ENABLED=0 go build -tags tools -ldflags "-s -w" -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3
  )
  rm -rf "$out" && mv "$out.tmp" "$out"
}

build_kwok() {
  local out="$tools/kwok-$KWOK_VERSION"
  [[ -x "$out/kwok" && -f "$out/stages.yaml" ]] && return
  log "building kwok $KWOK_VERSION"
  mkdir -p "$out.tmp"
  GOBIN="$out.tmp" CGO_ENABLED=0 go install -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  # kwok refuses to start without stage definitions; the module ships the standard ones.
  local src
  src="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
  for d in node/fast node/heartbeat pod/fast; do
    for f in "$src/$d"/*.yaml; do
      [[ "$(basename "$f")" == kustomization.yaml ]] && continue
      cat "$f"; echo "---"
    done
  done >"$out.tmp/stages.yaml"
  rm -rf "$out" && mv "$out.tmp" "$out"
}

# The crossplane cache directory carries a build-recipe suffix: a change to how it is built (here,
# stamping the version) must not reuse a binary built the old way.
crossplane_dir() { echo "$tools/crossplane-$CROSSPLANE_VERSION-b2"; }
build_crossplane() {
  local out
  out="$(crossplane_dir)"
  [[ -x "$out/crossplane" ]] && return
  log "building crossplane $CROSSPLANE_VERSION (~4 min cold)"
  local w="$tools/.work/crossplane"
  wrapper "$w" clusterops.local/crossplanetool
  cat >"$w/tools.go" <<'GO'
//go:build tools

package tools

import _ "github.com/crossplane/crossplane/v2/cmd/crossplane"
GO
  (
    cd "$w"
    # crossplane/v2 replaces its apis/v2 module with a local path; pin the published one.
    go mod edit -require="github.com/crossplane/crossplane/v2@$CROSSPLANE_VERSION" \
      -require="github.com/crossplane/crossplane/apis/v2@$CROSSPLANE_VERSION"
    go mod tidy -e >/dev/null 2>&1 || true
    mkdir -p "$out.tmp"
    # Core checks packages' `crossplane.version` constraints against its own version, which the
    # release build stamps into crossplane-runtime; unstamped, every constraint fails.
    CGO_ENABLED=0 go build -tags tools -o "$out.tmp/crossplane" \
      -ldflags "-s -w -X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=$CROSSPLANE_VERSION" \
      github.com/crossplane/crossplane/v2/cmd/crossplane
    # Core's own CRDs, which `crossplane core init` installs.
    cp -r "$(go env GOMODCACHE)/github.com/crossplane/crossplane/v2@$CROSSPLANE_VERSION/cluster/crds" "$out.tmp/crds"
    chmod -R u+w "$out.tmp/crds"
  )
  rm -rf "$out" && mv "$out.tmp" "$out"
}

# envtest wants one directory holding kube-apiserver and etcd.
envtest_dir() { echo "$tools/envtest-$KUBERNETES_VERSION-etcd-$ETCD_VERSION"; }
build_envtest() {
  build_kubernetes
  build_etcd
  local out
  out="$(envtest_dir)"
  mkdir -p "$out"
  ln -sf "$tools/kubernetes-$KUBERNETES_VERSION/kube-apiserver" "$out/kube-apiserver"
  ln -sf "$tools/etcd-$ETCD_VERSION/etcd" "$out/etcd"
  ln -sf "$(command -v kubectl || echo /usr/local/bin/kubectl)" "$out/kubectl"
}

if [[ "${1:-}" == envtest-dir ]]; then envtest_dir; exit 0; fi
if [[ "${1:-}" == crossplane-dir ]]; then crossplane_dir; exit 0; fi
# Concurrent runs would wipe each other's work directories; the second waits for the first, then
# finds the tools built.
exec 9>"$tools/.lock"
flock 9
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(envtest kwok crossplane)
# The tools build side by side: one's module downloads and single-threaded link overlap another's
# compile. envtest only links kube-apiserver and etcd, once both are built.
declare -A base=()
for t in "${targets[@]}"; do
  case "$t" in
    envtest) base[kubernetes]=1 base[etcd]=1 ;;
    kubernetes|etcd|kwok|crossplane) base[$t]=1 ;;
    *) echo "build-tools: unknown tool $t" >&2; exit 2 ;;
  esac
done
declare -A jobs=()
for t in "${!base[@]}"; do
  ( start=$SECONDS; "build_$t"; (( SECONDS - start < 2 )) || log "$t built in $((SECONDS - start)) s" ) &
  jobs[$t]=$!
done
failed=()
for t in "${!jobs[@]}"; do wait "${jobs[$t]}" || failed+=("$t"); done
[[ ${#failed[@]} -eq 0 ]] || { log "failed: ${failed[*]}"; exit 1; }
for t in "${targets[@]}"; do [[ "$t" != envtest ]] || build_envtest; done
log "done"
