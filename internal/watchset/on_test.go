package watchset_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/internal/target"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

// TestEnsureOnSeveralClusters: an owner that reads on one cluster and writes
// on another holds watches on both through one call, and a later call that
// leaves a cluster out releases that cluster's watches. (Two cluster IDs on
// one API server stand for two clusters: watches are keyed by ID.)
func TestEnsureOnSeveralClusters(t *testing.T) {
	ctx, s, _, _ := started(t)
	ns := env.Namespace(t, "watchset", nil)
	src := &target.Cluster{ID: "source", Config: env.Config}
	dst := &target.Cluster{ID: "target", Config: env.Config}
	owner := types.NamespacedName{Namespace: ns, Name: "rule"}
	w := configMaps
	w.Namespace = ns

	if err := s.EnsureOn(owner, watchset.On{Cluster: dst, Watches: []watchset.Watch{w}}, watchset.On{Cluster: src, Watches: []watchset.Watch{w}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(2, s.Len()); diff != "" {
		t.Errorf("one watch on each cluster: -want +got:\n%s", diff)
	}
	if err := s.WaitSynced(ctx, owner); err != nil {
		t.Fatal(err)
	}
	// The same watch on one cluster only: the other cluster's stops.
	if err := s.Ensure(owner, dst, w); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(1, s.Len()); diff != "" {
		t.Errorf("after leaving the source cluster out: -want +got:\n%s", diff)
	}
	s.Forget(owner)
	if diff := cmp.Diff(0, s.Len()); diff != "" {
		t.Errorf("after Forget: -want +got:\n%s", diff)
	}
}
