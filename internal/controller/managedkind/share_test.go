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

// TestShareOnlyFinishesWhatIsGone: a resource gone from the replica's cache
// (deleted, or of a shard it gave up) is reconciled, to finish it; one there
// is left to the fence (TestShareOnlyFencesWrites).
func TestShareOnlyFinishesWhatIsGone(t *testing.T) {
	s := kruntime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).Build()
	reconciled := false
	r := shareOnly{kube: c, object: &v1alpha1.ImmortalContainer{},
		Reconciler: reconcilerFunc(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			reconciled = true
			return reconcile.Result{}, nil
		})}
	ctx := shard.WithFence(context.Background(), shard.NewFence("p", "me", time.Minute))
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: "gone"}}); err != nil || !reconciled {
		t.Errorf("Reconcile of a resource gone: reconciled %t, %v; want reconciled", reconciled, err)
	}
}

// TestShareOnlyFencesWrites: under a replica's fence, a resource of a shard
// whose Lease the fence does not vouch for is not reconciled but retried,
// and one it vouches for is reconciled with its writes bound to its shard.
func TestShareOnlyFencesWrites(t *testing.T) {
	s := kruntime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	mine := &v1alpha1.ImmortalContainer{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "mine", Labels: map[string]string{shard.Label: "3"}}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(mine).Build()
	var checked error
	reconciled := false
	r := shareOnly{kube: c, object: &v1alpha1.ImmortalContainer{},
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

// TestStillHeldDropsDeletionsOfShardsGivenUp: the deletion of a resource of
// a shard the replica holds is reconciled; one of a shard it gave up (its
// cache dropped) or moved away from is not; without sharding every one is.
func TestStillHeldDropsDeletionsOfShardsGivenUp(t *testing.T) {
	shares := shard.NewShares(nil)
	held, err := shard.PartOf(shard.Placement{Shards: 4}, 1)
	if err != nil {
		t.Fatal(err)
	}
	shares.Hold([]shard.Part{held})
	in := func(s string) *v1alpha1.ImmortalContainer {
		return &v1alpha1.ImmortalContainer{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "x", Labels: map[string]string{shard.Label: s}}}
	}
	cases := map[string]struct {
		shares *shard.Shares
		shard  string
		want   bool
	}{
		"Held":      {shares: shares, shard: "1", want: true},
		"GivenUp":   {shares: shares, shard: "2"},
		"Unsharded": {shard: "2", want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := stillHeld(tc.shares).Delete(ctrlevent.DeleteEvent{Object: in(tc.shard)}); got != tc.want {
				t.Errorf("stillHeld passes the deletion of a resource of shard %s: %t, want %t", tc.shard, got, tc.want)
			}
		})
	}
}
