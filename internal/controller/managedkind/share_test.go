package managedkind

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/clusterops/provider-clusterops/apis"
	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

// TestShareOnly: a sharded replica reconciles the managed resources of its
// share and no other, even when its cache holds them all (a kind activated
// after its share was built); a resource gone is reconciled, to finish it.
func TestShareOnly(t *testing.T) {
	share, err := shard.Share([]int{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	s := kruntime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	mine := &v1alpha1.ImmortalContainer{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "mine", Labels: map[string]string{shard.Label: "3"}}}
	theirs := &v1alpha1.ImmortalContainer{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "theirs", Labels: map[string]string{shard.Label: "2"}}}
	unlabelled := &v1alpha1.ImmortalContainer{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "unlabelled"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(mine, theirs, unlabelled).Build()
	cases := map[string]struct {
		name string
		want bool
	}{
		"Mine":       {name: "mine", want: true},
		"Theirs":     {name: "theirs"},
		"Unlabelled": {name: "unlabelled"},
		"Gone":       {name: "gone", want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reconciled := false
			r := shareOnly{kube: c, object: &v1alpha1.ImmortalContainer{}, share: share,
				Reconciler: reconcilerFunc(func(context.Context, reconcile.Request) (reconcile.Result, error) {
					reconciled = true
					return reconcile.Result{}, nil
				})}
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: tc.name}}); err != nil {
				t.Fatal(err)
			}
			if reconciled != tc.want {
				t.Errorf("reconciled %s: %t, want %t", tc.name, reconciled, tc.want)
			}
			p := inShare(share)
			if n := (map[string]*v1alpha1.ImmortalContainer{"mine": mine, "theirs": theirs, "unlabelled": unlabelled})[tc.name]; n != nil && p.Create(ctrlevent.CreateEvent{Object: n}) != tc.want {
				t.Errorf("inShare passes %s: %t, want %t", tc.name, !tc.want, tc.want)
			}
		})
	}
	if !inShare(nil).Create(ctrlevent.CreateEvent{Object: theirs}) {
		t.Error("without sharding every resource's events pass")
	}
}

// TestShareOnlyFencesWrites: under a replica's fence, a resource of a shard
// whose Lease the fence does not vouch for is not reconciled but retried,
// and one it vouches for is reconciled with its writes bound to its shard.
func TestShareOnlyFencesWrites(t *testing.T) {
	share, err := shard.Share([]int{3})
	if err != nil {
		t.Fatal(err)
	}
	s := kruntime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	mine := &v1alpha1.ImmortalContainer{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "mine", Labels: map[string]string{shard.Label: "3"}}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(mine).Build()
	var checked error
	reconciled := false
	r := shareOnly{kube: c, object: &v1alpha1.ImmortalContainer{}, share: share,
		Reconciler: reconcilerFunc(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
			reconciled, checked = true, shard.CheckWrite(ctx)
			return reconcile.Result{}, nil
		})}
	// A fence that holds no Lease: shard 3 is not vouched for.
	ctx := shard.WithFence(context.Background(), shard.NewFence("p", "me", time.Minute))
	got, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: "mine"}})
	if err != nil || reconciled || got.RequeueAfter != fenceRetry {
		t.Errorf("Reconcile under a fence without the shard: reconciled %t, %+v, %v; want not reconciled, retried after %s", reconciled, got, err, fenceRetry)
	}
	// Without a fence (an unsharded test of shareOnly), the writes are not bound.
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: "mine"}}); err != nil || !reconciled || checked != nil {
		t.Errorf("Reconcile without a fence: reconciled %t, check %v, %v; want reconciled, writes unchecked", reconciled, checked, err)
	}
}
