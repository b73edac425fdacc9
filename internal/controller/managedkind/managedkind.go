package managedkind

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"

	"github.com/clusterops/provider-clusterops/internal/flow"
	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/target"
	"github.com/clusterops/provider-clusterops/internal/watchset"
	"github.com/clusterops/provider-clusterops/internal/whole"
)

// A Kind describes one managed resource kind to Setup.
type Kind[T resource.ModernManaged] struct {
	// GroupVersionKind of the managed resource, e.g. from its register.go.
	// Its group and kind name the controller.
	GroupVersionKind resource.ManagedKind
	// Object and List are empty instances of the managed resource and its list.
	Object T
	List   resource.ManagedList
	// NewClient builds the kind's external client for a resolved target cluster.
	// It records events with rec. A status the client writes before the
	// reconcile ends (an intent recorded before it acts) goes through status,
	// the managed reconciler's own writer: the version it replaces is known
	// to be stale, so the next reconcile does not read it from a lagging
	// cache and meet a conflict.
	NewClient func(c *target.Cluster, rec event.Recorder, status client.SubResourceWriter, mg T) managed.TypedExternalClient[T]
	// OwnNamespace is set for kinds that act in their own namespace only:
	// the connector refuses one whose config's reach does not allow it.
	OwnNamespace bool
	// Watch adds the watches on the objects the kind manages, so drift is seen
	// on the event rather than at the next poll.
	Watch func(b *builder.Builder) *builder.Builder
	// WatchSet, when set, runs the narrow watches the kind's managed resources
	// ask for while they reconcile; its events enqueue them, and a managed
	// resource's watches stop once it is gone.
	WatchSet *watchset.Set
	// PollHook, when set, brings a managed resource's next reconcile forward
	// from the poll interval (a backoff or a round that ends sooner). What it
	// leaves at the poll interval is jittered (Options.PollJitter).
	PollHook managed.PollIntervalHook
	// Options are added after the shared reconciler options.
	Options []managed.ReconcilerOption
	// OnStop, when set, runs once the controller's manager stops. A kind
	// whose series name managed resources forgets them there: the registry
	// is the provider's, and a sharded replica builds its controllers again
	// when its shards change, so a resource now another replica's would
	// otherwise be reported by both.
	OnStop func()
	// Forget, when set, drops what the kind remembers of a managed resource
	// (its series) once it is gone from the replica's view: deleted, or of
	// a shard the replica no longer holds.
	Forget func(types.NamespacedName)
}

// Options are crossplane-runtime's controller options and what this
// provider's kinds add to them.
type Options struct {
	controller.Options
	// PollJitter spreads the safety-net polls: each is the poll interval plus
	// or minus up to this fraction of it (0.1 is ±10%), so that resources
	// created or restarted together do not all poll at once.
	PollJitter float64
	// Flow ranks and bounds the controllers' reconciles and requests.
	Flow *flow.Control
	// Metrics is the provider's registry: each kind registers its metrics
	// there, or takes those of the same name already registered (a process
	// that builds several providers, a lead manager built again).
	Metrics prometheus.Registerer
	// Shares are, on a sharded replica, the caches that follow the shards it
	// holds (shard.Shares): the manager's cache holds only the managed
	// resources of those shards and the objects they made, a kind's own
	// caches of the objects it makes are made by NewCache to do the same,
	// and events of those objects reach the queue only for owners in the
	// cache. Nil without sharding.
	Shares *shard.Shares
	// Watches, when set, says whether the manager's namespace-wide watches
	// of objects that carry no shard label (ConfigRollout's workloads) hold
	// a namespace: a sharded replica's are filtered by the API server to its
	// shards' namespaces. A kind reads what such a watch lacks from the API
	// server, as on a remote cluster, and a false answer asks the replica
	// to watch the namespace too. Nil holds every one.
	Watches func(namespace string) bool
}

// Sharded is whether the controllers run on a sharded replica.
func (o Options) Sharded() bool { return o.Shares != nil }

