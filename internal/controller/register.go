// Package controller sets up the controllers of every kind.
package controller

import (
	"context"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/appbundle"
	"github.com/clusterops/provider-clusterops/internal/controller/chaosagent"
	"github.com/clusterops/provider-clusterops/internal/controller/config"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/controller/copyrule"
	"github.com/clusterops/provider-clusterops/internal/controller/immortalcontainer"
	"github.com/clusterops/provider-clusterops/internal/controller/managedkind"
	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/target"
)

// Parts are the controllers a manager runs: a provider that is not sharded
// runs all of them; a sharded replica runs Configs and ShardLabels once per
// cluster, under its leader election, and Managed for its share.
type Parts uint8

const (
	// Configs are the controllers of ProviderConfig and ClusterProviderConfig.
	Configs Parts = 1 << iota
	// Managed are the controllers of the managed resource kinds.
	Managed
	// ShardLabels label each managed resource with its shard (internal/shard).
	ShardLabels
)

// ManagedKinds are the kinds of the provider's managed resources.
func ManagedKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{
		workloadv1alpha1.ImmortalContainerGroupVersionKind,
		workloadv1alpha1.AppBundleGroupVersionKind,
		workloadv1alpha1.ConfigRolloutGroupVersionKind,
		copyv1alpha1.CopyRuleGroupVersionKind,
		chaosv1alpha1.ChaosAgentGroupVersionKind,
	}
}

// ManagedObjects are an empty object of each managed resource kind.
func ManagedObjects() []client.Object {
	return []client.Object{
		&workloadv1alpha1.ImmortalContainer{},
		&workloadv1alpha1.AppBundle{},
		&workloadv1alpha1.ConfigRollout{},
		&copyv1alpha1.CopyRule{},
		&chaosv1alpha1.ChaosAgent{},
	}
}

// CacheOptions are what the managed kinds ask of the manager's cache:
// ImmortalContainer's pods and AppBundle's claims and Services, selected by
// their owner label and, on a sharded replica, by its share; ConfigRollout's
// workloads as metadata. The provider adds its own and owns the rest.
func CacheOptions(share labels.Selector) (map[client.Object]cache.ByObject, error) {
	ownedPods, err := ownedBy(immortalcontainer.LabelOwner)
	if err != nil {
		return nil, err
	}
	ownedByBundle, err := ownedBy(appbundle.LabelOwner)
	if err != nil {
		return nil, err
	}
	ownedPods, ownedByBundle = shard.Within(ownedPods, share), shard.Within(ownedByBundle, share)
	out := configrollout.CacheOptions()
	out[&corev1.Pod{}] = cache.ByObject{Label: ownedPods}
	out[&corev1.PersistentVolumeClaim{}] = cache.ByObject{Label: ownedByBundle}
	out[&corev1.Service{}] = cache.ByObject{Label: ownedByBundle}
	return out, nil
}

// ownedBy selects objects that carry the label key.
func ownedBy(key string) (labels.Selector, error) {
	r, err := labels.NewRequirement(key, selection.Exists, nil)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot select objects labelled %s", key)
	}
	return labels.NewSelector().Add(*r), nil
}

// WatchedUnlabelled reports whether the manager watches obj's kind
// namespace-wide without a shard label (ConfigRollout's workloads): a
// sharded replica's share asks the API server for those of its shards'
// namespaces only.
func WatchedUnlabelled(obj any) bool { return configrollout.IsWorkloadMetadata(obj) }

// Setup adds the controllers of parts to mgr at once; place is where
// ShardLabels put managed resources.
func Setup(mgr ctrl.Manager, o managedkind.Options, r *target.Resolver, parts Parts, place shard.Placement) error {
	for _, k := range kinds(r, parts, place) {
		if err := k.setup(mgr, o); err != nil {
			return err
		}
	}
	return nil
}

