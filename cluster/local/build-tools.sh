#!/usr/bin/env bash
# Builds the local control plane from source through the Go module proxy (no Docker, no downloads of
# prebuilt binaries) and caches every tool under $CACHE_DIR/tools/<tool>-<version>/. A tool whose
# cache directory is complete is not built again.
#
#   cluster/local/build-tools.sh [controlplane|crossplane|crank|golangci-lint|prometheus ...]
#                                 (default: the first three; make vet builds the linter)
#
# Prints nothing but progress on stderr; `cluster/local/build-tools.sh envtest-dir` prints the
# directory to use as KUBEBUILDER_ASSETS, `crossplane-dir`, `crank-dir`, `golangci-lint-dir` and
# `prometheus-dir` where those are.
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
require go flock
mkdir -p "$tools"

log() { echo "build-tools: $*" >&2; }

# The compiler spends much of a cold build collecting garbage; these machines have memory to spare.
# The binaries are stripped (-ldflags -s -w), so the compiler need not emit debug information
# either (-gcflags=all=-dwarf=false below).
export GOGC="${GOGC:-400}"

# wrapper <dir> <module path>: a throwaway module from which tools are built, because a module with
# replace directives cannot be `go install`ed directly.
wrapper() {
  rm -rf "$1" && mkdir -p "$1"
  (cd "$1" && go mod init "$2" >/dev/null 2>&1)
}

# The control plane is one module and one `go build`: kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd and kwok share most of their packages (client-go, apimachinery, grpc, the
# etcd client), which a 2-core machine then compiles once instead of three times. kwok and etcd
# are pinned to the versions whose dependencies match Kubernetes' own (versions.env).
cp_packages=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
  k8s.io/kubernetes/cmd/kube-scheduler go.etcd.io/etcd/server/v3 sigs.k8s.io/kwok/cmd/kwok)

# pin_shared_libraries <package...>: run in a wrapper module, requires the provider's version of
# every module that both the packages and the provider's `make bench` build (its binary and the
# bench's test binary) compile. Built from the same sources with the same flags
# (cluster/local/bench.sh), their packages come out of the Go build cache the second time:
# client-go, apimachinery, grpc and the standard library compile once, not twice. Where the
# control plane needs a newer version it keeps it, and only the build cache notices; so does a
# failed listing here (the process substitutions' errors are not checked). A cached control plane
# is not rebuilt when the provider's versions move.
pin_shared_libraries() {
  local LC_ALL=C # join wants both lists sorted the same way.
  # The two listings download modules; they run side by side.
  join <(go list -mod=mod -tags tools -deps -f '{{with .Module}}{{.Path}}{{end}}' "$@" | sort -u) \
    <(cd "$root" && go list -tags bench -test -deps \
      -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}' ./cmd/provider ./test/bench | sort -u) |
    awk '{print "-require=" $1 "@" $2}' | xargs -r go mod edit
}

