#!/usr/bin/env bash
# The provider's main job on a local control plane it starts itself: builds what it needs, starts
# the cluster, installs the CRDs and the default ClusterProviderConfig, runs the provider, applies
# examples/ and shows what happened. Stops everything it started, also on failure or Ctrl-C.
# KEEP=1 leaves the cluster and the provider running.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
source "$here/common.sh"
# shellcheck source=wait.sh
source "$here/wait.sh"
demo="$CACHE_DIR/demo"
mkdir -p "$demo"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }

# Conditions for wait_for that need more than one command.
provider_exited() { ! kill -0 "$provider_pid" 2>/dev/null; }
pod_replaced() {
  uid="$(kc_poll -n demo get pod example-immortalcontainer-immortalpod -o jsonpath='{.metadata.uid}' 2>/dev/null)" &&
    [[ -n "$uid" && "$uid" != "$old" ]]
}
nginx_replicasets() { kc_poll -n demo get replicasets -l app=nginx --no-headers 2>/dev/null | wc -l; }
more_replicasets() { [[ "$(nginx_replicasets)" -gt "$before" ]]; }
# nginx_deployment: deployment/nginx's generation, the hash in its pod template and the lock on its
# metadata (the ConfigRollout's, written when it first rolls it).
nginx_deployment() {
  kc_poll -n demo get deployment nginx -o jsonpath='generation={.metadata.generation} template-hash={.spec.template.metadata.annotations.workload\.clusterops\.io/config-hash} lock={.metadata.annotations.workload\.clusterops\.io/config-rollout}'
}
# nginx_rollout: what ConfigRollout nginx's status says of deployment/nginx: the hash its pods run
# with, whether that is the baseline recorded when the rollout started to follow it, and the
# rollouts counted.
nginx_rollout() {
  kc_poll -n demo get configrollout nginx -o jsonpath='hash={.status.atProvider.workloads[0].hash} baseline={.status.atProvider.workloads[0].baseline} rollouts={.status.atProvider.rollouts}'
}
nginx_followed() { [[ "$(nginx_rollout 2>/dev/null)" == "hash=$rollout_hash baseline=true rollouts=" ]]; }
following_event() {
  [[ -n "$(kc_poll -n demo get events --field-selector involvedObject.name=nginx,reason=FollowingWorkloads -o name 2>/dev/null)" ]]
}
rollouts_are() { output_is "$1" -n demo get configrollout nginx -o jsonpath='{.status.atProvider.rollouts}'; }
# victim_pods: the pods of deployment/victim that are Ready and not being deleted, sorted, on one line.
victim_pods() {
  kc_poll -n demo get pods -l app=victim --no-headers \
    -o custom-columns='NAME:.metadata.name,DELETING:.metadata.deletionTimestamp,READY:.status.conditions[?(@.type=="Ready")].status' |
    awk '$2 == "<none>" && $3 == "True" { print $1 }' | sort | paste -sd ' ' -
}
# victim_whole: deployment/victim has its 2 replicas ready, and 2 Ready pods that are not being
# deleted ($pods).
victim_whole() {
  output_is 2/2 -n demo get deployment victim -o jsonpath='{.status.readyReplicas}/{.spec.replicas}' &&
    pods="$(victim_pods 2>/dev/null)" && [[ "$(wc -w <<<"$pods")" == 2 ]]
}
# victim_replaced: whole again, without the evicted pod and with a pod that was not there before.
victim_replaced() { victim_whole && [[ " $pods " != *" $evicted "* && "$pods" != "$before_pods" ]]; }
# tantrum_evicted: ChaosAgent tantrum's status records an eviction; $evicted is the first pod it evicted.
tantrum_evicted() {
  evicted="$(kc_poll -n demo get chaosagent tantrum -o jsonpath='{.status.atProvider.recentActions[?(@.action=="EvictPod")].name}' 2>/dev/null)" &&
    evicted="${evicted%% *}" && [[ -n "$evicted" ]]
}
tantrum_event() {
  [[ -n "$(kc_poll -n demo get events --field-selector involvedObject.kind=ChaosAgent,involvedObject.name=tantrum,reason=EvictPod -o name 2>/dev/null)" ]]
}
verdict_is() { output_is "$1" -n demo get chaosagent tantrum -o jsonpath='{.status.atProvider.verdicts[?(@.name=="victim")].verdict}'; }

