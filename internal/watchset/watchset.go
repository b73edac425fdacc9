// Package watchset runs narrow watches that managed resources ask for while
// they reconcile: one named ConfigMap, the Secrets matching one selector in one
// namespace, the copies one rule made. Each watch is metadata only, filtered by
// the API server, started when the first managed resource needs it and stopped
// when the last one no longer does, on whichever cluster the managed resource
// acts on. So the provider caches what its managed resources reference, never
// every ConfigMap or Secret in a cluster, and hears of changes on remote
// clusters as quickly as on its own.
package watchset

import (
	"context"
	"maps"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	"github.com/clusterops/provider-clusterops/internal/target"
)

// A Watch is one narrow watch a managed resource needs.
type Watch struct {
	// Resource is watched, e.g. {Version: "v1", Resource: "configmaps"}.
	Resource schema.GroupVersionResource
	// Namespace limits the watch to one namespace; empty watches all.
	Namespace string
	// Labels and Fields are selectors the API server filters by, such as
	// "app=web" or "metadata.name=nginx-conf". Empty selects everything.
	Labels string
	Fields string
	// KeepLabels keeps the watched objects' labels and deletion marks in the
	// store, so List can serve them: for watches a kind reads from, such as
	// the namespaces a rule selects by label.
	KeepLabels bool
}

// key is a Watch on one cluster.
type key struct {
	cluster string
	Watch
}

type running struct {
	stop     context.CancelFunc
	informer toolscache.SharedIndexInformer
	owners   map[types.NamespacedName]struct{}
}

// A Set runs the watches of one controller's managed resources and turns their
// events into reconcile requests of the managed resources that asked for them.
type Set struct {
	log    logging.Logger
	events chan event.GenericEvent

	ctx  context.Context //nolint:containedctx // The lifetime of every watch: until Start returns.
	stop context.CancelFunc

	mu       sync.Mutex
	clients  map[string]metadata.Interface
	watches  map[key]*running
	owners   map[types.NamespacedName]map[key]struct{}
	interest map[types.NamespacedName]Interest

	// startHook, set only by tests, runs as each watch starts with the watch's
	// context; its error fails the start.
	startHook func(ctx context.Context, w Watch) error
}

// An Interest tells whether an event of watch w about object o concerns its
// owner. Watches shared by many owners, such as every rule's namespaces watch,
// would otherwise reconcile them all for every event. For an update it is
// asked of the object before and after: either one concerning the owner is
// enough. Objects a transform did not produce always concern it.
type Interest func(w Watch, o *metav1.PartialObjectMetadata) bool

// New returns a Set. Add it to the manager, whose Start ends its watches.
func New(log logging.Logger) *Set {
	ctx, stop := context.WithCancel(context.Background())
	return &Set{
		log:      log,
		events:   make(chan event.GenericEvent, 1024),
		ctx:      ctx,
		stop:     stop,
		clients:  map[string]metadata.Interface{},
		watches:  map[key]*running{},
		owners:   map[types.NamespacedName]map[key]struct{}{},
		interest: map[types.NamespacedName]Interest{},
	}
}

// Start blocks until ctx ends, then stops every watch. It makes the Set a
// manager runnable.
func (s *Set) Start(ctx context.Context) error {
	<-ctx.Done()
	s.stop()
	return nil
}

// Source is the controller source that delivers the Set's events as requests
// to reconcile the managed resources that own the watches.
func (s *Set) Source() source.Source {
	return source.Channel(s.events, &handler.EnqueueRequestForObject{})
}

// Ensure makes ws the complete set of watches owner needs on cluster c: missing
// ones start, ones that owner alone needed and no longer names stop. It is all
// or nothing: if a watch cannot start, the ones this call started stop and
// owner keeps the watches it had.
func (s *Set) Ensure(owner types.NamespacedName, c *target.Cluster, ws ...Watch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := make(map[key]struct{}, len(ws))
	for _, w := range ws {
		want[key{cluster: c.ID, Watch: w}] = struct{}{}
	}
	// Start first and release after: a failed start must leave no informer
	// running unowned, and no key in s.owners without its watch.
	started := make([]key, 0, len(want))
	for k := range want {
		if _, ok := s.watches[k]; ok {
			continue
		}
		if _, err := s.start(c, k); err != nil {
			for _, sk := range started {
				s.watches[sk].stop()
				delete(s.watches, sk)
			}
			return err
		}
		started = append(started, k)
	}
	for k := range s.owners[owner] {
		if _, ok := want[k]; !ok {
			s.release(owner, k)
		}
	}
	for k := range want {
		s.watches[k].owners[owner] = struct{}{}
	}
	if len(want) == 0 {
		delete(s.owners, owner)
		return nil
	}
	s.owners[owner] = want
	return nil
}

// SetInterest narrows the events that enqueue owner to those f says concern
// it; nil lets every event of its watches through.
func (s *Set) SetInterest(owner types.NamespacedName, f Interest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f == nil {
		delete(s.interest, owner)
		return
	}
	s.interest[owner] = f
}

// Forget stops every watch that only owner needed: the managed resource is gone.
func (s *Set) Forget(owner types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.interest, owner)
	for k := range s.owners[owner] {
		s.release(owner, k)
	}
	delete(s.owners, owner)
}

// Len returns how many watches are running.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watches)
}

// Synced reports whether every watch owner needs has listed its objects, so
// that a change from now on is sure to bring an event.
func (s *Set) Synced(owner types.NamespacedName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.owners[owner] {
		// A watch missing from s.watches will never sync; never dereference it.
		if r, ok := s.watches[k]; !ok || !r.informer.HasSynced() {
			return false
		}
	}
	return true
}

