package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestAnotherClustersNamespaceIsNotTheTenants: an administrator's
// ClusterProviderConfig for another cluster grants shared-config and denies
// the tenant's namespace name there. A tenant's CopyRule that reads through
// it from the namespace named like its own is refused, naming the config and
// the namespace, and nothing is copied; so is one whose namespace the config
// neither grants nor denies, as on another cluster only a grant reaches a
// namespace. An AppBundle acting through it in its own namespace is refused
// and makes nothing, and its deletion is not held up. The granted namespace
// is read and copied.
func TestAnotherClustersNamespaceIsNotTheTenants(t *testing.T) {
	ctx := context.Background()
	// Restartable stops within seconds though the provider still watches it.
	remote, err := testenv.StartWith(testenv.Options{Restartable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remote.Stop() })
	kc, err := remote.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}

	tenant := env.Namespace(t, "payments", nil)
	other := env.Namespace(t, "apps", nil)
	admin := env.Namespace(t, "reach-admin", nil)
	reachable := map[string]string{"clusterops.io/reachable": "true"}
	dests := map[string]string{}
	for _, name := range []string{"steal", "borrow", "shared"} {
		dests[name] = env.Namespace(t, "reach-"+name, reachable)
	}
	shared := "shared-config"
	cfg := "remote-prod-" + tenant
	// The other cluster has namespaces of the tenants' names, holding what
	// is not theirs.
	for _, ns := range []string{tenant, other, shared} {
		if err := remote.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		if err := remote.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-password"}, Data: map[string][]byte{"password": []byte("s3cr3t")}}); err != nil {
			t.Fatal(err)
		}
	}
	remoteProd := kubeconfigConfig(cfg, admin, "kubeconfigs", "remote", shared)
	remoteProd.Spec.Reach.DeniedNamespaces = []string{tenant, "kube-system"}
	env.Create(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: admin, Name: "kubeconfigs"}, Data: map[string][]byte{"remote": kc}},
		remoteProd,
	)
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: cfg}})
	})

	rule := func(ns, name string, sources ...string) *copyv1alpha1.CopyRule {
		r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{
			Kind:             copyv1alpha1.KindSecret,
			Source:           &copyv1alpha1.CopySource{ProviderConfigRef: copyv1alpha1.SourceProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: cfg}},
			SourceNamespaces: sources,
			Names:            []string{"db-password"},
			Namespaces:       []string{dests[name]},
		}
		return r
	}
	denied, ungranted, granted := rule(tenant, "steal"), rule(other, "borrow"), rule(tenant, "shared", shared)
	env.Create(t, denied, ungranted, granted)

	ab := bundle(tenant, "web")
	ab.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: cfg}
	env.Create(t, ab)

	syncedFalse(t, denied, fmt.Sprintf(`namespace %q is out of reach: ClusterProviderConfig %q denies it`, tenant, cfg))
	syncedFalse(t, ungranted, fmt.Sprintf(`namespace %q is out of reach`, other), fmt.Sprintf("ClusterProviderConfig %q, which is for another cluster", cfg))
	testenv.Eventually(t, wait, "the granted namespace's Secret to be copied", func(ctx context.Context) (bool, error) {
		s := &corev1.Secret{}
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: dests["shared"], Name: "db-password"}, s)
		return err == nil, err
	})
	testenv.Eventually(t, wait, "the AppBundle to be refused", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ab), ab); err != nil {
			return false, err
		}
		s := ab.GetCondition(xpv2.TypeSynced)
		want := fmt.Sprintf(`namespace %q is out of reach: ClusterProviderConfig %q denies it`, tenant, cfg)
		if s.Status != corev1.ConditionFalse || !strings.Contains(s.Message, want) {
			return false, fmt.Errorf("synced: %s %s", s.Status, s.Message)
		}
		return true, nil
	})

	// Nothing crossed: no copy of the refused rules, nothing made for the
	// AppBundle on the other cluster.
	for _, name := range []string{"steal", "borrow"} {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: dests[name], Name: "db-password"}, &corev1.Secret{}); !kerrors.IsNotFound(err) {
			t.Errorf("copy of rule %s in %s: got %v, want NotFound", name, dests[name], err)
		}
	}
	if err := remote.Client.Get(ctx, types.NamespacedName{Namespace: tenant, Name: "web"}, &appsv1.Deployment{}); !kerrors.IsNotFound(err) {
		t.Errorf("Deployment %s/web on the other cluster: got %v, want NotFound", tenant, err)
	}

	if err := env.Client.Delete(ctx, ab); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the refused AppBundle to be deleted", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ab), &workloadv1alpha1.AppBundle{}); !kerrors.IsNotFound(err) {
			return false, fmt.Errorf("get: %w", err)
		}
		return true, nil
	})
}
