package process

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/controller/immortalcontainer"
)

const (
	// recovery bounds how long the provider takes to act again once its API
	// server is back: client-go's watches back off while it is away.
	recovery = time.Minute
	// atOnce is how soon a change is acted on once the provider has recovered:
	// on the watch event, where the next poll is an hour away.
	atOnce = 10 * time.Second
)

// TestProviderRecoversFromAPIServerRestart runs managed resources of every
// kind, restarts the API server (same port, certificate and etcd) under the
// provider, and checks that the same provider process acts on changes made
// after the restart within a bounded time, and then, with its watches
// resumed, at once: a deleted pod of an ImmortalContainer comes back, an
// AppBundle's deleted Deployment is repaired, a CopyRule's source change
// reaches its copy, a ConfigRollout rolls its Deployment, and a ChaosAgent
// keeps running rounds.
func TestProviderRecoversFromAPIServerRestart(t *testing.T) {
	c := startCluster(t, true)
	ctx := context.Background()
	const ns, copiesNS = "team-restart", "team-restart-copies"
	for _, n := range []string{ns, copiesNS} {
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	ic := &workloadv1alpha1.ImmortalContainer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ic"},
		Spec:       workloadv1alpha1.ImmortalContainerSpec{ForProvider: workloadv1alpha1.ImmortalContainerParameters{Image: "nginx:1.27"}},
	}
	bundle := &workloadv1alpha1.AppBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec:       workloadv1alpha1.AppBundleSpec{ForProvider: workloadv1alpha1.AppBundleParameters{Image: "nginx:1.27"}},
	}
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared", Labels: map[string]string{"copy": "yes"}}, Data: map[string]string{"v": "0"}}
	rule := &copyv1alpha1.CopyRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "copy"},
		Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
			Kind: copyv1alpha1.KindConfigMap, Names: []string{"shared"}, Namespaces: []string{copiesNS},
		}},
	}
	rolledDeploy := deployment(ns, "rolled", 1)
	rolledCfg := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rolled-config"}, Data: map[string]string{"v": "0"}}
	rollout := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rolled"},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "rolled-config"}},
			Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "rolled"}},
		}},
	}
	// A dry-run agent that runs a round every two seconds: its rounds come
	// from its own schedule, not from watches.
	agent := &chaosv1alpha1.ChaosAgent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: chaosv1alpha1.ChaosAgentSpec{ForProvider: chaosv1alpha1.ChaosAgentParameters{
			IpsumMode: true, DryRun: true, Eagerness: 100, Interval: metav1.Duration{Duration: 2 * time.Second},
		}},
	}
	for _, o := range []client.Object{ic, bundle, src, rule, rolledDeploy, rolledCfg, rollout, agent} {
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// Leader election is on, with its default lease: a short API server
	// outage must not cost the leader its lease (the provider would exit).
	p := c.runProvider(t, "restart", "--leader-election", "--poll=1h", "--max-reconcile-rate=20")

	podKey := types.NamespacedName{Namespace: ns, Name: immortalcontainer.PodName(ic)}
	copyKey := types.NamespacedName{Namespace: copiesNS, Name: "shared"}
	appKey := types.NamespacedName{Namespace: ns, Name: "app"}

	// Each check sees the provider act on one change; changes starts them.
	type check struct {
		what   string
		change func(ctx context.Context) error
		acted  func(ctx context.Context) (bool, error)
	}
	var podUID, appUID types.UID
	var rounds, rolls int64
	var rollHash string
	// n counts the rounds of changes.
	n := 0
	checks := func() []check {
		n++
		v := fmt.Sprint(n)
		return []check{
			{
				what: "the ImmortalContainer to start its deleted pod again",
				change: func(ctx context.Context) error {
					return c.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podKey.Name}})
				},
				acted: func(ctx context.Context) (bool, error) {
					pod := &corev1.Pod{}
					err := c.Client.Get(ctx, podKey, pod)
					return err == nil && pod.UID != podUID, err
				},
			},
			{
				what: "the AppBundle to create its deleted Deployment again",
				change: func(ctx context.Context) error {
					return c.Client.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}})
				},
				acted: func(ctx context.Context) (bool, error) {
					d := &appsv1.Deployment{}
					err := c.Client.Get(ctx, appKey, d)
					return err == nil && d.UID != appUID, err
				},
			},
			{
				what: "the CopyRule to copy its changed source",
				change: func(ctx context.Context) error {
					return c.Client.Patch(ctx, src, client.RawPatch(types.MergePatchType, []byte(`{"data":{"v":"`+v+`"}}`)))
				},
				acted: func(ctx context.Context) (bool, error) {
					cm := &corev1.ConfigMap{}
					err := c.Client.Get(ctx, copyKey, cm)
					return err == nil && cm.Data["v"] == v, err
				},
			},
			{
				what: "the ConfigRollout to roll its Deployment for the changed ConfigMap",
				change: func(ctx context.Context) error {
					return c.Client.Patch(ctx, rolledCfg, client.RawPatch(types.MergePatchType, []byte(`{"data":{"v":"`+v+`"}}`)))
				},
				acted: func(ctx context.Context) (bool, error) {
					if err := c.Client.Get(ctx, client.ObjectKeyFromObject(rollout), rollout); err != nil {
						return false, err
					}
					d := &appsv1.Deployment{}
					if err := c.Client.Get(ctx, client.ObjectKeyFromObject(rolledDeploy), d); err != nil {
						return false, err
					}
					o := rollout.Status.AtProvider
					// The status hash follows the ConfigMap; the Deployment carries
					// it, rolled once, under the rollout's lock.
					return o.Hash != rollHash && o.Rollouts == rolls+1 && d.Spec.Template.Annotations[configrollout.AnnotationHash] == o.Hash && d.Annotations[configrollout.AnnotationLock] == rollout.Name, nil
				},
			},
			{
				what:   "the ChaosAgent to run two more rounds",
				change: func(context.Context) error { return nil },
				acted: func(ctx context.Context) (bool, error) {
					err := c.Client.Get(ctx, client.ObjectKeyFromObject(agent), agent)
					return err == nil && agent.Status.AtProvider.RoundsRun >= rounds+2, err
				},
			},
		}
	}
	// snapshot records what the next checks compare with.
	snapshot := func() {
		t.Helper()
		eventually(t, recovery, "every managed resource to have acted", func(ctx context.Context) (bool, error) {
			pod, d, cp := &corev1.Pod{}, &appsv1.Deployment{}, &corev1.ConfigMap{}
			for k, o := range map[types.NamespacedName]client.Object{podKey: pod, appKey: d, copyKey: cp} {
				if err := c.Client.Get(ctx, k, o); err != nil {
					return false, err
				}
			}
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(agent), agent); err != nil {
				return false, err
			}
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(rollout), rollout); err != nil {
				return false, err
			}
			rolledNow := &appsv1.Deployment{}
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(rolledDeploy), rolledNow); err != nil {
				return false, err
			}
			o := rollout.Status.AtProvider
			podUID, appUID, rounds, rolls, rollHash = pod.UID, d.UID, agent.Status.AtProvider.RoundsRun, o.Rollouts, o.Hash
			// The Deployment runs the current configuration: rolled to it, the
			// hash in its template; or, before any change, followed as it was,
			// with the hash as its baseline in status and its template
			// untouched (adopted checks that first state in full).
			tmpl := rolledNow.Spec.Template.Annotations[configrollout.AnnotationHash]
			runs := len(o.Workloads) == 1 && o.Workloads[0].Hash == o.Hash && o.Workloads[0].Baseline == (rolls == 0)
			if rolls == 0 {
				runs = runs && tmpl == ""
			} else {
				runs = runs && tmpl == o.Hash
			}
			if rounds == 0 || o.Hash == "" || !runs {
				return false, errors.Errorf("agent rounds %d; rollout status %+v, conditions %+v; rolled's template hash %q", rounds, o, rollout.Status.Conditions, tmpl)
			}
			return true, nil
		})
	}
	// run makes every change and waits up to within for each to be acted on.
	run := func(label string, within time.Duration) {
		t.Helper()
		cs := checks()
		start := time.Now()
		for _, ch := range cs {
			if err := ch.change(ctx); err != nil {
				t.Fatalf("%s: cannot make the change for %s: %v", label, ch.what, err)
			}
		}
		for _, ch := range cs {
			eventually(t, within-time.Since(start), label+": "+ch.what, ch.acted)
		}
		t.Logf("%s: every change acted on within %s", label, time.Since(start).Round(time.Millisecond))
	}

	// The ConfigRollout's creation rolls nothing: it follows its Deployment,
	// whose first roll is the first change below.
	eventually(t, recovery, "the ConfigRollout to follow its Deployment without rolling it", c.adopted(rollout, rolledDeploy.DeepCopy()))
	snapshot()
	run("before the restart", atOnce)
	snapshot()

	start := time.Now()
	if err := c.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("API server restarted in %s", time.Since(start).Round(time.Millisecond))
	run("right after the restart", recovery)
	snapshot()
	run("once recovered", atOnce)

	// The same process did all of it, and still leads.
	if !p.Running() {
		t.Fatalf("the provider exited: %v", p.ExitErr())
	}
	if leading, err := p.leading(ctx); err != nil || !leading {
		t.Errorf("the provider no longer leads after the API server restart (metrics error: %v)", err)
	}
}
