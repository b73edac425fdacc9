package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// deadKubeconfig is kubeconfig kc pointed at a loopback port nobody listens on.
func deadKubeconfig(t *testing.T, kc []byte) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(kc)
	if err != nil {
		t.Fatal(err)
	}
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = fmt.Sprintf("https://127.0.0.1:%d", port)
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kubeconfigConfig is a ClusterProviderConfig that reaches the cluster of
// key of Secret ns/secret within namespaces.
func kubeconfigConfig(name, ns, secret, key string, namespaces ...string) *v1alpha1.ClusterProviderConfig {
	return &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterProviderConfigSpec{
		Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceSecret, SecretRef: &xpv2.SecretKeySelector{SecretReference: xpv2.SecretReference{Name: secret, Namespace: ns}, Key: key}},
		Reach:       &v1alpha1.Reach{Namespaces: namespaces},
	}}
}

// syncedFalse waits until the rule's Synced condition is False with a
// message containing all of parts.
func syncedFalse(t *testing.T, r *copyv1alpha1.CopyRule, parts ...string) {
	t.Helper()
	testenv.Eventually(t, wait, fmt.Sprintf("CopyRule %s to be Synced=False saying %q", r.Name, parts), func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			return false, err
		}
		s := r.GetCondition(xpv2.TypeSynced)
		if s.Status != corev1.ConditionFalse {
			return false, fmt.Errorf("synced: %s %s", s.Status, s.Message)
		}
		for _, p := range parts {
			if !strings.Contains(s.Message, p) {
				return false, fmt.Errorf("synced: %s", s.Message)
			}
		}
		t.Logf("Synced=False: %s", s.Message)
		return true, nil
	})
}

// TestCopyRuleAcrossClusters reads the sources on one cluster (here the
// control plane, through a kubeconfig Secret) and writes the copies on another
// (a second API server), each side through its own ClusterProviderConfig and
// within its reach. A target cluster that goes down is Synced=False naming it,
// and the copies are brought up to date once it is back; a source cluster that
// cannot be reached is Synced=False too, and no copy is deleted; nothing is
// ever written on the source side.
func TestCopyRuleAcrossClusters(t *testing.T) {
	ctx := context.Background()
	remote, err := testenv.StartWith(testenv.Options{Restartable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remote.Stop() })
	targetKC, err := remote.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	sourceKC, err := env.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}

	home := env.Namespace(t, "copy-xc", nil)
	src := env.Namespace(t, "copy-xsrc", nil)
	srcCfg, dstCfg := "xc-source-"+home, "xc-target-"+home
	env.Create(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "kubeconfigs"}, Data: map[string][]byte{
			"source": sourceKC, "target": targetKC, "dead": deadKubeconfig(t, sourceKC),
		}},
		// The source side may read src only; the target side may write into
		// xc-* and into a namespace named like src, which on the target
		// cluster is another namespace.
		kubeconfigConfig(srcCfg, home, "kubeconfigs", "source", src),
		kubeconfigConfig(dstCfg, home, "kubeconfigs", "target", "xc-*", src),
		configMap(src, "conf", map[string]string{"k": "v1"}, nil),
	)
	t.Cleanup(func() {
		for _, n := range []string{srcCfg, dstCfg} {
			_ = env.Client.Delete(ctx, &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
	})
	for _, ns := range []string{"xc-team", src} {
		if err := remote.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}

	r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "across"}}
	r.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: dstCfg}
	r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{
		Kind:             copyv1alpha1.KindConfigMap,
		Source:           &copyv1alpha1.CopySource{ProviderConfigRef: copyv1alpha1.SourceProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: srcCfg}},
		SourceNamespaces: []string{src},
		Names:            []string{"conf"},
		Namespaces:       []string{"xc-team", src},
		ConflictPolicy:   copyv1alpha1.ConflictSkip, MaxParallelWrites: 4,
	}
	env.Create(t, r)

	holds := func(v string, timeout time.Duration) {
		t.Helper()
		for _, ns := range []string{"xc-team", src} {
			testenv.Eventually(t, timeout, fmt.Sprintf("the copy in %s on the target cluster to hold %s", ns, v), func(ctx context.Context) (bool, error) {
				cm := &corev1.ConfigMap{}
				err := remote.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "conf"}, cm)
				if err == nil && cm.Annotations["copy.clusterops.io/source"] != src+"/conf" {
					return false, fmt.Errorf("the copy records source %q", cm.Annotations["copy.clusterops.io/source"])
				}
				return err == nil && cm.Data["k"] == v, err
			})
		}
	}
	setSource := func(v string) {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: src, Name: "conf"}, cm); err != nil {
			t.Fatal(err)
		}
		cm.Data["k"] = v
		if err := env.Client.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	holds("v1", wait)
	env.WaitConverged(t, wait, r)
	// The source config is in use by the rule, as the target config is.
	u := &v1alpha1.ProviderConfigUsage{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: home, Name: string(r.UID) + "-source"}, u); err != nil || u.ProviderConfigReference.Name != srcCfg {
		t.Errorf("no usage of the source config %s: %v %+v", srcCfg, err, u.ProviderConfigReference)
	}

	// A change on the source cluster reaches the target through the source
	// watch (the poll interval is an hour).
	setSource("v2")
	holds("v2", wait)

	// The target cluster goes down: a change of the source meets it, and the
	// rule says so; once it is back, the copies catch up.
	if err := remote.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	setSource("v3")
	// The target is the rule's own config: Connect finds it unreachable.
	syncedFalse(t, r, "unreachable since", dstCfg)
	if err := remote.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	// The rule retries with backoff: allow for a few of its steps.
	holds("v3", 2*wait)
	env.WaitConverged(t, wait, r)

	// The source cluster cannot be reached (its config now points at a port
	// nobody listens on): Synced=False naming the source side, and no copy is
	// deleted for want of sources.
	cpc := &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: srcCfg}}
	env.Update(t, cpc, func() { cpc.Spec.Credentials.SecretRef.Key = "dead" })
	poke := func(v string) {
		t.Helper()
		// A label change reconciles the rule at once.
		env.Update(t, r, func() { r.SetLabels(map[string]string{"poke": v}) })
	}
	poke("1")
	syncedFalse(t, r, "source cluster", srcCfg)
	holds("v3", wait)
	env.Update(t, cpc, func() { cpc.Spec.Credentials.SecretRef.Key = "source" })
	poke("2")
	env.WaitConverged(t, wait, r)

	// Nothing was ever written on the source side: the source is at the
	// version the test wrote, and no copy of the rule is there.
	own := &corev1.ConfigMapList{}
	if err := env.Client.List(ctx, own, client.MatchingLabels{"copy.clusterops.io/rule-uid": string(r.UID)}); err != nil {
		t.Fatal(err)
	}
	if n := len(own.Items); n > 0 {
		t.Errorf("the rule wrote %d copies on the source cluster", n)
	}
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: src, Name: "conf"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["k"] != "v3" || len(cm.Annotations) > 0 || len(cm.Labels) > 0 {
		t.Errorf("the source was changed: data %v, labels %v, annotations %v", cm.Data, cm.Labels, cm.Annotations)
	}

	// Deleting the rule deletes the copies on the target cluster only.
	if err := env.Client.Delete(ctx, r); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"xc-team", src} {
		testenv.Eventually(t, wait, "the copy in "+ns+" to be deleted", func(ctx context.Context) (bool, error) {
			err := remote.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "conf"}, &corev1.ConfigMap{})
			return kerrors.IsNotFound(err), nil
		})
	}
	testenv.Eventually(t, wait, "the rule to be gone", func(ctx context.Context) (bool, error) {
		return kerrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(r), r)), nil
	})
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: src, Name: "conf"}, cm); err != nil {
		t.Errorf("the source is gone after the rule: %v", err)
	}

	t.Run("Example", func(t *testing.T) { crossClusterExample(t, remote, targetKC) })
}

