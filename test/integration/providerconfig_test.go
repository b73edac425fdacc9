package integration

import (
	"context"
	"testing"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestConfigInUseCannotBeDeleted deletes a ClusterProviderConfig that a managed
// resource uses: the config stays, says why, and goes once it is unused.
func TestConfigInUseCannotBeDeleted(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "in-use", nil)
	cpc := &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "in-use-" + ns},
		Spec:       v1alpha1.ClusterProviderConfigSpec{Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity}},
	}
	ic := &workloadv1alpha1.ImmortalContainer{
		ObjectMeta: metav1.ObjectMeta{Name: "user", Namespace: ns},
		Spec: workloadv1alpha1.ImmortalContainerSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: cpc.Name}},
			ForProvider:         workloadv1alpha1.ImmortalContainerParameters{Image: "nginx"},
		},
	}
	for _, o := range []client.Object{cpc, ic} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, wait, "the config to count one user", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Name: cpc.Name}, cpc)
		return cpc.Status.Users == 1, err
	})

	if err := env.Client.Delete(ctx, cpc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the config to report that it is in use", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Name: cpc.Name}, cpc)
		c := cpc.GetCondition("Terminating")
		return c.Reason == "InUse" && c.Message == "Blocking deletion while usages still exist", err
	})

	if err := env.Client.Delete(ctx, ic); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the managed resource to be gone", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ic.Name}, ic)
		return kerrors.IsNotFound(err), nil
	})
	// envtest runs no garbage collector: remove the usage the way the collector
	// would once its owner, the managed resource, is gone.
	if err := env.Client.DeleteAllOf(ctx, &v1alpha1.ProviderConfigUsage{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the unused config to be deleted", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Name: cpc.Name}, cpc)
		return kerrors.IsNotFound(err), nil
	})
}

// TestMissingConfigIsReported points a managed resource at a config that does
// not exist: it says so in its Synced condition.
func TestMissingConfigIsReported(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "missing-config", nil)
	ic := &workloadv1alpha1.ImmortalContainer{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: ns},
		Spec: workloadv1alpha1.ImmortalContainerSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "absent"}},
			ForProvider:         workloadv1alpha1.ImmortalContainerParameters{Image: "nginx"},
		},
	}
	if err := env.Client.Create(ctx, ic); err != nil {
		t.Fatal(err)
	}
	want := `connect failed: ProviderConfig "absent" in namespace "` + ns + `" does not exist: create it, or point spec.providerConfigRef at one that does`
	testenv.Eventually(t, wait, "a Synced=False condition naming the missing config", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ic.Name}, ic)
		c := ic.GetCondition(xpv2.TypeSynced)
		return c.Status == "False" && c.Message == want, err
	})
}