// SetupGated adds each kind's controller once its CRDs are installed
// (Crossplane's safe-start), so that a package whose CRDs are not yet
// established does not crash the provider. done, when not nil, is called once
// every kind's setup has run (a failed one is logged), so that a caller can
// wait for the controllers to be there.
//
// Nothing of it outlives mgr: once mgr stops, a setup under way ends, and a
// kind whose CRD comes later is not set up; the gate, which has no
// unregister, then holds of its callbacks neither mgr nor o, r and done, so
// that a stopped manager is collected with its caches even while a kind's
// CRD is never installed (TestShareChangesLeaveNothingBehind).
func SetupGated(mgr ctrl.Manager, o managedkind.Options, r *target.Resolver, parts Parts, place shard.Placement, done func()) error {
	if o.Gate == nil {
		return errors.New("safe-start needs a gate")
	}
	ks := kinds(r, parts, place)
	if done == nil {
		done = func() {}
	}
	if len(ks) == 0 {
		done()
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &gated{mgr: bounded(mgr, ctx), o: o, kinds: ks, ctx: ctx, done: done}
	g.left.Store(int32(len(ks))) //nolint:gosec // A handful of kinds.
	s := &gatedSetups{stop: cancel}
	s.live.Store(g)
	if err := mgr.Add(s); err != nil {
		cancel()
		return errors.Wrap(err, "cannot tie safe-start's setups to the manager")
	}
	for i, k := range ks {
		o.Gate.Register(func() { s.release(i) }, k.gvks...)
	}
	return nil
}

// gatedSetups is what the gate's callbacks hold: the kinds' setups while the
// manager runs, nothing once it stopped. It is a runnable of the manager,
// which tells it when it stops.
type gatedSetups struct {
	live atomic.Pointer[gated]
	stop context.CancelFunc
}

// Start waits for the manager to stop, then drops the setups and ends those
// under way.
func (s *gatedSetups) Start(ctx context.Context) error {
	<-ctx.Done()
	s.live.Store(nil)
	s.stop()
	return nil
}

// NeedLeaderElection is false: it must hear the manager stop whether or not
// it leads.
func (s *gatedSetups) NeedLeaderElection() bool { return false }

// release sets kind i up, unless the manager stopped.
func (s *gatedSetups) release(i int) {
	if g := s.live.Load(); g != nil {
		g.setUp(i)
	}
}

// gated are the setups of the kinds safe-start gates, and what they need.
type gated struct {
	mgr   ctrl.Manager
	o     managedkind.Options
	kinds []kind
	// ctx ends when the manager stops: the gate runs setups outside any call.
	ctx  context.Context //nolint:containedctx // See above.
	left atomic.Int32
	done func()
}

// setUp sets kind i up. The gate opens once a CRD is Established; the API
// server's discovery, which the manager's REST mapper reads, may not list
// the kind for a moment more. A kind whose setup first maps its own type (a
// field index) fails before it registers anything, so it tries again until
// discovery has it (about 20 s at most), or the manager stops.
func (g *gated) setUp(i int) {
	k := g.kinds[i]
	var err error
	_ = wait.ExponentialBackoffWithContext(g.ctx, setupBackoff, func(context.Context) (bool, error) {
		err = k.setup(g.mgr, g.o)
		return !meta.IsNoMatchError(err), nil
	})
	if g.ctx.Err() != nil {
		return
	}
	if err != nil {
		g.mgr.GetLogger().Error(err, "cannot set up controller", "kind", k.gvks)
	}
	if g.left.Add(-1) == 0 {
		g.done()
	}
}

// setupBackoff spaces the tries of a kind's setup while discovery catches up
// with its CRD.
var setupBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 1.5, Steps: 10, Cap: 5 * time.Second}

type kind struct {
	gvks  []schema.GroupVersionKind
	setup func(ctrl.Manager, managedkind.Options) error
}

