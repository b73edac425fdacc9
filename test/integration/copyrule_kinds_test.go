package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/copyrule"
	"github.com/clusterops/provider-clusterops/internal/drift"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestCopyRuleKindAdmission: admission refuses exactly the kinds the
// provider does not copy (copyrule.Copyable), with a message naming them.
func TestCopyRuleKindAdmission(t *testing.T) {
	kinds := []string{
		"v1/ConfigMap", "v1/Secret", "v1/LimitRange", "v1/ResourceQuota", "v1/ServiceAccount",
		"v1/Pod", "v1/Service", "v1/Endpoints", "v1/Event", "v1/Namespace", "v1/Node", "v1/PersistentVolumeClaim",
		"networking.k8s.io/v1/NetworkPolicy", "networking.k8s.io/v1/Ingress",
		"rbac.authorization.k8s.io/v1/Role", "rbac.authorization.k8s.io/v1/RoleBinding",
		"rbac.authorization.k8s.io/v1/ClusterRole", "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
		"policy/v1/PodDisruptionBudget", "apps/v1/Deployment", "apps/v1/ReplicaSet", "batch/v1/Job", "batch/v1/CronJob",
		"storage.k8s.io/v1/StorageClass", "apiextensions.k8s.io/v1/CustomResourceDefinition",
		"coordination.k8s.io/v1/Lease", "discovery.k8s.io/v1/EndpointSlice", "events.k8s.io/v1/Event",
		"example.com/v1/Widget", "gateway.networking.k8s.io/v1/HTTPRoute", "cert-manager.io/v1/Certificate",
		"copy.clusterops.io/v1alpha1/CopyRule", "clusterops.io/v1/Thing",
	}
	cases := map[string]admission{}
	for _, k := range kinds {
		i := strings.LastIndex(k, "/")
		av, kind := k[:i], k[i+1:]
		gv, err := schema.ParseGroupVersion(av)
		if err != nil {
			t.Fatal(err)
		}
		tc := admission{
			reason: "admission agrees with copyrule.Copyable",
			yaml:   fmt.Sprintf(`{apiVersion: copy.clusterops.io/v1alpha1, kind: CopyRule, metadata: {generateName: adm-}, spec: {forProvider: {apiVersion: %q, kind: %s, names: [a], allNamespaces: true}}}`, av, kind),
		}
		if copyrule.Copyable(gv.WithKind(kind)) != nil {
			tc.want = "not copied"
		}
		cases[k] = tc
	}
	admit(t, cases)
}

// ruleOf makes a rule copying the objects of apiVersion and kind named
// names from namespace src into namespaces.
func ruleOf(t *testing.T, src, name, apiVersion, kind string, names []string, namespaces ...string) *copyv1alpha1.CopyRule {
	t.Helper()
	return copyRule(t, src, name, copyv1alpha1.CopyRuleParameters{APIVersion: apiVersion, Kind: kind, Names: names, Namespaces: namespaces})
}

// holds waits until ns/name of gvk exists as a copy whose field at path
// equals want, and returns it.
func holds(t *testing.T, gvk schema.GroupVersionKind, ns, name string, want any, path ...string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	testenv.Eventually(t, wait, fmt.Sprintf("%s %s/%s to hold %v at %v", gvk.Kind, ns, name, want, path), func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u); err != nil {
			return false, err
		}
		if got := at(u.Object, path...); fmt.Sprint(got) != fmt.Sprint(want) {
			return false, fmt.Errorf("%v is %v", path, got)
		}
		return u.GetLabels()[copyrule.LabelRuleUID] != "", nil
	})
	return u
}

