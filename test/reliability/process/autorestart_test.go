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
// ConfigRollouts in one namespace, each rolling the one Deployment that reads
// its ConfigMap, and starts a new provider on them: it reads each Deployment
// once (for the rollout that rolls it) and learns what the others read from
// a list, and rolls nothing. Before, the workload watch's first list read
// every Deployment of the namespace one by one in its event handler, then
// each rollout read its own again: two reads a Deployment, 20,000 and 90 s
// for a restart with 10,000 in one namespace.
func TestConfigRolloutAutoRestartReadsEachWorkloadOnce(t *testing.T) {
	c := startCluster(t, false)
	ctx := context.Background()
	const n = 12
	ns := "team-auto-restart"
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
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
	}
	// rolledOnce: every Deployment carries its rollout's hash, rolled once.
	rolledOnce := func(ctx context.Context) (bool, error) {
		for i := range n {
			ro, d := &workloadv1alpha1.ConfigRollout{}, &appsv1.Deployment{}
			if err := c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("r-%d", i)}, ro); err != nil {
				return false, err
			}
			if err := c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("d-%d", i)}, d); err != nil {
				return false, err
			}
			h := ro.Status.AtProvider.Hash
			if h == "" || d.Spec.Template.Annotations[configrollout.AnnotationHash] != h || d.Generation != 2 {
				return false, errors.Errorf("%s: generation %d, hash %q, rollout's %q", d.Name, d.Generation, d.Spec.Template.Annotations[configrollout.AnnotationHash], h)
			}
		}
		return true, nil
	}
	first := c.runProvider(t, "auto-restart-1", "--poll=1h")
	eventually(t, time.Minute, "every Deployment rolled by its rollout", rolledOnce)
	first.Kill()

	second := c.runProvider(t, "auto-restart-2", "--poll=1h")
	controller := managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind)
	got := second.idleAfter(t, controller, n)
	stays(t, time.Second, "nothing rolled again", rolledOnce)
	if reads := got[`resource="deployments",verb="get"`]; reads > n {
		t.Errorf("the restarted provider read Deployments %v times, want at most %d (one for each rollout's own); all requests: %v", reads, n, got)
	}
	for _, verb := range []string{"update", "patch"} {
		if w := got[`resource="deployments",verb="`+verb+`"`]; w > 0 {
			t.Errorf("the restarted provider sent %v %s requests of Deployments, want none; all requests: %v", w, verb, got)
		}
	}
}
