//go:build bench

package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
)

// BenchmarkConfigRolloutStaggered: one ConfigMap that BENCH_STAGGER_N (1,000)
// Deployments of one replica read, one ConfigRollout selecting them all with
// strategy.maxConcurrent BENCH_STAGGER_MAX (50). The ConfigMap changes once the
// rollout follows them all (its status records a baseline for each, none was
// rolled: what is timed is the one staggered rollout of all of them); measured
// is the time from the change until the
// rollout reports every Deployment rolled (the Deployment controller and kwok
// bring each new pod up before the next wave), and the most Deployments seen
// carrying the new hash without being available again, from a list of all of
// them every 250 ms: at most maxConcurrent is the promise.
func BenchmarkConfigRolloutStaggered(b *testing.B) {
	e := provider(b)
	n, most := envInt("BENCH_STAGGER_N", 1000), envInt("BENCH_STAGGER_MAX", 50)
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		ns := namespace(b, e.Client, "bench-stagger")
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns}, Data: map[string]string{"k": "v1"}}
		if err := e.Client.Create(ctx, cm); err != nil {
			b.Fatal(err)
		}
		// The Deployments start as users' do, with no hash in their templates.
		parallel(b, n, func(i int) error {
			return e.Client.Create(ctx, readerOf(ns, fmt.Sprintf("app-%04d", i), cm.Name))
		})
		cr := &workloadv1alpha1.ConfigRollout{
			ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns},
			Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
				ConfigMaps: []workloadv1alpha1.SourceRef{{Name: cm.Name}},
				Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"bench": "stagger"}},
				Strategy:   &workloadv1alpha1.RolloutStrategy{MaxConcurrent: int32(most), ProgressDeadline: &metav1.Duration{Duration: 10 * time.Minute}},
			}},
		}
		if err := e.Client.Create(ctx, cr); err != nil {
			b.Fatal(err)
		}
		complete := func(hash string, rollouts int64) error {
			return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
				if err := e.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
					return false, nil //nolint:nilerr // Poll again.
				}
				p, st := cr.Status.AtProvider.Progress, cr.Status.AtProvider
				return p != nil && p.Phase == workloadv1alpha1.PhaseComplete && st.Hash != hash && st.Rollouts >= rollouts, nil
			})
		}
		if err := followsAll(ctx, e.Client, cr, n); err != nil {
			b.Fatalf("the rollout did not follow the %d Deployments without rolling them: %v", n, err)
		}
		prev, rollouts := cr.Status.AtProvider.Hash, cr.Status.AtProvider.Rollouts

		stop := make(chan struct{})
		var wg sync.WaitGroup
		seen := 0
		wg.Go(func() { seen = mostInFlight(ctx, e.Client, ns, cr, prev, stop) })
		b.StartTimer()
		start := time.Now()
		cm.Data["k"] = "v2"
		if err := e.Client.Update(ctx, cm); err != nil {
			b.Fatal(err)
		}
		if err := complete(prev, rollouts+int64(n)); err != nil {
			b.Fatalf("the staggered rollout of %d Deployments did not complete: %v", n, err)
		}
		took := time.Since(start)
		b.StopTimer()
		close(stop)
		wg.Wait()
		b.ReportMetric(float64(n), "deployments")
		b.ReportMetric(float64(most), "max-concurrent")
		b.ReportMetric(took.Seconds(), "s-to-all-rolled")
		b.ReportMetric(float64(seen), "most-in-flight")
		deleteNamespaces(e.Client, ns)
		b.StartTimer()
	}
}

// followsAll waits until the ConfigRollout follows its n Deployments without
// rolling them: Ready, with no rollout counted and the current hash as the
// baseline of each of the n in its status. A Deployment of its namespace
// written to (a hash in its pod template, a generation past 1) fails at once.
func followsAll(ctx context.Context, c client.Client, cr *workloadv1alpha1.ConfigRollout, n int) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return false, nil //nolint:nilerr // Poll again.
		}
		st := cr.Status.AtProvider
		if st.Rollouts != 0 {
			return false, fmt.Errorf("%d rollouts counted before any change", st.Rollouts)
		}
		if st.Hash == "" || cr.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue {
			return false, nil
		}
		followed := 0
		for _, w := range st.Workloads {
			if w.Baseline && w.Hash == st.Hash {
				followed++
			}
		}
		if followed != n {
			return false, nil
		}
		l := &appsv1.DeploymentList{}
		if err := c.List(ctx, l, client.InNamespace(cr.Namespace)); err != nil {
			return false, nil //nolint:nilerr // Poll again.
		}
		for i := range l.Items {
			d := &l.Items[i]
			if h := d.Spec.Template.Annotations[configrollout.AnnotationHash]; h != "" || d.Generation != 1 {
				return false, fmt.Errorf("Deployment %s written to (hash %q, generation %d) before any change", d.Name, h, d.Generation)
			}
		}
		return len(l.Items) == n, nil
	})
}

// mostInFlight lists the namespace's Deployments every 250 ms until stop and
// returns the most that carried the rollout's new hash (once status names one
// other than prev) without being available again.
func mostInFlight(ctx context.Context, c client.Client, ns string, cr *workloadv1alpha1.ConfigRollout, prev string, stop <-chan struct{}) int {
	most := 0
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return most
		case <-t.C:
		}
		r := &workloadv1alpha1.ConfigRollout{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(cr), r); err != nil || r.Status.AtProvider.Hash == prev {
			continue
		}
		l := &appsv1.DeploymentList{}
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			continue
		}
		n := 0
		for i := range l.Items {
			d := &l.Items[i]
			if d.Spec.Template.Annotations[configrollout.AnnotationHash] == r.Status.AtProvider.Hash && !configrollout.RolledOut(d) {
				n++
			}
		}
		most = max(most, n)
	}
}

// readerOf is a Deployment of one replica whose pod reads the ConfigMap whole.
func readerOf(ns, name, cm string) *appsv1.Deployment {
	labels := map[string]string{"bench": "stagger", "app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx",
					EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}}},
			},
		},
	}
}
