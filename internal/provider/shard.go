package provider

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	clusterops "github.com/clusterops/provider-clusterops/internal/controller"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

// sharding is what a sharded provider knows of where the fleet's managed
// resources go, and, on a replica's share, which shards it holds now.
type sharding struct {
	place shard.Placement
	// shares are the caches of a replica's share; nil in its lead manager.
	shares *shard.Shares

	mu    sync.Mutex
	owned []int
	// outside are the namespaces of the share's ConfigRollouts that its
	// shards' ranges do not hold: pinned to a shard by hand, or labelled
	// before the fleet had ranges. Their workloads are watched too, in a
	// part of their own (shard.Placement.Outside).
	outside    []string
	generation int
	pending    bool
	// outsideParts are the namespaces of each outside part asked for.
	outsideParts map[string][]string
	// cache is the manager's, which says which parts it reads.
	cache *shard.ShareCache
}

// readSharding reads the fleet's placement (shard.Place); nil without
// sharding. A replica that starts while the API server cannot be reached
// (restarting, partitioned, throttling it, its grant not yet bound) tries
// again for up to placeTimeout rather than exit into a crash loop's
// growing backoff; the explorer's join during a partition holds it.
func readSharding(o Options, cfg *rest.Config) (*sharding, error) {
	if o.Shards <= 0 {
		return nil, nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, errors.Wrap(err, "cannot make the client that reads the shards' placement")
	}
	var place shard.Placement
	var last error
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, placeTimeout, true, func(ctx context.Context) (bool, error) {
		place, last = shard.Place(ctx, cs, o.Namespace, LeaderElectionID, o.Shards)
		return last == nil, nil
	})
	if last == nil {
		last = err
	}
	if err != nil {
		return nil, errors.Wrapf(last, "cannot read the shards' placement within %s", placeTimeout)
	}
	return &sharding{place: place, shares: o.shares}, nil
}

// placeTimeout bounds how long a replica tries to read the shards'
// placement before it gives up starting.
const placeTimeout = time.Minute

// placement is where the labeler puts managed resources; with no sharding
// there is none to label.
func (sh *sharding) placement() shard.Placement {
	if sh == nil {
		return shard.Placement{}
	}
	return sh.place
}

// share is whether sh is of a replica's share.
func (sh *sharding) share() bool { return sh != nil && sh.shares != nil }

// hold has the share's caches hold the shards owned, and the namespaces
// outside them that its ConfigRollouts asked for.
func (sh *sharding) hold(owned []int) error {
	sh.mu.Lock()
	sh.owned = slices.Clone(owned)
	sh.mu.Unlock()
	return sh.apply()
}

func (sh *sharding) apply() error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.pending = false
	// A namespace a held shard now covers needs no part of its own.
	sh.outside = slices.DeleteFunc(sh.outside, func(ns string) bool {
		return slices.Contains(sh.owned, sh.place.Of(ns))
	})
	parts := make([]shard.Part, 0, len(sh.owned)+1)
	for _, i := range sh.owned {
		p, err := shard.PartOf(sh.place, i)
		if err != nil {
			return err
		}
		parts = append(parts, p)
	}
	if p, ok := sh.place.Outside(sh.outside, sh.generation); ok {
		parts = append(parts, p)
		if sh.outsideParts == nil {
			sh.outsideParts = map[string][]string{}
		}
		sh.outsideParts[p.Name] = slices.Clone(sh.outside)
		for name := range sh.outsideParts {
			if name != p.Name && (sh.cache == nil || !sh.cache.Live(name)) {
				delete(sh.outsideParts, name)
			}
		}
	}
	sh.shares.Hold(parts)
	return nil
}

// outsideAfter is how long the share waits for more namespaces outside its
// shards before it watches them: a burst of resources pinned by hand costs
// one new part, not one each.
const outsideAfter = 5 * time.Second

// watches is managedkind.Options.Watches of a share: whether the workloads
// of a namespace are in a part of the manager's cache read now; when they
// are not, the namespace is added to the part outside its shards, unless
// its shard or that part is on its way, and read from the API server
// meanwhile.
func (sh *sharding) watches(namespace string) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i := sh.place.Of(namespace); slices.Contains(sh.owned, i) {
		return sh.cache != nil && sh.cache.Live(shard.Name(i))
	}
	for name, nss := range sh.outsideParts {
		if slices.Contains(nss, namespace) && sh.cache != nil && sh.cache.Live(name) {
			return true
		}
	}
	if slices.Contains(sh.outside, namespace) {
		return false // Its part is on its way.
	}
	if _, ok := sh.place.Outside(append(slices.Clone(sh.outside), namespace), 0); !ok {
		return false // More than a selector holds: read from the API server.
	}
	sh.outside = append(sh.outside, namespace)
	sh.generation++
	if !sh.pending {
		sh.pending = true
		time.AfterFunc(outsideAfter, func() { _ = sh.apply() })
	}
	return false
}

