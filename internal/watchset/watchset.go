// Package watchset runs narrow watches that managed resources ask for while
// they reconcile: one named ConfigMap, the Secrets matching one selector in one
// namespace, the copies one rule made. Each watch is metadata only, filtered by
// the API server, started when the first managed resource needs it and stopped
// when the last one no longer does, on whichever cluster the managed resource
// acts on. So the provider caches what its managed resources reference, never
// every ConfigMap or Secret in a cluster, and hears of changes on remote
// clusters as quickly as on its own.
//
// Watches of one object by name coalesce: once more than a few of them name
// objects of one resource in one namespace, one metadata-only watch of that
// namespace serves them all, and routes each event to the owners of the
// object's name only. An informer costs an API-server watch and about ten
// goroutines, so a thousand managed resources naming a thousand ConfigMaps
// would otherwise hold a thousand watches; coalesced, watches grow with the
// namespaces in use, not with the references.
package watchset

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"unique"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	"github.com/clusterops/provider-clusterops/internal/target"
	"github.com/clusterops/provider-clusterops/internal/urgency"
)

// A Watch is one narrow watch a managed resource needs.
type Watch struct {
	// Resource is watched, e.g. {Version: "v1", Resource: "configmaps"}.
	Resource schema.GroupVersionResource
	// Namespace limits the watch to one namespace; empty watches all.
	Namespace string
	// Labels and Fields are selectors the API server filters by, such as
	// "app=web" or "metadata.name=nginx-conf". Empty selects everything.
	//
	// A watch of exactly "metadata.name=<name>" in a namespace, without
	// labels, is a name watch: once more than coalesceAbove of them name
	// objects of one resource in one namespace, they share one watch of the
	// namespace instead of holding one each. Their owners see no difference
	// but the API-server watches and goroutines saved.
	Labels string
	Fields string
	// ReadLabels makes a watch a kind reads labels from, such as the
	// namespaces a rule selects by label: the store keeps the objects' labels
	// and deletion marks, so List can serve them, and an update that changes
	// neither is no event.
	ReadLabels bool
}

// coalesceAbove is how many name watches of a group run an informer each;
// one more and the group shares one. A few are cheaper apart: a namespace's
// every object is more than a few names' worth.
const coalesceAbove = 4

// nameField prefixes the Fields of a name watch.
const nameField = "metadata.name="

// key is a Watch on one cluster.
type key struct {
	cluster string
	Watch
}

// A group is where watches of one value coalesce: one resource in one
// namespace (or all, for a label) of one cluster, and either the name
// (label "") or the value of one label key.
type group struct {
	cluster   string
	resource  schema.GroupVersionResource
	namespace string
	label     string
}

// named returns the group of a watch of one value and the value it watches:
// a name watch, or a watch of exactly "key=value" for one label (a CopyRule's
// copies, by the rule's UID); false for any other watch. Values with
// characters a selector would read as more than one exact value do not
// coalesce, nor name watches of every namespace: their shared watch would be
// every object of the resource in the cluster. A label's shared watch holds
// only the objects that carry the label, in every namespace if need be.
func (k key) named() (group, string, bool) {
	if k.ReadLabels {
		return group{}, "", false
	}
	const odd = ",=!\\ ()"
	g := group{cluster: k.cluster, resource: k.Resource, namespace: k.Namespace}
	if name, ok := strings.CutPrefix(k.Fields, nameField); ok {
		if name == "" || strings.ContainsAny(name, odd) || k.Namespace == "" || k.Labels != "" {
			return group{}, "", false
		}
		return g, name, true
	}
	label, value, ok := strings.Cut(k.Labels, "=")
	if !ok || k.Fields != "" || label == "" || value == "" || strings.ContainsAny(label, odd) || strings.ContainsAny(value, odd) {
		return group{}, "", false
	}
	g.label = label
	return g, value, true
}

// watch returns the watch of value in g.
func (g group) watch(value string) key {
	w := Watch{Resource: g.resource, Namespace: g.namespace, Fields: nameField + value}
	if g.label != "" {
		w.Fields, w.Labels = "", g.label+"="+value
	}
	return key{cluster: g.cluster, Watch: w}
}

