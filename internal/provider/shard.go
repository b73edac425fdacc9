package provider

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
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
// make are scoped by cacheOptions.) Only kinds the API server serves are
// scoped: a cache cannot be built for one it does not, and with safe-start
// a kind's CRD may come later (Crossplane's activation policies). Such a kind
// is cached whole until the replica's share is built again, and its
// controller acts on the share alone all the same (managedkind's Share).
func shardCacheOptions(o Options, s *kruntime.Scheme, share labels.Selector, served func(schema.GroupVersionKind) bool) (map[client.Object]cache.ByObject, error) {
	if o.Shards <= 0 {
		return nil, nil
	}
	var gvks []schema.GroupVersionKind
	for _, gvk := range clusterops.ManagedKinds() {
		if served(gvk) {
			gvks = append(gvks, gvk)
		}
	}
	if share == nil {
		return shard.LabelerCacheOptions(gvks, o.Shards)
	}
	out := map[client.Object]cache.ByObject{}
	for _, obj := range clusterops.ManagedObjects() {
		gvk, err := apiutil.GVKForObject(obj, s)
		if err != nil {
			return nil, err
		}
		if slices.Contains(gvks, gvk) {
			out[obj] = cache.ByObject{Label: share}
		}
	}
	return out, nil
}

// servedBy returns whether the API server cfg reaches serves a kind, as its
// discovery says when asked; a kind it cannot tell of counts as not served.
func servedBy(cfg *rest.Config) (func(schema.GroupVersionKind) bool, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, errors.Wrap(err, "cannot make the discovery client")
	}
	m, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, errors.Wrap(err, "cannot make the REST mapper")
	}
	return func(gvk schema.GroupVersionKind) bool {
		_, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
		return err == nil
	}, nil
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
