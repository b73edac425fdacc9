package shard

import (
	"context"
	"slices"
	"strings"
	"sync"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
)

// A Part is a piece of a replica's share that its share caches hold apart,
// added and dropped on its own: a shard, or the namespaces of the share's
// ConfigRollouts that no held shard's ranges cover.
type Part struct {
	// Name is the shard's (Name), or another that names no shard.
	Name string
	// Select picks the part's objects by their shard label.
	Select labels.Selector
	// Filter is the shardSelector of the part's namespace-wide watches of
	// objects without a shard label; empty watches them whole.
	Filter string
	// Family, when set, names parts that replace one another: a part of a
	// family is dropped only once the part of its family that replaces it
	// is read.
	Family string
}

// PartOf is the Part of shard i of place.
func PartOf(place Placement, i int) (Part, error) {
	sel, err := Share([]int{i})
	if err != nil {
		return Part{}, err
	}
	return Part{Name: Name(i), Select: sel, Filter: place.Filter([]int{i}, nil)}, nil
}

// Shares are the share caches of one replica: each holds the parts the
// replica acts on, and Hold changes them all at once. A replica builds its
// manager and controllers once; only the caches of the parts that come or go
// change (TestShareChangesLeaveNothingBehind).
type Shares struct {
	log logging.Logger

	mu     sync.Mutex
	parts  []Part
	caches []*ShareCache
}

// NewShares returns shares that hold no part yet.
func NewShares(log logging.Logger) *Shares {
	if log == nil {
		log = logging.NewNopLogger()
	}
	return &Shares{log: log}
}

// Hold has every share cache hold parts from now on. A part dropped is read
// no more once Hold returns, and the handlers of its informers were told
// that its objects are gone (as an informer that relists tells of objects
// it no longer finds), so that what remembers them forgets them. A part
// added is built and started in the background and read once it synced;
// its handlers hear of its objects as they would of a new informer's.
func (s *Shares) Hold(parts []Part) {
	s.mu.Lock()
	s.parts = slices.Clone(parts)
	cs := slices.Clone(s.caches)
	s.mu.Unlock()
	for _, c := range cs {
		c.hold(parts)
	}
}

// Holds is whether the share caches hold the part named name now: a
// shard's (Name) from the Hold that added it until the one that dropped it.
func (s *Shares) Holds(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.parts, func(p Part) bool { return p.Name == name })
}

// New returns a share cache: objects route says are cut by shard are read
// and watched in a cache per part, built by build; the others in base,
// which may be nil when every object is routed. It is started as a
// manager's cache is (Start).
func (s *Shares) New(scheme *runtime.Scheme, mapper meta.RESTMapper, base cache.Cache, route func(gvk schema.GroupVersionKind, metadata bool) bool, build func(Part) (cache.Cache, error)) *ShareCache {
	c := &ShareCache{
		log: s.log, scheme: scheme, mapper: mapper, base: base, route: route, build: build,
		parts: map[string]*part{}, informers: map[informerKey]*shareInformer{},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.caches = append(s.caches, c)
	c.wanted = slices.Clone(s.parts)
	return c
}

// A ShareCache is a cache.Cache whose objects that are cut by shard live in
// one cache per part of the replica's share. A read looks in every part; an
// informer's handler hears from every part, those added later included.
type ShareCache struct {
	log    logging.Logger
	scheme *runtime.Scheme
	mapper meta.RESTMapper
	base   cache.Cache
	route  func(schema.GroupVersionKind, bool) bool
	build  func(Part) (cache.Cache, error)

	mu        sync.RWMutex
	ctx       context.Context //nolint:containedctx // Start's: parts run until it ends.
	wanted    []Part
	parts     map[string]*part  // by name, read once synced
	adding    map[string]*adder // by name, built and started meanwhile
	informers map[informerKey]*shareInformer
	indexes   []index
}

type informerKey struct {
	gvk      schema.GroupVersionKind
	metadata bool
}

type index struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

var _ cache.Cache = &ShareCache{}

func (c *ShareCache) key(obj runtime.Object) (informerKey, error) {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return informerKey{}, err
	}
	_, isList := obj.(client.ObjectList)
	if isList {
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	}
	switch obj.(type) {
	case *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		return informerKey{gvk: gvk, metadata: true}, nil
	}
	return informerKey{gvk: gvk}, nil
}