// value returns what o is to g: its name, or its value of g's label.
func (g group) value(o any) (string, bool) {
	m, err := meta.Accessor(o)
	if err != nil {
		return "", false
	}
	if g.label == "" {
		return m.GetName(), true
	}
	v, ok := m.GetLabels()[g.label]
	return v, ok
}

// byValue indexes a label group's shared store by the label's value.
const byValue = "value"

type running struct {
	stop     context.CancelFunc
	informer toolscache.SharedIndexInformer
	// handled syncs once the events of the informer's first list have
	// been handed out, which the informer's own HasSynced does not wait for.
	handled toolscache.ResourceEventHandlerRegistration
	// owners are those of a watch's own informer. names, of a group's shared
	// informer only, are the owners of each name it serves.
	owners *ownerSet
	names  map[string]*ownerSet
	// synced is set once the informer has listed (or stopped before);
	// waiting are the owners to enqueue then (WhenSynced). Both under
	// Set.mu.
	synced  bool
	waiting map[types.NamespacedName]struct{}
}

// A Set runs the watches of one controller's managed resources and turns their
// events into reconcile requests of the managed resources that asked for them.
type Set struct {
	log    logging.Logger
	events chan event.TypedGenericEvent[notice]

	ctx  context.Context //nolint:containedctx // The lifetime of every watch: until Start returns.
	stop context.CancelFunc

	mu      sync.Mutex
	clients map[string]metadata.Interface
	// watches are the informers of one watch each; shared those serving
	// every name watch of a group. named are the names of each group that
	// watches run, while it shares none: a group is in shared or named,
	// never both once Ensure returns.
	watches map[key]*running
	shared  map[group]*running
	named   map[group]map[string]struct{}
	// owners are each owner's watches, as handles: many owners hold the
	// same few keys (a rule's ten copy watches), and a key is 120 bytes.
	owners   map[types.NamespacedName]map[unique.Handle[key]]struct{}
	interest map[types.NamespacedName]Interest
	// ownWrites are owners' writes whose events are not theirs (Writing),
	// and writesBy the objects of each owner's, to forget with the owner.
	ownWrites map[object]ownWrite
	writesBy  map[types.NamespacedName]map[object]struct{}
	// reads are the version of each object each owner last read (Read).
	reads map[types.NamespacedName][]read
	// forgotten are called with each owner Forget forgets (OnForget).
	forgotten []func(types.NamespacedName)

	// peers count the owners' kind in each namespace (CountPeers); nil
	// counts none.
	peers *Peers

	// coalesceAbove is the package constant; tests lower or raise it.
	coalesceAbove int

	// startHook, set only by tests, runs as each watch starts with the watch's
	// context; its error fails the start.
	startHook func(ctx context.Context, w Watch) error
}

// An Interest tells whether an event of watch w about object o concerns its
// owner. Watches shared by many owners, such as every rule's namespaces watch,
// would otherwise reconcile them all for every event. For an update it is
// asked of the object before and after: either one concerning the owner is
// enough. Objects a transform did not produce always concern it.
type Interest func(w Watch, o *Object) bool

// New returns a Set. Add it to the manager, whose Start ends its watches.
func New(log logging.Logger) *Set {
	ctx, stop := context.WithCancel(context.Background())
	return &Set{
		log:      log,
		events:   make(chan event.TypedGenericEvent[notice], 1024),
		ctx:      ctx,
		stop:     stop,
		clients:  map[string]metadata.Interface{},
		watches:  map[key]*running{},
		shared:   map[group]*running{},
		named:    map[group]map[string]struct{}{},
		owners:   map[types.NamespacedName]map[unique.Handle[key]]struct{}{},
		interest: map[types.NamespacedName]Interest{},

		ownWrites: map[object]ownWrite{},
		writesBy:  map[types.NamespacedName]map[object]struct{}{},
		reads:     map[types.NamespacedName][]read{},

		coalesceAbove: coalesceAbove,
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
	return source.TypedChannel(s.events, handler.TypedFuncs[notice, reconcile.Request]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[notice], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r := reconcile.Request{NamespacedName: e.Object.owner}
			if e.Object.listed {
				q.Add(r)
				return
			}
			urgency.Queue(q).Add(r)
		},
	})
}

