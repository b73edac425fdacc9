package integration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestCopyRuleOnRemoteCluster points a CopyRule at a second API server through
// a kubeconfig Secret: it reads and writes there, and hears of changes there
// through its watches (the poll interval is an hour).
func TestCopyRuleOnRemoteCluster(t *testing.T) {
	ctx := context.Background()
	remote, err := testenv.Start(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remote.Stop() })
	kc, err := remote.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}

	// The rule lives in the control plane; its source namespace (its own
	// namespace's name) and its target exist on the remote cluster only.
	home := env.Namespace(t, "copy-home", nil)
	cpc := "remote-" + home
	remoteConfig(t, home, cpc, kc)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: home}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "far-away"}},
		configMap(home, "conf", map[string]string{"k": "v1"}, nil),
	} {
		if err := remote.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "remote"}}
	r.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: cpc}
	r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{"conf"}, Namespaces: []string{"far-away"}, ConflictPolicy: copyv1alpha1.ConflictSkip, MaxParallelWrites: 4}
	env.Create(t, r)

	holds := func(v string) {
		t.Helper()
		testenv.Eventually(t, wait, "the copy on the remote cluster to hold "+v, func(ctx context.Context) (bool, error) {
			cm := &corev1.ConfigMap{}
			err := remote.Client.Get(ctx, types.NamespacedName{Namespace: "far-away", Name: "conf"}, cm)
			return err == nil && cm.Data["k"] == v, err
		})
	}
	holds("v1")
	src := &corev1.ConfigMap{}
	if err := remote.Client.Get(ctx, types.NamespacedName{Namespace: home, Name: "conf"}, src); err != nil {
		t.Fatal(err)
	}
	src.Data["k"] = "v2"
	if err := remote.Client.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	holds("v2")
	// Nothing was written into the control plane's namespaces.
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: home, Name: "conf"}, &corev1.ConfigMap{}); err == nil {
		t.Error("the rule wrote into the control plane instead of the remote cluster")
	}
	// Deleting the rule deletes the remote copy, and stops the rule's watches
	// there (or the remote API server would wait for them when it stops).
	if err := env.Client.Delete(ctx, r); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the remote copy to be deleted", func(ctx context.Context) (bool, error) {
		err := remote.Client.Get(ctx, types.NamespacedName{Namespace: "far-away", Name: "conf"}, &corev1.ConfigMap{})
		return kerrors.IsNotFound(err), nil
	})
	testenv.Eventually(t, wait, "the rule to be gone", func(ctx context.Context) (bool, error) {
		return kerrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(r), r)), nil
	})
}

// remoteConfig makes ClusterProviderConfig cpc, which reaches the far-*
// namespaces and the one named home of the cluster kubeconfig kc describes
// (on another cluster a namespace named like the managed resource's is
// reached only through a grant), from a Secret in namespace home, and
// deletes it when the test ends.
func remoteConfig(t *testing.T, home, cpc string, kc []byte) {
	t.Helper()
	env.Create(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "remote-kubeconfig"}, Data: map[string][]byte{"kubeconfig": kc}},
		&v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: cpc}, Spec: v1alpha1.ClusterProviderConfigSpec{
			Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceSecret, SecretRef: &xpv2.SecretKeySelector{SecretReference: xpv2.SecretReference{Name: "remote-kubeconfig", Namespace: home}, Key: "kubeconfig"}},
			Reach:       &v1alpha1.Reach{Namespaces: []string{"far-*", home}},
		}})
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: cpc}})
	})
}
