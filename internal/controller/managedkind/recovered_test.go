package managedkind

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/clusterops/provider-clusterops/apis"
	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/target"
)

// TestFailedOn: once a remote cluster answers again, the managed resources
// queued are those whose config names it and that failed, as the cache
// holds them; those on another config, and those that did not fail, are not.
func TestFailedOn(t *testing.T) {
	s := runtime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	rule := func(ns, name, kind, config string, synced bool) client.Object {
		r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		r.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: kind, Name: config}
		if synced {
			r.SetConditions(xpv2.ReconcileSuccess())
		} else {
			r.SetConditions(xpv2.ReconcileError(context.DeadlineExceeded))
		}
		return r
	}
	c := fake.NewClientBuilder().WithScheme(s).WithIndex(&copyv1alpha1.CopyRule{}, indexConfig, configKeys).WithObjects(
		rule("a", "failed", apisv1alpha1.ClusterProviderConfigKind, "far", false),
		rule("b", "failed", apisv1alpha1.ClusterProviderConfigKind, "far", false),
		rule("a", "fine", apisv1alpha1.ClusterProviderConfigKind, "far", true),
		rule("a", "elsewhere", apisv1alpha1.ClusterProviderConfigKind, "near", false),
		rule("a", "namespaced", apisv1alpha1.ProviderConfigKind, "far", false),
	).Build()

	far := target.ConfigKey(rule("", "", apisv1alpha1.ClusterProviderConfigKind, "far", true).(*copyv1alpha1.CopyRule))
	got := failedOn(context.Background(), c, &copyv1alpha1.CopyRuleList{}, far)
	slices.SortFunc(got, func(a, b reconcile.Request) int { return strings.Compare(a.String(), b.String()) })
	want := []reconcile.Request{
		{NamespacedName: types.NamespacedName{Namespace: "a", Name: "failed"}},
		{NamespacedName: types.NamespacedName{Namespace: "b", Name: "failed"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("failedOn(ClusterProviderConfig far): -want, +got:\n%s", diff)
	}
	// A ProviderConfig is its namespace's: the same name elsewhere is
	// another config.
	inA := target.ConfigKey(rule("a", "", apisv1alpha1.ProviderConfigKind, "far", true).(*copyv1alpha1.CopyRule))
	if got := failedOn(context.Background(), c, &copyv1alpha1.CopyRuleList{}, inA); len(got) != 1 || got[0].Name != "namespaced" {
		t.Errorf("failedOn(ProviderConfig far in a) = %v, want a/namespaced", got)
	}
}