// A notice asks to reconcile owner. One from an informer's initial list
// (listed) is routine: the owner read the object when it asked for the watch,
// unless it changed in between. Any other is a change, and urgent.
type notice struct {
	owner  types.NamespacedName
	listed bool
}

// Ensure makes ws the complete set of watches owner needs on cluster c: missing
// ones start, ones that owner alone needed and no longer names stop. It is all
// or nothing: if a watch cannot start, the ones this call started stop and
// owner keeps the watches it had.
func (s *Set) Ensure(owner types.NamespacedName, c *target.Cluster, ws ...Watch) error {
	return s.EnsureOn(owner, On{Cluster: c, Watches: ws})
}

// On are watches on one cluster.
type On struct {
	Cluster *target.Cluster
	Watches []Watch
}

// EnsureOn is Ensure for an owner that acts on more than one cluster, such as
// a rule that reads on one and writes on another: ons are the complete set of
// watches owner needs, on every cluster.
func (s *Set) EnsureOn(owner types.NamespacedName, ons ...On) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ensure(owner, ons, false)
}

// Join adds watches ws on cluster c to owner's, keeping the others. An owner
// joins the watches it reads from before it reads: an event between its read
// and its joining a watch that already runs would reach it never.
func (s *Set) Join(owner types.NamespacedName, c *target.Cluster, ws ...Watch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ensure(owner, []On{{Cluster: c, Watches: ws}}, true)
}

// ensure makes ons owner's watches, or adds them to owner's (keep); s.mu is
// held.
func (s *Set) ensure(owner types.NamespacedName, ons []On, keep bool) error {
	want := map[key]struct{}{}
	clusters := map[string]*target.Cluster{}
	for _, on := range ons {
		clusters[on.Cluster.ID] = on.Cluster
		for _, w := range on.Watches {
			want[key{cluster: on.Cluster.ID, Watch: w}] = struct{}{}
		}
	}
	if keep {
		// Owned keys are served already: none needs its cluster to start.
		for h := range s.owners[owner] {
			want[h.Value()] = struct{}{}
		}
	}
	// Start first and release after: a failed start must leave no informer
	// running unowned, and no key in s.owners without its watch.
	var started []key
	var coalesced []group
	undo := func() {
		for _, k := range started {
			s.stopWatch(k)
		}
		for _, g := range coalesced {
			s.shared[g].stop()
			delete(s.shared, g)
		}
	}
	fresh := map[group][]key{}
	for k := range want {
		if _, ok := s.serving(k); ok {
			continue
		}
		if g, _, ok := k.named(); ok {
			fresh[g] = append(fresh[g], k)
			continue
		}
		if err := s.start(clusters[k.cluster], k); err != nil {
			undo()
			return err
		}
		started = append(started, k)
	}
	for g, ks := range fresh {
		// Counted before owner lets go of any name: coalescing a little early
		// costs nothing but the namespace's other objects in the store.
		if len(s.named[g])+len(ks) > s.coalesceAbove || s.crowded(owner.Namespace, g) {
			if err := s.startShared(clusters[g.cluster], g); err != nil {
				undo()
				return err
			}
			coalesced = append(coalesced, g)
			continue
		}
		for _, k := range ks {
			if err := s.start(clusters[k.cluster], k); err != nil {
				undo()
				return err
			}
			started = append(started, k)
		}
	}
	// Nothing fails from here. The shared informers started, their groups'
	// owners move over and only then do the watches they replace stop.
	for _, g := range coalesced {
		s.coalesce(g)
	}
	// Owning before releasing leaves no informer ownerless in between, which
	// release would stop.
	var behind bool
	owned := make(map[unique.Handle[key]]struct{}, len(want))
	for k := range want {
		h := unique.Make(k)
		if _, had := s.owners[owner][h]; !had {
			behind = behind || s.missed(owner, k)
		}
		s.own(owner, k)
		owned[h] = struct{}{}
	}
	for h := range s.owners[owner] {
		if _, ok := owned[h]; !ok {
			s.release(owner, h.Value())
		}
	}
	if behind {
		// Not from here: the channel may be full, and s.mu is held.
		go s.enqueue([]types.NamespacedName{owner}, false)
	}
	if len(want) == 0 {
		delete(s.owners, owner)
		return nil
	}
	s.owners[owner] = owned
	return nil
}

