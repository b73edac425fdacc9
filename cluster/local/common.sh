# shellcheck shell=bash disable=SC2034  # the variables are used by the scripts sourcing this
# Shared by the cluster/local scripts: paths of the local control plane and its process bookkeeping.
# Sourced, not executed.

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
CACHE_DIR="${CACHE_DIR:-$root/.cache}"

tools="$CACHE_DIR/tools"
state="$CACHE_DIR/cluster"
kubeconfig="$state/kubeconfig"
node_name=kwok-node-0

# build-tools.sh builds the whole control plane into one directory keyed by its versions.
cp_dir="$tools/kubernetes-$KUBERNETES_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION"
bin_etcd="$cp_dir/etcd"
bin_apiserver="$cp_dir/kube-apiserver"
bin_controller_manager="$cp_dir/kube-controller-manager"
bin_scheduler="$cp_dir/kube-scheduler"
bin_kwok="$cp_dir/kwok"
kwok_stages="$cp_dir/stages.yaml"

# Components in start order; cluster-down stops them in reverse, so etcd goes last.
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

# A pid file holds the pid on its first line and the binary's path on its second, so that a pid
# reused by an unrelated process is never signalled.

# pid_of <component>: prints the pid if the recorded process is alive and still runs the recorded
# binary; fails otherwise.
pid_of() {
  local f="$state/pids/$1.pid" pid bin exe
  [[ -f "$f" ]] || return 1
  { read -r pid; read -r bin; } <"$f" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  exe="$(readlink "/proc/$pid/exe" 2>/dev/null)" || return 1
  # A binary rebuilt while running shows up as "<path> (deleted)".
  [[ "${exe% (deleted)}" == "$(readlink -m "$bin")" ]] || return 1
  echo "$pid"
}

# cluster_healthy: every component runs, the apiserver is ready and the fake node is Ready.
cluster_healthy() {
  local c
  [[ -f "$kubeconfig" ]] || return 1
  for c in "${components[@]}"; do pid_of "$c" >/dev/null || return 1; done
  kubectl --kubeconfig "$kubeconfig" --request-timeout=5s get --raw /readyz >/dev/null 2>&1 || return 1
  [[ "$(kubectl --kubeconfig "$kubeconfig" --request-timeout=5s get node "$node_name" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

# stop_components: SIGTERM the recorded processes and wait for them to exit; the apiserver's clients
# first, then the apiserver, etcd last (the apiserver hangs on shutdown without etcd).
stop_components() {
  stop_group kwok kube-scheduler kube-controller-manager
  stop_group kube-apiserver
  stop_group etcd
}

stop_group() {
  local c pid pids=() deadline=$((SECONDS + 30))
  for c in "$@"; do
    pid="$(pid_of "$c")" || continue
    kill -TERM "$pid" 2>/dev/null && pids+=("$c")
  done
  for c in "${pids[@]}"; do
    while pid="$(pid_of "$c")"; do
      if ((SECONDS >= deadline)); then
        echo "$c (pid $pid) ignored SIGTERM for 30s; killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
      fi
      sleep 0.1
    done
  done
}

# measured_commit: the short hash of HEAD, which results committed under bench/results name. A
# measurement is refused on a tree with changes outside bench/results and docs (the results and the
# pages generated from them): every figure must come from a commit anyone can check out.
measured_commit() {
  if [[ -n "$(git -C "$root" status --porcelain -- . ':!bench/results' ':!docs')" ]]; then
    echo "$(basename "$0"): the tree has uncommitted changes; commit them first, so that the results name the commit they measured:" >&2
    git -C "$root" status --short -- . ':!bench/results' ':!docs' | head -10 >&2
    exit 1
  fi
  git -C "$root" rev-parse --short HEAD
}

# require <command>...: stops at once, naming every command that is missing, rather than halfway
# through a build or a start (README.md lists what the scripts need).
require() {
  local c missing=()
  for c in "$@"; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
  ((${#missing[@]} == 0)) || { echo "$(basename "$0"): missing: ${missing[*]} (README.md lists what the scripts need)" >&2; exit 1; }
}
