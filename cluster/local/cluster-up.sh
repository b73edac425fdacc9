#!/usr/bin/env bash
# Starts a local Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok faking one node, so that Deployments become Available without a kubelet.
# All state lives under $CACHE_DIR/cluster/ (default <repo>/.cache/cluster/); stop it with
# cluster-down.sh. Does nothing if the cluster is already up and healthy.
#
#   eval "$(cluster/local/cluster-up.sh)"    # progress goes to stderr, the KUBECONFIG export to stdout
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
require openssl curl ss kubectl

log() { echo "cluster-up: $*" >&2; }
hint() { echo "export KUBECONFIG=$kubeconfig"; }

if cluster_healthy; then
  log "already up; kubeconfig: $kubeconfig"
  hint
  exit 0
fi
if [[ -e "$state" ]]; then
  log "the cluster in $state is not healthy; stopping what is left of it and starting afresh"
  stop_components
  rm -rf "$state"
fi

for b in "$bin_etcd" "$bin_apiserver" "$bin_controller_manager" "$bin_scheduler" "$bin_kwok" "$kwok_stages"; do
  [[ -e "$b" ]] || { "$here/build-tools.sh" controlplane; break; }
done

started="$(date +%s.%N)"
mkdir -p "$state"/{pki,pids,logs} && mkdir -m 700 "$state/etcd"
pki="$state/pki"

# fail <component> <message>: stops whatever was started (keeping logs and state for inspection; the
# next cluster-up or cluster-down removes them) and points at the component's log.
fail() {
  local f="$state/logs/$1.log"
  log "$2; see $f"
  [[ -f "$f" ]] && tail -n 20 "$f" | sed 's/^/  | /' >&2
  stop_components
  exit 1
}
trap 'log interrupted; stop_components; exit 130' INT TERM

# start <component> <binary> <args...>
start() {
  local name=$1 bin=$2
  shift 2
  "$bin" "$@" </dev/null >"$state/logs/$name.log" 2>&1 &
  printf '%s\n%s\n' "$!" "$bin" >"$state/pids/$name.pid"
}

# wait_for <component> <timeout seconds> <command...>: retries the command until it succeeds, giving
# up early if the component exits.
wait_for() {
  local name=$1 timeout=$2 deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    pid_of "$name" >/dev/null || fail "$name" "$name exited"
    ((SECONDS < deadline)) || fail "$name" "$name not ready after ${timeout}s"
    sleep 0.2
  done
}