// NewCache makes a cache of objects a kind makes, with the options opts
// gives for a selector of shards: on a sharded replica, one that holds the
// objects of the shards it holds, and follows them as they change; without
// sharding, one of opts(nil). Each drains the watches it stops
// (shard.NewInformer).
func (o Options) NewCache(mgr ctrl.Manager, opts func(share labels.Selector) cache.Options) (cache.Cache, error) {
	drained := func(share labels.Selector) cache.Options {
		co := opts(share)
		if co.NewInformer == nil {
			co.NewInformer = shard.NewInformer("", nil)
		}
		return co
	}
	if o.Shares == nil {
		return cache.New(mgr.GetConfig(), drained(nil))
	}
	return o.Shares.New(mgr.GetScheme(), mgr.GetRESTMapper(), nil, nil, func(p shard.Part) (cache.Cache, error) {
		return cache.New(mgr.GetConfig(), drained(p.Select))
	}), nil
}

// jittered returns the poll interval hook of a kind: hook's interval, which
// when it is the poll interval itself becomes a random one within ±jitter of
// it. Intervals hook brings forward are due times and are kept.
func jittered(hook managed.PollIntervalHook, jitter float64, random func() float64) managed.PollIntervalHook {
	return func(mg resource.Managed, poll time.Duration) time.Duration {
		d := poll
		if hook != nil {
			d = hook(mg, poll)
		}
		if d != poll || jitter <= 0 {
			return d
		}
		return poll + time.Duration((random()*2-1)*min(jitter, 1)*float64(poll))
	}
}

// Setup adds the controller of kind k to mgr.
func Setup[T resource.ModernManaged](mgr ctrl.Manager, o Options, r *target.Resolver, k Kind[T]) error {
	gk := schema.GroupKind{Group: k.GroupVersionKind.Group, Kind: k.GroupVersionKind.Kind}.String()
	name := managed.ControllerName(gk)
	// First, as it maps the kind (a field index): a kind whose CRD discovery
	// does not list yet fails here, before it registers anything.
	var back source.Source
	if r != nil {
		var err error
		if back, err = recovered(mgr, r, k.Object, k.List); err != nil {
			return errors.Wrapf(err, "cannot set up %s controller", gk)
		}
	}
	rec := event.NewAPIRecorder(mgr.GetEventRecorderFor(name)) //nolint:staticcheck // crossplane-runtime's recorder takes the record API.
	own := noOpSkippingManager{Manager: mgr, conflicts: &conflicts{}, written: newWrittenOver(k.Object)}
	opts := []managed.ReconcilerOption{
		managed.WithTypedExternalConnector[T](k.connector(r, rec, own.GetClient().Status())),
		managed.WithLogger(o.Logger.WithValues("controller", name)),
		managed.WithRecorder(rec),
		managed.WithPollInterval(o.PollInterval),
		managed.WithPollIntervalHook(jittered(k.PollHook, o.PollJitter, rand.Float64)),
		// Observe reads the API server directly, which is consistent: an object
		// missing right after Create really is missing, so there is no reason to
		// wait out the grace period meant for eventually consistent cloud APIs.
		managed.WithCreationGracePeriod(0),
		// No kind has an external name: a managed resource's own name says
		// what it acts on. The default initializer would write the name into
		// an annotation, one more update per new resource and one more
		// reconcile, as the annotation change passes the event filter.
		managed.WithInitializers(),
		// Every kind names what it makes after the managed resource
		// (<name>-data, <name>-immortalpod), so a create cut short (the
		// provider restarted between the create-pending annotation and the
		// create's result) is found by the next Observe and never leaks.
		// Without this the resource would stop reconciling for good until
		// someone removed the annotation by hand.
		managed.WithDeterministicExternalName(true),
	}
	if o.Features.Enabled(feature.EnableBetaManagementPolicies) {
		opts = append(opts, managed.WithManagementPolicies())
	}
	// Every kind's creates, updates and deletes go to the change log, here
	// once for all kinds (cmd/provider's --enable-changelogs).
	if o.ChangeLogOptions != nil && o.Features.Enabled(feature.EnableAlphaChangeLogs) {
		opts = append(opts, managed.WithChangeLogger(o.ChangeLogOptions.ChangeLogger))
	}
	if o.MetricOptions != nil {
		opts = append(opts, managed.WithMetricRecorder(o.MetricOptions.MRMetrics))
		if o.MetricOptions.MRStateMetrics != nil {
			sr := statemetrics.NewMRStateRecorder(UncopiedLists{Client: mgr.GetClient()}, o.Logger, o.MetricOptions.MRStateMetrics, k.List, o.MetricOptions.PollStateMetricInterval)
			if err := mgr.Add(sr); err != nil {
				return errors.Wrapf(err, "cannot add state metrics of %s", gk)
			}
		}
	}
	if err := onStop(mgr, k.OnStop); err != nil {
		return errors.Wrapf(err, "cannot set up %s controller", gk)
	}
	mr := managed.NewReconciler(own, k.GroupVersionKind, append(opts, k.Options...)...)
	// The controller starts once every watch below is registered.
	return whole.Controller(mgr, func(mgr ctrl.Manager) error {
		b := ctrl.NewControllerManagedBy(mgr).
			Named(name).
			WithOptions(flow.WithQueue(o.ForControllerRuntime(), mgr.GetLogger())).
			// The filter applies to the managed resource only: events of the
			// watched objects (a pod's status, say) must get through.
			For(client.Object(k.Object), builder.WithPredicates(desiredStateChanged(), stillHeld(o.Shares))).
			// An edit of an existing managed resource's spec is a change someone
			// waits for: it ranks with the changes of what the resource made or
			// references, above a backlog of new resources. The priority queue
			// keeps the higher of the two ranks the request gets.
			Watches(client.Object(k.Object), o.Flow.Handler(&handler.EnqueueRequestForObject{}), builder.WithPredicates(
				predicate.GenerationChangedPredicate{},
				stillHeld(o.Shares),
				predicate.Funcs{
					CreateFunc:  func(ctrlevent.CreateEvent) bool { return false },
					GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
				}))
		if k.Watch != nil {
			b = k.Watch(b)
		}
		if back != nil {
			b = watchConfigs(b.WatchesRawSource(back), mgr.GetCache(), k.List)
		}
		var rr reconcile.Reconciler = retryConflicts{Reconciler: errors.WithSilentRequeueOnConflict(mr), conflicts: own.conflicts}
		rr = pollAfterCreate{Reconciler: rr, poll: jittered(k.PollHook, o.PollJitter, rand.Float64), interval: o.PollInterval}
		if o.Sharded() {
			rr = shareOnly{Reconciler: rr, kube: mgr.GetClient(), object: k.Object}
		}
		b, rr, err := k.watchAndForget(mgr, o, b, rr)
		if err != nil {
			return errors.Wrapf(err, "cannot set up %s controller", gk)
		}
		return errors.Wrapf(b.Complete(o.Flow.Reconciler(name, rr, lightIn(mgr.GetClient(), k.Object))), "cannot set up %s controller", gk)
	})
}