# deleted <namespace> <kind> <name>: kubectl's own --wait would not notice the provider's exit.
deleted() {
  kc -n "$1" delete "$2" "$3" --wait=false
  wait_for 60 "$2/$3 in namespace $1 was not deleted" gone "$@"
}

started_cluster=false
provider_pid=""
cleanup() {
  local rc=$?
  if [[ "${KEEP:-}" == 1 ]]; then
    say "KEEP=1: leaving things running. export KUBECONFIG=$kubeconfig; provider pid ${provider_pid:-none}, log $demo/provider.log"
    exit "$rc"
  fi
  if [[ -n "$provider_pid" ]] && kill -0 "$provider_pid" 2>/dev/null; then
    watch_process # its exit is now the goal, not a failure
    kill "$provider_pid" 2>/dev/null || true
    wait_for 30 "the provider (pid $provider_pid) did not exit on SIGTERM" provider_exited ||
      kill -KILL "$provider_pid" 2>/dev/null || true
    wait "$provider_pid" 2>/dev/null || true
  fi
  $started_cluster && "$here/cluster-down.sh" >&2
  [[ $rc -ne 0 ]] && echo "demo failed; provider log: $demo/provider.log" >&2
  exit "$rc"
}
trap cleanup EXIT

say "Building the control plane (cached after the first run) and the provider"
"$here/build-tools.sh" controlplane
(cd "$root" && CGO_ENABLED=0 go build -o "$demo/provider" ./cmd/provider)

if cluster_healthy; then
  say "Using the local control plane that is already running"
else
  say "Starting a local control plane"
  started_cluster=true
  "$here/cluster-up.sh" >/dev/null
fi

say "Installing the CRDs and the default ClusterProviderConfig"
kc apply --server-side -f "$root/package/crds" >/dev/null
kc wait --for condition=Established --timeout=60s crd --all >/dev/null
kc create namespace crossplane-system --dry-run=client -o yaml | kc apply -f - >/dev/null
kc apply -f "$root/examples/providerconfig/clusterproviderconfig.yaml"

say "Running the provider (log: $demo/provider.log)"
KUBECONFIG="$kubeconfig" "$demo/provider" --debug --namespace crossplane-system \
  --metrics-bind-address=127.0.0.1:0 --health-probe-bind-address=0 >"$demo/provider.log" 2>&1 &
provider_pid=$!
watch_process provider "$provider_pid" "$demo/provider.log"

say "Providing a volume for the AppBundle's claim (the local control plane has no provisioner)"
kc apply -f - <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: demo-my-web-app-data}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/demo-my-web-app-data}
  claimRef: {namespace: demo, name: my-web-app-data}
YAML

# A ConfigRollout nginx left by an earlier run on this cluster has followed, and rolled, the nginx
# Deployment already (and a few runs in a row would meet its rollout limit): only new ones show how
# it starts to follow a running workload.
if exists demo configrollout nginx; then deleted demo configrollout nginx; fi
kc -n demo delete deployment/nginx --ignore-not-found --cascade=foreground --wait >/dev/null

say "Applying examples/"
# examples/monitoring is for a cluster's Prometheus and Grafana (printed at the end).
# examples/platform and examples/crossplane need Crossplane core, which the demo does not run (the
# Crossplane e2e tier does; see docs/development.md); a file marked as needing a second cluster is left out
# (as TestEveryExampleAppliesAsWritten leaves it out).
find "$root/examples" \( -path "$root/examples/platform" -o -path "$root/examples/crossplane" -o -path "$root/examples/monitoring" \) -prune -o -name '*.yaml' -print | sort | while read -r f; do
  if head -1 "$f" | grep -q '^# examples: needs a second cluster'; then
    echo "(skipped: $f needs a second cluster)"
    continue
  fi
  kc apply -f "$f"
done

say "Waiting for the managed resources to be Ready (kwok runs their pods on a fake node)"
ready_or_fail immortalcontainer example-immortalcontainer
ready_or_fail appbundle my-web-app
kc -n demo get appbundles,deployments,pvc,services -o wide
kc -n demo get immortalcontainers,pods -o wide

