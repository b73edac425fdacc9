package function

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
)

// Observed XRs, as Crossplane sends them.
const (
	// A legacy XTenant, created by Crossplane for the claim tenant-alpha/alpha.
	legacyTenant = `
apiVersion: platform.clusterops.io/v1alpha1
kind: XTenant
metadata:
  name: alpha-x7k2p
  labels:
    crossplane.io/claim-name: alpha
    crossplane.io/claim-namespace: tenant-alpha
    crossplane.io/composite: alpha-x7k2p
spec:
  claimRef: {apiVersion: platform.clusterops.io/v1alpha1, kind: Tenant, name: alpha, namespace: tenant-alpha}
  compositionRef: {name: xtenants.platform.clusterops.io}
  providerConfigName: platform-tenants
  pullSecret: {namespace: platform-shared, name: registry-pull}
  sharedConfig:
    namespace: platform-shared
    selector:
      matchLabels: {platform.clusterops.io/shared: "true"}
`
	// A namespaced Tenant (Crossplane v2), with chaos.
	namespacedTenant = `
apiVersion: namespaced.platform.clusterops.io/v1alpha1
kind: Tenant
metadata:
  name: beta
  namespace: tenant-beta
spec:
  crossplane:
    compositionRef: {name: tenants.namespaced.platform.clusterops.io}
  pullSecret: {namespace: platform-shared, name: registry-pull}
  sharedConfig:
    namespace: platform-shared
    names: [company-ca, feature-flags]
  chaos:
    enabled: true
    tantrumMode: true
    podTolerance: 3
    eagerness: 10
    interval: 5m
    minPodAge: 30s
`
	legacyWebApp = `
apiVersion: platform.clusterops.io/v1alpha1
kind: XWebApp
metadata:
  name: hello-9fz2q
spec:
  claimRef: {apiVersion: platform.clusterops.io/v1alpha1, kind: WebApp, name: hello, namespace: tenant-alpha}
  providerConfigName: platform-tenants
  image: nginx:1.27
  replicas: 2
  port: 80
  service: ClusterIP
  config:
    LOG_LEVEL: info
    GREETING: hello
`
	namespacedWebApp = `
apiVersion: namespaced.platform.clusterops.io/v1alpha1
kind: WebApp
metadata:
  name: hello
  namespace: tenant-beta
spec:
  image: nginx:1.27
`
)

// Expected composed resources.
const (
	alphaPullSecret = `
apiVersion: copy.clusterops.io/v1alpha1
kind: CopyRule
metadata: {name: alpha-pull-secret, namespace: tenant-alpha}
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: platform-tenants}
  forProvider:
    kind: Secret
    sourceNamespace: platform-shared
    names: [registry-pull]
    namespaces: [tenant-alpha]
    conflictPolicy: Adopt
`
	alphaSharedConfig = `
apiVersion: copy.clusterops.io/v1alpha1
kind: CopyRule
metadata: {name: alpha-shared-config, namespace: tenant-alpha}
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: platform-tenants}
  forProvider:
    kind: ConfigMap
    sourceNamespace: platform-shared
    selector:
      matchLabels: {platform.clusterops.io/shared: "true"}
    namespaces: [tenant-alpha]
    conflictPolicy: Adopt
`
	betaPullSecret = `
apiVersion: copy.clusterops.io/v1alpha1
kind: CopyRule
metadata: {name: beta-pull-secret, namespace: tenant-beta}
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: default}
  forProvider:
    kind: Secret
    sourceNamespace: platform-shared
    names: [registry-pull]
    namespaces: [tenant-beta]
    conflictPolicy: Adopt
`
	betaSharedConfig = `
apiVersion: copy.clusterops.io/v1alpha1
kind: CopyRule
metadata: {name: beta-shared-config, namespace: tenant-beta}
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: default}
  forProvider:
    kind: ConfigMap
    sourceNamespace: platform-shared
    names: [company-ca, feature-flags]
    namespaces: [tenant-beta]
    conflictPolicy: Adopt
`
	betaChaos = `
apiVersion: chaos.clusterops.io/v1alpha1
kind: ChaosAgent
metadata: {name: beta-chaos, namespace: tenant-beta}
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: default}
  forProvider:
    tantrumMode: true
    podTolerance: 3
    eagerness: 10
    interval: 5m0s
    minPodAge: 30s
`
	alphaApp = `
apiVersion: workload.clusterops.io/v1alpha1
kind: AppBundle
metadata: {name: hello, namespace: tenant-alpha}
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: platform-tenants}
  forProvider:
    image: nginx:1.27
    replicas: 2
    port: 80
    service: ClusterIP
    env:
    - name: GREETING
      valueFrom: {configMapKeyRef: {name: hello-config, key: GREETING}}
    - name: LOG_LEVEL
      valueFrom: {configMapKeyRef: {name: hello-config, key: LOG_LEVEL}}
`
	alphaConfig = `
apiVersion: v1
kind: ConfigMap
metadata: {name: hello-config, namespace: tenant-alpha}
data:
  LOG_LEVEL: info
  GREETING: hello
`
	alphaRollout = `
apiVersion: workload.clusterops.io/v1alpha1
kind: ConfigRollout
metadata: {name: hello-config, namespace: tenant-alpha}
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: platform-tenants}
  forProvider:
    configMaps: [{name: hello-config}]
    workloads: [{kind: Deployment, name: hello}]
`
	betaApp = `
apiVersion: workload.clusterops.io/v1alpha1
kind: AppBundle
metadata: {name: hello, namespace: tenant-beta}
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: default}
  forProvider:
    image: nginx:1.27
`
)

