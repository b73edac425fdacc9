package fight

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// blastConfig reaches blast-* but denies blast-denied-*, and the system
// namespaces by default.
const blastConfig = "blast"

// A blastCluster is a cluster of many namespaces, each with pods,
// a Deployment and ConfigMaps, and a ChaosAgent that targets all of them by name.
type blastCluster struct {
	home    string
	allowed []string // home and the reachable, targeted, not excluded namespaces
	spared  []string // every other namespace with victims
	targets []string // what the agent names: all of them
}

// newBlastCluster creates 31 namespaces and their victims: the agent's own,
// 10 it may act in, and 20 it must not touch although it names every one of
// them: excluded by the agent, denied by the config, out of the config's
// reach, not named at all, and the system namespaces and the provider's own.
func newBlastCluster(t *testing.T) *blastCluster {
	t.Helper()
	env.Create(t, &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: blastConfig},
		Spec: v1alpha1.ClusterProviderConfigSpec{
			Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity},
			Reach: &v1alpha1.Reach{
				Namespaces:       []string{"blast-*"},
				DeniedNamespaces: []string{"blast-denied-*", "kube-system", "kube-public", "kube-node-lease"},
			},
		},
	})
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: blastConfig}})
	})
	c := &blastCluster{home: env.Namespace(t, "blast-home", nil)}
	c.allowed = append(c.allowed, c.home)
	for range 10 {
		c.allowed = append(c.allowed, env.Namespace(t, "blast-t", nil))
	}
	var untargeted []string
	for range 4 {
		c.spared = append(c.spared,
			env.Namespace(t, "blast-excl", nil),
			env.Namespace(t, "blast-denied", nil),
			env.Namespace(t, "far", nil))
		untargeted = append(untargeted, env.Namespace(t, "blast-u", nil))
	}
	system := []string{"kube-system", "kube-public", "kube-node-lease", testenv.ProviderNamespace}
	for _, ns := range system {
		// The API server makes the kube-* ones in its first seconds; the provider's is ours to make.
		if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !kerrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	c.targets = append(slices.Clone(c.allowed), c.spared...)
	c.targets = append(c.targets, system...)
	c.spared = append(append(c.spared, untargeted...), system...)
	for _, ns := range append(slices.Clone(c.allowed), c.spared...) {
		victims(t, ns)
	}
	return c
}

// victims fills a namespace with two running pods, a Deployment and two
// ConfigMaps, and removes them when the test ends (envtest runs no namespace
// controller, and the system namespaces stay).
func victims(t *testing.T, ns string) {
	t.Helper()
	objs := []client.Object{
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
				},
			},
		},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"k": "v"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "more", Namespace: ns}, Data: map[string]string{"k": "v"}},
	}
	for _, name := range []string{"a", "b"} {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
		}
		env.Create(t, p)
		// Running and Ready, as a kubelet would report: what the Eviction API
		// weighs against disruption budgets.
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if err := env.Client.Status().Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, p)
	}
	env.Create(t, objs[:3]...)
	t.Cleanup(func() {
		for _, o := range objs {
			_ = env.Client.Delete(context.Background(), o, client.GracePeriodSeconds(0))
		}
	})
}

// snapshot records the resource version of every pod, Deployment and
// ConfigMap in the namespaces: equal snapshots mean nothing was written.
func snapshot(t *testing.T, namespaces []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ns := range namespaces {
		pods, deploys, cms := &corev1.PodList{}, &appsv1.DeploymentList{}, &corev1.ConfigMapList{}
		for _, l := range []client.ObjectList{pods, deploys, cms} {
			if err := env.Client.List(context.Background(), l, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range pods.Items {
			out[ns+"/pod/"+p.Name] = p.ResourceVersion
		}
		for _, d := range deploys.Items {
			out[ns+"/deployment/"+d.Name] = d.ResourceVersion
		}
		for _, c := range cms.Items {
			out[ns+"/configmap/"+c.Name] = c.ResourceVersion
		}
	}
	return out
}

// namespaceOf is the namespace a write's path names, or "" for a
// cluster-scoped one: "POST /api/v1/namespaces/x/pods/a/eviction" is in x.
func namespaceOf(write string) string {
	_, rest, ok := strings.Cut(write, "/namespaces/")
	if !ok {
		return ""
	}
	ns, _, _ := strings.Cut(rest, "/")
	return ns
}

// outside returns the writes since n that went to a namespace of blast
// cluster c other than the allowed ones, or to no namespace at all. Writes to
// other tests' namespaces are not this agent's business.
func (c *blastCluster) outside(n int) []string {
	var out []string
	for _, w := range writesSince(n) {
		ns := namespaceOf(w)
		if ns == "" || slices.Contains(c.spared, ns) {
			out = append(out, w)
		}
	}
	return out
}

// inCluster returns the writes since n that went to any namespace of c, or
// to no namespace.
func (c *blastCluster) inCluster(n int) []string {
	var out []string
	for _, w := range writesSince(n) {
		if ns := namespaceOf(w); ns == "" || slices.Contains(c.allowed, ns) || slices.Contains(c.spared, ns) {
			out = append(out, w)
		}
	}
	return out
}

func blastAgent(c *blastCluster, name string, mod func(ca *chaosv1alpha1.ChaosAgent)) *chaosv1alpha1.ChaosAgent {
	ca := &chaosv1alpha1.ChaosAgent{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.home, Name: name},
		Spec: chaosv1alpha1.ChaosAgentSpec{ForProvider: chaosv1alpha1.ChaosAgentParameters{
			TantrumMode: true, CancerMode: true, IpsumMode: true, MaxReplicas: 8,
			Eagerness: 100, Interval: metav1.Duration{Duration: time.Second}, MaxActionsPerRound: 10,
			Namespaces: c.targets, ExcludedNamespaces: []string{"blast-excl-*"}, Seed: ptr.To[int64](7),
		}},
	}
	ca.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: blastConfig}
	mod(ca)
	return ca
}

