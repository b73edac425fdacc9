package process

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
)

// TestStaggeredRolloutSurvivesLeaderChangeAndRestart runs a staggered
// rollout of four Deployments, two at a time, across a leader change (the
// leader is SIGKILLed, its follower takes over) and a restart (that one is
// killed too, a new process starts): each time the new provider goes on from
// the workloads and status on the API server, rolls the next Deployment once
// a slot is free, and rolls none again. The rollout is of a configuration
// change: the rollout's creation only starts to follow the Deployments (a
// baseline for each in its status, nothing written to them). envtest runs no
// Deployment controller: the test marks Deployments available as one would.
func TestStaggeredRolloutSurvivesLeaderChangeAndRestart(t *testing.T) {
	c := startCluster(t, false)
	ctx := context.Background()
	ns := "team-stagger"
	names := []string{"d1", "d2", "d3", "d4"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conf"}, Data: map[string]string{"v": "0"}}
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, cm}
	var refs []workloadv1alpha1.WorkloadRef
	var ds []*appsv1.Deployment
	for _, n := range names {
		d := deployment(ns, n, 1)
		objs = append(objs, d)
		ds = append(ds, d)
		refs = append(refs, workloadv1alpha1.WorkloadRef{Kind: "Deployment", Name: n})
	}
	ro := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "waves"},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
			Workloads:  refs,
			Strategy:   &workloadv1alpha1.RolloutStrategy{MaxConcurrent: 2, ProgressDeadline: &metav1.Duration{Duration: 10 * time.Minute}},
		}},
	}
	for _, o := range objs {
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	settle := func(name string) {
		t.Helper()
		d := &appsv1.Deployment{}
		eventually(t, react, name+" to settle", func(ctx context.Context) (bool, error) {
			if err := c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
				return false, err
			}
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
			return true, c.Client.Status().Update(ctx, d)
		})
	}
	for _, n := range names {
		settle(n)
	}
	if err := c.Client.Create(ctx, ro); err != nil {
		t.Fatal(err)
	}
	// baseline is the hash the rollout's creation recorded for each
	// Deployment it started to follow.
	var baseline string
	// rolled checks that exactly the named Deployments carry the rollout's
	// hash and lock, each rolled once (generation 2), while the others are
	// untouched and status still has them run their baseline, and status
	// counts the rolled ones.
	rolled := func(want ...string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(ro), ro); err != nil {
				return false, err
			}
			h := ro.Status.AtProvider.Hash
			in := map[string]bool{}
			for _, n := range want {
				in[n] = true
			}
			for _, n := range names {
				d := &appsv1.Deployment{}
				if err := c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, d); err != nil {
					return false, err
				}
				carries := h != "" && d.Spec.Template.Annotations[configrollout.AnnotationHash] == h
				gen := int64(1)
				if in[n] {
					gen = 2
				}
				if carries != in[n] || d.Generation != gen {
					return false, errors.Errorf("%s carries the hash: %t, generation %d; want %t, %d", n, carries, d.Generation, in[n], gen)
				}
				if locked := d.Annotations[configrollout.AnnotationLock] == ro.Name; locked != in[n] {
					return false, errors.Errorf("%s carries the rollout's lock: %t; want %t", n, locked, in[n])
				}
			}
			for _, w := range ro.Status.AtProvider.Workloads {
				if in[w.Name] && (w.Baseline || w.Hash != h) || !in[w.Name] && (!w.Baseline || w.Hash != baseline) {
					return false, errors.Errorf("status of %s: hash %q, baseline %t; want rolled to %q: %t, else baseline %q", w.Name, w.Hash, w.Baseline, h, in[w.Name], baseline)
				}
			}
			if ro.Status.AtProvider.Rollouts != int64(len(want)) {
				return false, errors.Errorf("status counts %d rollouts, want %d", ro.Status.AtProvider.Rollouts, len(want))
			}
			return true, nil
		}
	}

	a := c.replica(t, "a")
	waitLeader(t, a, time.Now(), startup)
	b := c.replica(t, "b")
	waitCampaigning(t, b)
	// The rollout's creation rolls nothing: the leader follows the four
	// Deployments. A change of the configuration starts the staggered rollout.
	eventually(t, react, "the leader to follow the four Deployments without rolling them", c.adopted(ro, ds...))
	baseline = ro.Status.AtProvider.Hash
	c.Update(t, cm, func() { cm.Data["v"] = "1" })
	eventually(t, react, "d1 and d2 to roll, and only those", rolled("d1", "d2"))
	stays(t, 2*time.Second, "d3 and d4 to wait for a free slot", rolled("d1", "d2"))

	// Leader change: d1 becomes available while nobody leads.
	a.Kill()
	killed := time.Now()
	settle("d1")
	waitLeader(t, b, killed, takeover)
	eventually(t, react, "the new leader to roll d3 into d1's slot", rolled("d1", "d2", "d3"))
	stays(t, 2*time.Second, "d4 to wait, and nothing to roll again", rolled("d1", "d2", "d3"))

	// Restart: the only provider dies; d2 and d3 become available before a
	// new one starts.
	b.Kill()
	settle("d2")
	settle("d3")
	p := c.runProvider(t, "c", "--poll=1h", "--max-reconcile-rate=20")
	eventually(t, react, "the restarted provider to roll d4", rolled("d1", "d2", "d3", "d4"))
	settle("d4")
	eventually(t, react, "the rollout to complete", func(ctx context.Context) (bool, error) {
		if !p.Running() {
			t.Fatalf("provider exited: %v", p.ExitErr())
		}
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(ro), ro)
		pr := ro.Status.AtProvider.Progress
		if err != nil || pr == nil {
			return false, err
		}
		return pr.Phase == workloadv1alpha1.PhaseComplete && pr.Rolled == 4, nil
	})
	if ok, err := rolled(names...)(ctx); !ok {
		t.Errorf("after the rollout: %v", err)
	}
	for _, w := range ro.Status.AtProvider.Workloads {
		if w.LastRollout == nil {
			t.Errorf("%s has no lastRollout", w.Name)
		}
	}
}
