package shard

import (
	"context"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// The parts of a share cache come and go here: a part wanted is built,
// started and synced in the background, then read; a part no longer wanted
// is read no more at once, its handlers told its objects are gone, and
// stopped.

// An adder builds a part in the background until it is read, or cancelled
// once it is no longer wanted.
type adder struct {
	cancel context.CancelFunc
}

type part struct {
	Part
	cache     cache.Cache
	cancel    context.CancelFunc
	life      context.Context //nolint:containedctx // The part's own: it ends once the part is dropped.
	done      chan struct{}
	informers map[informerKey]cache.Informer
	indexed   int // how many of the cache's indexes the part has
}

// within is ctx, ended too once p is dropped: a wait of p's cache for an
// informer that p stopped before it synced would otherwise last as long as
// ctx, for an informer that never syncs. Every routed read goes through
// it, so it starts no goroutine: the part's end cancels it.
func (p *part) within(ctx context.Context) (context.Context, context.CancelFunc) {
	pctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.life, cancel)
	return pctx, func() {
		stop()
		cancel()
	}
}

// dropped reports whether p has been dropped.
func (p *part) dropped() bool { return p.life.Err() != nil }

// readd has part p, which could not take a kind or an index asked for, read
// no more and added again with every kind and index; c.mu is held.
func (c *ShareCache) readd(p *part, err error) {
	c.log.Info("A part of the share cannot take a kind or index asked for; adding it again", "part", p.Name, "error", err)
	delete(c.parts, p.Name)
	drop := append([]*part{p}, c.holdLocked()...)
	go func() {
		for _, d := range drop {
			c.drop(d)
		}
	}()
}

// hold adds the parts wanted that it lacks, in the background, and drops
// those no longer wanted; before Start it only notes them.
func (c *ShareCache) hold(wanted []Part) {
	c.mu.Lock()
	c.wanted = slices.Clone(wanted)
	drop := c.holdLocked()
	c.mu.Unlock()
	for _, p := range drop {
		c.drop(p)
	}
}

// holdLocked starts the adds of the parts wanted that are neither read nor
// being added, cancels those of parts no longer wanted, and takes the parts
// to drop out of the reads, for the caller to drop once c.mu is released.
// A part is kept while a part of its family that is wanted is not read yet.
func (c *ShareCache) holdLocked() []*part {
	if c.ctx == nil {
		return nil
	}
	if c.adding == nil {
		c.adding = map[string]*adder{}
	}
	var drop []*part
	for name, p := range c.parts {
		if !c.wants(name) && !c.awaitsSuccessor(p) {
			drop = append(drop, p)
			delete(c.parts, name)
		}
	}
	for name, a := range c.adding {
		if !c.wants(name) {
			a.cancel()
			delete(c.adding, name)
		}
	}
	for _, w := range c.wanted {
		if _, ok := c.parts[w.Name]; ok {
			continue
		}
		if _, ok := c.adding[w.Name]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(c.ctx)
		a := &adder{cancel: cancel}
		c.adding[w.Name] = a
		go c.add(ctx, w, a)
	}
	return drop
}

func (c *ShareCache) wants(name string) bool {
	return slices.ContainsFunc(c.wanted, func(p Part) bool { return p.Name == name })
}

// awaitsSuccessor is whether p, no longer wanted, is kept until a wanted
// part of its family is read.
func (c *ShareCache) awaitsSuccessor(p *part) bool {
	if p.Family == "" {
		return false
	}
	for _, w := range c.wanted {
		if _, read := c.parts[w.Name]; w.Family == p.Family && !read {
			return true
		}
	}
	return false
}

// addRetry spaces the tries of a part that could not be built or synced.
const addRetry = 5 * time.Second

// add builds part w, starts it and, once synced, reads it; it tries again
// until it is read or a is cancelled.
func (c *ShareCache) add(ctx context.Context, w Part, a *adder) {
	defer func() {
		c.mu.Lock()
		if c.adding[w.Name] == a {
			delete(c.adding, w.Name)
		}
		c.mu.Unlock()
		a.cancel()
	}()
	for ctx.Err() == nil {
		err := c.try(ctx, w, a)
		if err == nil {
			return
		}
		c.log.Info("Cannot hold a part of the replica's share; trying again", "part", w.Name, "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(addRetry):
		}
	}
}

