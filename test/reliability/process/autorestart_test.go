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
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
)

// TestConfigRolloutAutoRestartReadsEachWorkloadOnce converges auto
// ConfigRollouts in one namespace, each following the one Deployment that
// reads its ConfigMap, and starts a new provider on them, twice: once they
// have only started to follow them (a baseline for each in status, nothing
// written to them), and once a change of each ConfigMap has rolled each
// Deployment. Each time it reads each Deployment once (for the rollout that
// follows it) and learns what the others read from a list, and writes
// nothing. Before, the workload watch's first list read every Deployment of
// the namespace one by one in its event handler, then each rollout read its
// own again: two reads a Deployment, 20,000 and 90 s for a restart with
// 10,000 in one namespace.
func TestConfigRolloutAutoRestartReadsEachWorkloadOnce(t *testing.T) {
	c := startCluster(t, false)
	ctx := context.Background()
	const n = 12
	ns := "team-auto-restart"
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	cms := make([]*corev1.ConfigMap, n)
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"v": "0"}}
		d := deployment(ns, fmt.Sprintf("d-%d", i), 0)
		d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}}}
		ro := &workloadv1alpha1.ConfigRollout{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("r-%d", i)},
			Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
				ConfigMaps: []workloadv1alpha1.SourceRef{{Name: cm.Name}}, Auto: true,
			}},
		}
		for _, o := range []client.Object{cm, d, ro} {
			if err := c.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		cms[i] = cm
	}
	// followed: every rollout follows its Deployment, rolled by none.
	followed := func(ctx context.Context) (bool, error) {
		for i := range n {
			ro, d := &workloadv1alpha1.ConfigRollout{}, &appsv1.Deployment{}
			ro.Namespace, ro.Name = ns, fmt.Sprintf("r-%d", i)
			d.Namespace, d.Name = ns, fmt.Sprintf("d-%d", i)
			if ok, err := c.adopted(ro, d)(ctx); !ok {
				return false, err
			}
		}
		return true, nil
	}
	// rolledOnce: every Deployment carries its rollout's hash and lock, rolled
	// once, and status no longer has it run a baseline.
	rolledOnce := func(ctx context.Context) (bool, error) {
		for i := range n {
			ro, d := &workloadv1alpha1.ConfigRollout{}, &appsv1.Deployment{}
			if err := c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("r-%d", i)}, ro); err != nil {
				return false, err
			}
			if err := c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("d-%d", i)}, d); err != nil {
				return false, err
			}
			o := ro.Status.AtProvider
			if o.Hash == "" || d.Spec.Template.Annotations[configrollout.AnnotationHash] != o.Hash || d.Generation != 2 || d.Annotations[configrollout.AnnotationLock] != ro.Name ||
				o.Rollouts != 1 || len(o.Workloads) != 1 || o.Workloads[0].Baseline {
				return false, errors.Errorf("%s: generation %d, hash %q, lock %q; rollout's status %+v", d.Name, d.Generation, d.Spec.Template.Annotations[configrollout.AnnotationHash], d.Annotations[configrollout.AnnotationLock], o)
			}
		}
		return true, nil
	}
	controller := managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind)
	// restart kills p and starts a new provider, which must read each
	// Deployment at most once, write none, and leave them as state says.
	restart := func(p *provider, name, what string, state func(ctx context.Context) (bool, error)) *provider {
		t.Helper()
		p.Kill()
		next := c.runProvider(t, name, "--poll=1h")
		got := next.idleAfter(t, controller, n)
		stays(t, time.Second, what, state)
		if reads := got[`resource="deployments",verb="get"`]; reads > n {
			t.Errorf("%s: the restarted provider read Deployments %v times, want at most %d (one for each rollout's own); all requests: %v", name, reads, n, got)
		}
		for _, verb := range []string{"update", "patch"} {
			if w := got[`resource="deployments",verb="`+verb+`"`]; w > 0 {
				t.Errorf("%s: the restarted provider sent %v %s requests of Deployments, want none; all requests: %v", name, w, verb, got)
			}
		}
		return next
	}

	first := c.runProvider(t, "auto-restart-1", "--poll=1h")
	eventually(t, time.Minute, "every Deployment followed by its rollout, none rolled", followed)
	second := restart(first, "auto-restart-2", "nothing rolled or written", followed)

	for _, cm := range cms {
		c.Update(t, cm, func() { cm.Data["v"] = "1" })
	}
	eventually(t, time.Minute, "every Deployment rolled by its rollout for the change", rolledOnce)
	restart(second, "auto-restart-3", "nothing rolled again", rolledOnce)
}