# pick_ports <n>: prints n distinct unused ports, below the kernel's ephemeral range (32768+) so
# that outgoing connections do not take them between picking and binding.
pick_ports() {
  local taken p ports=()
  taken="$(ss -Htan | awk '{n = split($4, a, ":"); print a[n]}' | sort -u)"
  while ((${#ports[@]} < $1)); do
    p=$((20000 + RANDOM % 12000))
    grep -qx "$p" <<<"$taken" && continue
    taken+=$'\n'"$p"
    ports+=("$p")
  done
  echo "${ports[*]}"
}
read -r etcd_port etcd_peer_port apiserver_port kwok_port <<<"$(pick_ports 4)"
declare -p etcd_port etcd_peer_port apiserver_port kwok_port | sed 's/^declare -- //' >"$state/ports.env"

# etcd needs none of the keys, so it starts while they are generated.
log "starting etcd on 127.0.0.1:$etcd_port"
start etcd "$bin_etcd" \
  --name=default \
  --data-dir="$state/etcd" \
  --listen-client-urls="http://127.0.0.1:$etcd_port" \
  --advertise-client-urls="http://127.0.0.1:$etcd_port" \
  --listen-peer-urls="http://127.0.0.1:$etcd_peer_port" \
  --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer_port" \
  --initial-cluster="default=http://127.0.0.1:$etcd_peer_port" \
  --unsafe-no-fsync
log "generating certificates and keys"
# One self-signed certificate serves the apiserver and is the cluster's root CA at the same time.
openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj /CN=kube-apiserver \
  -addext subjectAltName=IP:127.0.0.1,DNS:localhost -addext extendedKeyUsage=serverAuth \
  -keyout "$pki/apiserver.key" -out "$pki/apiserver.crt" 2>/dev/null
openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
token="$(openssl rand -hex 32)"
echo "$token,admin,admin,system:masters" >"$pki/tokens.csv"
chmod 600 "$pki"/*.key "$pki/tokens.csv"

# Every component, and the user, talks to the apiserver as the system:masters admin.
(umask 077 && cat >"$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$apiserver_port
    certificate-authority-data: $(base64 -w0 "$pki/apiserver.crt")
users:
- name: admin
  user:
    token: $token
contexts:
- name: local
  context:
    cluster: local
    user: admin
current-context: local
EOF
)

wait_for etcd 30 curl -sf "http://127.0.0.1:$etcd_port/health"

log "starting kube-apiserver on 127.0.0.1:$apiserver_port"
# --endpoint-reconciler-type=none: the apiserver would otherwise keep trying to publish a loopback
# address as the endpoint of the default/kubernetes Service, which validation rejects.
# ShardedListAndWatch (alpha): sharded replicas ask for their share of the workloads by
# shardSelector (docs/operations.md, "Sharding"); without it they watch all of them.
start kube-apiserver "$bin_apiserver" \
  --feature-gates=ShardedListAndWatch=true \
  --etcd-servers="http://127.0.0.1:$etcd_port" \
  --bind-address=127.0.0.1 \
  --advertise-address=127.0.0.1 \
  --secure-port="$apiserver_port" \
  --tls-cert-file="$pki/apiserver.crt" \
  --tls-private-key-file="$pki/apiserver.key" \
  --token-auth-file="$pki/tokens.csv" \
  --authorization-mode=RBAC \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$pki/sa.pub" \
  --service-account-signing-key-file="$pki/sa.key" \
  --service-cluster-ip-range=10.96.0.0/16 \
  --endpoint-reconciler-type=none
wait_for kube-apiserver 60 curl -sf --cacert "$pki/apiserver.crt" "https://127.0.0.1:$apiserver_port/readyz"

log "starting kube-controller-manager, kube-scheduler, kwok"
# Its client's default 20 requests per second would make fleets of 1,000 Deployments and claims
# (make bench) wait on the controller-manager rather than on what is measured. CONTROLLERS_QPS
# sets it, and the scheduler's (default 50), higher: make bench-fleet's 10,000 Deployments are
# 30,000 writes of the controller-manager's, two and a half minutes at 200 a second.
cm_qps="${CONTROLLERS_QPS:-200}" sched_qps="${CONTROLLERS_QPS:-50}"
start kube-controller-manager "$bin_controller_manager" \
  --kubeconfig="$kubeconfig" \
  --kube-api-qps="$cm_qps" --kube-api-burst=$((cm_qps * 2)) \
  --leader-elect=false \
  --secure-port=0 \
  --service-account-private-key-file="$pki/sa.key" \
  --root-ca-file="$pki/apiserver.crt" \
  --controllers=deployment-controller,replicaset-controller,garbage-collector-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller,disruption-controller,job-controller,statefulset-controller,endpointslice-controller,clusterrole-aggregation-controller,pod-garbage-collector-controller,persistentvolume-binder-controller,persistentvolume-protection-controller,persistentvolumeclaim-protection-controller
start kube-scheduler "$bin_scheduler" \
  --kubeconfig="$kubeconfig" \
  --kube-api-qps="$sched_qps" --kube-api-burst=$((sched_qps * 2)) \
  --leader-elect=false \
  --secure-port=0
start kwok "$bin_kwok" \
  --kubeconfig="$kubeconfig" \
  --config="$kwok_stages" \
  --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --server-address="127.0.0.1:$kwok_port"

kc() { kubectl --kubeconfig "$kubeconfig" --request-timeout=10s "$@"; }

kc apply -f - >/dev/null <<EOF || fail kube-apiserver "cannot create node $node_name"
apiVersion: v1
kind: Node
metadata:
  name: $node_name
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/hostname: $node_name
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
# The node only simulates pods: room for the benchmarks' thousands of them, and a pod CIDR
# large enough for kwok to give each an address.
spec:
  podCIDR: 10.0.0.0/16
status:
  capacity: {cpu: "1000", memory: 4Ti, pods: "5000"}
  allocatable: {cpu: "1000", memory: 4Ti, pods: "5000"}
EOF
node_ready() {
  [[ "$(kc get node "$node_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]
}
wait_for kwok 30 node_ready
# The TaintNodesByCondition admission plugin taints every new node not-ready; only the node-lifecycle
# controller, which is not run here, would lift it.
if kc get node "$node_name" -o jsonpath='{.spec.taints[*].key}' | grep -qw node.kubernetes.io/not-ready; then
  kc taint node "$node_name" node.kubernetes.io/not-ready- >/dev/null ||
    fail kube-apiserver "cannot remove the not-ready taint from node $node_name"
fi
# Pods cannot be created in a namespace before its default ServiceAccount exists.
wait_for kube-controller-manager 30 kc -n default get serviceaccount default
for c in kube-scheduler kwok; do pid_of "$c" >/dev/null || fail "$c" "$c exited"; done

log "up in $(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s; kubeconfig: $kubeconfig"
hint
