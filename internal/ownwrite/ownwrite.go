// Package ownwrite tells the watch events of a controller's own writes from
// everybody else's, so that the event of a write does not reconcile again the
// managed resource that made it: that reconcile knows what it wrote. Any
// later change, whoever makes it, reconciles the owner again.
//
// Its one promise: an event that is not the owner's own write is never taken
// for one (a missed reconcile is a bug; an extra one costs a reconcile). An
// event is a write's own when it shows the version the write's answer
// returned, or, while the write is in flight (a write is noted before it is
// sent), when only that write can have made it: the creation of an object it
// creates, or an update from the version it carries as its precondition.
// Await takes an update event that comes while a write without a
// precondition is in flight as Unsure, and the write's Done reports a miss
// when its answer shows another version or an error. A write whose event
// never comes is forgotten with its object or its owner, past maxVersions
// newer versions, or with every other once the Filter holds maxObjects.
// docs/architecture.md says which Filters the provider keeps and what each
// keys its objects by.
package ownwrite

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

const (
	// maxObjects bounds the objects a Filter remembers writes of.
	maxObjects = 100_000
	// maxVersions bounds the answered versions remembered of one object: a
	// reconcile writes an object once or twice.
	maxVersions = 4
)

// A Write is what a write does to an object, as far as telling its event
// apart goes. The zero Write is a Patch.
type Write struct {
	create bool
	from   string
}

// Create is a write that makes the object: a create, or an apply of an object
// not there yet. Only one write can make an object: if somebody else's makes
// it first, a create fails and an apply updates theirs.
func Create() Write { return Write{create: true} }

// Update is an update from version from, carried as its precondition: it
// fails unless the object is still at from. Without a version ("") it is a
// Patch.
func Update(from string) Write { return Write{from: from} }

// Patch is a write without a precondition: a patch, an apply or an update
// without a resourceVersion. Only its answer tells its event.
func Patch() Write { return Write{} }

// An Event is what a watch event says of an object's versions.
type Event struct {
	// Old is the version the update event's old object shows; empty for a
	// creation event.
	Old string
	// New is the version the event shows the object at.
	New string
}

// mayBe reports whether e may be the event of w, in flight: one that only w
// can have made. An update that shows no new version (a resync) is nobody's.
func (w Write) mayBe(e Event) bool {
	if e.New == "" {
		return false
	}
	if e.Old == "" {
		return w.create
	}
	return w.from != "" && e.Old == w.from && e.New != e.Old
}

// mayBeUnsure reports whether e may be the event of w, a write without a
// precondition in flight, though somebody else's write may have made it.
func (w Write) mayBeUnsure(e Event) bool {
	return !w.create && w.from == "" && e.Old != "" && e.New != "" && e.New != e.Old
}

// A Key names an object on the provider's own cluster that a controller
// writes, as a Filter remembers its writes: AppBundle's Deployments, claims
// and Services, ConfigRollout's workloads. The narrow watches of
// internal/watchset key theirs by cluster and resource as well.
type Key struct{ Kind, Namespace, Name string }

// KeyOf is the Key of o, an object of kind.
func KeyOf(kind string, o interface {
	GetNamespace() string
	GetName() string
}) Key {
	return Key{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName()}
}

// A Filter remembers owners' writes to objects named by keys K until their
// events come. It is safe for concurrent use; a nil Filter remembers nothing.
type Filter[K comparable] struct {
	mu    sync.Mutex
	limit int
	// records are the writes of each object; byOwner the objects of each
	// owner's, to forget with the owner.
	records map[K]*record
	byOwner map[types.NamespacedName]map[K]struct{}
}

// record is an object's writes, all of one owner: the last to write it.
type record struct {
	owner types.NamespacedName
	// flight is the write in flight, if any.
	flight *flight
	// answered are the versions the owner's writes were answered with whose
	// events have not come, oldest first.
	answered []string
}

// flight is a write in flight, shared with what Writing returned.
type flight struct {
	write Write
	// taken says an event was taken for the write's own before its answer,
	// and heard is the version it showed.
	taken bool
	heard string
	// later, set by Await, reconciles the owner when the answer shows the
	// event taken was not the write's.
	later func(types.NamespacedName)
	owner types.NamespacedName
}

// Done hears of a write's outcome: the version the API server answered with,
// or the write's error. It reports whether an event was taken for the write's
// own that the answer shows was not: the owner must be reconciled again, as
// no event may follow to do it. When Await took that event, Done has called
// its later already.
type Done func(answer string, err error) (missed bool)

// New returns an empty Filter.
func New[K comparable]() *Filter[K] {
	return &Filter[K]{limit: maxObjects, records: map[K]*record{}, byOwner: map[types.NamespacedName]map[K]struct{}{}}
}

// Writing notes that owner is about to make write w to the object k, and
// returns what to call with its outcome. The write is the object's last: any
// other owner's writes of it are forgotten, as is a write of it still in
// flight, whose answer is then not remembered (its event reconciles its
// owner).
func (f *Filter[K]) Writing(owner types.NamespacedName, k K, w Write) Done {
	if f == nil {
		return func(string, error) bool { return false }
	}
	fl := &flight{write: w, owner: owner}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.records[k]
	if r != nil && r.owner != owner {
		f.drop(k, r)
		r = nil
	}
	if r == nil {
		if len(f.records) >= f.limit {
			clear(f.records)
			clear(f.byOwner)
		}
		r = &record{owner: owner}
		f.records[k] = r
		if f.byOwner[owner] == nil {
			f.byOwner[owner] = map[K]struct{}{}
		}
		f.byOwner[owner][k] = struct{}{}
	}
	r.flight = fl
	return func(answer string, err error) bool { return f.done(k, fl, answer, err) }
}

