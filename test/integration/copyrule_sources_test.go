package integration

import (
	"context"
	"fmt"
	"strings"
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

// sourceConflict waits until the rule reports (want) or no longer reports a
// conflict between source namespaces over copy name, and returns the rule.
func sourceConflict(t *testing.T, r *copyv1alpha1.CopyRule, name string, want bool) {
	t.Helper()
	testenv.Eventually(t, wait, fmt.Sprintf("CopyRule %s to report a source conflict over %q: %t", r.Name, name, want), func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			return false, err
		}
		for _, p := range r.Status.AtProvider.Problems {
			if p.Reason == copyv1alpha1.ProblemSourceConflict && p.Name == name {
				return want, nil
			}
		}
		return !want, nil
	})
}

// TestCopyRuleSourceNamespaces copies from two source namespaces: each copy
// records the namespace it came from; a name both hold is a reported conflict
// (status and a Warning event) whose copies are left as they are; and it
// resolves itself once one of the two goes.
func TestCopyRuleSourceNamespaces(t *testing.T) {
	ctx := context.Background()
	home := env.Namespace(t, "copy-rules", nil)
	a := env.Namespace(t, "copy-srca", nil)
	b := env.Namespace(t, "copy-srcb", nil)
	dst := env.Namespace(t, "copy-dst", nil)
	share := map[string]string{"share": "yes"}
	env.Create(t, configMap(a, "from-a", map[string]string{"k": "a"}, share), configMap(b, "from-b", map[string]string{"k": "b"}, share))
	r := copyRule(t, home, "two-sources", copyv1alpha1.CopyRuleParameters{
		Kind: copyv1alpha1.KindConfigMap, SourceNamespaces: []string{a, b},
		Selector: &metav1.LabelSelector{MatchLabels: share}, Namespaces: []string{dst},
	})

	// Each source is copied, and its copy names the namespace it came from.
	for _, c := range []struct{ ns, name, v string }{{a, "from-a", "a"}, {b, "from-b", "b"}} {
		cm := copyHolds(t, dst, c.name, map[string]string{"k": c.v})
		if got := cm.Annotations["copy.clusterops.io/source"]; got != c.ns+"/"+c.name {
			t.Errorf("copy %s records source %q, want %q", c.name, got, c.ns+"/"+c.name)
		}
	}
	env.WaitConverged(t, wait, r)
	if r.Status.AtProvider.Sources != 2 {
		t.Errorf("status.atProvider.sources = %d, want 2", r.Status.AtProvider.Sources)
	}

	// b gets an object named like a's: a conflict, reported with a Warning,
	// and the copy made from a before stays as it is.
	env.Create(t, configMap(b, "from-a", map[string]string{"k": "b-impostor"}, share))
	sourceConflict(t, r, "from-a", true)
	eventFor(t, home, r.Name, "SourceConflict")
	if c := r.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionFalse {
		t.Errorf("Ready is %s during a source conflict, want False", c.Status)
	}
	// a's source changes: the rule reads it (observedSources follows) but
	// writes no winner.
	src := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: a, Name: "from-a"}, src); err != nil {
		t.Fatal(err)
	}
	src.Data["k"] = "a2"
	if err := env.Client.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the rule to have read the changed source", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			return false, err
		}
		for _, o := range r.Status.AtProvider.ObservedSources {
			if o.Namespace == a && o.Name == "from-a" {
				return o.ResourceVersion == src.ResourceVersion, nil
			}
		}
		return false, nil
	})
	copyHolds(t, dst, "from-a", map[string]string{"k": "a"})
	copyHolds(t, dst, "from-b", map[string]string{"k": "b"})

	// a's goes: the conflict resolves itself, and the copy follows b's,
	// recording its new source.
	if err := env.Client.Delete(ctx, src); err != nil {
		t.Fatal(err)
	}
	sourceConflict(t, r, "from-a", false)
	cm := copyHolds(t, dst, "from-a", map[string]string{"k": "b-impostor"})
	if got := cm.Annotations["copy.clusterops.io/source"]; got != b+"/from-a" {
		t.Errorf("copy from-a records source %q after the conflict, want %q", got, b+"/from-a")
	}
	env.WaitConverged(t, wait, r)
}

// TestCopyRuleSourceNamespaceOutOfReach: one source namespace beyond the
// config's reach fails the whole rule, named in its conditions, and nothing
// is copied, not even from the namespaces within reach.
func TestCopyRuleSourceNamespaceOutOfReach(t *testing.T) {
	home := env.Namespace(t, "copy-rules", nil)
	a := env.Namespace(t, "copy-srca", nil)
	far := env.Namespace(t, "elsewhere", nil)
	dst := env.Namespace(t, "copy-dst", nil)
	env.Create(t, configMap(a, "conf", map[string]string{"k": "v"}, nil))
	r := copyRule(t, home, "far-source", copyv1alpha1.CopyRuleParameters{
		Kind: copyv1alpha1.KindConfigMap, SourceNamespaces: []string{a, far}, Names: []string{"conf"}, Namespaces: []string{dst},
	})
	testenv.Eventually(t, wait, "the rule to name the source namespace out of reach", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			return false, err
		}
		s := r.GetCondition(xpv2.TypeSynced)
		return s.Status == corev1.ConditionFalse && strings.Contains(s.Message, far), nil
	})
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: dst, Name: "conf"}, &corev1.ConfigMap{}); err == nil {
		t.Errorf("the rule copied from %s although %s is out of reach", a, far)
	}
}

