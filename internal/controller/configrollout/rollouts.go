package configrollout

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

// otherRollouts returns where a rollout reads the other ConfigRollouts of its
// namespace, for the locks and baselines that keep a workload to one of
// them (holds, followedBy): a cache that holds every ConfigRollout of the
// cluster, indexed by the workloads they follow (indexFollowing). Without
// sharding that is the manager's. A sharded replica's manager
// caches only its shards' ConfigRollouts, blind to a rollout of the same
// namespace pinned to a shard another replica holds: it reads the others
// from a cache of its own, unfiltered, that keeps of each only what is read
// of it (SlimRollout), which the manager starts, and waits to sync, with
// its own caches. Every workload then follows one rollout, whichever
// replicas act on them (TestShardedRolloutsRollOnce).
func otherRollouts(mgr ctrl.Manager, sharded bool) (cache.Cache, error) {
	c := mgr.GetCache()
	if sharded {
		var err error
		c, err = cache.New(mgr.GetConfig(), cache.Options{
			HTTPClient: mgr.GetHTTPClient(),
			Scheme:     mgr.GetScheme(),
			Mapper:     mgr.GetRESTMapper(),
			ByObject:   map[client.Object]cache.ByObject{&v1alpha1.ConfigRollout{}: {Transform: SlimRollout}},
			// Like every cache the provider makes, it drains the watches it
			// stops.
			NewInformer: shard.NewInformer("", nil),
		})
		if err != nil {
			return nil, errors.Wrap(err, "cannot make the cache of every ConfigRollout")
		}
		if err := mgr.Add(startedWithCaches{c}); err != nil {
			return nil, errors.Wrap(err, "cannot add the cache of every ConfigRollout")
		}
	}
	if err := c.IndexField(context.Background(), &v1alpha1.ConfigRollout{}, indexFollowing, followingValues); err != nil {
		return nil, errors.Wrap(err, "cannot index ConfigRollouts by the workloads they follow")
	}
	return c, nil
}

// startedWithCaches has the manager start a cache in the group of its own
// caches (a runnable with GetCache, as a cluster.Cluster), before any
// controller and waited for until it synced, rather than with the
// controllers.
type startedWithCaches struct{ cache.Cache }

func (s startedWithCaches) GetCache() cache.Cache { return s.Cache }

// SlimRollout keeps of a ConfigRollout what other rollouts read of it: its
// identity, when it was made (first), its deletion mark, and the workloads
// its status holds without a lock (followingValues): those it follows by a
// baseline, and those it rolled, with the hash that tells them apart
// (holding), not the times. At 10,000 rollouts a replica's cache of them
// holds a few hundred bytes each and about a hundred more per workload,
// not their specs and statuses.
func SlimRollout(in any) (any, error) {
	cr, ok := in.(*v1alpha1.ConfigRollout)
	if !ok {
		return in, nil
	}
	out := &v1alpha1.ConfigRollout{TypeMeta: cr.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: cr.Name, Namespace: cr.Namespace, UID: cr.UID, ResourceVersion: cr.ResourceVersion,
		CreationTimestamp: cr.CreationTimestamp, DeletionTimestamp: cr.DeletionTimestamp,
	}}
	for _, w := range cr.Status.AtProvider.Workloads {
		switch held, rolled := holding(w); {
		case rolled:
			out.Status.AtProvider.Workloads = append(out.Status.AtProvider.Workloads, v1alpha1.RolledWorkload{Kind: w.Kind, Name: w.Name, Hash: w.Hash})
		case held:
			out.Status.AtProvider.Workloads = append(out.Status.AtProvider.Workloads, v1alpha1.RolledWorkload{Kind: w.Kind, Name: w.Name, Baseline: true})
		}
	}
	return out, nil
}

var _ toolscache.TransformFunc = SlimRollout
