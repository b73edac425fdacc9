package provider

import (
	"context"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	clusterops "github.com/clusterops/provider-clusterops/internal/controller"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

// share selects the managed resources of the shards the replica acts on,
// and what they made; nil unless it is a sharded replica's share.
func (o Options) share() (labels.Selector, error) {
	if o.owned == nil {
		return nil, nil
	}
	return shard.Share(o.owned)
}

// shardCacheOptions scope a sharded replica's caches of managed resources: its
// share's manager caches only those labelled with its shards (share), so that
// a replica holds its share of the fleet, not all of it; its leading part
// caches only the resources the labeler has yet to label. (The objects they
// make are scoped by cacheOptions.)
func shardCacheOptions(o Options, share labels.Selector) (map[client.Object]cache.ByObject, error) {
	switch {
	case o.Shards <= 0:
		return nil, nil
	case share == nil:
		return shard.LabelerCacheOptions(clusterops.ManagedKinds(), o.Shards)
	}
	out := map[client.Object]cache.ByObject{}
	for _, obj := range clusterops.ManagedObjects() {
		out[obj] = cache.ByObject{Label: share}
	}
	return out, nil
}

// A replica runs a sharded provider's share of the fleet on every replica,
// leading or not: it takes part in sharing the shards (shard.Run) and runs a
// provider with the managed resources' controllers for the shards it holds,
// built again whenever they change.
type replica struct {
	o Options
}

// NeedLeaderElection is false: every replica acts on its share.
func (r *replica) NeedLeaderElection() bool { return false }

// Start shares the fleet until ctx ends.
func (r *replica) Start(ctx context.Context) error {
	o := r.o
	log := o.Logger
	if log == nil {
		log = logging.NewNopLogger()
	}
	reg := o.MetricsRegistry
	if reg == nil {
		reg = metrics.Registry
	}
	m, err := shard.NewMetrics(reg)
	if err != nil {
		return err
	}
	d := DefaultOptions()
	so := shard.Options{
		Metrics:       m,
		Config:        o.Config,
		Namespace:     o.Namespace,
		Name:          LeaderElectionID,
		Identity:      o.Identity,
		Shards:        o.Shards,
		LeaseDuration: positiveOr(o.LeaseDuration, d.LeaseDuration),
		RenewDeadline: positiveOr(o.RenewDeadline, d.RenewDeadline),
		RetryPeriod:   positiveOr(o.RetryPeriod, d.RetryPeriod),
		Logger:        log.WithValues("replica", o.Identity),
	}
	return shard.Run(ctx, so, func(ctx context.Context, owned []int) error {
		wo := o
		wo.owned = owned
		p, err := New(wo)
		if err != nil {
			return err
		}
		return p.Start(ctx)
	})
}

func positiveOr[T ~int64](v, d T) T {
	if v > 0 {
		return v
	}
	return d
}