// done completes fl, a write of k, with its outcome.
func (f *Filter[K]) done(k K, fl *flight, answer string, err error) bool {
	missed := f.complete(k, fl, answer, err)
	if missed && fl.later != nil {
		fl.later(fl.owner)
	}
	return missed
}

// complete forgets fl, a write of k, and remembers its answer unless its
// event has come; it reports a miss as Done does.
func (f *Filter[K]) complete(k K, fl *flight, answer string, err error) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	missed := fl.taken && (err != nil || fl.heard != answer)
	r := f.records[k]
	if r == nil || r.flight != fl {
		// Forgotten, or overtaken by another write: its event is heard.
		return missed
	}
	r.flight = nil
	if err == nil && answer != "" && !fl.taken {
		if len(r.answered) == maxVersions {
			r.answered = slices.Delete(r.answered, 0, 1)
		}
		r.answered = append(r.answered, answer)
	}
	if len(r.answered) == 0 {
		f.drop(k, r)
	}
	return missed
}

// Heard reports whether e, an event of the object k, is an own write, and
// whose, and then forgets that write: each is heard once.
func (f *Filter[K]) Heard(k K, e Event) (types.NamespacedName, bool) {
	if f == nil {
		return types.NamespacedName{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.records[k]
	if r == nil || !f.take(k, r, e) {
		return types.NamespacedName{}, false
	}
	return r.owner, true
}

// A Hearing is what Await says of an event.
type Hearing int

const (
	// Others is an event of somebody else's write, as far as is known.
	Others Hearing = iota
	// Own is an event of the owner's write, for certain.
	Own
	// Unsure is an update event that came while a write of the owner
	// without a precondition was in flight: the write's answer decides.
	Unsure
)

// Await is Heard for an owner that can be reconciled later. An update event
// that comes while the owner's write without a precondition is in flight is
// taken Unsure: the caller holds back the owner's reconcile for it, and
// treats the event as anybody's otherwise (it may be somebody else's). When
// the answer shows another version, or an error, Done calls later with the
// owner. A write's event that comes before its answer then costs no
// reconcile; under load it mostly does (TestProviderRelistsAfterCompaction).
func (f *Filter[K]) Await(k K, e Event, later func(types.NamespacedName)) (types.NamespacedName, Hearing) {
	if f == nil {
		return types.NamespacedName{}, Others
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.records[k]
	if r == nil {
		return types.NamespacedName{}, Others
	}
	if f.take(k, r, e) {
		return r.owner, Own
	}
	if fl := r.flight; fl != nil && !fl.taken && fl.write.mayBeUnsure(e) {
		fl.taken, fl.heard, fl.later = true, e.New, later
		return r.owner, Unsure
	}
	return types.NamespacedName{}, Others
}

// Own reports whether e, an event of the object k, is owner's own write, and
// then forgets that write. An event of another owner's write is owner's to
// hear, and is left for that owner.
func (f *Filter[K]) Own(owner types.NamespacedName, k K, e Event) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.records[k]
	return r != nil && r.owner == owner && f.take(k, r, e)
}

// take reports whether e is a write of r, k's record, and forgets it; f.mu is
// held.
func (f *Filter[K]) take(k K, r *record, e Event) bool {
	if i := slices.Index(r.answered, e.New); i >= 0 && e.New != "" {
		r.answered = r.answered[i+1:]
		if len(r.answered) == 0 && r.flight == nil {
			f.drop(k, r)
		}
		return true
	}
	if fl := r.flight; fl != nil && !fl.taken && fl.write.mayBe(e) {
		fl.taken, fl.heard = true, e.New
		return true
	}
	return false
}

// Forget forgets the writes of the object k: it was deleted, and a deletion
// is nobody's own write (an object that an owner made and somebody deleted
// must be made again). A write of it in flight is forgotten too: its answer
// is not remembered.
func (f *Filter[K]) Forget(k K) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.records[k]; ok {
		f.drop(k, r)
	}
}

// ForgetOwner forgets owner's writes whose events never came: the owner is
// gone. Only its: a fleet of owners deleted at once must not leave their
// writes behind until the bound forgets everyone's.
func (f *Filter[K]) ForgetOwner(owner types.NamespacedName) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.byOwner[owner] {
		if r, ok := f.records[k]; ok && r.owner == owner {
			delete(f.records, k)
		}
	}
	delete(f.byOwner, owner)
}

// Len returns how many objects have writes remembered, in flight or answered.
func (f *Filter[K]) Len() int {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.records)
}

// drop forgets r, the record of k; f.mu is held.
func (f *Filter[K]) drop(k K, r *record) {
	delete(f.records, k)
	if m := f.byOwner[r.owner]; m != nil {
		delete(m, k)
		if len(m) == 0 {
			delete(f.byOwner, r.owner)
		}
	}
}