build_controlplane() {
  local out="$cp_dir"
  [[ -x "$out/kube-apiserver" && -x "$out/kube-controller-manager" && -x "$out/kube-scheduler" &&
    -x "$out/etcd" && -x "$out/kwok" && -f "$out/stages.yaml" ]] && return
  log "building kube-apiserver, kube-controller-manager, kube-scheduler $KUBERNETES_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION (~10 min cold on 2 cores)"
  local w="$tools/.work/controlplane" staging="v0${KUBERNETES_VERSION#v1}"
  wrapper "$w" clusterops.local/controlplane
  cat >"$w/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
GO
  (
    cd "$w"
    go mod edit -require="k8s.io/kubernetes@$KUBERNETES_VERSION" \
      -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION" -require="sigs.k8s.io/kwok@$KWOK_VERSION"
    # k8s.io/kubernetes replaces every staging module with a local path; point each at its
    # published version instead.
    local mod
    mod="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$mod" | while read -r m; do
      go mod edit -replace="$m=$m@$staging"
    done
    pin_shared_libraries "${cp_packages[@]}"
    mkdir -p "$out.tmp"
    # One invocation: shared packages compile once, and the links run side by side. -mod=mod
    # fetches only the modules these packages need (`go mod tidy` would fetch every dependency's
    # tests too: about 1 GB).
    CGO_ENABLED=0 go build -mod=mod -tags tools -gcflags=all=-dwarf=false -o "$out.tmp/" \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)" \
      "${cp_packages[@]}"
    # etcd's main package is go.etcd.io/etcd/server/v3, so go build names it after "server".
    mv "$out.tmp/server" "$out.tmp/etcd"
    # kwok refuses to start without stage definitions; the module ships the standard ones.
    local src
    src="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
    for d in node/fast node/heartbeat pod/fast; do
      for f in "$src/$d"/*.yaml; do
        [[ "$(basename "$f")" == kustomization.yaml ]] && continue
        cat "$f"; echo "---"
      done
    done >"$out.tmp/stages.yaml"
    # envtest wants kube-apiserver, etcd and kubectl in one directory: this one.
    ln -sf "$(command -v kubectl || echo /usr/local/bin/kubectl)" "$out.tmp/kubectl"
  )
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
    # -e: a module only tests of dependencies need may be missing; say what tidy could not
    # resolve instead of hiding it, and stop when tidy itself fails.
    if ! go mod tidy -e >"$w/tidy.log" 2>&1; then
      echo "build-tools: go mod tidy for crossplane failed:" >&2
      cat "$w/tidy.log" >&2
      exit 1
    fi
    [[ ! -s "$w/tidy.log" ]] || { echo "build-tools: go mod tidy for crossplane reported (continuing):" >&2; sed 's/^/  /' "$w/tidy.log" >&2; }
    mkdir -p "$out.tmp"
    # Core checks packages' `crossplane.version` constraints against its own version, which the
    # release build stamps into crossplane-runtime; unstamped, every constraint fails.
    CGO_ENABLED=0 go build -tags tools -gcflags=all=-dwarf=false -o "$out.tmp/crossplane" \
      -ldflags "-s -w -X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=$CROSSPLANE_VERSION" \
      github.com/crossplane/crossplane/v2/cmd/crossplane
    # Core's own CRDs, which `crossplane core init` installs.
    cp -r "$(go env GOMODCACHE)/github.com/crossplane/crossplane/v2@$CROSSPLANE_VERSION/cluster/crds" "$out.tmp/crds"
    chmod -R u+w "$out.tmp/crds"
  )
  rm -rf "$out" && mv "$out.tmp" "$out"
}

# build_go_tool <out dir> <binary> <module> <version> <package> <ldflags>: one command-line tool
# built from its module at the pinned version, in a wrapper module that imports it. -mod=mod
# fetches only the modules the package needs.
build_go_tool() {
  local out="$1" bin="$2" module="$3" version="$4" pkg="$5" ldflags="$6"
  [[ -x "$out/$bin" ]] && return
  local w="$tools/.work/$bin"
  wrapper "$w" "clusterops.local/$bin"
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" >"$w/tools.go"
  (
    cd "$w"
    go mod edit -require="$module@$version"
    mkdir -p "$out.tmp"
    CGO_ENABLED=0 go build -mod=mod -tags tools -gcflags=all=-dwarf=false -o "$out.tmp/$bin" \
      -ldflags "-s -w $ldflags" "$pkg"
  )
  rm -rf "$out" && mv "$out.tmp" "$out"
}

# The Crossplane CLI, crank, as users run it (`crossplane xpkg build`, `crossplane beta validate`,
# `crossplane xpkg install`). Its last release served as a Go module is older than core
# (versions.env). The version is stamped as a release build does: `crossplane version` reports it,
# and `beta validate` names the core image of that version unless told another.
crank_dir() { echo "$tools/crank-$CRANK_VERSION"; }
build_crank() {
  [[ -x "$(crank_dir)/crank" ]] || log "building crank (the crossplane CLI) $CRANK_VERSION (~5 min cold)"
  build_go_tool "$(crank_dir)" crank github.com/crossplane/crossplane/v2 "$CRANK_VERSION" \
    github.com/crossplane/crossplane/v2/cmd/crank \
    "-X github.com/crossplane/crossplane/v2/internal/version.version=$CRANK_VERSION"
}

# The linter make vet runs, pinned like every other tool: built from its module at the version
# versions.env names, not whatever a machine has installed.
golangci_lint_dir() { echo "$tools/golangci-lint-$GOLANGCI_LINT_VERSION"; }
build_golangci_lint() {
  [[ -x "$(golangci_lint_dir)/golangci-lint" ]] || log "building golangci-lint $GOLANGCI_LINT_VERSION (~2 min cold)"
  build_go_tool "$(golangci_lint_dir)" golangci-lint github.com/golangci/golangci-lint/v2 "$GOLANGCI_LINT_VERSION" \
    github.com/golangci/golangci-lint/v2/cmd/golangci-lint "-X main.version=${GOLANGCI_LINT_VERSION#v}"
}

# Prometheus and promtool, one compile: the e2e tier scrapes the provider with Prometheus, and
# promtool unit-tests the alerting rules (hack/monitoring). remove_all_sd leaves out every service
# discovery but file and HTTP (the tests use static targets), which halves the build; without
# builtinassets the web UI is not embedded, and the HTTP API the tests use is all there.
prometheus_dir() { echo "$tools/prometheus-$PROMETHEUS_VERSION"; }
build_prometheus() {
  local out
  out="$(prometheus_dir)"
  [[ -x "$out/prometheus" && -x "$out/promtool" ]] && return
  log "building prometheus and promtool $PROMETHEUS_VERSION"
  local w="$tools/.work/prometheus" v="${PROMETHEUS_VERSION#v0.}"
  # Module v0.MMP.F is Prometheus M.MP.F (v0.316.0 is 3.16.0).
  v="${v:0:1}.$((10#${v:1:2})).${v#*.}"
  wrapper "$w" clusterops.local/prometheus
  printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "github.com/prometheus/prometheus/cmd/prometheus"\n\t_ "github.com/prometheus/prometheus/cmd/promtool"\n)\n' >"$w/tools.go"
  (
    cd "$w"
    go mod edit -require="github.com/prometheus/prometheus@$PROMETHEUS_VERSION"
    mkdir -p "$out.tmp"
    CGO_ENABLED=0 go build -mod=mod -tags tools,remove_all_sd -gcflags=all=-dwarf=false -o "$out.tmp/" \
      -ldflags "-s -w -X github.com/prometheus/common/version.Version=$v" \
      github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool
  )
  rm -rf "$out" && mv "$out.tmp" "$out"
}

if [[ "${1:-}" == envtest-dir || "${1:-}" == controlplane-dir ]]; then echo "$cp_dir"; exit 0; fi
if [[ "${1:-}" == crossplane-dir ]]; then crossplane_dir; exit 0; fi
if [[ "${1:-}" == crank-dir ]]; then crank_dir; exit 0; fi
if [[ "${1:-}" == golangci-lint-dir ]]; then golangci_lint_dir; exit 0; fi
if [[ "${1:-}" == prometheus-dir ]]; then prometheus_dir; exit 0; fi
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(controlplane crossplane crank)
# The control plane, crossplane and crank build side by side: one's module downloads and
# single-threaded links overlap another's compile. The old per-tool names all mean the control plane.
declare -A base=()
for t in "${targets[@]}"; do
  case "$t" in
    controlplane|envtest|kubernetes|etcd|kwok) base[controlplane]=1 ;;
    crossplane) base[crossplane]=1 ;;
    crank) base[crank]=1 ;;
    golangci-lint) base[golangci_lint]=1 ;;
    prometheus) base[prometheus]=1 ;;
    *) echo "build-tools: unknown tool $t" >&2; exit 2 ;;
  esac
done
declare -A jobs=()
# Concurrent runs of one tool would wipe each other's work directory: the second waits for the
# first, then finds the tool built. Each tool has its own lock, so that a run asking for a tool
# already built does not wait for another tool's build (make test builds Prometheus in the
# background while the e2e tiers ask for the control plane).
for t in "${!base[@]}"; do
  ( exec 9>"$tools/.lock-$t"; flock 9
    start=$SECONDS; "build_$t"; (( SECONDS - start < 2 )) || log "$t built in $((SECONDS - start)) s" ) &
  jobs[$t]=$!
done
failed=()
for t in "${!jobs[@]}"; do wait "${jobs[$t]}" || failed+=("$t"); done
[[ ${#failed[@]} -eq 0 ]] || { log "failed: ${failed[*]}"; exit 1; }
log "done"