// crossClusterExample applies examples/copy/cross-cluster.yaml, which
// TestEveryExampleAppliesAsWritten leaves out, with a real workload cluster (remote) behind
// the kubeconfig Secret it names, and waits for its copy there.
func crossClusterExample(t *testing.T, remote *testenv.Env, kc []byte) {
	ctx := context.Background()
	dir := filepath.Join(testenv.RepoRoot(), "examples", "copy")
	// The source the example copies, from the example that makes it; its
	// same-cluster rule is not needed here.
	objs, err := testenv.ReadObjects(filepath.Join(dir, "registry-pull-secret.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetKind() == "CopyRule" {
			continue
		}
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("examples"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "workload-kubeconfig"}, Data: map[string][]byte{"kubeconfig": kc}}
	if err := env.Client.Create(ctx, s); err != nil && !kerrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := remote.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-payments"}}); err != nil {
		t.Fatal(err)
	}
	applied, err := testenv.ApplyFile(ctx, env.Client, filepath.Join(dir, "cross-cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the example's copy on the workload cluster", func(ctx context.Context) (bool, error) {
		c := &corev1.Secret{}
		err := remote.Client.Get(ctx, types.NamespacedName{Namespace: "team-payments", Name: "registry-pull"}, c)
		return err == nil && c.Annotations["copy.clusterops.io/source"] == "platform/registry-pull", err
	})
	// The rule goes before the workload cluster does, and its configs after it.
	r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "registry-pull-to-workload"}}
	if err := env.Client.Delete(ctx, r); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the example rule to be gone", func(ctx context.Context) (bool, error) {
		return kerrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(r), r)), nil
	})
	for _, u := range applied {
		if u.GetKind() == "ClusterProviderConfig" {
			_ = env.Client.Delete(ctx, u)
		}
	}
}