// lightIn says whether the managed resource of a request is light
// (flow.Light) as the manager's cache holds it; one it cannot read is
// not.
func lightIn[T resource.ModernManaged](c client.Reader, object T) func(context.Context, reconcile.Request) bool {
	return func(ctx context.Context, req reconcile.Request) bool {
		mg, ok := object.DeepCopyObject().(T)
		return ok && c.Get(ctx, req.NamespacedName, mg) == nil && flow.Light(mg)
	}
}

// connector is the kind's connector: its clients write early status through
// status, the managed reconciler's own writer.
func (k Kind[T]) connector(r *target.Resolver, rec event.Recorder, status client.SubResourceWriter) *target.Connector[T] {
	newClient := func(c *target.Cluster, rec event.Recorder, mg T) managed.TypedExternalClient[T] {
		return k.NewClient(c, rec, status, mg)
	}
	c := &target.Connector[T]{Resolver: r, Recorder: rec, NewClient: newClient, OwnNamespace: k.OwnNamespace}
	if k.WatchSet != nil || k.Forget != nil {
		// Followed again from scratch once reachable, as by a new holder.
		forget := &forgetGone{watches: k.WatchSet, forget: k.Forget}
		c.Unreachable = func(mg T) { forget.forgetName(types.NamespacedName{Namespace: mg.GetNamespace(), Name: mg.GetName()}) }
	}
	return c
}

// onStop has mgr run f once it stops; nothing when f is nil.
func onStop(mgr ctrl.Manager, f func()) error {
	if f == nil {
		return nil
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		f()
		return nil
	}))
}