// route is whether the share's cache holds objects of gvk (as metadata or
// not) in a cache per shard: the managed resources, what they made, and
// the workloads the API server selects by namespace.
func (sh *sharding) route() func(schema.GroupVersionKind, bool) bool {
	routed := map[schema.GroupVersionKind]bool{
		corev1.SchemeGroupVersion.WithKind("Pod"):                   true,
		corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"): true,
		corev1.SchemeGroupVersion.WithKind("Service"):               true,
		v1alpha1.ProviderConfigUsageGroupVersionKind:                true,
	}
	for _, gvk := range clusterops.ManagedKinds() {
		routed[gvk] = true
	}
	filters := sh.place.Filters()
	return func(gvk schema.GroupVersionKind, metadata bool) bool {
		if routed[gvk] {
			return true
		}
		if !metadata || !filters {
			return false
		}
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		return clusterops.WatchedUnlabelled(m)
	}
}

// newCache makes a share's cache: the objects route picks in a cache per
// part of the share, scoped to it, the rest in one cache of o.
func (sh *sharding) newCache(s *kruntime.Scheme, sync time.Duration) cache.NewCacheFunc {
	return func(cfg *rest.Config, o cache.Options) (cache.Cache, error) {
		base, err := cache.New(cfg, o)
		if err != nil {
			return nil, err
		}
		c := sh.shares.New(s, o.Mapper, base, sh.route(), func(p shard.Part) (cache.Cache, error) {
			po, err := partOptions(o, sync, p)
			if err != nil {
				return nil, err
			}
			return cache.New(cfg, po)
		})
		sh.mu.Lock()
		sh.cache = c
		sh.mu.Unlock()
		return c, nil
	}
}

// partOptions are those of the cache of part p of a share: its managed
// resources and their usages by their shard label, what they made by
// their owner's label and the shard's, and the workloads of its namespaces
// (Part.Filter), or none when it has none.
func partOptions(o cache.Options, sync time.Duration, p shard.Part) (cache.Options, error) {
	co, err := cacheOptions(sync, p.Select)
	if err != nil {
		return cache.Options{}, err
	}
	for obj, b := range co.ByObject {
		if clusterops.WatchedUnlabelled(obj) {
			b.Label = labels.Everything()
			if p.Filter == "" {
				b.Label = p.Select // Unlabelled: none.
			}
			co.ByObject[obj] = b
		}
	}
	o.ByObject = co.ByObject
	o.DefaultLabelSelector = p.Select
	o.NewInformer = shard.NewInformer(p.Filter, clusterops.WatchedUnlabelled)
	return o, nil
}

// A shareRunner runs a sharded provider's share of the fleet on every
// replica, leading or not: it takes part in sharing the shards (shard.Run)
// and runs a provider with the managed resources' controllers, whose caches
// hold the shards it holds and follow them as they change (shareWork).
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
	return shard.Run(ctx, so, &shareWork{o: o, log: so.Logger})
}

// shareWork is a replica's share: one provider with the managed resources'
// controllers, built once and again only if it fails, whose caches follow
// the shards the replica holds. Work on the shards it keeps never pauses,
// and a shard that comes is read, and its resources reconciled, once.
type shareWork struct {
	o   Options
	log logging.Logger

	mu    sync.Mutex
	owned []int
	sh    *sharding // of the provider running, if any
}

// Run builds the share's provider and runs it until ctx ends.
func (w *shareWork) Run(ctx context.Context) error {
	o := w.o
	o.shares = shard.NewShares(w.log)
	p, err := New(o)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.sh = p.sharding
	err = w.sh.hold(w.owned)
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.sh = nil
		w.mu.Unlock()
	}()
	if err != nil {
		return err
	}
	return p.Start(ctx)
}

// Hold has the share act on the shards owned from now on.
func (w *shareWork) Hold(owned []int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.owned = slices.Clone(owned)
	if w.sh == nil {
		return nil
	}
	return w.sh.hold(owned)
}

func positiveOr[T ~int64](v, d T) T {
	if v > 0 {
		return v
	}
	return d
}

// lead runs a sharded replica until ctx ends: its share of the fleet, and
// its lead manager, which campaigns for the lead and runs the singletons
// (the configs' controllers, the labeler) while it holds it. A lead manager
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
	// The lead manager built again names its controllers as the first did.
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

// buildLead builds the lead manager again from o, retrying with backoff
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
		p.logInfo("Cannot build the lead manager again; retrying, acting on the replica's share meanwhile", "error", err, "retryAfter", d)
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

// labelerCacheOptions scope a lead manager's caches of managed resources to
// those the labeler has yet to place (shard.LabelerCacheOptions). Only kinds
// the API server serves are scoped: a cache cannot be built for one it does
// not, and with safe-start a kind's CRD may come later (Crossplane's
// activation policies). Such a kind is cached whole until the lead manager
// is built again.
func labelerCacheOptions(shards int, cfg *rest.Config) (map[client.Object]cache.ByObject, error) {
	served, err := servedBy(cfg)
	if err != nil {
		return nil, err
	}
	var gvks []schema.GroupVersionKind
	for _, gvk := range clusterops.ManagedKinds() {
		if served(gvk) {
			gvks = append(gvks, gvk)
		}
	}
	return shard.LabelerCacheOptions(gvks, shards)
}