// Owns reports whether owner holds watch w on cluster c: whether an event of
// w reaches it from now on.
func (s *Set) Owns(owner types.NamespacedName, c *target.Cluster, w Watch) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.owners[owner][unique.Make(key{cluster: c.ID, Watch: w})]
	return ok
}

// missed reports whether owner, joining name watch k, which runs and has
// listed already, missed a change to its object: one owner read before it
// joined, changed since, or one it found missing, made since. The watch's
// events before owner joined were not owner's, and a watch that has listed
// lists no more. A watch that has not listed yet shows owner its object
// when it does. s.mu is held.
func (s *Set) missed(owner types.NamespacedName, k key) bool {
	g, name, ok := k.named()
	if !ok || g.label != "" {
		return false
	}
	r, ok := s.serving(k)
	if !ok || !r.informer.HasSynced() {
		return false
	}
	o, exists, _ := r.informer.GetStore().GetByKey(toolscache.NewObjectName(k.Namespace, name).String())
	want := object{cluster: k.cluster, resource: k.Resource, namespace: k.Namespace, name: name}
	version, read := "", false
	for _, rd := range s.reads[owner] {
		if rd.object == want {
			version, read = rd.version, true
		}
	}
	m, isMeta := asObject(o)
	switch {
	case !exists:
		// Gone since owner read it, or missing as owner found it.
		return read
	case !isMeta:
		return true
	default:
		return !read || m.ResourceVersion != version
	}
}

// coalesce moves the owners of g's own name watches to its shared informer and
// stops those watches; s.mu is held.
func (s *Set) coalesce(g group) {
	r := s.shared[g]
	for name := range s.named[g] {
		k := g.watch(name)
		r.names[name] = s.watches[k].owners
		s.stopWatch(k)
	}
}

// own records that owner needs k, which is served; s.mu is held.
func (s *Set) own(owner types.NamespacedName, k key) {
	if g, name, ok := k.named(); ok {
		if r, ok := s.shared[g]; ok {
			if r.names[name] == nil {
				r.names[name] = &ownerSet{}
			}
			r.names[name].add(owner)
			return
		}
	}
	s.watches[k].owners.add(owner)
}