// rounds waits until agent ca has run at least n rounds.
func rounds(t *testing.T, ca *chaosv1alpha1.ChaosAgent, n int64) {
	t.Helper()
	testenv.Eventually(t, 3*time.Minute, "ChaosAgent "+ca.Name+" to run its rounds", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca)
		return ca.Status.AtProvider.RoundsRun >= n, err
	})
}

// deleteAgent deletes an agent and waits until it is gone, reverted.
func deleteAgent(t *testing.T, ca *chaosv1alpha1.ChaosAgent) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), ca); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "ChaosAgent "+ca.Name+" to be deleted", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), &chaosv1alpha1.ChaosAgent{})
		return kerrors.IsNotFound(err), nil
	})
}

func TestChaosBlastRadius(t *testing.T) {
	c := newBlastCluster(t)
	before := snapshot(t, c.spared)

	n := mark()
	ca := blastAgent(c, "havoc", func(*chaosv1alpha1.ChaosAgent) {})
	env.Create(t, ca)
	rounds(t, ca, 20)
	o := ca.Status.AtProvider
	t.Logf("%d rounds: %d pods killed, %d Deployments scaled, %d ConfigMaps rewritten, %d provider writes", o.RoundsRun, o.PodsKilled, o.DeploymentsScaled, o.ConfigMapsRewritten, len(writesSince(n)))

	// It did act, in every mode: the rest of the test is not vacuous.
	if o.PodsKilled == 0 || o.DeploymentsScaled == 0 || o.ConfigMapsRewritten == 0 {
		t.Errorf("counters after %d rounds = killed %d, scaled %d, rewritten %d: want every mode to have acted", o.RoundsRun, o.PodsKilled, o.DeploymentsScaled, o.ConfigMapsRewritten)
	}
	for _, kind := range []string{"/eviction", "/deployments/", "/configmaps/"} {
		if len(writesSince(n, kind)) == 0 {
			t.Errorf("no write to %s in the request log", kind)
		}
	}
	want := slices.Sorted(slices.Values(c.allowed))
	if diff := cmp.Diff(want, slices.Sorted(slices.Values(o.TargetNamespaces))); diff != "" {
		t.Errorf("targetNamespaces: -want, +got:\n%s", diff)
	}
	for _, a := range o.RecentActions {
		if !slices.Contains(c.allowed, a.Namespace) {
			t.Errorf("recent action %s %s/%s is outside the allowed namespaces", a.Action, a.Namespace, a.Name)
		}
	}

	// Deleting it reverts what it did, in the same namespaces.
	deleteAgent(t, ca)
	if w := c.outside(n); len(w) > 0 {
		t.Errorf("%d writes outside the allowed namespaces: %v", len(w), w)
	}
	if diff := cmp.Diff(before, snapshot(t, c.spared)); diff != "" {
		t.Errorf("objects outside the allowed namespaces changed: -before, +after:\n%s", diff)
	}

	// An agent that only pretends, and one that may only observe: not one
	// write, in any namespace, whatever they name, through their deletion.
	modes := map[string]func(ca *chaosv1alpha1.ChaosAgent){
		"dry-run": func(ca *chaosv1alpha1.ChaosAgent) { ca.Spec.ForProvider.DryRun = true },
		"observe-only": func(ca *chaosv1alpha1.ChaosAgent) {
			ca.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
		},
	}
	all := append(slices.Clone(c.allowed), c.spared...)
	for name, mod := range modes {
		t.Run(name, func(t *testing.T) {
			before := snapshot(t, all)
			n := mark()
			ca := blastAgent(c, name, mod)
			env.Create(t, ca)
			rounds(t, ca, 5)
			if len(ca.Status.AtProvider.RecentActions) == 0 {
				t.Errorf("recentActions is empty: want the actions it would have taken")
			}
			deleteAgent(t, ca)
			if w := c.inCluster(n); len(w) > 0 {
				t.Errorf("%d writes: %v", len(w), w)
			}
			if diff := cmp.Diff(before, snapshot(t, all)); diff != "" {
				t.Errorf("objects changed: -before, +after:\n%s", diff)
			}
		})
	}
}