// desiredStateChanged is crossplane-runtime's resource.DesiredStateChanged
// that also ignores the external-create-succeeded annotation. The managed
// reconciler writes it at the end of a create and asks for the next reconcile
// itself (Requeue), as it does after the pending and failed annotations that
// resource.DesiredStateChanged already ignores. Its event comes while the
// create's status is still on its way to the cache: the reconcile it started
// read the managed resource without that status and met a conflict writing
// its own, two reconciles more for every new managed resource.
func desiredStateChanged() predicate.Predicate {
	return predicate.Or(
		predicate.Funcs{
			UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
				return changedBut(e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations(),
					meta.AnnotationKeyExternalCreatePending, meta.AnnotationKeyExternalCreateSucceeded, meta.AnnotationKeyExternalCreateFailed) ||
					// The count the labeler placed a resource under changes
					// nothing it acts on: written to every resource of a
					// fleet once after an upgrade, it reconciles none.
					changedBut(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels(), shard.LabelShards)
			},
		},
		predicate.GenerationChangedPredicate{},
	)
}

// changedBut is whether a key but the ignored ones differs between the
// annotations or labels old and cur.
func changedBut(old, cur map[string]string, ignored ...string) bool {
	skip := func(k string) bool { return slices.Contains(ignored, k) }
	for k, v := range cur {
		if w, ok := old[k]; !skip(k) && (!ok || w != v) {
			return true
		}
	}
	for k := range old {
		if _, ok := cur[k]; !skip(k) && !ok {
			return true
		}
	}
	return false
}

// forgetGone stops the watches of a managed resource that no longer exists
// in the manager's cache, and forgets what the kind remembers of it: deleted,
// or of a shard the replica gave up (whose cache tells its handlers that its
// objects are gone). Its last reconcile may not see it gone (the cache lags
// the finalizer's removal); then the next event of one of its watches brings
// it back here.
type forgetGone struct {
	reconcile.Reconciler
	kube    client.Reader
	object  client.Object
	watches *watchset.Set
	forget  func(types.NamespacedName)
}

func (f *forgetGone) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := f.Reconciler.Reconcile(ctx, req)
	o, _ := f.object.DeepCopyObject().(client.Object)
	if gerr := f.kube.Get(ctx, req.NamespacedName, o); kerrors.IsNotFound(gerr) {
		f.forgetName(req.NamespacedName)
	}
	return res, err
}

// stillHeld drops the deletion of a managed resource whose shard the
// replica no longer holds, on a sharded replica: the cache of a shard it
// gave up tells that its resources are gone, and so does a resource's
// label moved to a shard it does not hold. Nothing is left to reconcile of
// those; what is remembered of them is forgotten at once (forgetLeft).
func stillHeld(shares *shard.Shares) predicate.Predicate {
	return predicate.Funcs{DeleteFunc: func(e ctrlevent.DeleteEvent) bool {
		return shares == nil || shares.Holds(e.Object.GetLabels()[shard.Label])
	}}
}

// forgetLeft forgets, as they leave the replica's share, the managed
// resources of object's kind that stillHeld keeps from the queue. A
// reconcile of one under way as it leaves forgets it again as it ends
// (forgetGone), as the resource is gone from the cache by then.
func forgetLeft(mgr ctrl.Manager, object client.Object, shares *shard.Shares, f *forgetGone) error {
	inf, err := mgr.GetCache().GetInformer(context.Background(), object)
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		o, ok := obj.(client.Object)
		if !ok || shares.Holds(o.GetLabels()[shard.Label]) {
			return
		}
		f.forgetName(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()})
	}})
	return err
}

// shareOnly reconciles, on a sharded replica, only the managed resources of
// its share: the manager's cache holds the resources of the shards the
// replica holds (shard.ShareCache), and a resource is reconciled only while
// the replica's fence lets it write for its shard. Its writes to the target
// cluster are checked again as they are sent (shard.WritingFor;
// TestShareOnlyFencesWrites).
type shareOnly struct {
	reconcile.Reconciler
	kube   client.Reader
	object client.Object
}