say "Deleting its pod: the provider replaces it on the watch event"
old="$(kc -n demo get pod example-immortalcontainer-immortalpod -o jsonpath='{.metadata.uid}')"
start=$(date +%s%N)
kc -n demo delete pod example-immortalcontainer-immortalpod --wait=false >/dev/null
wait_for 30 "the pod example-immortalcontainer-immortalpod was not recreated" pod_replaced
echo "new pod $uid after $(( ($(date +%s%N) - start) / 1000000 )) ms"
ready_or_fail immortalcontainer example-immortalcontainer >/dev/null
kc -n demo get immortalcontainer example-immortalcontainer -o jsonpath='{"restarts: "}{.status.atProvider.restarts}{"\nstartTimes: "}{.status.atProvider.startTimes}{"\n"}'

say "Editing the AppBundle's Deployment behind its back: the edit is reverted on the watch event"
kc -n demo set image deployment/my-web-app app=evil:latest >/dev/null
start=$(date +%s%N)
wait_for 30 "the image of deployment/my-web-app was not restored to nginx:1.21" \
  output_is nginx:1.21 -n demo get deployment my-web-app -o jsonpath='{.spec.template.spec.containers[0].image}'
echo "image restored to nginx:1.21 after $(( ($(date +%s%N) - start) / 1000000 )) ms"

say "ConfigRollout nginx follows the running nginx Deployment without rolling it: a baseline in its status, nothing written to the Deployment"
ready_or_fail configrollout nginx >/dev/null
rollout_hash="$(kc -n demo get configrollout nginx -o jsonpath='{.status.atProvider.hash}')"
wait_for 30 "ConfigRollout nginx does not record its hash $rollout_hash as the baseline of deployment/nginx, with no rollout" nginx_followed
if [[ "$(nginx_deployment)" != "generation=1 template-hash= lock=" || "$(nginx_replicasets)" != 1 ]]; then
  echo "demo: ConfigRollout nginx wrote to deployment/nginx when it started to follow it ($(nginx_deployment), $(nginx_replicasets) ReplicaSets); it should only record a baseline in its status" >&2
  exit 1
fi
echo "configrollout/nginx: $(nginx_rollout)"
echo "deployment/nginx: $(nginx_deployment), $(nginx_replicasets) ReplicaSet"
wait_for 30 "ConfigRollout nginx recorded no FollowingWorkloads event" following_event
kc -n demo get events --field-selector involvedObject.name=nginx,reason=FollowingWorkloads -o custom-columns=REASON:.reason,MESSAGE:.message
kc -n demo get configrollouts

say "Changing nginx.conf: the ConfigRollout rolls the nginx Deployment once (a new ReplicaSet, ROLLOUTS +1)"
before="$(nginx_replicasets)"
rollouts="$(kc -n demo get configrollout nginx -o jsonpath='{.status.atProvider.rollouts}')"
rollouts="${rollouts:-0}"
kc -n demo patch configmap nginx-conf --type merge -p '{"data":{"nginx.conf":"events {}\nhttp { server { listen 80; return 200 \"changed\\n\"; } }\n"}}' >/dev/null
start=$(date +%s%N)
wait_for 30 "no new ReplicaSet of the nginx Deployment appeared" more_replicasets
echo "new ReplicaSet after $(( ($(date +%s%N) - start) / 1000000 )) ms"
wait_for 30 "the ROLLOUTS of ConfigRollout nginx did not become $((rollouts + 1)): one rollout for one change" rollouts_are "$((rollouts + 1))"
ready_or_fail configrollout nginx >/dev/null
if [[ "$(nginx_replicasets)" != $((before + 1)) ]]; then
  echo "demo: deployment/nginx has $(nginx_replicasets) ReplicaSets after one change, want $((before + 1)): one rollout" >&2
  exit 1
fi
echo "configrollout/nginx: $(nginx_rollout)"
echo "deployment/nginx: $(nginx_deployment) (the roll wrote the hash and the lock)"
kc -n demo get configrollouts
kc -n demo get replicasets -l app=nginx

say "CopyRule: the Copyrator ConfigMap is in every namespace within reach; a new namespace gets it on the watch event"
ready_or_fail copyrule copyrator default >/dev/null
kc get copyrules -A
kc create namespace demo-newcomer >/dev/null
start=$(date +%s%N)
wait_for 30 "configmap copyrator-greeting was not copied into namespace demo-newcomer" \
  exists demo-newcomer configmap copyrator-greeting