func (c *ShareCache) try(ctx context.Context, w Part, a *adder) error {
	sub, err := c.build(w)
	if err != nil {
		return err
	}
	// The part runs until the cache stops or the part is dropped; while it
	// is being added, also until the add is cancelled.
	c.mu.RLock()
	root := c.ctx
	c.mu.RUnlock()
	pctx, cancel := context.WithCancel(root)
	building := context.AfterFunc(ctx, cancel)
	p := &part{Part: w, cache: sub, cancel: cancel, life: pctx, done: make(chan struct{}), informers: map[informerKey]cache.Informer{}}
	go func() {
		defer close(p.done)
		if err := sub.Start(pctx); err != nil {
			c.log.Info("A part of the replica's share stopped", "part", w.Name, "error", err)
		}
	}()
	stop := func(err error) error {
		cancel()
		<-p.done
		return err
	}
	for {
		// Every kind asked for so far, and every index, then synced,
		// before the part is read; those asked for meanwhile are added in
		// turn.
		c.mu.RLock()
		var missing []*shareInformer
		for k, i := range c.informers {
			if _, ok := p.informers[k]; !ok {
				missing = append(missing, i)
			}
		}
		indexes := slices.Clone(c.indexes)
		c.mu.RUnlock()
		if len(missing) > 0 || p.indexed < len(indexes) {
			if err := p.index(pctx, indexes); err != nil {
				return stop(err)
			}
			for _, i := range missing {
				if err := p.informOnly(pctx, i); err != nil {
					return stop(err)
				}
			}
			if !sub.WaitForCacheSync(pctx) {
				return stop(errors.New("the part did not sync"))
			}
			continue
		}
		c.mu.Lock()
		if c.lacks(p) {
			c.mu.Unlock()
			continue
		}
		if c.adding[w.Name] != a || !building() {
			c.mu.Unlock()
			return stop(nil) // No longer wanted: nothing to hold.
		}
		for _, i := range c.informers {
			for r := range i.handlers {
				if err := r.on(p, p.informers[i.key]); err != nil {
					c.log.Info("Cannot tell a handler of a part of the replica's share", "part", w.Name, "error", err)
				}
			}
		}
		c.parts[w.Name] = p
		delete(c.adding, w.Name)
		drop := c.holdLocked() // The part it replaces, if any.
		c.mu.Unlock()
		for _, d := range drop {
			c.drop(d)
		}
		return nil
	}
}

// lacks is whether p lacks an informer or an index asked for; c.mu is
// held.
func (c *ShareCache) lacks(p *part) bool {
	if p.indexed < len(c.indexes) {
		return true
	}
	for k := range c.informers {
		if _, ok := p.informers[k]; !ok {
			return true
		}
	}
	return false
}

// drop stops reading p and tells its handlers that its objects are gone.
func (c *ShareCache) drop(p *part) {
	c.mu.Lock()
	type told struct {
		reg *registration
		inf cache.Informer
		key informerKey
	}
	var handlers []told
	for k, i := range c.informers {
		for r := range i.handlers {
			handlers = append(handlers, told{reg: r, inf: p.informers[k], key: k})
		}
	}
	c.mu.Unlock()
	ctx := context.Background()
	for _, h := range handlers {
		if h.inf == nil {
			continue
		}
		h.reg.off(p, h.inf)
		l, err := listOf(c.scheme, h.key)
		if err != nil {
			continue
		}
		if err := p.cache.List(ctx, l); err != nil {
			continue
		}
		items, _ := meta.ExtractList(l)
		for _, o := range items {
			key, _ := toolscache.MetaNamespaceKeyFunc(o)
			h.reg.handler.OnDelete(toolscache.DeletedFinalStateUnknown{Key: key, Obj: o})
		}
	}
	p.cancel()
	<-p.done
}

// listOf is an empty list of k.
func listOf(s *runtime.Scheme, k informerKey) (client.ObjectList, error) {
	gvk := k.gvk
	gvk.Kind += "List"
	if k.metadata {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(gvk)
		return l, nil
	}
	o, err := s.New(gvk)
	if err != nil {
		return nil, err
	}
	l, ok := o.(client.ObjectList)
	if !ok {
		return nil, errors.Errorf("%s is not a list", gvk)
	}
	return l, nil
}

// inform has p run informer i, with its handlers.
func (p *part) inform(ctx context.Context, i *shareInformer) error {
	if err := p.informOnly(ctx, i); err != nil {
		return err
	}
	for r := range i.handlers {
		if err := r.on(p, p.informers[i.key]); err != nil {
			return err
		}
	}
	return nil
}

// informOnly has p run informer i, and no handler yet.
func (p *part) informOnly(ctx context.Context, i *shareInformer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	inf, err := p.cache.GetInformer(ctx, i.obj, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	p.informers[i.key] = inf
	return nil
}

// index adds to p the indexes it lacks of all.
func (p *part) index(ctx context.Context, all []index) error {
	if ctx == nil {
		ctx = context.Background()
	}
	for ; p.indexed < len(all); p.indexed++ {
		x := all[p.indexed]
		if err := p.cache.IndexField(ctx, x.obj, x.field, x.extract); err != nil {
			return err
		}
	}
	return nil
}
