package provider

import (
	"context"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	clusterops "github.com/clusterops/provider-clusterops/internal/controller"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

// sharding is what a sharded provider knows of where the fleet's managed
// resources go, read when it is built.
type sharding struct {
	place shard.Placement
	// owned are the shards of a replica's share; nil in its leading part.
	owned []int
	// outside are the namespaces of the share's ConfigRollouts that its
	// shards' ranges do not hold: pinned to a shard by hand, or labelled
	// before the fleet had ranges. Their workloads are watched too.
	outside []string
	// rebuild takes a namespace the share's watches lack; Provider.Start
	// then stops, to be built again with it (watches).
	rebuild chan string
}

// readSharding reads the fleet's placement (shard.Place) and, for a
// replica's share, the namespaces of its ConfigRollouts outside its shards'
// ranges; nil without sharding.
func readSharding(o Options, s *kruntime.Scheme, cfg *rest.Config) (*sharding, error) {
	if o.Shards <= 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, errors.Wrap(err, "cannot make the client that reads the shards' placement")
	}
	place, err := shard.Place(ctx, cs, o.Namespace, LeaderElectionID, o.Shards)
	if err != nil {
		return nil, err
	}
	sh := &sharding{place: place, owned: o.owned, rebuild: make(chan string, 1)}
	if o.owned == nil || place.Filter(o.owned, nil) == "" {
		return sh, nil
	}
	share, err := o.share()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, errors.Wrap(err, "cannot make the client that lists the share's ConfigRollouts")
	}
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(workloadv1alpha1.ConfigRolloutGroupVersionKind.GroupVersion().WithKind(workloadv1alpha1.ConfigRolloutKind + "List"))
	err = c.List(ctx, l, client.MatchingLabelsSelector{Selector: share})
	if meta.IsNoMatchError(err) {
		return sh, nil // Not served yet (safe-start): none to place.
	}
	if err != nil {
		return nil, errors.Wrap(err, "cannot list the share's ConfigRollouts")
	}
	for _, cr := range l.Items {
		if !place.Covers(o.owned, sh.outside, cr.Namespace) {
			sh.outside = append(sh.outside, cr.Namespace)
		}
	}
	return sh, nil
}

// placement is where the labeler puts managed resources; with no sharding
// there is none to label.
func (sh *sharding) placement() shard.Placement {
	if sh == nil {
		return shard.Placement{}
	}
	return sh.place
}

// filter is the shardSelector of a share's namespace-wide watches of
// objects without a shard label; empty for none (a leading part, or an API
// server without the feature gate).
func (sh *sharding) filter() string {
	if sh == nil || sh.owned == nil {
		return ""
	}
	return sh.place.Filter(sh.owned, sh.outside)
}

// watches is managedkind.Options.Watches of a share: whether its filtered
// watches hold a namespace; when not, it asks for the share to be built
// again with it.
func (sh *sharding) watches(namespace string) bool {
	if sh.place.Covers(sh.owned, sh.outside, namespace) {
		return true
	}
	select {
	case sh.rebuild <- namespace:
	default:
	}
	return false
}

// selectShare has a list and watch of the manager's cache ask the API
// server for only the workloads of the namespaces filter selects (a
// shardSelector), so that a replica holds its share's workloads and not every
// one of the cluster; lw itself for any other kind, or without filter.
func selectShare(lw toolscache.ListerWatcher, obj kruntime.Object, filter string) toolscache.ListerWatcher {
	if filter == "" || !clusterops.WatchedUnlabelled(obj) {
		return lw
	}
	lwc := toolscache.ToListerWatcherWithContext(lw)
	return toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (kruntime.Object, error) {
			o.ShardSelector = filter
			return lwc.ListWithContext(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.ShardSelector = filter
			return lwc.WatchWithContext(ctx, o)
		},
	}, lw)
}

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

// A shareRunner runs a sharded provider's share of the fleet on every
// replica, leading or not: it takes part in sharing the shards (shard.Run)
// and runs a provider with the managed resources' controllers for the
// shards it holds, built again whenever they change.
type shareRunner struct {
	o Options
}

// Start shares the fleet until ctx ends.
func (r *shareRunner) Start(ctx context.Context) error {
	o := r.o
	log := o.Logger
	if log == nil {
		log = logging.NewNopLogger()
	}
	m, err := shard.NewMetrics(o.registry())
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

// lead runs a sharded replica until ctx ends: its share of the fleet, and
// its leading part, which campaigns for the lead and runs the singletons
// (the configs' controllers, the labeler) while it holds it. A leading part
// that stops with an error once it was elected lost the Lease (controller-
// runtime stops it when it cannot renew in time, as when the API server is
// slow to answer) or a singleton failed: the replica builds it again to
// campaign anew, retrying with backoff while the API server does not answer
// (buildLead), and keeps acting on its share all the while. Only a leading
// part that fails before it was ever elected, which is misconfigured, stops
// the replica (TestReplicaKeepsItsShareWhenItLosesTheLead,
// TestReplicaKeepsItsShareWhileTheLeadCannotBeBuilt).
func (p *Provider) lead(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	shared := make(chan error, 1)
	go func() { shared <- p.share.Start(ctx) }()
	leading := p
	// The leading part built again names its controllers as the first did.
	again := p.o
	again.SkipNameValidation = true
	for {
		err := leading.run(ctx)
		if ctx.Err() == nil && err != nil && elected(leading) {
			p.logInfo("Lost the lead; campaigning again, acting on the replica's share meanwhile", "error", err)
			if leading = p.buildLead(ctx, again); leading != nil {
				continue
			}
			err = nil // Stopped while building it again.
		}
		cancel()
		if serr := <-shared; err == nil {
			err = serr
		}
		return err
	}
}

// elected is whether p's manager won its leader election before it stopped.
func elected(p *Provider) bool {
	select {
	case <-p.Manager.Elected():
		return true
	default:
		return false
	}
}

// buildLead builds the leading part again from o, retrying with backoff
// until ctx ends: building it reads the API server, which may be as slow to
// answer as it was to renew the Lease. Nil once ctx ended.
func (p *Provider) buildLead(ctx context.Context, o Options) *Provider {
	b := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 30 * time.Second}
	for {
		l, err := New(o)
		if err == nil {
			return l
		}
		d := b.Step()
		p.logInfo("Cannot build the leading part again; retrying, acting on the replica's share meanwhile", "error", err, "retryAfter", d)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
	}
}

func (p *Provider) logInfo(msg string, kv ...any) {
	if p.o.Logger != nil {
		p.o.Logger.Info(msg, kv...)
	}
}
