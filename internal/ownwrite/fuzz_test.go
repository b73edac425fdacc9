package ownwrite

import (
	"errors"
	"slices"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// world is one object on a simulated API server, written by two owners
// through a Filter and by somebody else, its events delivered in the order of
// its versions, one at a time or folded as a relist folds them.
type world struct {
	t *testing.T
	f *Filter[string]

	exists  bool
	version int
	// events are those not yet delivered; a deletion is an Event without a
	// New version.
	events []Event
	// writes are the owners' writes sent and not yet answered, oldest first.
	writes []*simWrite

	// answered are the versions each owner's successful writes were
	// answered with; missed whether a write of the owner reported a miss.
	answered map[string][]string
	missed   map[string]bool
	// taken are the events taken for each owner's own.
	taken map[string][]Event
}

type simWrite struct {
	owner string
	kind  byte // 0 create, 1 apply that creates, 2 update from a version, 3 patch
	from  string
	done  Done
	// sent says the API server has handled it; then err or answer is its
	// outcome.
	sent   bool
	err    error
	answer string
}

func (w *world) rv() string { return strconv.Itoa(w.version) }

// start makes owner begin a write of the given kind.
func (w *world) start(owner string, kind byte, stale bool) {
	if len(w.writes) >= 2 {
		return
	}
	sw := &simWrite{owner: owner, kind: kind}
	var write Write
	switch kind {
	case 0, 1:
		write = Create()
	case 2:
		sw.from = w.rv()
		if stale && w.version > 1 {
			sw.from = strconv.Itoa(w.version - 1)
		}
		write = Update(sw.from)
	default:
		write = Patch()
	}
	sw.done = w.f.Writing(types.NamespacedName{Name: owner}, "x", write)
	w.writes = append(w.writes, sw)
}

// change makes a new version of the object and its event.
func (w *world) change() string {
	old := ""
	if w.exists {
		old = w.rv()
	}
	w.exists = true
	w.version++
	w.events = append(w.events, Event{Old: old, New: w.rv()})
	return w.rv()
}

// send has the API server handle the oldest write not yet handled.
func (w *world) send(noOp bool) {
	i := slices.IndexFunc(w.writes, func(sw *simWrite) bool { return !sw.sent })
	if i < 0 {
		return
	}
	sw := w.writes[i]
	sw.sent = true
	switch {
	case sw.kind == 0 && w.exists:
		sw.err = errors.New("already exists")
	case sw.kind == 2 && (!w.exists || w.rv() != sw.from):
		sw.err = errors.New("conflict")
	case sw.kind == 3 && !w.exists:
		sw.err = errors.New("not found")
	case noOp && w.exists && sw.kind != 0:
		// A write that changes nothing makes no version.
		sw.answer = w.rv()
	default:
		sw.answer = w.change()
	}
}

// answer delivers the outcome of the oldest write the API server handled.
func (w *world) answer() {
	i := slices.IndexFunc(w.writes, func(sw *simWrite) bool { return sw.sent })
	if i < 0 {
		return
	}
	sw := w.writes[i]
	w.writes = slices.Delete(w.writes, i, i+1)
	if sw.done(sw.answer, sw.err) {
		w.missed[sw.owner] = true
	}
	if sw.err == nil {
		w.answered[sw.owner] = append(w.answered[sw.owner], sw.answer)
	}
}

// deliver delivers the next event (through Await when await is set, whose
// later reports a miss), or folds those up to the next deletion
// into one, as a relist does.
func (w *world) deliver(fold, await bool) {
	if len(w.events) == 0 {
		return
	}
	e, n := w.events[0], 1
	if e.New == "" {
		w.events = w.events[1:]
		w.f.Forget("x")
		return
	}
	for fold && n < len(w.events) && w.events[n].New != "" {
		e.New = w.events[n].New
		n++
	}
	w.events = w.events[n:]
	if !await {
		if o, ok := w.f.Heard("x", e); ok {
			w.taken[o.Name] = append(w.taken[o.Name], e)
		}
		return
	}
	later := func(o types.NamespacedName) { w.missed[o.Name] = true }
	if o, h := w.f.Await("x", e, later); h != Others {
		w.taken[o.Name] = append(w.taken[o.Name], e)
	}
}

func (w *world) step(b byte) {
	owner := "a"
	if b&0x80 != 0 {
		owner = "b"
	}
	switch b % 8 {
	case 0, 1:
		w.start(owner, (b>>3)&3, b&0x40 != 0)
	case 2:
		w.send(b&0x40 != 0)
	case 3:
		w.answer()
	case 4:
		w.change()
	case 5:
		if w.exists {
			w.exists = false
			w.events = append(w.events, Event{Old: w.rv()})
		}
	default:
		w.deliver(b%8 == 7, b&0x40 != 0)
	}
}

// check asserts the Filter's promise: every event taken for an owner's own
// shows a version one of the owner's writes was answered with, where the
// owner has it, or a write of the owner reported a miss. And its memory
// stays bounded.
func (w *world) check(ops []byte) {
	for owner, es := range w.taken {
		for _, e := range es {
			if !slices.Contains(w.answered[owner], e.New) && !w.missed[owner] {
				w.t.Fatalf("ops %v: event %+v taken for %s's own, whose answers were %v and who was told of no miss",
					ops, e, owner, w.answered[owner])
			}
		}
	}
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	for _, r := range w.f.records {
		if len(r.answered) > maxVersions {
			w.t.Fatalf("ops %v: %d versions remembered of one object", ops, len(r.answered))
		}
	}
}

// FuzzOwnWrite runs the Filter against a simulated object written by two
// owners and somebody else, with writes failing, changing nothing, racing
// and answered late, and events delivered late or folded.
func FuzzOwnWrite(f *testing.F) {
	f.Add([]byte{0, 2, 6, 3})                      // a create, its event before its answer
	f.Add([]byte{4, 16, 2, 3, 6, 6})               // an update with a precondition, answered first
	f.Add([]byte{4, 24, 4, 2, 6, 6, 3, 6})         // a patch, somebody's write first
	f.Add([]byte{8, 4, 6, 2, 3, 6})                // an apply that creates, racing a create
	f.Add([]byte{4, 6, 16, 2, 4, 7, 3})            // an update folded with a later write
	f.Add([]byte{4, 6, 24, 152, 2, 2, 3, 3, 6, 6}) // two owners' patches
	f.Add([]byte{4, 6, 24, 2, 70, 3})              // a patch's event awaited before its answer
	f.Add([]byte{4, 6, 24, 4, 70, 2, 3})           // somebody's event awaited as a patch's
	f.Fuzz(func(t *testing.T, ops []byte) {
		w := &world{t: t, f: New[string](), answered: map[string][]string{}, missed: map[string]bool{}, taken: map[string][]Event{}}
		for _, b := range ops {
			w.step(b)
		}
		for len(w.writes) > 0 {
			w.send(false)
			w.answer()
		}
		for len(w.events) > 0 {
			w.deliver(false, false)
		}
		w.check(ops)
	})
}