// serving returns the informer that serves k: its group's shared one or its
// own; s.mu is held.
func (s *Set) serving(k key) (*running, bool) {
	if g, _, ok := k.named(); ok {
		if r, ok := s.shared[g]; ok {
			return r, true
		}
	}
	r, ok := s.watches[k]
	return r, ok
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

// Forget stops every watch that only owner needed and forgets its own
// writes: the managed resource is gone.
func (s *Set) Forget(owner types.NamespacedName) {
	s.mu.Lock()
	delete(s.interest, owner)
	for h := range s.owners[owner] {
		s.release(owner, h.Value())
	}
	delete(s.owners, owner)
	s.forgetWrites(owner)
	delete(s.reads, owner)
	fs := s.forgotten
	s.mu.Unlock()
	for _, f := range fs {
		f(owner)
	}
}

// OnForget has f called with every owner Forget forgets, for what a
// controller keeps of its managed resources beside their watches. Call it
// before the Set starts.
func (s *Set) OnForget(f func(types.NamespacedName)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgotten = append(s.forgotten, f)
}

// release records that owner no longer needs k and stops the informer that
// served k if nobody else needs it; s.mu is held.
func (s *Set) release(owner types.NamespacedName, k key) {
	if g, name, ok := k.named(); ok {
		if r, ok := s.shared[g]; ok {
			r.names[name].del(owner)
			if r.names[name].len() == 0 {
				delete(r.names, name)
			}
			if len(r.names) == 0 {
				r.stop()
				delete(s.shared, g)
			}
			return
		}
	}
	r, ok := s.watches[k]
	if !ok {
		return
	}
	r.owners.del(owner)
	if r.owners.len() == 0 {
		s.stopWatch(k)
	}
}

// start runs the informer of k alone; s.mu is held.
func (s *Set) start(c *target.Cluster, k key) error {
	r, err := s.inform(c, k.Watch, func(h happening, objs ...any) { s.notify(k, h, objs...) })
	if err != nil {
		return err
	}
	r.owners = &ownerSet{}
	s.watches[k] = r
	if g, name, ok := k.named(); ok {
		if s.named[g] == nil {
			s.named[g] = map[string]struct{}{}
		}
		s.named[g][name] = struct{}{}
	}
	return nil
}

// stopWatch stops the informer of k alone; s.mu is held.
func (s *Set) stopWatch(k key) {
	s.watches[k].stop()
	delete(s.watches, k)
	if g, name, ok := k.named(); ok {
		delete(s.named[g], name)
		if len(s.named[g]) == 0 {
			delete(s.named, g)
		}
	}
}

// startShared runs the informer that serves every name watch of g: the whole
// namespace, stripped by slim like any watch; s.mu is held.
func (s *Set) startShared(c *target.Cluster, g group) error {
	r, err := s.inform(c, g.shared(), func(h happening, objs ...any) { s.notifyNames(g, h, objs...) })
	if err != nil {
		return err
	}
	r.names = map[string]*ownerSet{}
	s.shared[g] = r
	return nil
}

// shared is the watch that serves every watch of g: the namespace's objects,
// or the objects that carry g's label.
func (g group) shared() Watch {
	return Watch{Resource: g.resource, Namespace: g.namespace, Labels: g.label}
}

// inform runs an informer of w on cluster c whose events go to notify; s.mu
// is held.
func (s *Set) inform(c *target.Cluster, w Watch, notify func(h happening, objs ...any)) (*running, error) {
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
	indexers := toolscache.Indexers{}
	// A watch's events are all anyone uses: its store keeps only what the
	// informer needs to tell objects and versions apart, not labels,
	// annotations or managed fields (measured by make bench's memory scenario).
	transform := slim
	switch {
	case w.ReadLabels:
		transform = slimKeepingLabels
	case isKey(w.Labels):
		// A label group's shared watch: the label's value routes events.
		transform = slimKeeping(w.Labels)
		indexers[byValue] = func(o any) ([]string, error) {
			m, err := meta.Accessor(o)
			if err != nil {
				return nil, err
			}
			return []string{m.GetLabels()[w.Labels]}, nil
		}
	}
	inf := metadatainformer.NewFilteredMetadataInformer(mc, w.Resource, w.Namespace, 0, indexers, func(o *metav1.ListOptions) {
		o.LabelSelector, o.FieldSelector = w.Labels, w.Fields
	}).Informer()
	if err := inf.SetTransform(transform); err != nil {
		return nil, errors.Wrap(err, "cannot slim watched objects")
	}
	handled, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(o any, initial bool) {
			h := changed
			if initial {
				h = listed
			}
			notify(h, o)
		},
		UpdateFunc: func(was, is any) {
			// A watch that keeps labels is read for them: an update that
			// changes neither them nor the deletion mark, such as a terminating
			// namespace's status, concerns no owner. Every owner of the
			// namespaces watch would be reconciled for it.
			if w.ReadLabels && sameLabelsAndDeletion(was, is) {
				return
			}
			notify(changed, was, is)
		},
		DeleteFunc: func(o any) {
			if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			// A deletion is nobody's own write: the copy a rule made and
			// somebody deleted must be made again.
			s.forgetWrite(key{cluster: c.ID, Watch: w}, o)
			notify(gone, o)
		},
	})
	if err != nil {
		return nil, errors.Wrap(err, "cannot handle watch events")
	}
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		// The informer retries with backoff; the managed resource's poll is
		// the safety net meanwhile.
		s.log.Debug("Watch failed; retrying", "resource", w.Resource.String(), "namespace", w.Namespace, "labels", w.Labels, "fields", w.Fields, "error", err)
	})
	ctx, stop := context.WithCancel(s.ctx)
	if s.startHook != nil {
		if err := s.startHook(ctx, w); err != nil {
			stop()
			return nil, err
		}
	}
	r := &running{stop: stop, informer: inf, handled: handled}
	go inf.RunWithContext(ctx)
	go s.awaitSync(ctx, r)
	return r, nil
}

