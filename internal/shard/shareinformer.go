package shard

import (
	"strings"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// A shareInformer is the informer of one kind across the parts of a share
// cache: a handler added to it hears from every part, those added later
// included, and stops hearing from a part once it is dropped.
type shareInformer struct {
	c   *ShareCache
	key informerKey
	obj client.Object

	// handlers are guarded by c.mu.
	handlers map[*registration]struct{}
}

var _ cache.Informer = &shareInformer{}

// A registration is one handler of a shareInformer and its registrations in
// each part.
type registration struct {
	inf     *shareInformer
	handler toolscache.ResourceEventHandler
	opts    toolscache.HandlerOptions

	mu    sync.Mutex
	parts map[*part]toolscache.ResourceEventHandlerRegistration
}

func (i *shareInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

func (i *shareInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{ResyncPeriod: &resync})
}

func (i *shareInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	r := &registration{inf: i, handler: h, opts: o, parts: map[*part]toolscache.ResourceEventHandlerRegistration{}}
	i.c.mu.Lock()
	defer i.c.mu.Unlock()
	i.handlers[r] = struct{}{}
	for _, p := range i.c.parts {
		if err := r.on(p, p.informers[i.key]); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (i *shareInformer) RemoveEventHandler(h toolscache.ResourceEventHandlerRegistration) error {
	r, ok := h.(*registration)
	if !ok {
		return errors.New("not a registration of this informer")
	}
	i.c.mu.Lock()
	defer i.c.mu.Unlock()
	delete(i.handlers, r)
	r.mu.Lock()
	parts := r.parts
	r.parts = map[*part]toolscache.ResourceEventHandlerRegistration{}
	r.mu.Unlock()
	for p, pr := range parts {
		if inf := p.informers[i.key]; inf != nil {
			if err := inf.RemoveEventHandler(pr); err != nil {
				return err
			}
		}
	}
	return nil
}

// AddIndexers are not offered: indexes go through IndexField, which every
// part added later repeats.
func (i *shareInformer) AddIndexers(toolscache.Indexers) error {
	return errors.New("a share cache's informer takes indexes through IndexField")
}

// HasSynced is whether every part read now has synced this kind.
func (i *shareInformer) HasSynced() bool {
	for _, p := range i.c.live() {
		inf := i.informerOf(p)
		if inf == nil || !inf.HasSynced() {
			return false
		}
	}
	return true
}

func (i *shareInformer) informerOf(p *part) cache.Informer {
	i.c.mu.RLock()
	defer i.c.mu.RUnlock()
	return p.informers[i.key]
}

func (i *shareInformer) HasSyncedChecker() toolscache.DoneChecker {
	return polled{name: "share informer of " + i.key.gvk.String(), synced: i.HasSynced}
}

// IsStopped is whether the share cache stopped.
func (i *shareInformer) IsStopped() bool {
	i.c.mu.RLock()
	defer i.c.mu.RUnlock()
	return i.c.ctx != nil && i.c.ctx.Err() != nil
}

// on registers r with p's informer inf.
func (r *registration) on(p *part, inf cache.Informer) error {
	if inf == nil {
		return nil
	}
	pr, err := inf.AddEventHandlerWithOptions(r.handler, r.opts)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.parts[p] = pr
	r.mu.Unlock()
	return nil
}

// off removes r from p's informer inf.
func (r *registration) off(p *part, inf cache.Informer) {
	r.mu.Lock()
	pr, ok := r.parts[p]
	delete(r.parts, p)
	r.mu.Unlock()
	if !ok || inf.RemoveEventHandler(pr) != nil {
		return
	}
	// Notifications queued for the handler are still delivered after its
	// removal; the part's deletions must come after them.
	if s, ok := pr.(interface{ ShutdownChan() <-chan struct{} }); ok {
		<-s.ShutdownChan()
	}
}

// HasSynced is whether r has heard every object of every part read now.
func (r *registration) HasSynced() bool {
	for _, p := range r.inf.c.live() {
		r.mu.Lock()
		pr, ok := r.parts[p]
		r.mu.Unlock()
		if !ok || !pr.HasSynced() {
			return false
		}
	}
	return true
}

func (r *registration) HasSyncedChecker() toolscache.DoneChecker {
	return polled{name: "share registration of " + r.inf.key.gvk.String(), synced: r.HasSynced}
}

// polled is a DoneChecker of a condition polled: parts come and go, so no
// single channel closes when they have all synced.
type polled struct {
	name   string
	synced func() bool
}

func (p polled) Name() string { return strings.TrimSpace(p.name) }

func (p polled) Done() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !p.synced() {
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return done
}