// observedMR is an observed composed resource with a Ready condition and,
// optionally, more status.
func observedMR(apiVersion, kind, ready, atProvider string) string {
	return `
apiVersion: ` + apiVersion + `
kind: ` + kind + `
metadata: {name: whatever, namespace: tenant-alpha}
status:
  atProvider: {` + atProvider + `}
  conditions:
  - {type: Synced, status: "True", reason: ReconcileSuccess}
  - {type: Ready, status: "` + ready + `", reason: Whatever}
`
}

func TestRunFunction(t *testing.T) {
	cases := map[string]struct {
		reason   string
		observed state
		desired  state
		ready    map[string]string
		want     map[string]string
		status   map[string]any
	}{
		"LegacyTenantThroughClaim": {
			reason:   "A legacy XTenant composes into its claim's namespace, named after the claim, and is not ready before anything is observed.",
			observed: state{xr: legacyTenant},
			ready:    map[string]string{"copy-pull-secret": "False", "copy-shared-config": "False"},
			want:     map[string]string{"copy-pull-secret": alphaPullSecret, "copy-shared-config": alphaSharedConfig},
		},
		"NamespacedTenantWithChaos": {
			reason:   "A namespaced Tenant composes into its own namespace; enabled chaos adds a ChaosAgent confined to it (no target namespaces, no dry run); without providerConfigName the default config is used.",
			observed: state{xr: namespacedTenant},
			ready:    map[string]string{"copy-pull-secret": "False", "copy-shared-config": "False", "chaos": "False"},
			want:     map[string]string{"copy-pull-secret": betaPullSecret, "copy-shared-config": betaSharedConfig, "chaos": betaChaos},
		},
		"TenantChaosDisabled": {
			reason: "Chaos that is not enabled composes no ChaosAgent, and no sharedConfig composes no second CopyRule.",
			observed: state{xr: `
apiVersion: namespaced.platform.clusterops.io/v1alpha1
kind: Tenant
metadata: {name: beta, namespace: tenant-beta}
spec:
  pullSecret: {namespace: platform-shared, name: registry-pull}
  chaos: {enabled: false, tantrumMode: true}
`},
			ready: map[string]string{"copy-pull-secret": "False"},
			want:  map[string]string{"copy-pull-secret": betaPullSecret},
		},
		"TenantReadiness": {
			reason: "A composed MR is ready when its observed Ready condition is True; the XR's status.copies sums the rules' copies.",
			observed: state{xr: legacyTenant, resources: map[string]string{
				"copy-pull-secret":   observedMR("copy.clusterops.io/v1alpha1", "CopyRule", "True", "intendedCopies: 1, copiesInSync: 1"),
				"copy-shared-config": observedMR("copy.clusterops.io/v1alpha1", "CopyRule", "False", "intendedCopies: 2"),
			}},
			ready:  map[string]string{"copy-pull-secret": "True", "copy-shared-config": "False"},
			want:   map[string]string{"copy-pull-secret": alphaPullSecret, "copy-shared-config": alphaSharedConfig},
			status: map[string]any{"copies": "1/3"},
		},
		"LegacyWebApp": {
			reason:   "A legacy XWebApp composes an AppBundle reading each config key from a ConfigMap, the ConfigMap, and a ConfigRollout of the AppBundle's Deployment.",
			observed: state{xr: legacyWebApp},
			ready:    map[string]string{"app": "False", "config": "False", "rollout": "False"},
			want:     map[string]string{"app": alphaApp, "config": alphaConfig, "rollout": alphaRollout},
		},
		"NamespacedWebAppWithoutConfig": {
			reason:   "A namespaced WebApp without config composes the AppBundle alone.",
			observed: state{xr: namespacedWebApp},
			ready:    map[string]string{"app": "False"},
			want:     map[string]string{"app": betaApp},
		},
		"WebAppReadiness": {
			reason: "The AppBundle and ConfigRollout are ready when their Ready condition is True, the ConfigMap once it exists; the XR shows the app's ready replicas and address.",
			observed: state{xr: legacyWebApp, resources: map[string]string{
				"app":     observedMR("workload.clusterops.io/v1alpha1", "AppBundle", "True", "readyReplicas: 2, serviceAddress: '10.0.0.7:80'"),
				"config":  "{apiVersion: v1, kind: ConfigMap, metadata: {name: hello-config, namespace: tenant-alpha}}",
				"rollout": observedMR("workload.clusterops.io/v1alpha1", "ConfigRollout", "False", ""),
			}},
			ready:  map[string]string{"app": "True", "config": "True", "rollout": "False"},
			want:   map[string]string{"app": alphaApp, "config": alphaConfig, "rollout": alphaRollout},
			status: map[string]any{"readyReplicas": float64(2), "serviceAddress": "10.0.0.7:80"},
		},
		"WebAppNotReadyYet": {
			reason: "An observed AppBundle without ready replicas shows 0.",
			observed: state{xr: namespacedWebApp, resources: map[string]string{
				"app": observedMR("workload.clusterops.io/v1alpha1", "AppBundle", "False", ""),
			}},
			ready:  map[string]string{"app": "False"},
			want:   map[string]string{"app": betaApp},
			status: map[string]any{"readyReplicas": float64(0)},
		},
		"KeepsEarlierSteps": {
			reason:   "Resources desired by earlier pipeline steps stay desired.",
			observed: state{xr: namespacedWebApp},
			desired:  state{resources: map[string]string{"extra": "{apiVersion: v1, kind: ConfigMap, metadata: {name: extra}}"}},
			ready:    map[string]string{"app": "False", "extra": "Unspecified"},
			want:     map[string]string{"app": betaApp, "extra": "{apiVersion: v1, kind: ConfigMap, metadata: {name: extra}}"},
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp, err := New(logging.NewNopLogger()).RunFunction(context.Background(), req(t, tc.observed, tc.desired))
			if err != nil {
				t.Fatalf("\n%s\nRunFunction(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff([]resultView(nil), results(rsp)); diff != "" {
				t.Errorf("\n%s\nRunFunction(...) results: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(want(t, tc.ready, tc.want), view(rsp)); diff != "" {
				t.Errorf("\n%s\nRunFunction(...) desired resources: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.status, desiredStatus(rsp), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nRunFunction(...) desired XR status: -want, +got:\n%s", tc.reason, diff)
			}
			if tc.status != nil && rsp.GetDesired().GetComposite().GetResource().AsMap()["kind"] == nil {
				t.Errorf("\n%s\nRunFunction(...) desired XR has no kind", tc.reason)
			}
		})
	}
}

// tenant and webApp return a namespaced XR of that kind with the given spec.
func tenant(spec string) string {
	return "apiVersion: namespaced.platform.clusterops.io/v1alpha1\nkind: Tenant\nmetadata: {name: beta, namespace: tenant-beta}\nspec:\n" + spec
}

func webApp(spec string) string {
	return "apiVersion: namespaced.platform.clusterops.io/v1alpha1\nkind: WebApp\nmetadata: {name: hello, namespace: tenant-beta}\nspec:\n" + spec
}

const pullSecret = "  pullSecret: {namespace: platform-shared, name: registry-pull}\n"

func TestRunFunctionFatal(t *testing.T) {
	cases := map[string]struct {
		reason string
		xr     string
		want   string
	}{
		"UnknownKind": {
			reason: "Only the platform kinds are composed.",
			xr:     "{apiVersion: example.org/v1, kind: XDatabase, metadata: {name: db}, spec: {}}",
			want:   `function-clusterops composes XTenant, Tenant, XWebApp and WebApp resources, not "XDatabase": point this Composition at another function`,
		},
		"NoObservedXR": {
			reason: "A request without an observed XR has no kind.",
			xr:     "",
			want:   `function-clusterops composes XTenant, Tenant, XWebApp and WebApp resources, not "": point this Composition at another function`,
		},
		"ClusterScopedWithoutClaim": {
			reason: "A cluster-scoped XR without a claim has no namespace to compose into.",
			xr:     "{apiVersion: platform.clusterops.io/v1alpha1, kind: XTenant, metadata: {name: alpha}, spec: {pullSecret: {namespace: platform-shared, name: registry-pull}}}",
			want:   `compose this XR through a claim or as a namespaced XR: XTenant "alpha" is cluster-scoped and has no spec.claimRef.namespace, so it has no namespace to compose into`,
		},
		"ClaimRefWithoutName": {
			reason: "The claim's name names the composed resources.",
			xr:     "{apiVersion: platform.clusterops.io/v1alpha1, kind: XWebApp, metadata: {name: hello-x}, spec: {claimRef: {namespace: tenant-alpha}, image: nginx}}",
			want:   `XWebApp "hello-x": spec.claimRef.name is required`,
		},
		"MissingSpec": {
			reason: "An XR without a spec says so.",
			xr:     "{apiVersion: namespaced.platform.clusterops.io/v1alpha1, kind: WebApp, metadata: {name: hello, namespace: tenant-beta}}",
			want:   `invalid WebApp "tenant-beta/hello": spec is required`,
		},
		"WrongFieldType": {
			reason: "A spec that does not decode says which field.",
			xr:     webApp("  image: nginx\n  replicas: two\n"),
			want:   `invalid WebApp "tenant-beta/hello": cannot read spec: cannot unmarshal value from JSON: json: cannot unmarshal string into Go struct field WebAppSpec.replicas of type int32`,
		},
		"MissingPullSecret": {
			reason: "Every tenant gets the registry pull secret.",
			xr:     tenant("  sharedConfig: {namespace: platform-shared, names: [a]}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.pullSecret is required`,
		},
		"PullSecretWithoutName": {
			reason: "The pull secret needs a name.",
			xr:     tenant("  pullSecret: {namespace: platform-shared}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.pullSecret.name is required`,
		},
		"PullSecretWithoutNamespace": {
			reason: "The pull secret needs a namespace.",
			xr:     tenant("  pullSecret: {name: registry-pull}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.pullSecret.namespace is required`,
		},
		"PullSecretBadNamespace": {
			reason: "A namespace name is a DNS label.",
			xr:     tenant("  pullSecret: {namespace: Platform_Shared, name: registry-pull}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.pullSecret.namespace "Platform_Shared" is not a namespace name: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
		},
		"PullSecretBadName": {
			reason: "An object name is a DNS subdomain.",
			xr:     tenant("  pullSecret: {namespace: platform-shared, name: -pull}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.pullSecret.name "-pull" is not an object name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		"PullSecretFromOwnNamespace": {
			reason: "Copying from the tenant's namespace into itself makes no sense.",
			xr:     tenant("  pullSecret: {namespace: tenant-beta, name: registry-pull}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.pullSecret.namespace is the tenant's own namespace "tenant-beta": name the namespace the secret is copied from`,
		},
		"BadProviderConfigName": {
			reason: "The provider config name is an object name.",
			xr:     tenant("  providerConfigName: Not OK\n" + pullSecret),
			want:   `invalid Tenant "tenant-beta/beta": spec.providerConfigName "Not OK" is not an object name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		"SharedConfigWithoutNamespace": {
			reason: "Shared config comes from a namespace.",
			xr:     tenant(pullSecret + "  sharedConfig: {names: [a]}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.sharedConfig.namespace is required`,
		},
		"SharedConfigFromOwnNamespace": {
			reason: "Copying from the tenant's namespace into itself makes no sense.",
			xr:     tenant(pullSecret + "  sharedConfig: {namespace: tenant-beta, names: [a]}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.sharedConfig.namespace is the tenant's own namespace "tenant-beta": name the namespace the ConfigMaps are copied from`,
		},
		"SharedConfigPicksNothing": {
			reason: "An empty selector would copy every ConfigMap: refused, as the CopyRule refuses it.",
			xr:     tenant(pullSecret + "  sharedConfig: {namespace: platform-shared, selector: {}}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.sharedConfig needs names or a non-empty selector: a tenant must not receive every ConfigMap of "platform-shared" by accident`,
		},
		"SharedConfigBadName": {
			reason: "Each name is checked, by index.",
			xr:     tenant(pullSecret + "  sharedConfig: {namespace: platform-shared, names: [ok, NOT]}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.sharedConfig.names[1] "NOT" is not an object name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		"SharedConfigBadSelector": {
			reason: "A selector the API server would refuse is refused here.",
			xr:     tenant(pullSecret + "  sharedConfig: {namespace: platform-shared, selector: {matchExpressions: [{key: a, operator: Near}]}}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.sharedConfig.selector is not a valid label selector: "Near" is not a valid label selector operator`,
		},
		"ChaosWithoutMode": {
			reason: "Enabled chaos needs something to do.",
			xr:     tenant(pullSecret + "  chaos: {enabled: true}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.chaos is enabled without a mode: set tantrumMode, cancerMode or ipsumMode`,
		},
		"ChaosEagerness": {
			reason: "Eagerness is a percentage.",
			xr:     tenant(pullSecret + "  chaos: {enabled: true, ipsumMode: true, eagerness: 0}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.chaos.eagerness must be between 1 and 100, got 0`,
		},
		"ChaosMaxReplicas": {
			reason: "maxReplicas is bounded as the ChaosAgent bounds it.",
			xr:     tenant(pullSecret + "  chaos: {enabled: true, cancerMode: true, maxReplicas: 20000}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.chaos.maxReplicas must be between 1 and 10000, got 20000`,
		},
		"ChaosPodTolerance": {
			reason: "podTolerance counts pods.",
			xr:     tenant(pullSecret + "  chaos: {enabled: true, tantrumMode: true, podTolerance: -1}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.chaos.podTolerance must not be negative, got -1`,
		},
		"ChaosIntervalSyntax": {
			reason: "The interval is a duration the ChaosAgent accepts.",
			xr:     tenant(pullSecret + "  chaos: {enabled: true, tantrumMode: true, interval: 5 minutes}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.chaos.interval "5 minutes" is not a duration such as 30s, 5m or 1h30m`,
		},
		"ChaosIntervalTooShort": {
			reason: "Rounds are at least a second apart.",
			xr:     tenant(pullSecret + "  chaos: {enabled: true, tantrumMode: true, interval: 500ms}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.chaos.interval must be at least 1s, got 500ms`,
		},
		"ChaosMinPodAge": {
			reason: "minPodAge is a duration.",
			xr:     tenant(pullSecret + "  chaos: {enabled: true, tantrumMode: true, minPodAge: -5s}\n"),
			want:   `invalid Tenant "tenant-beta/beta": spec.chaos.minPodAge "-5s" is not a duration such as 30s, 5m or 1h30m`,
		},
		"WebAppMissingImage": {
			reason: "A web app runs an image.",
			xr:     webApp("  replicas: 1\n"),
			want:   `invalid WebApp "tenant-beta/hello": spec.image is required`,
		},
		"WebAppImageWithSpace": {
			reason: "An image reference has no spaces.",
			xr:     webApp("  image: 'nginx 1.27'\n"),
			want:   `invalid WebApp "tenant-beta/hello": spec.image "nginx 1.27" must not contain spaces`,
		},
		"WebAppNegativeReplicas": {
			reason: "Replicas are not negative.",
			xr:     webApp("  image: nginx\n  replicas: -1\n"),
			want:   `invalid WebApp "tenant-beta/hello": spec.replicas must not be negative, got -1`,
		},
		"WebAppPort": {
			reason: "A port is a TCP port.",
			xr:     webApp("  image: nginx\n  port: 70000\n"),
			want:   `invalid WebApp "tenant-beta/hello": spec.port must be between 1 and 65535, got 70000`,
		},
		"WebAppServiceWithoutPort": {
			reason: "A Service needs the port.",
			xr:     webApp("  image: nginx\n  service: NodePort\n"),
			want:   `invalid WebApp "tenant-beta/hello": spec.port is required to expose the app through a NodePort Service`,
		},
		"WebAppUnknownService": {
			reason: "Only the AppBundle's Service types.",
			xr:     webApp("  image: nginx\n  port: 80\n  service: LoadBalancer\n"),
			want:   `invalid WebApp "tenant-beta/hello": spec.service must be None, ClusterIP or NodePort, got "LoadBalancer"`,
		},
		"WebAppServiceName": {
			reason: "A Service is named like the app, so the name must be a DNS-1035 label.",
			xr:     "{apiVersion: namespaced.platform.clusterops.io/v1alpha1, kind: WebApp, metadata: {name: 1st-app, namespace: tenant-beta}, spec: {image: nginx, port: 80, service: ClusterIP}}",
			want:   `invalid WebApp "tenant-beta/1st-app": spec.service cannot expose "1st-app": a Service name a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`,
		},
		"WebAppConfigKey": {
			reason: "Config keys become environment variable names.",
			xr:     webApp("  image: nginx\n  config: {GOOD: '1', log.level: debug, 9LIVES: cat}\n"),
			want:   `invalid WebApp "tenant-beta/hello": spec.config["9LIVES"] is not usable as an environment variable name: use letters, digits and _, not starting with a digit`,
		},
		"LegacyNamesTheClaim": {
			reason: "A legacy XR's errors name the claim its author wrote.",
			xr:     "{apiVersion: platform.clusterops.io/v1alpha1, kind: XWebApp, metadata: {name: hello-x}, spec: {claimRef: {namespace: tenant-alpha, name: hello}}}",
			want:   `invalid XWebApp "tenant-alpha/hello (claim of hello-x)": spec.image is required`,
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp, err := New(logging.NewNopLogger()).RunFunction(context.Background(), req(t, state{xr: tc.xr}, state{}))
			if err != nil {
				t.Fatalf("\n%s\nRunFunction(...): %v", tc.reason, err)
			}
			want := []resultView{{Severity: "SEVERITY_FATAL", Message: tc.want}}
			if diff := cmp.Diff(want, results(rsp)); diff != "" {
				t.Errorf("\n%s\nRunFunction(...) results: -want, +got:\n%s", tc.reason, diff)
			}
			if n := len(rsp.GetDesired().GetResources()); n != 0 {
				t.Errorf("\n%s\nRunFunction(...) desired %d resources after a fatal result, want none", tc.reason, n)
			}
		})
	}
}