// awaitSync enqueues the owners waiting for r to sync once it has, or once
// it stopped before: they decide again either way. Synced is when the first
// list's events have been sent, so those come first. The goroutine lasts
// until the informer's first list.
func (s *Set) awaitSync(ctx context.Context, r *running) {
	toolscache.WaitForCacheSync(ctx.Done(), r.handled.HasSynced)
	s.mu.Lock()
	r.synced = true
	owners := slices.Collect(maps.Keys(r.waiting))
	r.waiting = nil
	s.mu.Unlock()
	s.enqueue(owners, true)
}

// WhenSynced reports whether every watch of owner has synced, so that List
// serves them all. If not, owner is enqueued, as routine, once they have: an
// owner that would rather decide from its watches than read the API server
// (such as a resource whose status says what it last decided from, after a
// restart) waits for them without holding a worker.
func (s *Set) WhenSynced(owner types.NamespacedName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := true
	for h := range s.owners[owner] {
		r, ok := s.serving(h.Value())
		if !ok {
			// Never so once ensure returns; never wait on it either.
			go s.enqueue([]types.NamespacedName{owner}, true)
			return false
		}
		if r.synced || r.handled.HasSynced() {
			continue
		}
		all = false
		if r.waiting == nil {
			r.waiting = map[types.NamespacedName]struct{}{}
		}
		r.waiting[owner] = struct{}{}
	}
	return all
}

// notify enqueues every owner of k that objs concern.
func (s *Set) notify(k key, h happening, objs ...any) {
	s.mu.Lock()
	var notices []notice
	if r, ok := s.watches[k]; ok {
		notices = s.concerned(r.owners, k, h, objs)
	}
	s.mu.Unlock()
	s.send(notices)
}

// notifyNames enqueues the owners in g of the value (name or label) of the
// object objs are about, those the event concerns: other objects are
// nobody's. An update that moves an object from one label value to another
// concerns the owners of both.
func (s *Set) notifyNames(g group, h happening, objs ...any) {
	values := make([]string, 0, len(objs))
	for _, o := range objs {
		if v, ok := g.value(o); ok && (len(values) == 0 || values[0] != v) {
			values = append(values, v)
		}
	}
	s.mu.Lock()
	var notices []notice
	if r, ok := s.shared[g]; ok {
		for _, v := range values {
			notices = append(notices, s.concerned(r.names[v], g.watch(v), h, objs)...)
		}
	}
	s.mu.Unlock()
	s.send(notices)
}

// concerned returns notices for those of owners that an event h of w about
// objs concerns, that did not make it themselves and, unless the object is
// gone, have not read it as it is now; s.mu is held.
//
// A watch's initial list is routine, but not where it shows an object at
// another version than its owner read: that is a change the owner has not
// seen, made while the watch started (as when a namespace's name watches
// coalesce into one, whose list then carries a change made in between), and
// as urgent as any other. Ranked with the list, such a change waited behind
// a converging fleet's backlog: 7.6 and 8.8 s for one of 17 probes of 1,000
// ConfigRollouts spread over 100 namespaces, against at most 1.4 s before.
func (s *Set) concerned(owners *ownerSet, k key, h happening, objs []any) []notice {
	out := make([]notice, 0, owners.len())
	for o := range owners.all() {
		if !concerns(s.interest[o], k.Watch, objs) || s.isOwnWrite(o, k, objs) {
			continue
		}
		read := notRead
		if h != gone {
			read = s.readOf(o, k, objs)
		}
		if read == readAsIs {
			continue
		}
		out = append(out, notice{owner: o, listed: h == listed && read == notRead})
	}
	return out
}

// send sends notices, without s.mu: the channel may be full while the
// controller catches up.
func (s *Set) send(notices []notice) {
	for _, n := range notices {
		select {
		case s.events <- event.TypedGenericEvent[notice]{Object: n}:
		case <-s.ctx.Done():
			return
		}
	}
}