// at is the field of v at path, whose numbers index lists; nil when there
// is none.
func at(v any, path ...string) any {
	for _, p := range path {
		switch t := v.(type) {
		case map[string]any:
			v = t[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(t) {
				return nil
			}
			v = t[i]
		default:
			return nil
		}
	}
	return v
}

// TestCopyRuleCopiesBuiltinKinds copies a NetworkPolicy, a Role and its
// RoleBinding, a LimitRange, a ResourceQuota and a ServiceAccount: each copy
// holds its source's content and none of what names the source namespace
// alone, follows its source, and is repaired, as drift naming the field,
// when edited.
func TestCopyRuleCopiesBuiltinKinds(t *testing.T) {
	ctx := context.Background()
	src := env.Namespace(t, "copy-kinds", nil)
	a := env.Namespace(t, "copy-kinds-a", nil)
	tcp := corev1.ProtocolTCP
	env.Create(t,
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "deny-ingress", Labels: map[string]string{"tier": "base"}},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp}}}}}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "config-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "config-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "config-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "developers"}}},
		&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "defaults"},
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Default: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}}}},
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "pods"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("20")}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "builder"},
			Secrets:          []corev1.ObjectReference{{Name: "builder-token"}},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry-pull"}}},
	)
	np := ruleOf(t, src, "policies", "networking.k8s.io/v1", "NetworkPolicy", []string{"deny-ingress"}, a)
	ruleOf(t, src, "roles", "rbac.authorization.k8s.io/v1", "Role", []string{"config-reader"}, a)
	ruleOf(t, src, "bindings", "rbac.authorization.k8s.io/v1", "RoleBinding", []string{"config-reader"}, a)
	ruleOf(t, src, "limits", "v1", "LimitRange", []string{"defaults"}, a)
	ruleOf(t, src, "quotas", "v1", "ResourceQuota", []string{"pods"}, a)
	ruleOf(t, src, "accounts", "v1", "ServiceAccount", []string{"builder"}, a)

	npGVK := networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy")
	cp := holds(t, npGVK, a, "deny-ingress", "[Ingress]", "spec", "policyTypes")
	if cp.GetLabels()["tier"] != "base" || cp.GetAnnotations()[copyrule.AnnotationSource] != src+"/deny-ingress" {
		t.Errorf("the NetworkPolicy copy's metadata: labels %v, annotations %v", cp.GetLabels(), cp.GetAnnotations())
	}
	holds(t, rbacv1.SchemeGroupVersion.WithKind("Role"), a, "config-reader", "[configmaps]", "rules", "0", "resources")
	holds(t, rbacv1.SchemeGroupVersion.WithKind("RoleBinding"), a, "config-reader", "config-reader", "roleRef", "name")
	holds(t, corev1.SchemeGroupVersion.WithKind("LimitRange"), a, "defaults", "256Mi", "spec", "limits", "0", "default", "memory")
	holds(t, corev1.SchemeGroupVersion.WithKind("ResourceQuota"), a, "pods", "20", "spec", "hard", "pods")
	sa := holds(t, corev1.SchemeGroupVersion.WithKind("ServiceAccount"), a, "builder", "registry-pull", "imagePullSecrets", "0", "name")
	if _, has := sa.Object["secrets"]; has {
		t.Errorf("the ServiceAccount copy lists its source's token Secrets: %v", sa.Object["secrets"])
	}
	env.WaitConverged(t, wait, np)

	// The source changes: the copy follows, and that is no drift.
	patch(t, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "deny-ingress"}}, `{"spec":{"policyTypes":["Ingress","Egress"]}}`)
	holds(t, npGVK, a, "deny-ingress", "[Ingress Egress]", "spec", "policyTypes")
	env.WaitConverged(t, wait, np)
	// Someone edits the copy: it is repaired, as drift of that field.
	patch(t, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "deny-ingress"}}, `{"spec":{"policyTypes":["Egress"]}}`)
	holds(t, npGVK, a, "deny-ingress", "[Ingress Egress]", "spec", "policyTypes")
	driftReported(t, np, func() []v1alpha1.Drift { return np.Status.AtProvider.RecentDrift }, drift.Of("NetworkPolicy", a, "deny-ingress", []string{"spec.policyTypes[0]", "spec.policyTypes[1]"}))

	// The rule deleted, its copies go.
	if err := env.Client.Delete(ctx, np); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the NetworkPolicy copy to be deleted", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: a, Name: "deny-ingress"}, &networkingv1.NetworkPolicy{})
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})
}

