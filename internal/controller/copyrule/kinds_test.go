package copyrule

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
)

// copyableCases are kinds a rule copies and kinds it refuses.
var copyableCases = map[string]struct {
	APIVersion, Kind string
	Copied           bool
}{
	"ConfigMap":           {"v1", "ConfigMap", true},
	"Secret":              {"v1", "Secret", true},
	"LimitRange":          {"v1", "LimitRange", true},
	"ResourceQuota":       {"v1", "ResourceQuota", true},
	"ServiceAccount":      {"v1", "ServiceAccount", true},
	"NetworkPolicy":       {"networking.k8s.io/v1", "NetworkPolicy", true},
	"Role":                {"rbac.authorization.k8s.io/v1", "Role", true},
	"RoleBinding":         {"rbac.authorization.k8s.io/v1", "RoleBinding", true},
	"PodDisruptionBudget": {"policy/v1", "PodDisruptionBudget", true},
	"CustomResource":      {"example.com/v1", "Widget", true},
	"GatewayAPI":          {"gateway.networking.k8s.io/v1", "HTTPRoute", true},
	"Pod":                 {"v1", "Pod", false},
	"Service":             {"v1", "Service", false},
	"Namespace":           {"v1", "Namespace", false},
	"Deployment":          {"apps/v1", "Deployment", false},
	"Job":                 {"batch/v1", "Job", false},
	"ClusterRole":         {"rbac.authorization.k8s.io/v1", "ClusterRole", false},
	"Ingress":             {"networking.k8s.io/v1", "Ingress", false},
	"StorageClass":        {"storage.k8s.io/v1", "StorageClass", false},
	"CRD":                 {"apiextensions.k8s.io/v1", "CustomResourceDefinition", false},
	"Lease":               {"coordination.k8s.io/v1", "Lease", false},
	"OwnKind":             {"copy.clusterops.io/v1alpha1", "CopyRule", false},
}

func TestCopyableRefusesKindsControllersKeep(t *testing.T) {
	for name, tc := range copyableCases {
		t.Run(name, func(t *testing.T) {
			gvk := sourceGVK(v1alpha1.CopyRuleParameters{APIVersion: tc.APIVersion, Kind: tc.Kind})
			if err := Copyable(gvk); (err == nil) != tc.Copied {
				t.Errorf("Copyable(%s) = %v, want copied: %t", gvk, err, tc.Copied)
			}
		})
	}
}

func TestResolveKind(t *testing.T) {
	widget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	dial := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Dial"}
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(widget, meta.RESTScopeNamespace)
	m.Add(dial, meta.RESTScopeRoot)
	cases := map[string]struct {
		reason  string
		gvk     schema.GroupVersionKind
		want    schema.GroupVersionResource
		kindErr string
	}{
		"ConfigMap": {
			reason: "ConfigMaps need no lookup.",
			gvk:    schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			want:   schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		},
		"Namespaced": {
			reason: "A namespaced custom resource resolves to its resource.",
			gvk:    widget,
			want:   schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
		},
		"ClusterScoped": {
			reason:  "A cluster-scoped kind is not copied.",
			gvk:     dial,
			kindErr: "cluster-scoped",
		},
		"NotServed": {
			reason:  "A kind the cluster does not serve says so.",
			gvk:     schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"},
			kindErr: "CustomResourceDefinition installed",
		},
		"Refused": {
			reason:  "A kind admission refuses is refused here too.",
			gvk:     schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
			kindErr: "is not copied",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			k, err := resolveKind(tc.gvk, m)
			if tc.kindErr != "" {
				if !isKindError(err) || !strings.Contains(err.Error(), tc.kindErr) {
					t.Errorf("%s\nresolveKind(%s) = %v, want a KindError saying %q", tc.reason, tc.gvk, err, tc.kindErr)
				}
				return
			}
			if err != nil || k.Resource != tc.want {
				t.Errorf("%s\nresolveKind(%s) = %v, %v, want %v", tc.reason, tc.gvk, k.Resource, err, tc.want)
			}
		})
	}
}

func TestBodyKeepsOnlyTheSpec(t *testing.T) {
	cases := map[string]struct {
		reason string
		gk     schema.GroupKind
		in     map[string]any
		want   map[string]any
	}{
		"NetworkPolicy": {
			reason: "A copy gets the spec, never the type, metadata or status.",
			gk:     schema.GroupKind{Group: "networking.k8s.io", Kind: "NetworkPolicy"},
			in: map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": map[string]any{"name": "deny"},
				"spec": map[string]any{"podSelector": map[string]any{}}, "status": map[string]any{}},
			want: map[string]any{"spec": map[string]any{"podSelector": map[string]any{}}},
		},
		"ServiceAccount": {
			reason: "A ServiceAccount's token Secrets are its namespace's; its image pull secrets are copied.",
			gk:     schema.GroupKind{Kind: "ServiceAccount"},
			in: map[string]any{"metadata": map[string]any{"name": "builder"}, "secrets": []any{map[string]any{"name": "builder-token"}},
				"imagePullSecrets": []any{map[string]any{"name": "registry"}}},
			want: map[string]any{"imagePullSecrets": []any{map[string]any{"name": "registry"}}},
		},
		"RoleBinding": {
			reason: "Top-level fields other than spec are copied too.",
			gk:     schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"},
			in:     map[string]any{"roleRef": map[string]any{"name": "view"}, "subjects": []any{}},
			want:   map[string]any{"roleRef": map[string]any{"name": "view"}, "subjects": []any{}},
		},
		"Empty": {
			reason: "An object of only metadata has no body.",
			gk:     schema.GroupKind{Group: "example.com", Kind: "Widget"},
			in:     map[string]any{"metadata": map[string]any{"name": "w"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, body(tc.gk, tc.in)); diff != "" {
				t.Errorf("%s\nbody(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestUnstructuredRoundTrip: an object of another kind written as the rule
// makes it and read back is the same Object, in sync with its template.
func TestUnstructuredRoundTrip(t *testing.T) {
	k := Mapping{GroupVersionKind: schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}}
	src := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": "deny", "namespace": "platform", "labels": map[string]any{"tier": "base"}, "resourceVersion": "7", "uid": "u-1"},
		"spec":     map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Ingress"}},
	}}
	o := fromUnstructured(src)
	if o.Name != "deny" || o.Labels["tier"] != "base" || o.ResourceVersion != "7" {
		t.Fatalf("fromUnstructured(...) lost metadata: %+v", o.ObjectMeta)
	}
	d, err := Transform{}.Apply(o)
	if err != nil {
		t.Fatal(err)
	}
	owner := Owner{UID: "rule-uid", Namespace: "platform", Name: "policies"}
	h := Hash(d)
	c := Desired(owner, d, h, "team-a", nil, false)
	u, ok := c.ToAPI(k).(*unstructured.Unstructured)
	if !ok {
		t.Fatalf("ToAPI(%s) is not unstructured", k)
	}
	if u.GetKind() != "NetworkPolicy" || u.GetAPIVersion() != "networking.k8s.io/v1" || u.GetNamespace() != "team-a" || u.GetLabels()[LabelRuleUID] != "rule-uid" {
		t.Fatalf("ToAPI(...) = %v", u.Object)
	}
	back := fromUnstructured(u)
	if !InSync(owner, d, h, back) {
		t.Errorf("the copy read back is not in sync with its template:\n%s", cmp.Diff(d.Body, back.Body))
	}
	// A changed field of the copy is named by its path.
	back.Body = map[string]any{"spec": map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Egress"}}}
	if InSync(owner, d, h, back) {
		t.Error("a copy whose spec was edited is in sync")
	}
}