echo "copy in the new namespace after $(( ($(date +%s%N) - start) / 1000000 )) ms"
kc -n default patch configmap copyrator-greeting --type merge -p '{"data":{"greeting":"changed at the source"}}' >/dev/null
start=$(date +%s%N)
wait_for 30 "the source's change did not reach configmap copyrator-greeting in namespace demo" \
  output_is "changed at the source" -n demo get configmap copyrator-greeting -o jsonpath='{.data.greeting}'
echo "source change reached the copies after $(( ($(date +%s%N) - start) / 1000000 )) ms"

say "ChaosAgent tantrum evicts a pod of deployment/victim at once; the Deployment replaces it, and the agent says how fast"
# An agent left by an earlier run (KEEP=1) would carry that run's rounds and verdicts.
exists demo chaosagent tantrum && deleted demo chaosagent tantrum >/dev/null
kc apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: victim, namespace: demo}
spec:
  replicas: 2
  selector: {matchLabels: {app: victim}}
  template:
    metadata: {labels: {app: victim}}
    spec:
      containers: [{name: app, image: nginx:1.27}]
YAML
wait_for 60 "deployment/victim did not get its 2 pods Ready" victim_whole
before_pods="$pods"
echo "deployment/victim: 2/2 ready, pods $before_pods"
# A new agent's first round runs as soon as it is created; with eagerness 100 it evicts one of
# the pods its podSelector picks. Its next round is an interval later, after the demo has
# deleted it, and while a recovery is pending it looks every tenth of that interval (2 s).
kc apply -f - >/dev/null <<YAML
apiVersion: chaos.clusterops.io/v1alpha1
kind: ChaosAgent
metadata: {name: tantrum, namespace: demo}
spec:
  forProvider:
    tantrumMode: true
    podSelector: {matchLabels: {app: victim}}
    eagerness: 100
    interval: 20s
YAML
start=$(date +%s%N)
wait_for 30 "ChaosAgent tantrum evicted no pod" tantrum_evicted
echo "evicted pod $evicted after $(( ($(date +%s%N) - start) / 1000000 )) ms"
start=$(date +%s%N)
wait_for 30 "ChaosAgent tantrum recorded no EvictPod event" tantrum_event
kc -n demo get events --field-selector involvedObject.kind=ChaosAgent,involvedObject.name=tantrum,reason=EvictPod -o custom-columns=REASON:.reason,MESSAGE:.message
wait_for 60 "deployment/victim did not replace the evicted pod $evicted" victim_replaced
new_pods=""
for p in $pods; do [[ " $before_pods " == *" $p "* ]] || new_pods+="${new_pods:+ }$p"; done
echo "deployment/victim: 2/2 ready again after $(( ($(date +%s%N) - start) / 1000000 )) ms; new pod $new_pods"
wait_for 30 "ChaosAgent tantrum did not find deployment/victim Resilient" verdict_is Resilient
kc -n demo get chaosagent tantrum -o jsonpath='{range .status.atProvider.verdicts[*]}verdict on {.kind} {.namespace}/{.name}: {.verdict}, recovered from {.recovered} of {.disruptions} disruptions, p50 {.p50}, max {.max}{"\n"}{end}'
# Every agent's last round; the examples' agents say why they did nothing.
kc get chaosagents -A -o custom-columns='NAMESPACE:.metadata.namespace,NAME:.metadata.name,ROUNDS:.status.atProvider.roundsRun,ACTING:.status.conditions[?(@.type=="Acting")].reason,LAST-ROUND:.status.atProvider.lastRoundSummary'

say "Configs and their users"
kc get clusterproviderconfigs
kc get providerconfigs,providerconfigusages -A

say "Deleting the examples: the claim outlives its AppBundle (pvcDeletionPolicy: Retain)"
deleted demo chaosagent tantrum
kc -n demo delete deployment victim --wait=false >/dev/null
deleted demo immortalcontainer example-immortalcontainer
deleted demo appbundle my-web-app
deleted default copyrule copyrator
echo "copies of copyrator-greeting left: $(kc get configmaps -A -l copy.clusterops.io/rule-uid --no-headers 2>/dev/null | grep -c copyrator-greeting || true)"
kc delete namespace demo-newcomer --wait=false >/dev/null
kc -n demo get deployments,pods,services,pvc 2>&1
say "Monitoring"
echo "alerts, a PodMonitor and a Grafana dashboard for a cluster's Prometheus: examples/monitoring/ (docs/operations.md#monitoring)"
say "Done"