// TestCopyRuleCopyNameSeveralSources: copyName gives every source one copy
// name, so the source of the one name in each of two source namespaces would
// both write it. That is a reported conflict, never a silent winner: the copy
// made while one namespace held the source stays as it is, and follows the
// other once the first source goes.
func TestCopyRuleCopyNameSeveralSources(t *testing.T) {
	ctx := context.Background()
	home := env.Namespace(t, "copy-rules", nil)
	a := env.Namespace(t, "copy-srca", nil)
	b := env.Namespace(t, "copy-srcb", nil)
	dst := env.Namespace(t, "copy-dst", nil)
	env.Create(t, configMap(a, "conf", map[string]string{"k": "a"}, nil))
	r := copyRule(t, home, "one-name", copyv1alpha1.CopyRuleParameters{
		Kind: copyv1alpha1.KindConfigMap, SourceNamespaces: []string{a, b},
		Names: []string{"conf"}, CopyName: "app-conf", Namespaces: []string{dst},
	})
	copyHolds(t, dst, "app-conf", map[string]string{"k": "a"})
	env.WaitConverged(t, wait, r)

	fromB := configMap(b, "conf", map[string]string{"k": "b"}, nil)
	env.Create(t, fromB)
	sourceConflict(t, r, "app-conf", true)
	eventFor(t, home, r.Name, "SourceConflict")
	copyHolds(t, dst, "app-conf", map[string]string{"k": "a"})

	if err := env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "conf"}}); err != nil {
		t.Fatal(err)
	}
	sourceConflict(t, r, "app-conf", false)
	cm := copyHolds(t, dst, "app-conf", map[string]string{"k": "b"})
	if got := cm.Annotations["copy.clusterops.io/source"]; got != b+"/conf" {
		t.Errorf("copy app-conf records source %q, want %q", got, b+"/conf")
	}
	env.WaitConverged(t, wait, r)
}

// TestCopyRuleSourceConfig reads the sources through a config of their own on
// the cluster of the copies: that config's reach bounds what is read (not the
// target config's, which would allow more), the rule holds a usage of it, and
// once the rule no longer names it the usage goes and the config can be
// deleted, while the copies stay.
func TestCopyRuleSourceConfig(t *testing.T) {
	ctx := context.Background()
	home := env.Namespace(t, "copy-rules", nil)
	a := env.Namespace(t, "copy-srca", nil)
	// Within the target config's reach (copy-*), not within the source's.
	b := env.Namespace(t, "copy-srcb", nil)
	dst := env.Namespace(t, "copy-dst", nil)
	srcCfg := "copy-source-" + home
	cfg := &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: srcCfg},
		Spec: v1alpha1.ClusterProviderConfigSpec{
			Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity},
			Reach:       &v1alpha1.Reach{Namespaces: []string{a}},
		},
	}
	env.Create(t, cfg, configMap(a, "conf", map[string]string{"k": "a"}, nil))
	t.Cleanup(func() { _ = env.Client.Delete(ctx, cfg) })

	r := copyRule(t, home, "read-through", copyv1alpha1.CopyRuleParameters{
		Kind:             copyv1alpha1.KindConfigMap,
		Source:           &copyv1alpha1.CopySource{ProviderConfigRef: copyv1alpha1.SourceProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: srcCfg}},
		SourceNamespaces: []string{a, b}, Names: []string{"conf"}, Namespaces: []string{dst},
	})
	syncedFalse(t, r, b, srcCfg)
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: dst, Name: "conf"}, &corev1.ConfigMap{}); err == nil {
		t.Errorf("the rule copied from %s although %s is out of its source config's reach", a, b)
	}

	patchRule(t, r, `{"sourceNamespaces":["`+a+`"]}`)
	copyHolds(t, dst, "conf", map[string]string{"k": "a"})
	env.WaitConverged(t, wait, r)
	usage := types.NamespacedName{Namespace: home, Name: string(r.UID) + "-source"}
	u := &v1alpha1.ProviderConfigUsage{}
	if err := env.Client.Get(ctx, usage, u); err != nil || u.ProviderConfigReference.Name != srcCfg {
		t.Fatalf("no usage of the source config %s: %v %+v", srcCfg, err, u.ProviderConfigReference)
	}

	// The rule reads through its own config from now on: the usage goes,
	// the copy stays, and the config can be deleted.
	patchRule(t, r, `{"source":null}`)
	testenv.Eventually(t, wait, "the usage of the source config to be deleted", func(ctx context.Context) (bool, error) {
		return kerrors.IsNotFound(env.Client.Get(ctx, usage, &v1alpha1.ProviderConfigUsage{})), nil
	})
	env.WaitConverged(t, wait, r)
	copyHolds(t, dst, "conf", map[string]string{"k": "a"})
	if err := env.Client.Delete(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the source config to be deleted", func(ctx context.Context) (bool, error) {
		return kerrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), &v1alpha1.ClusterProviderConfig{})), nil
	})
}
