package integration

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestAPIServerRejectsInvalidSpecsWithAMessage applies invalid objects and checks that the API server rejects
// each with a message that tells the user what is wrong, and that the valid
// counterparts are accepted.
func TestAPIServerRejectsInvalidSpecsWithAMessage(t *testing.T) {
	admit(t, map[string]admission{
		"SecretSourceWithoutSecretRef": {
			reason: "A Secret source needs a secretRef.",
			yaml:   `{apiVersion: clusterops.io/v1alpha1, kind: ProviderConfig, metadata: {name: a}, spec: {credentials: {source: Secret}}}`,
			want:   "credentials.secretRef is required when credentials.source is Secret",
		},
		"ClusterSecretSourceWithoutSecretRef": {
			reason: "A Secret source needs a secretRef on cluster configs too.",
			yaml:   `{apiVersion: clusterops.io/v1alpha1, kind: ClusterProviderConfig, metadata: {name: adm-b}, spec: {credentials: {source: Secret}}}`,
			want:   "credentials.secretRef is required when credentials.source is Secret",
		},
		"InjectedIdentityWithSecretRef": {
			reason: "A secretRef that would be ignored is refused.",
			yaml:   `{apiVersion: clusterops.io/v1alpha1, kind: ProviderConfig, metadata: {name: c}, spec: {credentials: {source: InjectedIdentity, secretRef: {name: s, key: k}}}}`,
			want:   "credentials.secretRef is only allowed when credentials.source is Secret",
		},
		"UnknownSource": {
			reason: "Only the two supported sources are accepted.",
			yaml:   `{apiVersion: clusterops.io/v1alpha1, kind: ProviderConfig, metadata: {name: d}, spec: {credentials: {source: Filesystem}}}`,
			want:   `Unsupported value: "Filesystem"`,
		},
		"SecretRefWithoutNamespace": {
			reason: "A cluster config must say where its Secret lives.",
			yaml:   `{apiVersion: clusterops.io/v1alpha1, kind: ClusterProviderConfig, metadata: {name: adm-e}, spec: {credentials: {source: Secret, secretRef: {name: s, key: k}}}}`,
			want:   "spec.credentials.secretRef.namespace: Required value",
		},
		"BadGlob": {
			reason: "Reach patterns are namespace names with * and ? only.",
			yaml:   `{apiVersion: clusterops.io/v1alpha1, kind: ClusterProviderConfig, metadata: {name: adm-f}, spec: {credentials: {source: InjectedIdentity}, reach: {namespaces: ["team-["]}}}`,
			want:   "spec.reach.namespaces[0]",
		},
		"BadSelectorOperator": {
			reason: "A selector operator outside the four known ones is refused.",
			yaml:   `{apiVersion: clusterops.io/v1alpha1, kind: ClusterProviderConfig, metadata: {name: adm-g}, spec: {credentials: {source: InjectedIdentity}, reach: {namespaceSelector: {matchExpressions: [{key: a, operator: Equals, values: [b]}]}}}}`,
			want:   "reach.namespaceSelector.matchExpressions[].operator must be one of In, NotIn, Exists, DoesNotExist",
		},
		"InWithoutValues": {
			reason: "In needs values.",
			yaml:   `{apiVersion: clusterops.io/v1alpha1, kind: ClusterProviderConfig, metadata: {name: adm-h}, spec: {credentials: {source: InjectedIdentity}, reach: {namespaceSelector: {matchExpressions: [{key: a, operator: In}]}}}}`,
			want:   "In and NotIn need values, Exists and DoesNotExist take none",
		},
		"ValidClusterProviderConfig": {
			reason: "A full, valid cluster config is accepted.",
			yaml:   `{apiVersion: clusterops.io/v1alpha1, kind: ClusterProviderConfig, metadata: {name: adm-ok}, spec: {credentials: {source: Secret, secretRef: {name: s, namespace: ns1, key: k}}, reach: {namespaces: ["team-*", "shared"], namespaceSelector: {matchExpressions: [{key: a, operator: Exists}]}}}}`,
		},
		"ImmortalContainerEmptyImage": {
			reason: "An ImmortalContainer needs an image.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: ImmortalContainer, metadata: {name: i}, spec: {forProvider: {image: ""}}}`,
			want:   "spec.forProvider.image: Invalid value",
		},
		"ImmortalContainerImageWithSpace": {
			reason: "An image reference with spaces is refused.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: ImmortalContainer, metadata: {name: j}, spec: {forProvider: {image: "nginx latest"}}}`,
			want:   "image must not contain spaces",
		},
		"ImmortalContainerBackoffMaxBelowInitial": {
			reason: "A backoff whose max is shorter than its initial delay is refused.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: ImmortalContainer, metadata: {name: l}, spec: {forProvider: {image: nginx, restartBackoff: {initial: 1m, max: 10s}}}}`,
			want:   "restartBackoff.max must not be shorter than restartBackoff.initial",
		},
		"ImmortalContainerBackoffNotADuration": {
			reason: "A backoff that is not a duration is refused with an example of one.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: ImmortalContainer, metadata: {name: m}, spec: {forProvider: {image: nginx, restartBackoff: {initial: soon, max: 5m}}}}`,
			want:   "restartBackoff.initial and max are durations such as 500ms, 10s, 5m or 1h30m",
		},
		"ImmortalContainerValid": {
			reason: "A full, valid ImmortalContainer is accepted.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: ImmortalContainer, metadata: {name: valid-ic}, spec: {forProvider: {image: "nginx:1.27", command: [nginx], args: ["-g", "daemon off;"], resources: {limits: {memory: 64Mi}}, restartBackoff: {initial: 500ms, max: 1h30m}}}}`,
		},
		"AppBundleEmptyImage": {
			reason: "An AppBundle needs an image.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: AppBundle, metadata: {name: ab1}, spec: {forProvider: {image: ""}}}`,
			want:   "spec.forProvider.image: Invalid value",
		},
		"AppBundleNegativeReplicas": {
			reason: "Replicas cannot be negative.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: AppBundle, metadata: {name: ab2}, spec: {forProvider: {image: nginx, replicas: -1}}}`,
			want:   "spec.forProvider.replicas: Invalid value: -1: spec.forProvider.replicas in body should be greater than or equal to 0",
		},
		"AppBundleBadQuantity": {
			reason: "A storage size must be a quantity.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: AppBundle, metadata: {name: ab3}, spec: {forProvider: {image: nginx, storage: {size: lots}}}}`,
			want:   "spec.forProvider.storage.size",
		},
		"AppBundleUnknownServiceType": {
			reason: "Only None, ClusterIP and NodePort services are known.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: AppBundle, metadata: {name: ab4}, spec: {forProvider: {image: nginx, port: 80, service: LoadBalancer}}}`,
			want:   `Unsupported value: "LoadBalancer"`,
		},
		"AppBundleServiceWithoutPort": {
			reason: "A Service needs a port.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: AppBundle, metadata: {name: ab5}, spec: {forProvider: {image: nginx, service: ClusterIP}}}`,
			want:   "a service needs spec.forProvider.port",
		},
		"AppBundleUnknownAccessMode": {
			reason: "Access modes are the four Kubernetes knows.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: AppBundle, metadata: {name: ab6}, spec: {forProvider: {image: nginx, storage: {accessModes: [ReadWriteSometimes]}}}}`,
			want:   `Unsupported value: "ReadWriteSometimes"`,
		},
		"AppBundleValid": {
			reason: "A full, valid AppBundle is accepted.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: AppBundle, metadata: {name: ab7}, spec: {forProvider: {image: "nginx:1.21", replicas: 2, port: 80, service: NodePort, env: [{name: A, value: b}], resources: {requests: {cpu: 100m}}, storage: {size: 2Gi, accessModes: [ReadWriteMany], storageClassName: fast, mountPath: /var/lib/app}, pvcDeletionPolicy: Delete, adoptExisting: true}}}`,
		},
		"ConfigRolloutNoSources": {
			reason: "A ConfigRollout needs a source.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: ConfigRollout, metadata: {name: cr1}, spec: {forProvider: {auto: true}}}`,
			want:   "name at least one source in configMaps or secrets",
		},
		"ConfigRolloutNoWorkloads": {
			reason: "A ConfigRollout needs a workload selection.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: ConfigRollout, metadata: {name: cr2}, spec: {forProvider: {configMaps: [{name: c}]}}}`,
			want:   "choose the workloads with exactly one of workloads, selector or auto: true",
		},
		"ConfigRolloutTwoSelections": {
			reason: "Two ways of selecting workloads at once are refused.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: ConfigRollout, metadata: {name: cr3}, spec: {forProvider: {configMaps: [{name: c}], auto: true, workloads: [{kind: Deployment, name: w}]}}}`,
			want:   "choose the workloads with exactly one of workloads, selector or auto: true",
		},
		"ConfigRolloutUnknownKind": {
			reason: "Only Deployments, StatefulSets, DaemonSets and CronJobs roll: a Job's pod template cannot change.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: ConfigRollout, metadata: {name: cr4}, spec: {forProvider: {configMaps: [{name: c}], workloads: [{kind: Job, name: w}]}}}`,
			want:   `Unsupported value: "Job"`,
		},
		"ConfigRolloutBadDebounce": {
			reason: "A debounce must be a duration.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: ConfigRollout, metadata: {name: cr5}, spec: {forProvider: {configMaps: [{name: c}], auto: true, debounce: soon}}}`,
			want:   "debounce is a duration such as 500ms, 10s or 1m",
		},
		"ConfigRolloutValid": {
			reason: "A full, valid ConfigRollout is accepted.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: ConfigRollout, metadata: {name: cr6}, spec: {forProvider: {configMaps: [{name: c, keys: [nginx.conf]}], secrets: [{name: s}], selector: {matchLabels: {app: web}}, debounce: 5s}}}`,
		},
		"ChaosAgentEagernessZero": {
			reason: "Eagerness is a percentage from 1.",
			yaml:   `{apiVersion: chaos.clusterops.io/v1alpha1, kind: ChaosAgent, metadata: {name: ca1}, spec: {forProvider: {tantrumMode: true, eagerness: 0}}}`,
			want:   "spec.forProvider.eagerness: Invalid value: 0: spec.forProvider.eagerness in body should be greater than or equal to 1",
		},
		"ChaosAgentEagernessOver100": {
			reason: "Eagerness is a percentage up to 100.",
			yaml:   `{apiVersion: chaos.clusterops.io/v1alpha1, kind: ChaosAgent, metadata: {name: ca2}, spec: {forProvider: {tantrumMode: true, eagerness: 101}}}`,
			want:   "spec.forProvider.eagerness in body should be less than or equal to 100",
		},
		"ChaosAgentNegativeTolerance": {
			reason: "A negative pod tolerance is refused.",
			yaml:   `{apiVersion: chaos.clusterops.io/v1alpha1, kind: ChaosAgent, metadata: {name: ca3}, spec: {forProvider: {tantrumMode: true, podTolerance: -1}}}`,
			want:   "spec.forProvider.podTolerance in body should be greater than or equal to 0",
		},
		"ChaosAgentIntervalUnderASecond": {
			reason: "Rounds are at least a second apart.",
			yaml:   `{apiVersion: chaos.clusterops.io/v1alpha1, kind: ChaosAgent, metadata: {name: ca4}, spec: {forProvider: {tantrumMode: true, interval: 500ms}}}`,
			want:   "interval must be at least 1s",
		},
		"ChaosAgentIntervalNotADuration": {
			reason: "An interval must be a duration.",
			yaml:   `{apiVersion: chaos.clusterops.io/v1alpha1, kind: ChaosAgent, metadata: {name: ca5}, spec: {forProvider: {tantrumMode: true, interval: often}}}`,
			want:   "interval is a duration such as 1s, 30s, 5m or 1h30m",
		},
		"ChaosAgentNoMode": {
			reason: "An agent with no mode enabled would do nothing.",
			yaml:   `{apiVersion: chaos.clusterops.io/v1alpha1, kind: ChaosAgent, metadata: {name: ca6}, spec: {forProvider: {tantrumMode: false, podTolerance: 3}}}`,
			want:   "enable at least one of tantrumMode, cancerMode or ipsumMode",
		},
		"ChaosAgentWindowBadTime": {
			reason: "Quiet window times are HH:MM.",
			yaml:   `{apiVersion: chaos.clusterops.io/v1alpha1, kind: ChaosAgent, metadata: {name: ca7}, spec: {forProvider: {ipsumMode: true, quietWindows: [{start: "9am", end: "17:00"}]}}}`,
			want:   "quietWindows[0]: Invalid value: start and end are times of day as HH:MM",
		},
		"ChaosAgentWindowBadDay": {
			reason: "Quiet window days are weekday names.",
			yaml:   `{apiVersion: chaos.clusterops.io/v1alpha1, kind: ChaosAgent, metadata: {name: ca8}, spec: {forProvider: {ipsumMode: true, quietWindows: [{days: [Funday], start: "09:00", end: "17:00"}]}}}`,
			want:   `Unsupported value: "Funday"`,
		},
		"ChaosAgentWindowEmptyTimeZone": {
			reason: "A quiet window's time zone is an IANA name, not empty.",
			yaml:   `{apiVersion: chaos.clusterops.io/v1alpha1, kind: ChaosAgent, metadata: {name: ca9}, spec: {forProvider: {ipsumMode: true, quietWindows: [{start: "09:00", end: "17:00", timeZone: ""}]}}}`,
			want:   "quietWindows[0]: Invalid value: timeZone is an IANA time zone such as UTC or Europe/Berlin",
		},
		"ChaosAgentBadSelectorOperator": {
			reason: "A selector operator outside the four known ones is refused.",
			yaml:   `{apiVersion: chaos.clusterops.io/v1alpha1, kind: ChaosAgent, metadata: {name: ca10}, spec: {forProvider: {tantrumMode: true, podSelector: {matchExpressions: [{key: a, operator: Equals, values: [b]}]}}}}`,
			want:   "podSelector.matchExpressions[].operator must be one of In, NotIn, Exists, DoesNotExist",
		},
		"ChaosAgentValid": {
			reason: "A full, valid ChaosAgent is accepted.",
			yaml:   `{apiVersion: chaos.clusterops.io/v1alpha1, kind: ChaosAgent, metadata: {name: ca-ok}, spec: {managementPolicies: ["Observe"], forProvider: {tantrumMode: true, podTolerance: 0, cancerMode: true, maxReplicas: 4, ipsumMode: true, eagerness: 100, interval: 1s, minPodAge: 1m30s, maxActionsPerRound: 3, excludedNamespaces: ["prod-*"], namespaces: [a, b], dryRun: true, seed: -7, revertOnDelete: false, respectDisruptionBudgets: false, quietWindows: [{days: [Mon, Sunday], start: "22:00", end: "06:00", timeZone: America/Argentina/Buenos_Aires}]}}}`,
		},
		"ImmortalContainerNoForProvider": {
			reason: "An ImmortalContainer without parameters is refused.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: ImmortalContainer, metadata: {name: k}, spec: {}}`,
			want:   "spec.forProvider: Required value",
		},
	})
}

// An admission case is an object and what the API server should say to it.
type admission struct {
	reason string
	yaml   string
	want   string // substring of the rejection; empty means accepted
}

// admit creates each case's object in a new namespace (cluster-scoped kinds
// aside) and checks the API server's answer.
func admit(t *testing.T, cases map[string]admission) {
	t.Helper()
	ns := env.Namespace(t, "admission", nil)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(tc.yaml), &u.Object); err != nil {
				t.Fatal(err)
			}
			if u.GetKind() != "ClusterProviderConfig" {
				u.SetNamespace(ns)
			}
			err := env.Client.Create(context.Background(), u)
			if err == nil {
				t.Cleanup(func() { _ = env.Client.Delete(context.Background(), u) })
			}
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("\n%s\nCreate(...): want accepted, got %v", tc.reason, err)
			case tc.want != "" && err == nil:
				t.Errorf("\n%s\nCreate(...): want rejected with %q, got accepted", tc.reason, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("\n%s\nCreate(...): want message containing %q, got %v", tc.reason, tc.want, err)
			}
		})
	}
}