func (s shareOnly) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	o, _ := s.object.DeepCopyObject().(client.Object)
	if s.kube.Get(ctx, req.NamespacedName, o) != nil {
		// Gone (or not read): reconciled, to finish it.
		return s.Reconciler.Reconcile(ctx, req)
	}
	if f := shard.FenceFrom(ctx); f != nil {
		v := o.GetLabels()[shard.Label]
		done, err := f.Enter(v)
		if err != nil {
			// About to lose the shard, or lost it, or the label moved it
			// to another: the replica stops reading it at once, and the
			// request is retried meanwhile.
			return reconcile.Result{RequeueAfter: fenceRetry}, nil
		}
		defer done()
		ctx = shard.WritingFor(ctx, v)
	}
	return s.Reconciler.Reconcile(ctx, req)
}

// fenceRetry is how soon a resource whose shard the fence refused is tried
// again: by then the replica holds the shard anew or stopped acting on it.
const fenceRetry = 2 * time.Second

// EnqueueOwner enqueues the managed resource named by an object's label key, in
// the object's namespace: how each kind hears about the objects it made.
// A change to such an object is urgent: it ranks above new managed resources.
// When sharded, only an owner that owners (the manager's cache) holds is
// enqueued: a replica caches only its share of the managed resources, and
// another replica's objects are none of its work. Otherwise every owner is
// in the cache, and the lookup is not made.
func EnqueueOwner(o Options, key string, owners client.Reader, owner func() client.Object) handler.EventHandler {
	return o.Flow.Handler(handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		n, ok := obj.GetLabels()[key]
		if !ok {
			return nil
		}
		nn := types.NamespacedName{Namespace: obj.GetNamespace(), Name: n}
		if o.Sharded() {
			if err := owners.Get(ctx, nn, owner()); err != nil {
				return nil
			}
		}
		return []reconcile.Request{{NamespacedName: nn}}
	}))
}

// PollUntil returns a poll interval hook that brings the next reconcile of a
// managed resource forward to the time due returns, when due says one is
// pending and it is sooner than the poll interval (a backoff ending, a
// debounce window closing).
func PollUntil[T resource.Managed](now func() time.Time, due func(mg T, now time.Time) (time.Time, bool)) managed.PollIntervalHook {
	return func(mg resource.Managed, poll time.Duration) time.Duration {
		m, ok := mg.(T)
		if !ok {
			return poll
		}
		t, pending := due(m, now())
		if !pending {
			return poll
		}
		return max(min(t.Sub(now()), poll), 10*time.Millisecond)
	}
}

// forgetName stops the watches of the managed resource nn and forgets what
// the kind remembers of it.
func (f *forgetGone) forgetName(nn types.NamespacedName) {
	if f.watches != nil {
		f.watches.Forget(nn)
	}
	if f.forget != nil {
		f.forget(nn)
	}
}

// watchAndForget adds the kind's narrow watches (WatchSet) to b, and to rr
// the forgetting of a managed resource gone from the replica's view
// (forgetGone, forgetLeft).
func (k Kind[T]) watchAndForget(mgr ctrl.Manager, o Options, b *builder.Builder, rr reconcile.Reconciler) (*builder.Builder, reconcile.Reconciler, error) {
	if k.WatchSet != nil {
		if err := mgr.Add(k.WatchSet); err != nil {
			return nil, nil, errors.Wrapf(err, "cannot add the watches of %s", k.GroupVersionKind.Kind)
		}
		b = b.WatchesRawSource(k.WatchSet.Source(o.Flow))
		inf, err := mgr.GetCache().GetInformer(context.Background(), k.Object)
		if err != nil {
			return nil, nil, errors.Wrapf(err, "cannot inform on %s", k.GroupVersionKind.Kind)
		}
		peers := watchset.NewPeers()
		if _, err := inf.AddEventHandler(peers); err != nil {
			return nil, nil, errors.Wrapf(err, "cannot count %s", k.GroupVersionKind.Kind)
		}
		k.WatchSet.CountPeers(peers)
	}
	if k.WatchSet != nil || k.Forget != nil {
		fg := &forgetGone{Reconciler: rr, kube: mgr.GetClient(), object: k.Object, watches: k.WatchSet, forget: k.Forget}
		rr = fg
		if o.Sharded() {
			if err := forgetLeft(mgr, k.Object, o.Shares, fg); err != nil {
				return nil, nil, errors.Wrapf(err, "cannot forget the %s that leave the share", k.GroupVersionKind.Kind)
			}
		}
	}
	return b, rr, nil
}