// routed is whether obj is cut by shard, and its key.
func (c *ShareCache) routed(obj runtime.Object) (informerKey, bool, error) {
	k, err := c.key(obj)
	if err != nil {
		return k, false, err
	}
	return k, c.base == nil || c.route(k.gvk, k.metadata), nil
}

// Live is whether the part named name is read now.
func (c *ShareCache) Live(name string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.parts[name]
	return ok
}

func (c *ShareCache) live() []*part {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*part, 0, len(c.parts))
	for _, p := range c.parts {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *part) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Get reads obj from the part that holds it.
func (c *ShareCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	k, routed, err := c.routed(obj)
	if err != nil {
		return err
	}
	if !routed {
		return c.base.Get(ctx, key, obj, opts...)
	}
	if _, err := c.ensure(k, obj); err != nil {
		return err
	}
	for _, p := range c.live() {
		pctx, cancel := p.within(ctx)
		err := p.cache.Get(pctx, key, obj, opts...)
		cancel()
		// A part dropped meanwhile holds nothing of the replica's any more
		// (TestShareCacheReadsWithoutAPartDropped).
		if p.dropped() && ctx.Err() == nil {
			continue
		}
		if !kerrors.IsNotFound(err) {
			return err
		}
	}
	return kerrors.NewNotFound(schema.GroupResource{Group: k.gvk.Group, Resource: strings.ToLower(k.gvk.Kind)}, key.Name)
}

// List lists from every part.
func (c *ShareCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	k, routed, err := c.routed(list)
	if err != nil {
		return err
	}
	if !routed {
		return c.base.List(ctx, list, opts...)
	}
	obj, err := objectOf(c.scheme, k)
	if err != nil {
		return err
	}
	if _, err := c.ensure(k, obj); err != nil {
		return err
	}
	var all []runtime.Object
	parts := c.live()
	var seen map[types.UID]bool
	if len(parts) > 1 {
		seen = map[types.UID]bool{}
	}
	for _, p := range parts {
		l, ok := list.DeepCopyObject().(client.ObjectList)
		if !ok {
			return errors.New("cannot copy the list")
		}
		pctx, cancel := p.within(ctx)
		err := p.cache.List(pctx, l, opts...)
		cancel()
		if p.dropped() && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return err
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return errors.Wrap(err, "cannot read a part's list")
		}
		// Two parts may hold an object for a moment: one relabelled
		// between two shards held, a namespace both of a shard and of
		// the outside part. One part holds each object once.
		if seen == nil {
			all = append(all, items...)
			continue
		}
		for _, o := range items {
			if a, err := meta.Accessor(o); err == nil && !seen[a.GetUID()] {
				seen[a.GetUID()] = true
				all = append(all, o)
			}
		}
	}
	return errors.Wrap(meta.SetList(list, all), "cannot set the list of every part")
}

// objectOf is an empty object of k, for the informers of parts.
func objectOf(s *runtime.Scheme, k informerKey) (client.Object, error) {
	if k.metadata {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(k.gvk)
		return m, nil
	}
	o, err := s.New(k.gvk)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot make an object of %s", k.gvk)
	}
	co, ok := o.(client.Object)
	if !ok {
		return nil, errors.Errorf("%s is not an object", k.gvk)
	}
	return co, nil
}

// GetInformer returns the informer of obj's kind across every part.
func (c *ShareCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	k, routed, err := c.routed(obj)
	if err != nil {
		return nil, err
	}
	if !routed {
		return c.base.GetInformer(ctx, obj, opts...)
	}
	return c.informer(ctx, k, obj, opts)
}

// GetInformerForKind returns the informer of gvk across every part.
func (c *ShareCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if c.base != nil && !c.route(gvk, false) {
		return c.base.GetInformerForKind(ctx, gvk, opts...)
	}
	k := informerKey{gvk: gvk}
	o, err := objectOf(c.scheme, k)
	if err != nil {
		return nil, err
	}
	return c.informer(ctx, k, o, opts)
}

