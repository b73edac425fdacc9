//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// generations are the generations of the Deployments in ns, by name: what
// they are before a ConfigRollout starts to follow them.
func generations(t *testing.T, c client.Client, ns string) map[string]int64 {
	t.Helper()
	l := &appsv1.DeploymentList{}
	if err := c.List(context.Background(), l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]int64, len(l.Items))
	for _, d := range l.Items {
		out[d.Name] = d.Generation
	}
	return out
}

// statusOf is a ConfigRollout's status as JSON, for a failure's message.
func statusOf(cr *workloadv1alpha1.ConfigRollout) string {
	st, _ := json.Marshal(cr.Status)
	return string(st)
}

// followed waits until the ConfigRollout follows each Deployment of gens
// without rolling it: the rollout is Ready with no rollout counted, and its
// status gives each a baseline (the configuration its pods are taken to run:
// for a named or selected workload, the hash of every source), while nothing
// was written to the Deployment: its pod template carries no hash and its
// generation is what it was (an annotation written on its metadata would move
// it too). A roll, or any write, on adoption fails the test at once; so does
// one right after (checked again once the watch events of the rollout's
// status and the Deployments' had a moment to reconcile it).
func followed(t *testing.T, c client.Client, cr *workloadv1alpha1.ConfigRollout, gens map[string]int64) {
	t.Helper()
	check := func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return err
		}
		st := cr.Status.AtProvider
		if st.Rollouts != 0 {
			t.Fatalf("ConfigRollout %s counted %d rollouts while it started to follow its workloads; status %s", cr.Name, st.Rollouts, statusOf(cr))
		}
		byName := map[string]workloadv1alpha1.RolledWorkload{}
		for _, w := range st.Workloads {
			if w.Kind == configrollout.KindDeployment {
				byName[w.Name] = w
			}
		}
		for name, gen := range gens {
			d := &appsv1.Deployment{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: cr.Namespace, Name: name}, d); err != nil {
				return err
			}
			if h := d.Spec.Template.Annotations[configHash]; h != "" || d.Generation != gen {
				t.Fatalf("Deployment %s was written to when ConfigRollout %s started to follow it: its pod template carries hash %q, generation %d (was %d), annotations %v; status %s",
					name, cr.Name, h, d.Generation, gen, d.Annotations, statusOf(cr))
			}
			if w, ok := byName[name]; !ok || !w.Baseline || w.Hash == "" || w.LastRollout != nil || (!cr.Spec.ForProvider.Auto && w.Hash != st.Hash) {
				return fmt.Errorf("status does not give Deployment %s a baseline of the current configuration; status %s", name, statusOf(cr))
			}
		}
		if cr.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue || st.Hash == "" {
			return fmt.Errorf("not Ready with a hash; status %s", statusOf(cr))
		}
		return nil
	}
	testenv.Eventually(t, time.Minute, "ConfigRollout "+cr.Name+" to follow its Deployments without rolling them", func(ctx context.Context) (bool, error) {
		err := check(ctx)
		return err == nil, err
	})
	time.Sleep(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := check(ctx); err != nil {
		t.Fatalf("ConfigRollout %s no longer follows its Deployments as it did: %v", cr.Name, err)
	}
}

// runCurrent checks that each Deployment the ConfigRollout's status lists was
// rolled to the configuration it names: status says so (no baseline, a last
// rollout), and the Deployment's pod template carries the hash and its
// metadata the rollout's lock, which the roll wrote.
func runCurrent(t *testing.T, c client.Client, cr *workloadv1alpha1.ConfigRollout) {
	t.Helper()
	for _, w := range cr.Status.AtProvider.Workloads {
		d := &appsv1.Deployment{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: cr.Namespace, Name: w.Name}, d); err != nil {
			t.Fatal(err)
		}
		if w.Baseline || w.LastRollout == nil || (!cr.Spec.ForProvider.Auto && w.Hash != cr.Status.AtProvider.Hash) {
			t.Errorf("status of %s %s: hash %q, baseline %t, last rollout %v; want the current hash %q, rolled", w.Kind, w.Name, w.Hash, w.Baseline, w.LastRollout, cr.Status.AtProvider.Hash)
		}
		if h, lock := d.Spec.Template.Annotations[configHash], d.Annotations[configLock]; h != w.Hash || lock != cr.Name {
			t.Errorf("Deployment %s: template hash %q, lock %q; want %q and %q", d.Name, h, lock, w.Hash, cr.Name)
		}
	}
}

// TestConfigRolloutOnLocalControlPlane: a ConfigRollout follows a running
// Deployment without rolling it, or writing to it at all; a changed ConfigMap
// then produces exactly one new ReplicaSet, whose pods run.
func TestConfigRolloutOnLocalControlPlane(t *testing.T) {
	env := provider(t)
	ns := env.Namespace(t, "e2e-rollout", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"app.conf": "v1"}}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: "nginx", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}}}}},
				},
			},
		},
	}
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}}, Auto: true,
		}},
	}
	createAll(t, env.Client, cm, d)
	gens := map[string]int64{d.Name: d.Generation}
	createAll(t, env.Client, cr)
	replicaSets := func(n int, what string) {
		t.Helper()
		testenv.Eventually(t, time.Minute, what, func(ctx context.Context) (bool, error) {
			rs := &appsv1.ReplicaSetList{}
			if err := env.Client.List(ctx, rs, client.InNamespace(ns)); err != nil {
				return false, err
			}
			err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d)
			available := false
			for _, c := range d.Status.Conditions {
				available = available || (c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue)
			}
			return len(rs.Items) == n && d.Status.UpdatedReplicas == 1 && d.Status.ObservedGeneration == d.Generation && available, err
		})
	}
	// The ConfigRollout starts to follow the Deployment: a baseline in its
	// status, nothing rolled, one event saying so.
	followed(t, env.Client, cr, gens)
	replicaSets(1, "the Deployment to run its one ReplicaSet, not rolled")
	testenv.Eventually(t, time.Minute, "a FollowingWorkloads event and no RolledWorkload event", func(ctx context.Context) (bool, error) {
		l := &corev1.EventList{}
		if err := env.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			return false, err
		}
		following := false
		for _, e := range l.Items {
			if e.InvolvedObject.Name != cr.Name {
				continue
			}
			if e.Reason == "RolledWorkload" {
				t.Fatalf("a RolledWorkload event before any configuration change: %s", e.Message)
			}
			following = following || (e.Reason == "FollowingWorkloads" && e.Type == corev1.EventTypeNormal)
		}
		return following, nil
	})

	// Only the change rolls it: one rollout, one new ReplicaSet.
	prev := cr.Status.AtProvider.Hash
	env.Update(t, cm, func() { cm.Data["app.conf"] = "v2" })
	replicaSets(2, "a new ReplicaSet for the changed ConfigMap")
	testenv.Eventually(t, time.Minute, "one rollout counted for the change", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return false, err
		}
		st := cr.Status.AtProvider
		if st.Rollouts > 1 {
			t.Fatalf("%d rollouts counted for one change of the ConfigMap; status %s", st.Rollouts, statusOf(cr))
		}
		if st.Hash != prev && st.Rollouts == 1 && cr.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue {
			return true, nil
		}
		return false, fmt.Errorf("status %s", statusOf(cr))
	})
	if d.Generation != gens[d.Name]+1 {
		t.Errorf("Deployment generation %d after one change, want %d: one roll", d.Generation, gens[d.Name]+1)
	}
	runCurrent(t, env.Client, cr)
}