func (s *Set) release(owner types.NamespacedName, k key) {
	r, ok := s.watches[k]
	if !ok {
		return
	}
	delete(r.owners, owner)
	if len(r.owners) == 0 {
		r.stop()
		delete(s.watches, k)
	}
}

// start runs the informer of k; s.mu is held.
func (s *Set) start(c *target.Cluster, k key) (*running, error) {
	mc, ok := s.clients[c.ID]
	if !ok {
		cfg := rest.CopyConfig(c.Config)
		// Watches are long-lived: their requests are few, but many start at once
		// when the provider starts, so they get a rate of their own.
		cfg.QPS, cfg.Burst = 50, 100
		var err error
		if mc, err = metadata.NewForConfig(cfg); err != nil {
			return nil, errors.Wrap(err, "cannot create a metadata client for watches")
		}
		s.clients[c.ID] = mc
	}
	inf := metadatainformer.NewFilteredMetadataInformer(mc, k.Resource, k.Namespace, 0, toolscache.Indexers{}, func(o *metav1.ListOptions) {
		o.LabelSelector, o.FieldSelector = k.Labels, k.Fields
	}).Informer()
	// A watch's events are all anyone uses: its store keeps only what the
	// informer needs to tell objects and versions apart, not labels,
	// annotations or managed fields (measured by make bench's memory scenario).
	transform := slim
	if k.KeepLabels {
		transform = slimKeepingLabels
	}
	if err := inf.SetTransform(transform); err != nil {
		return nil, errors.Wrap(err, "cannot slim watched objects")
	}
	r := &running{informer: inf, owners: map[types.NamespacedName]struct{}{}}
	notify := func(objs ...any) { s.notify(k, objs...) }
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { notify(o) },
		UpdateFunc: func(was, is any) {
			// A watch that keeps labels is read for them: an update that
			// changes neither them nor the deletion mark, such as a terminating
			// namespace's status, concerns no owner. Every owner of the
			// namespaces watch would be reconciled for it.
			if k.KeepLabels && sameLabelsAndDeletion(was, is) {
				return
			}
			notify(was, is)
		},
		DeleteFunc: func(o any) {
			if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			notify(o)
		},
	}); err != nil {
		return nil, errors.Wrap(err, "cannot handle watch events")
	}
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		// The informer retries with backoff; the managed resource's poll is
		// the safety net meanwhile.
		s.log.Debug("Watch failed; retrying", "resource", k.Resource.String(), "namespace", k.Namespace, "labels", k.Labels, "fields", k.Fields, "error", err)
	})
	ctx, stop := context.WithCancel(s.ctx)
	if s.startHook != nil {
		if err := s.startHook(ctx, k.Watch); err != nil {
			stop()
			return nil, err
		}
	}
	r.stop = stop
	go inf.RunWithContext(ctx)
	s.watches[k] = r
	return r, nil
}

// notify enqueues every owner of k that objs concern. The owners are copied
// under the lock and sent without it: the channel may be full while the
// controller catches up.
func (s *Set) notify(k key, objs ...any) {
	s.mu.Lock()
	r, ok := s.watches[k]
	if !ok {
		s.mu.Unlock()
		return
	}
	owners := make([]types.NamespacedName, 0, len(r.owners))
	for o := range r.owners {
		if concerns(s.interest[o], k.Watch, objs) {
			owners = append(owners, o)
		}
	}
	s.mu.Unlock()
	for _, o := range owners {
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name}}
		select {
		case s.events <- event.GenericEvent{Object: obj}:
		case <-s.ctx.Done():
			return
		}
	}
}

func concerns(f Interest, w Watch, objs []any) bool {
	if f == nil {
		return true
	}
	for _, o := range objs {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok || f(w, m) {
			return true
		}
	}
	return false
}

// WaitSynced polls until every watch of owner has synced or ctx ends; tests
// and callers that must not miss the next change use it.
func (s *Set) WaitSynced(ctx context.Context, owner types.NamespacedName) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !s.Synced(owner) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// slim keeps of a watched object its identity and version.
func slim(o any) (any, error) {
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return o, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
	}}, nil
}

// slimKeepingLabels is slim that also keeps labels and the deletion mark.
func slimKeepingLabels(o any) (any, error) {
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return o, nil
	}
	s, _ := slim(o)
	out, _ := s.(*metav1.PartialObjectMetadata)
	out.Labels, out.DeletionTimestamp = m.Labels, m.DeletionTimestamp
	return out, nil
}

func sameLabelsAndDeletion(was, is any) bool {
	a, ok := was.(*metav1.PartialObjectMetadata)
	b, ok2 := is.(*metav1.PartialObjectMetadata)
	if !ok || !ok2 {
		return false
	}
	return maps.Equal(a.Labels, b.Labels) && (a.DeletionTimestamp == nil) == (b.DeletionTimestamp == nil)
}

// List returns the objects a running, synced watch w on cluster c holds, as
// its transform kept them; false when there is no such watch yet, and the
// caller reads the API server instead. The store is current up to the events
// the watch has delivered, which are the events that enqueue its owners.
func (s *Set) List(c *target.Cluster, w Watch) ([]*metav1.PartialObjectMetadata, bool) {
	s.mu.Lock()
	r, ok := s.watches[key{cluster: c.ID, Watch: w}]
	s.mu.Unlock()
	if !ok || !r.informer.HasSynced() {
		return nil, false
	}
	items := r.informer.GetStore().List()
	out := make([]*metav1.PartialObjectMetadata, 0, len(items))
	for _, i := range items {
		if m, ok := i.(*metav1.PartialObjectMetadata); ok {
			out = append(out, m)
		}
	}
	return out, true
}
