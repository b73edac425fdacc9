package managedkind

import (
	"context"
	"testing"

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
