package reliability

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestBadInputAdmission applies invalid specs of every kind and checks that
// the API server refuses each with the field and a message that tells the
// user what to write instead: a sentence, an enum's supported values or a
// bound, never a bare regular expression or CEL rule.
func TestBadInputAdmission(t *testing.T) {
	mr := func(apiVersion, kind, forProvider string) string {
		return `{apiVersion: ` + apiVersion + `, kind: ` + kind + `, metadata: {generateName: bad-}, spec: {forProvider: ` + forProvider + `}}`
	}
	cpc := func(spec string) string {
		return `{apiVersion: clusterops.io/v1alpha1, kind: ClusterProviderConfig, metadata: {generateName: rel-bad-}, spec: ` + spec + `}`
	}
	copyRule := func(fp string) string { return mr("copy.clusterops.io/v1alpha1", "CopyRule", fp) }
	chaos := func(fp string) string { return mr("chaos.clusterops.io/v1alpha1", "ChaosAgent", fp) }
	bundle := func(fp string) string { return mr("workload.clusterops.io/v1alpha1", "AppBundle", fp) }
	immortal := func(fp string) string { return mr("workload.clusterops.io/v1alpha1", "ImmortalContainer", fp) }
	rollout := func(fp string) string { return mr("workload.clusterops.io/v1alpha1", "ConfigRollout", fp) }
	const (
		nsName  = "a namespace name is lowercase letters, digits and '-', and starts and ends with a letter or digit"
		nsGlob  = "a namespace pattern is lowercase letters, digits, '-' and the wildcards '*' and '?', and starts and ends with one of those but '-'"
		objName = "an object name is lowercase letters, digits, '-' and '.', and starts and ends with a letter or digit"
		ops     = "matchExpressions[].operator must be one of In, NotIn, Exists, DoesNotExist"
	)

	cases := map[string]struct {
		reason string
		yaml   string
		want   []string // each must be in the refusal: the field, and what to do
	}{
		// ProviderConfig and ClusterProviderConfig.
		"ProviderConfigSecretWithoutRef": {
			reason: "A Secret source needs a secretRef.",
			yaml:   `{apiVersion: clusterops.io/v1alpha1, kind: ProviderConfig, metadata: {name: bad-a}, spec: {credentials: {source: Secret}}}`,
			want:   []string{"spec.credentials", "credentials.secretRef is required when credentials.source is Secret"},
		},
		"ProviderConfigRefWithoutSecret": {
			reason: "A secretRef the source would ignore is refused.",
			yaml:   `{apiVersion: clusterops.io/v1alpha1, kind: ProviderConfig, metadata: {name: bad-b}, spec: {credentials: {source: InjectedIdentity, secretRef: {name: s, key: k}}}}`,
			want:   []string{"spec.credentials", "credentials.secretRef is only allowed when credentials.source is Secret"},
		},
		"ClusterProviderConfigUnknownSource": {
			reason: "The supported sources are listed.",
			yaml:   cpc(`{credentials: {source: Filesystem}}`),
			want:   []string{`spec.credentials.source: Unsupported value: "Filesystem": supported values: "InjectedIdentity", "Secret"`},
		},
		"ClusterProviderConfigSecretRefWithoutNamespace": {
			reason: "A cluster config must say where its Secret lives.",
			yaml:   cpc(`{credentials: {source: Secret, secretRef: {name: s, key: k}}}`),
			want:   []string{"spec.credentials.secretRef.namespace: Required value"},
		},
		"ReachBadGlob": {
			reason: "A reach pattern with other characters than a namespace name's and wildcards is refused, in words.",
			yaml:   cpc(`{credentials: {source: InjectedIdentity}, reach: {namespaces: ["team-["]}}`),
			want:   []string{"spec.reach.namespaces[0]", "reach.namespaces: " + nsGlob},
		},
		"ReachBadDenied": {
			reason: "Denied namespaces are names or patterns too.",
			yaml:   cpc(`{credentials: {source: InjectedIdentity}, reach: {deniedNamespaces: ["Kube_System"]}}`),
			want:   []string{"spec.reach.deniedNamespaces[0]", "reach.deniedNamespaces: " + nsGlob},
		},
		"ReachBadOperator": {
			reason: "Selector operators are the four Kubernetes knows.",
			yaml:   cpc(`{credentials: {source: InjectedIdentity}, reach: {namespaceSelector: {matchExpressions: [{key: a, operator: Equals, values: [b]}]}}}`),
			want:   []string{"spec.reach", "reach.namespaceSelector." + ops},
		},
		"ReachNotInWithoutValues": {
			reason: "NotIn needs values.",
			yaml:   cpc(`{credentials: {source: InjectedIdentity}, reach: {namespaceSelector: {matchExpressions: [{key: a, operator: NotIn}]}}}`),
			want:   []string{"spec.reach", "In and NotIn need values, Exists and DoesNotExist take none"},
		},

		// CopyRule.
		"CopyRuleUnknownKind": {
			reason: "Workloads are never copied: they run pods.",
			yaml:   copyRule(`{kind: Deployment, names: [a], allNamespaces: true}`),
			want:   []string{`kind Deployment of apiVersion v1 is not copied: of the core kinds, a rule copies ConfigMap, Secret, LimitRange, ResourceQuota and ServiceAccount`},
		},
		"CopyRuleNoSelection": {
			reason: "A rule must say which sources it copies.",
			yaml:   copyRule(`{kind: Secret, allNamespaces: true}`),
			want:   []string{"spec.forProvider", "set a non-empty selector or names: a rule must not copy every object of its source namespace by accident"},
		},
		"CopyRuleTwoTargetModes": {
			reason: "Target modes exclude each other.",
			yaml:   copyRule(`{kind: ConfigMap, names: [a], namespacePattern: "team-.*", allNamespaces: true}`),
			want:   []string{"spec.forProvider", "set exactly one of namespaces, namespacePattern, namespaceSelector or allNamespaces: true"},
		},
		"CopyRuleBadPattern": {
			reason: "A pattern must be a regular expression.",
			yaml:   copyRule(`{kind: ConfigMap, names: [a], namespacePattern: "team-(["}`),
			want:   []string{"spec.forProvider.namespacePattern", "namespacePattern must be a valid regular expression"},
		},
		"CopyRuleBadTargetName": {
			reason: "Target namespaces are namespace names.",
			yaml:   copyRule(`{kind: ConfigMap, names: [a], namespaces: [Team_A]}`),
			want:   []string{"spec.forProvider.namespaces[0]", "namespaces: " + nsName},
		},
		"CopyRuleBadObjectName": {
			reason: "Source names are object names.",
			yaml:   copyRule(`{kind: Secret, names: ["Registry Pull"], allNamespaces: true}`),
			want:   []string{"spec.forProvider.names[0]", "names: " + objName},
		},
		"CopyRuleBadSourceNamespace": {
			reason: "The source namespace is a namespace name.",
			yaml:   copyRule(`{kind: Secret, sourceNamespace: "shared!", names: [a], allNamespaces: true}`),
			want:   []string{"spec.forProvider.sourceNamespace", "sourceNamespace: " + nsName},
		},
		"CopyRuleUnknownConflictPolicy": {
			reason: "The three policies are listed.",
			yaml:   copyRule(`{kind: ConfigMap, names: [a], allNamespaces: true, conflictPolicy: Merge}`),
			want:   []string{`spec.forProvider.conflictPolicy: Unsupported value: "Merge": supported values: "Skip", "Adopt", "Overwrite"`},
		},
		"CopyRuleTooManyParallelWrites": {
			reason: "Parallel writes are bounded.",
			yaml:   copyRule(`{kind: ConfigMap, names: [a], allNamespaces: true, maxParallelWrites: 1000}`),
			want:   []string{"spec.forProvider.maxParallelWrites", "should be less than or equal to 256"},
		},

		// ChaosAgent.
		"ChaosAgentNoMode": {
			reason: "An agent with no mode would do nothing.",
			yaml:   chaos(`{podTolerance: 3}`),
			want:   []string{"spec.forProvider", "enable at least one of tantrumMode, cancerMode or ipsumMode"},
		},
		"ChaosAgentEagernessOver100": {
			reason: "Eagerness is a percentage.",
			yaml:   chaos(`{ipsumMode: true, eagerness: 150}`),
			want:   []string{"spec.forProvider.eagerness", "should be less than or equal to 100"},
		},
		"ChaosAgentMaxReplicasZero": {
			reason: "cancerMode needs room to grow.",
			yaml:   chaos(`{cancerMode: true, maxReplicas: 0}`),
			want:   []string{"spec.forProvider.maxReplicas", "should be greater than or equal to 1"},
		},
		"ChaosAgentIntervalTooShort": {
			reason: "Rounds are at least a second apart.",
			yaml:   chaos(`{tantrumMode: true, interval: 100ms}`),
			want:   []string{"spec.forProvider.interval", "interval must be at least 1s"},
		},
		"ChaosAgentMinPodAgeNotADuration": {
			reason: "minPodAge is a duration, with examples.",
			yaml:   chaos(`{tantrumMode: true, minPodAge: old}`),
			want:   []string{"spec.forProvider.minPodAge", "minPodAge is a duration such as 30s, 5m or 1h"},
		},
		"ChaosAgentWindowBadTime": {
			reason: "Quiet window times are HH:MM, with examples.",
			yaml:   chaos(`{ipsumMode: true, quietWindows: [{start: "09:00", end: "5pm"}]}`),
			want:   []string{"spec.forProvider.quietWindows[0]", "start and end are times of day as HH:MM, such as 09:00 or 17:30"},
		},
		"ChaosAgentWindowBadDay": {
			reason: "Weekday names are listed.",
			yaml:   chaos(`{ipsumMode: true, quietWindows: [{days: [Caturday], start: "09:00", end: "17:00"}]}`),
			want:   []string{`spec.forProvider.quietWindows[0].days[0]: Unsupported value: "Caturday": supported values: "Monday"`},
		},
		"ChaosAgentWindowBadTimeZone": {
			reason: "A time zone is an IANA name.",
			yaml:   chaos(`{ipsumMode: true, quietWindows: [{start: "09:00", end: "17:00", timeZone: "UTC+2 hours"}]}`),
			want:   []string{"spec.forProvider.quietWindows[0]", "timeZone is an IANA time zone such as UTC or Europe/Berlin"},
		},
		"ChaosAgentBadExcludedPattern": {
			reason: "Excluded namespaces are names or globs, in words.",
			yaml:   chaos(`{ipsumMode: true, excludedNamespaces: ["Prod_*"]}`),
			want:   []string{"spec.forProvider.excludedNamespaces[0]", "excludedNamespaces: " + nsGlob},
		},
		"ChaosAgentBadNamespace": {
			reason: "Target namespaces are namespace names, in words.",
			yaml:   chaos(`{ipsumMode: true, namespaces: ["team a"]}`),
			want:   []string{"spec.forProvider.namespaces[0]", "namespaces: " + nsName},
		},
		"ChaosAgentBadDeploymentSelector": {
			reason: "Selector operators are the four Kubernetes knows.",
			yaml:   chaos(`{cancerMode: true, deploymentSelector: {matchExpressions: [{key: a, operator: Like, values: [b]}]}}`),
			want:   []string{"spec.forProvider.deploymentSelector", "deploymentSelector." + ops},
		},

		// AppBundle.
		"AppBundleImageWithSpace": {
			reason: "An image reference has no spaces.",
			yaml:   bundle(`{image: "nginx :1.27"}`),
			want:   []string{"spec.forProvider.image", "image must not contain spaces"},
		},
		"AppBundleServiceWithoutPort": {
			reason: "A Service needs a port.",
			yaml:   bundle(`{image: nginx, service: NodePort}`),
			want:   []string{"spec.forProvider", "a service needs spec.forProvider.port"},
		},
		"AppBundlePortTooHigh": {
			reason: "Ports are at most 65535.",
			yaml:   bundle(`{image: nginx, port: 70000}`),
			want:   []string{"spec.forProvider.port", "should be less than or equal to 65535"},
		},
		"AppBundleRelativeMountPath": {
			reason: "The claim is mounted at an absolute path, in words.",
			yaml:   bundle(`{image: nginx, storage: {mountPath: data}}`),
			want:   []string{"spec.forProvider.storage.mountPath", "storage.mountPath is an absolute path such as /data"},
		},
		"AppBundleUnknownDeletionPolicy": {
			reason: "The claim's deletion policies are listed.",
			yaml:   bundle(`{image: nginx, pvcDeletionPolicy: Keep}`),
			want:   []string{`spec.forProvider.pvcDeletionPolicy: Unsupported value: "Keep": supported values: "Retain", "Delete"`},
		},

		// ImmortalContainer.
		"ImmortalContainerNoParameters": {
			reason: "An ImmortalContainer without parameters is refused.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: ImmortalContainer, metadata: {generateName: bad-}, spec: {}}`,
			want:   []string{"spec.forProvider: Required value"},
		},
		"ImmortalContainerBackoffInverted": {
			reason: "A backoff whose max is below its initial delay is refused.",
			yaml:   immortal(`{image: nginx, restartBackoff: {initial: 10m, max: 1m}}`),
			want:   []string{"spec.forProvider.restartBackoff", "restartBackoff.max must not be shorter than restartBackoff.initial"},
		},
		"ImmortalContainerBackoffNotADuration": {
			reason: "Backoff delays are durations, with examples.",
			yaml:   immortal(`{image: nginx, restartBackoff: {initial: 1s, max: forever}}`),
			want:   []string{"spec.forProvider.restartBackoff", "restartBackoff.initial and max are durations such as 500ms, 10s, 5m or 1h30m"},
		},

		// ConfigRollout.
		"ConfigRolloutNoSources": {
			reason: "A rollout needs a source.",
			yaml:   rollout(`{selector: {matchLabels: {app: web}}}`),
			want:   []string{"spec.forProvider", "name at least one source in configMaps or secrets"},
		},
		"ConfigRolloutTwoSelections": {
			reason: "Workloads are chosen one way.",
			yaml:   rollout(`{secrets: [{name: s}], auto: true, selector: {matchLabels: {app: web}}}`),
			want:   []string{"spec.forProvider", "choose the workloads with exactly one of workloads, selector or auto: true"},
		},
		"ConfigRolloutUnknownWorkloadKind": {
			reason: "The kinds that roll are listed.",
			yaml:   rollout(`{secrets: [{name: s}], workloads: [{kind: Job, name: w}]}`),
			want:   []string{`spec.forProvider.workloads[0].kind: Unsupported value: "Job": supported values: "Deployment", "StatefulSet", "DaemonSet"`},
		},
		"ConfigRolloutBadDebounce": {
			reason: "A debounce is a duration, with examples.",
			yaml:   rollout(`{configMaps: [{name: c}], auto: true, debounce: "5 seconds"}`),
			want:   []string{"spec.forProvider", "debounce is a duration such as 500ms, 10s or 1m"},
		},
		"ConfigRolloutEmptySourceName": {
			reason: "A source has a name.",
			yaml:   rollout(`{configMaps: [{name: ""}], auto: true}`),
			want:   []string{"spec.forProvider.configMaps[0].name", "should be at least 1 chars long"},
		},
	}
	if len(cases) < 30 {
		t.Fatalf("only %d cases; the bar is 30", len(cases))
	}

	ns := env.Namespace(t, "bad-input", nil)
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
				_ = env.Client.Delete(context.Background(), u)
				t.Fatalf("\n%s\nCreate(...): want refused with %q, got accepted", tc.reason, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("\n%s\nCreate(...): want a message containing\n  %q\ngot\n  %v", tc.reason, w, err)
				}
			}
		})
	}
}