func kinds(r *target.Resolver, parts Parts, place shard.Placement) []kind {
	var out []kind
	if parts&Configs != 0 {
		out = append(out, kind{
			gvks:  []schema.GroupVersionKind{v1alpha1.ProviderConfigGroupVersionKind, v1alpha1.ClusterProviderConfigGroupVersionKind, v1alpha1.ProviderConfigUsageGroupVersionKind},
			setup: func(m ctrl.Manager, o managedkind.Options) error { return config.Setup(m, o.Options) },
		})
	}
	if parts&Managed != 0 {
		out = append(out, managed(r)...)
	}
	if parts&ShardLabels != 0 {
		for _, gvk := range ManagedKinds() {
			out = append(out, kind{
				gvks:  []schema.GroupVersionKind{gvk},
				setup: func(m ctrl.Manager, _ managedkind.Options) error { return shard.SetupLabeler(m, gvk, place) },
			})
		}
	}
	return out
}

func managed(r *target.Resolver) []kind {
	return []kind{
		{
			gvks:  []schema.GroupVersionKind{workloadv1alpha1.ImmortalContainerGroupVersionKind},
			setup: func(m ctrl.Manager, o managedkind.Options) error { return immortalcontainer.Setup(m, o, r) },
		},
		{
			gvks:  []schema.GroupVersionKind{workloadv1alpha1.AppBundleGroupVersionKind},
			setup: func(m ctrl.Manager, o managedkind.Options) error { return appbundle.Setup(m, o, r) },
		},
		{
			gvks:  []schema.GroupVersionKind{workloadv1alpha1.ConfigRolloutGroupVersionKind},
			setup: func(m ctrl.Manager, o managedkind.Options) error { return configrollout.Setup(m, o, r) },
		},
		{
			gvks:  []schema.GroupVersionKind{copyv1alpha1.CopyRuleGroupVersionKind},
			setup: func(m ctrl.Manager, o managedkind.Options) error { return copyrule.Setup(m, o, r) },
		},
		{
			gvks:  []schema.GroupVersionKind{chaosv1alpha1.ChaosAgentGroupVersionKind},
			setup: func(m ctrl.Manager, o managedkind.Options) error { return chaosagent.Setup(m, o, r) },
		},
	}
}

// bounded is mgr as a gated setup sees it: its cache's calls that wait for
// an informer to sync also end with ctx. A setup waits with a context of its
// own (context.Background, as for a field index); once the manager stopped,
// its caches never sync, and such a wait would hold the setup, and the
// manager, forever.
func bounded(mgr ctrl.Manager, ctx context.Context) ctrl.Manager { //nolint:revive // ctx bounds, it is not the call's.
	return boundedManager{Manager: mgr, cache: boundedCache{Cache: mgr.GetCache(), ctx: ctx}}
}

type boundedManager struct {
	ctrl.Manager
	cache boundedCache
}

func (m boundedManager) GetCache() cache.Cache { return m.cache }

func (m boundedManager) GetFieldIndexer() client.FieldIndexer { return m.cache }

type boundedCache struct {
	cache.Cache
	ctx context.Context //nolint:containedctx // It bounds the waits of every call.
}

// within is ctx, ended also when c.ctx ends.
func (c boundedCache) within(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

func (c boundedCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	ctx, cancel := c.within(ctx)
	defer cancel()
	return c.Cache.Get(ctx, key, obj, opts...)
}

func (c boundedCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	ctx, cancel := c.within(ctx)
	defer cancel()
	return c.Cache.List(ctx, list, opts...)
}

func (c boundedCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	ctx, cancel := c.within(ctx)
	defer cancel()
	return c.Cache.GetInformer(ctx, obj, opts...)
}

func (c boundedCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	ctx, cancel := c.within(ctx)
	defer cancel()
	return c.Cache.GetInformerForKind(ctx, gvk, opts...)
}

func (c boundedCache) WaitForCacheSync(ctx context.Context) bool {
	ctx, cancel := c.within(ctx)
	defer cancel()
	return c.Cache.WaitForCacheSync(ctx)
}

func (c boundedCache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	ctx, cancel := c.within(ctx)
	defer cancel()
	return c.Cache.IndexField(ctx, obj, field, extract)
}