// enqueue sends a request for each owner, routine (listed) or urgent.
func (s *Set) enqueue(owners []types.NamespacedName, listed bool) {
	notices := make([]notice, 0, len(owners))
	for _, o := range owners {
		notices = append(notices, notice{owner: o, listed: listed})
	}
	s.send(notices)
}

func concerns(f Interest, w Watch, objs []any) bool {
	if f == nil {
		return true
	}
	for _, o := range objs {
		m, ok := asObject(o)
		if !ok || f(w, m) {
			return true
		}
	}
	return false
}

// slim keeps of a watched object its identity and version, as an Object.
func slim(o any) (any, error) {
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return o, nil
	}
	// A namespace's name is held once, not by each of its objects.
	return &Object{Name: m.Name, Namespace: unique.Make(m.Namespace).Value(), UID: m.UID, ResourceVersion: m.ResourceVersion}, nil
}

// isKey reports whether a label selector is one bare key: "exists".
func isKey(labels string) bool {
	return labels != "" && !strings.ContainsAny(labels, ",=!() ")
}

// slimKeeping is slim that also keeps one label. The objects of one value
// share one labels map, and so its strings: a label group's objects are many
// to a value (a rule's copies carry its UID), and a map of one label held by
// each cost about 500 bytes of heap a copy (heap profile of 1,000 CopyRules
// with 10 targets each). Cached objects are never written, so sharing is
// safe; at most maxSharedLabels values are remembered, then the table starts
// over, so values of objects long gone do not pile up.
func slimKeeping(label string) toolscache.TransformFunc {
	var mu sync.Mutex
	shared := map[string]map[string]string{}
	return func(o any) (any, error) {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok {
			return o, nil
		}
		s, _ := slim(o)
		out, _ := s.(*Object)
		v, ok := m.Labels[label]
		if !ok {
			return out, nil
		}
		mu.Lock()
		defer mu.Unlock()
		l, ok := shared[v]
		if !ok {
			if len(shared) >= maxSharedLabels {
				clear(shared)
			}
			l = map[string]string{label: v}
			shared[v] = l
		}
		out.Labels = l
		return out, nil
	}
}

// maxSharedLabels bounds a label group's table of shared labels maps: about
// 350 bytes a value, once.
const maxSharedLabels = 4096

// slimKeepingLabels is slim that also keeps labels and the deletion mark.
func slimKeepingLabels(o any) (any, error) {
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return o, nil
	}
	s, _ := slim(o)
	out, _ := s.(*Object)
	out.Labels, out.Deleting = m.Labels, m.DeletionTimestamp != nil
	return out, nil
}

func sameLabelsAndDeletion(was, is any) bool {
	a, ok := asObject(was)
	b, ok2 := asObject(is)
	if !ok || !ok2 {
		return false
	}
	return maps.Equal(a.Labels, b.Labels) && a.Deleting == b.Deleting
}

// List returns the objects a running, synced watch w on cluster c holds, as
// its transform kept them; false when there is no such watch yet, and the
// caller reads the API server instead. The store is current up to the events
// the watch has delivered, which are the events that enqueue its owners. A
// name watch served by its group's shared informer lists its one object.
func (s *Set) List(c *target.Cluster, w Watch) ([]*Object, bool) {
	k := key{cluster: c.ID, Watch: w}
	s.mu.Lock()
	r, ok := s.serving(k)
	s.mu.Unlock()
	if !ok || !r.informer.HasSynced() {
		return nil, false
	}
	var items []any
	if r.names != nil {
		g, v, _ := k.named()
		if g.label != "" {
			items, _ = r.informer.GetIndexer().ByIndex(byValue, v)
		} else if i, exists, _ := r.informer.GetStore().GetByKey(toolscache.NewObjectName(w.Namespace, v).String()); exists {
			items = []any{i}
		}
	} else {
		items = r.informer.GetStore().List()
	}
	out := make([]*Object, 0, len(items))
	for _, i := range items {
		if m, ok := asObject(i); ok {
			out = append(out, m)
		}
	}
	return out, true
}
