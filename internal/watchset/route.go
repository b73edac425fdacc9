package watchset

// This file holds the routing of events: an informer's event becomes a
// reconcile request of each owner it concerns (Interest), unless it is the
// owner's own write or shows a version the owner has read, sent through the
// controller source as routine (an initial list) or urgent (a change).

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/clusterops/provider-clusterops/internal/flow"
)

// An Interest tells whether an event of watch w about object o concerns its
// owner. Watches shared by many owners, such as every rule's namespaces watch,
// would otherwise reconcile them all for every event. For an update it is
// asked of the object before and after: either one concerning the owner is
// enough. Objects a transform did not produce always concern it.
type Interest func(w Watch, o *Object) bool

// Source is the controller source that delivers the Set's events as requests
// to reconcile the managed resources that own the watches.
func (s *Set) Source(fc *flow.Control) source.Source {
	return source.TypedChannel(s.events, handler.TypedFuncs[notice, reconcile.Request]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[notice], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r := reconcile.Request{NamespacedName: e.Object.owner}
			if e.Object.listed {
				q.Add(r)
				return
			}
			fc.Queue(q).Add(r)
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

// notify enqueues every owner of k that objs concern.
func (s *Set) notify(k key, h Happening, objs ...any) {
	s.mu.Lock()
	var notices []notice
	if r, ok := s.watches[k]; ok {
		notices = s.concerned(r, r.owners, k, h, objs)
	}
	s.mu.Unlock()
	s.send(notices)
}

// A placer tells the group and value (name or label value) of an object an
// informer delivers; false if it has none.
type placer func(o any) (group, string, bool)

// fixed places every object of the informer of one value v of g, whose
// store need not keep the label that says so.
func fixed(g group, v string) placer {
	return func(any) (group, string, bool) { return g, v, true }
}

// within places the objects of g's shared informer.
func within(g group) placer {
	return func(o any) (group, string, bool) {
		v, ok := g.value(o)
		return g, v, ok
	}
}

// route enqueues the owners of the value (name or label) of the object objs
// are about, in its group, those the event of informer r concerns: other
// objects are nobody's. An update that moves an object from one label value
// to another concerns the owners of both. Owners are the Set's, not r's: any
// informer serving a group, narrow or wide, routes alike, so a switch of
// strategy moves no owner. An object r lists as another informer of a
// switching family told already is no news (told).
func (s *Set) route(r *running, place placer, h Happening, objs ...any) {
	last, ok := asObject(objs[len(objs)-1])
	if !ok {
		return
	}
	var g group
	values := make([]string, 0, len(objs))
	for _, o := range objs {
		if at, v, ok := place(o); ok && (len(values) == 0 || values[0] != v) {
			g, values = at, append(values, v)
		}
	}
	s.mu.Lock()
	var notices []notice
	for _, v := range values {
		if h == Listed && s.told(r, g, v, last) {
			continue
		}
		notices = append(notices, s.concerned(r, s.values[g][v], g.watch(v), h, objs)...)
	}
	s.mu.Unlock()
	s.send(notices)
}

// concerned returns notices for those of owners that an event h of w about
// objs concerns, that did not make it themselves and, unless the object is
// gone, have not read it as it is now; s.mu is held. from is the informer
// that delivered the event.
//
// A watch's initial list is routine, but not where it shows an object at
// another version than its owner read: that is a change the owner has not
// seen, made while the watch started (as when a namespace's name watches
// coalesce into one, whose list then carries a change made in between), and
// as urgent as any other: ranked with the list, it would wait behind a
// converging fleet's backlog (TestConcernedRanksChangesAboveLists).
func (s *Set) concerned(from *running, owners *ownerSet, k key, h Happening, objs []any) []notice {
	out := make([]notice, 0, owners.len())
	for o := range owners.all() {
		if !concerns(s.interest[o], k.Watch, objs) || (h != Gone && s.isOwnWrite(o, k, objs)) {
			continue
		}
		read := notRead
		if h != Gone {
			read = s.readOf(o, k, objs)
		}
		// An owner to be enqueued once the list has ended (WhenSynced)
		// decides from the whole list then; only a change since it read
		// the object is news to it now.
		if read == readAsIs || (h == Listed && read == notRead && from.waits(o)) {
			continue
		}
		out = append(out, notice{owner: o, listed: h == Listed && read == notRead})
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