func (c *ShareCache) informer(ctx context.Context, k informerKey, obj client.Object, opts []cache.InformerGetOption) (cache.Informer, error) {
	i, err := c.ensure(k, obj)
	if err != nil {
		return nil, err
	}
	var o cache.InformerGetOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.BlockUntilSynced == nil || *o.BlockUntilSynced {
		if !toolscache.WaitForCacheSync(ctx.Done(), i.HasSynced) {
			return nil, errors.New("the informer of every part did not sync")
		}
	}
	return i, nil
}

// ensure returns the informer of k, which every live part then runs; an
// error, as a cache's, when the API server does not serve k.
func (c *ShareCache) ensure(k informerKey, obj client.Object) (*shareInformer, error) {
	c.mu.RLock()
	i, ok := c.informers[k]
	c.mu.RUnlock()
	if ok {
		return i, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ensureLocked(k, obj)
}

// ensureLocked is ensure with c.mu held.
func (c *ShareCache) ensureLocked(k informerKey, obj client.Object) (*shareInformer, error) {
	if i, ok := c.informers[k]; ok {
		return i, nil
	}
	// A kind not served yet (a CRD discovery does not list yet) is refused
	// here, as a cache refuses it, so that the caller tries again; taken, it
	// would be a kind no part can run.
	if c.mapper != nil {
		if _, err := c.mapper.RESTMapping(k.gvk.GroupKind(), k.gvk.Version); err != nil {
			return nil, err
		}
	}
	o, _ := obj.DeepCopyObject().(client.Object)
	i := &shareInformer{c: c, key: k, obj: o, handlers: map[*registration]struct{}{}}
	c.informers[k] = i
	for _, p := range c.parts {
		if err := p.inform(c.ctx, i); err != nil {
			c.readd(p, err)
		}
	}
	return i, nil
}

// RemoveInformer stops the informer of obj's kind in every part.
func (c *ShareCache) RemoveInformer(ctx context.Context, obj client.Object) error {
	k, routed, err := c.routed(obj)
	if err != nil {
		return err
	}
	if !routed {
		return c.base.RemoveInformer(ctx, obj)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.informers, k)
	for _, p := range c.parts {
		if err := p.cache.RemoveInformer(ctx, obj); err != nil {
			return err
		}
		delete(p.informers, k)
	}
	return nil
}

// IndexField indexes obj's kind in every part, those added later included.
func (c *ShareCache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	k, routed, err := c.routed(obj)
	if err != nil {
		return err
	}
	if !routed {
		return c.base.IndexField(ctx, obj, field, extract)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.ensureLocked(k, obj); err != nil {
		return err
	}
	// The same field of the same kind again (a setup tried again) is
	// indexed once.
	for _, x := range c.indexes {
		if xk, err := c.key(x.obj); err == nil && xk == k && x.field == field {
			return nil
		}
	}
	c.indexes = append(c.indexes, index{obj: obj, field: field, extract: extract})
	for _, p := range c.parts {
		if err := p.index(ctx, c.indexes); err != nil {
			c.readd(p, err)
		}
	}
	return nil
}

// Start runs base and the parts held until ctx ends.
func (c *ShareCache) Start(ctx context.Context) error {
	c.mu.Lock()
	c.ctx = ctx
	c.holdLocked()
	c.mu.Unlock()
	var err error
	if c.base != nil {
		err = c.base.Start(ctx)
	} else {
		<-ctx.Done()
	}
	c.mu.Lock()
	parts := c.parts
	c.parts = map[string]*part{}
	for _, a := range c.adding {
		a.cancel()
	}
	c.mu.Unlock()
	for _, p := range parts {
		p.cancel()
		<-p.done
	}
	return err
}

// WaitForCacheSync waits for base and every part read now. A part dropped
// meanwhile is waited for no more: an informer it started and stopped
// before it synced (a kind asked for just before the drop) never syncs.
func (c *ShareCache) WaitForCacheSync(ctx context.Context) bool {
	if c.base != nil && !c.base.WaitForCacheSync(ctx) {
		return false
	}
	for _, p := range c.live() {
		wctx, cancel := p.within(ctx)
		synced := p.cache.WaitForCacheSync(wctx)
		cancel()
		if !synced && ctx.Err() != nil {
			return false
		}
	}
	return true
}