// patch merge-patches o with p.
func patch(t *testing.T, o client.Object, p string) {
	t.Helper()
	if err := env.Client.Patch(context.Background(), o, client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
		t.Fatal(err)
	}
}

// widgetCRD is a CustomResourceDefinition of kind Widget in group
// example.com, namespaced or cluster-scoped.
func widgetCRD(group, kind string, scope apiextensionsv1.ResourceScope) *apiextensionsv1.CustomResourceDefinition {
	plural := strings.ToLower(kind) + "s"
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}

// unavailable waits until the rule is Ready=False with a message holding want.
func unavailable(t *testing.T, r *copyv1alpha1.CopyRule, want string) {
	t.Helper()
	testenv.Eventually(t, wait, "CopyRule "+r.Name+" unavailable: "+want, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			return false, err
		}
		c := r.GetCondition(xpv2.TypeReady)
		if c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, want) {
			return false, fmt.Errorf("ready: %s %s", c.Status, c.Message)
		}
		return true, nil
	})
}

// TestCopyRuleCopiesCustomResources copies a namespaced custom resource by
// group, version and kind, without its status; a cluster-scoped kind and a
// kind the cluster does not serve are conditions that say so, and the
// latter is copied once its CustomResourceDefinition is installed.
func TestCopyRuleCopiesCustomResources(t *testing.T) {
	ctx := context.Background()
	group := "kinds-" + strings.TrimPrefix(env.Namespace(t, "copy-crd", nil), "copy-crd-") + ".example.com"
	src := env.Namespace(t, "copy-crd-src", nil)
	a := env.Namespace(t, "copy-crd-a", nil)
	dial := widgetCRD(group, "Dial", apiextensionsv1.ClusterScoped)
	env.Create(t, widgetCRD(group, "Widget", apiextensionsv1.NamespaceScoped), dial)
	t.Cleanup(func() { _ = env.Client.Delete(ctx, dial) })

	gvk := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"}
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(gvk)
	w.SetNamespace(src)
	w.SetName("blue")
	w.Object["spec"] = map[string]any{"color": "blue", "size": int64(3)}
	testenv.Eventually(t, wait, "the Widget CRD to serve", func(ctx context.Context) (bool, error) {
		return env.Client.Create(ctx, w) == nil, nil
	})
	if err := unstructured.SetNestedField(w.Object, "Ready", "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}

	r := ruleOf(t, src, "widgets", group+"/v1", "Widget", []string{"blue"}, a)
	cp := holds(t, gvk, a, "blue", "blue", "spec", "color")
	if _, has := cp.Object["status"]; has {
		t.Errorf("the copy holds its source's status: %v", cp.Object["status"])
	}
	env.WaitConverged(t, wait, r)

	dials := ruleOf(t, src, "dials", group+"/v1", "Dial", []string{"x"}, a)
	unavailable(t, dials, "is cluster-scoped: a rule copies namespaced kinds only")

	later := ruleOf(t, src, "gadgets", group+"/v1", "Gadget", []string{"g"}, a)
	unavailable(t, later, "the cluster does not serve kind Gadget")
	gadgets := widgetCRD(group, "Gadget", apiextensionsv1.NamespaceScoped)
	env.Create(t, gadgets)
	g := &unstructured.Unstructured{}
	g.SetGroupVersionKind(gvk.GroupVersion().WithKind("Gadget"))
	g.SetNamespace(src)
	g.SetName("g")
	g.Object["spec"] = map[string]any{"on": true}
	testenv.Eventually(t, wait, "the Gadget CRD to serve", func(ctx context.Context) (bool, error) {
		return env.Client.Create(ctx, g) == nil, nil
	})
	holds(t, g.GroupVersionKind(), a, "g", true, "spec", "on")
}
