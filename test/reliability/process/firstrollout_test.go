package process

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
)

// TestFirstRolloutCountedOnce starts a provider on ConfigRollouts that exist
// before it, again and again: the status write of the first rollout often
// conflicts with the provider's own first writes and is lost, and the next
// observation must still count that rollout, exactly once. The rollouts roll
// on adoption (spec.forProvider.rollOnAdoption): a workload a rollout merely
// starts to follow is otherwise not rolled, and only that first roll at once
// needs the recovery of a lost status write.
func TestFirstRolloutCountedOnce(t *testing.T) {
	c := startCluster(t, false)
	ctx := context.Background()
	controller := managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind)
	for i := range 8 {
		ns := fmt.Sprintf("team-first-%d", i)
		d := deployment(ns, "web", 1)
		ro := &workloadv1alpha1.ConfigRollout{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
				ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "web-config"}},
				Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "web"}},
				// Roll the workload the rollout starts to follow at once.
				RollOnAdoption: true,
			}},
		}
		for _, o := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"}, Data: map[string]string{"v": "0"}},
			d, ro,
		} {
			if err := c.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		// Debug logging changes the timing enough to lose the write often.
		p := c.runProvider(t, fmt.Sprintf("first-%d", i), "--poll=1h", "--max-reconcile-rate=20", "--debug")
		once := func(ctx context.Context) (bool, error) {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(ro), ro); err != nil {
				return false, err
			}
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
				return false, err
			}
			o := ro.Status.AtProvider
			if o.Rollouts != 1 || len(o.Workloads) != 1 || o.Workloads[0].LastRollout == nil || d.Generation != 2 || d.Spec.Template.Annotations[configrollout.AnnotationHash] != o.Hash {
				return false, errors.Errorf("status %+v; web generation %d, annotations %v", o, d.Generation, d.Spec.Template.Annotations)
			}
			return true, nil
		}
		eventually(t, 30*time.Second, fmt.Sprintf("start %d: one rollout, counted", i), once)
		// A reconcile after the count must not count it again: a label makes
		// the provider reconcile the rollout once more; once it has, the count
		// still holds.
		r, err := p.reconciles(ctx, controller)
		if err != nil {
			t.Fatal(err)
		}
		c.Update(t, ro, func() { ro.SetLabels(map[string]string{"poked": "yes"}) })
		eventually(t, 30*time.Second, fmt.Sprintf("start %d: a reconcile after the rollout was counted", i), func(ctx context.Context) (bool, error) {
			n, err := p.reconciles(ctx, controller)
			return n > r, err
		})
		stays(t, time.Second, fmt.Sprintf("start %d: one rollout, counted once", i), once)
		p.Kill()
	}
}
