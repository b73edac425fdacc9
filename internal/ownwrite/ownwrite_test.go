package ownwrite

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// A step is one thing that happens to a Filter of objects named by strings,
// and what it should say.
type step struct {
	op    string // write, answer, fail, event, await, own, forget, forgetOwner
	id    int    // the write a write, answer or fail step is of
	owner string
	obj   string
	write Write
	// old and new are an event's versions; new is an answer's version.
	old, new string
	// want is what the step should say: the owner whose own write an event
	// is ("" for nobody's, "a?" for a's Unsure), "yes" for an own step that
	// takes the event, and "missed" for an answer or failure that reports a
	// miss, "missed later a" where it calls a's later.
	want string
}

func write(id int, owner, obj string, w Write) step {
	return step{op: "write", id: id, owner: owner, obj: obj, write: w}
}

func answer(id int, rv string, want string) step {
	return step{op: "answer", id: id, new: rv, want: want}
}

func fail(id int, want string) step { return step{op: "fail", id: id, want: want} }

func event(obj, old, cur, want string) step {
	return step{op: "event", obj: obj, old: old, new: cur, want: want}
}

func await(obj, old, cur, want string) step {
	return step{op: "await", obj: obj, old: old, new: cur, want: want}
}

func own(owner, obj, old, cur, want string) step {
	return step{op: "own", owner: owner, obj: obj, old: old, new: cur, want: want}
}

func owner(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "ns", Name: name}
}

// run runs steps on f and returns what each said.
func run(f *Filter[string], steps []step) []string {
	done := map[int]Done{}
	got := make([]string, 0, len(steps))
	var called []string
	later := func(o types.NamespacedName) { called = append(called, o.Name) }
	for _, s := range steps {
		said := ""
		switch s.op {
		case "write":
			done[s.id] = f.Writing(owner(s.owner), s.obj, s.write)
		case "answer", "fail":
			var err error
			if s.op == "fail" {
				err = errors.New("conflict")
			}
			if done[s.id](s.new, err) {
				said = "missed"
			}
			for _, o := range called {
				said += " later " + o
			}
			called = nil
		case "event":
			if o, ok := f.Heard(s.obj, Event{Old: s.old, New: s.new}); ok {
				said = o.Name
			}
		case "await":
			switch o, h := f.Await(s.obj, Event{Old: s.old, New: s.new}, later); h {
			case Own:
				said = o.Name
			case Unsure:
				said = o.Name + "?"
			}
		case "own":
			if f.Own(owner(s.owner), s.obj, Event{Old: s.old, New: s.new}) {
				said = "yes"
			}
		case "forget":
			f.Forget(s.obj)
		case "forgetOwner":
			f.ForgetOwner(owner(s.owner))
		}
		got = append(got, fmt.Sprintf("%s %s", s.op, said))
	}
	return got
}

func TestFilterTakesOnlyOwnWritesEventsForOwn(t *testing.T) {
	cases := map[string]struct {
		reason string
		// limit is the Filter's bound of objects; 0 leaves the package's.
		limit int
		steps []step
		// left is how many objects have writes remembered at the end.
		left int
	}{
		"CreateHeardBeforeItsAnswer": {
			reason: "The creation event that comes while the create is in flight is the create's own, and its answer does not make the next event own.",
			steps:  []step{write(1, "a", "x", Create()), event("x", "", "5", "a"), answer(1, "5", ""), event("x", "5", "6", "")},
		},
		"CreateHeardAfterItsAnswer": {
			reason: "The creation event of the version the create was answered with is its own.",
			steps:  []step{write(1, "a", "x", Create()), answer(1, "5", ""), event("x", "", "5", "a"), event("x", "5", "6", "")},
		},
		"UpdateWithPreconditionHeardBeforeItsAnswer": {
			reason: "Only one update from a version can succeed: while the owner's is in flight, the update from that version is its own.",
			steps:  []step{write(1, "a", "x", Update("4")), event("x", "4", "5", "a"), answer(1, "5", ""), event("x", "5", "6", "")},
		},
		"UpdateWithPreconditionHeardAfterItsAnswer": {
			reason: "The event of the version an update was answered with is its own.",
			steps:  []step{write(1, "a", "x", Update("4")), answer(1, "5", ""), event("x", "4", "5", "a"), event("x", "5", "6", "")},
		},
		"PatchHeardBeforeItsAnswer": {
			reason: "A patch has no precondition: an update while it is in flight may be anybody's, and is heard. Its answer is remembered until its object goes.",
			steps:  []step{write(1, "a", "x", Patch()), event("x", "4", "5", ""), answer(1, "5", "")},
			left:   1,
		},
		"PatchHeardAfterItsAnswer": {
			reason: "The event of the version a patch was answered with is its own.",
			steps:  []step{write(1, "a", "x", Patch()), answer(1, "5", ""), event("x", "4", "5", "a")},
		},
		"PatchAwaitedBeforeItsAnswer": {
			reason: "Awaited, an update while a patch is in flight is taken unsure; the answer shows it was the patch's, and nothing is left.",
			steps:  []step{write(1, "a", "x", Patch()), await("x", "4", "5", "a?"), answer(1, "5", ""), await("x", "5", "6", "")},
		},
		"ForeignWriteAwaitedBeforeAPatchsAnswer": {
			reason: "Somebody else's write awaited while a patch is in flight is taken unsure; the answer shows another version, so the owner's later is called. The patch's own event after it is nobody's then: it was taken once.",
			steps:  []step{write(1, "a", "x", Patch()), await("x", "4", "5", "a?"), answer(1, "6", "missed later a"), await("x", "5", "6", "")},
		},
		"FailedPatchAwaited": {
			reason: "A patch that fails made no event: the one taken unsure was somebody else's.",
			steps:  []step{write(1, "a", "x", Patch()), await("x", "4", "5", "a?"), fail(1, "missed later a")},
		},
		"AwaitTakesOneEventAWrite": {
			reason: "Only the first update in flight is taken unsure; a second is heard, its owner's reconcile not held back.",
			steps:  []step{write(1, "a", "x", Patch()), await("x", "4", "5", "a?"), await("x", "5", "6", ""), answer(1, "6", "missed later a")},
		},
		"AwaitKnowsAnsweredVersions": {
			reason: "Await takes the event of an answered version for certain, as Heard does.",
			steps:  []step{write(1, "a", "x", Patch()), answer(1, "5", ""), await("x", "4", "5", "a")},
		},
		"AwaitTakesNoCreationForAPatch": {
			reason: "A creation event while a patch is in flight is not the patch's: a patch makes no object.",
			steps:  []step{write(1, "a", "x", Patch()), await("x", "", "5", ""), answer(1, "5", "")},
			left:   1,
		},
		"UpdateWithoutVersionIsPatch": {
			reason: "An update without a resourceVersion has no precondition.",
			steps:  []step{write(1, "a", "x", Update("")), event("x", "4", "5", ""), answer(1, "5", "")},
			left:   1,
		},
		"ForeignWriteBeforeAPatchsAnswer": {
			reason: "Somebody else's write that lands while a patch is in flight is heard, and the patch's own event after it is the owner's.",
			steps:  []step{write(1, "a", "x", Patch()), event("x", "4", "5", ""), answer(1, "6", ""), event("x", "5", "6", "a")},
		},
		"ForeignUpdateRacesPreconditionUpdate": {
			reason: "Somebody else's patch from the version the owner's update is from is taken for the owner's, which then fails: the miss is reported.",
			steps:  []step{write(1, "a", "x", Update("4")), event("x", "4", "5", "a"), fail(1, "missed"), event("x", "5", "6", "")},
		},
		"ForeignCreateRacesCreate": {
			reason: "Somebody else's create taken for the owner's, which then fails, is reported missed.",
			steps:  []step{write(1, "a", "x", Create()), event("x", "", "5", "a"), fail(1, "missed"), event("x", "5", "6", "")},
		},
		"ForeignCreateRacesApply": {
			reason: "An apply that meant to create updates somebody else's object created first: their creation is reported missed, and the apply's own event is heard.",
			steps:  []step{write(1, "a", "x", Create()), event("x", "", "5", "a"), answer(1, "6", "missed"), event("x", "5", "6", "")},
		},
		"FoldedEventInFlight": {
			reason: "A relist folds the owner's update and somebody else's after it into one event: the answer shows another version, and the miss is reported.",
			steps:  []step{write(1, "a", "x", Update("4")), event("x", "4", "7", "a"), answer(1, "5", "missed")},
		},
		"ForeignWriteAfterOwn": {
			reason: "The next change after an own write is heard, whoever makes it.",
			steps:  []step{write(1, "a", "x", Update("4")), answer(1, "5", ""), event("x", "4", "5", "a"), event("x", "5", "6", "")},
		},
		"OthersWrite": {
			reason: "A version the owner did not write is somebody else's, and the owner's write is still awaited.",
			steps:  []step{write(1, "a", "x", Patch()), answer(1, "2", ""), event("x", "2", "3", "")},
			left:   1,
		},
		"InterleavedWrites": {
			reason: "Somebody else's write between two of the owner's is heard as theirs, both of the owner's as its own.",
			steps: []step{write(1, "a", "x", Patch()), answer(1, "2", ""), write(2, "a", "x", Patch()), answer(2, "4", ""),
				event("x", "1", "2", "a"), event("x", "2", "3", ""), event("x", "3", "4", "a")},
		},
		"SkippedVersion": {
			reason: "An event that skips a write's version (a relist) forgets the writes before it.",
			steps: []step{write(1, "a", "x", Patch()), answer(1, "2", ""), write(2, "a", "x", Patch()), answer(2, "4", ""),
				event("x", "1", "4", "a"), event("x", "1", "2", "")},
		},
		"HeardOnce": {
			reason: "Each write's event is heard once: a resync of the same version is nobody's.",
			steps:  []step{write(1, "a", "x", Patch()), answer(1, "2", ""), event("x", "1", "2", "a"), event("x", "2", "2", "")},
		},
		"ResyncInFlight": {
			reason: "A resync (no new version) while an update is in flight is not taken for it.",
			steps:  []step{write(1, "a", "x", Update("4")), event("x", "4", "4", ""), answer(1, "5", ""), event("x", "4", "5", "a")},
		},
		"FailedWriteForgotten": {
			reason: "A failed write is forgotten at once: the next event is heard.",
			steps:  []step{write(1, "a", "x", Create()), fail(1, ""), event("x", "", "5", "")},
		},
		"DeletionForgets": {
			reason: "A deletion forgets the object's writes, answered and in flight.",
			steps: []step{write(1, "a", "x", Patch()), answer(1, "5", ""), write(2, "a", "x", Patch()),
				{op: "forget", obj: "x"}, answer(2, "6", ""), event("x", "5", "6", "")},
		},
		"AnotherOwnerWritesOver": {
			reason: "The object's last writer's writes are remembered, and only its: the other's events are heard.",
			steps: []step{write(1, "a", "x", Patch()), answer(1, "5", ""), write(2, "b", "x", Patch()), answer(2, "6", ""),
				event("x", "4", "5", ""), event("x", "5", "6", "b")},
		},
		"OwnIsPerOwner": {
			reason: "An own write is its owner's own and nobody else's, and is left for its owner.",
			steps:  []step{write(1, "a", "x", Create()), answer(1, "5", ""), own("b", "x", "", "5", ""), own("a", "x", "", "5", "yes")},
		},
		"OvertakenInFlight": {
			reason: "A write overtaken by another of the same object before its answer is not remembered: its event is heard.",
			steps: []step{write(1, "a", "x", Patch()), write(2, "a", "x", Patch()), answer(1, "5", ""), answer(2, "6", ""),
				event("x", "4", "5", ""), event("x", "5", "6", "a")},
		},
		"ForgetOwner": {
			reason: "An owner's writes are forgotten with the owner, and only its.",
			steps: []step{write(1, "a", "x", Patch()), answer(1, "5", ""), write(2, "a", "y", Create()), write(3, "b", "z", Create()),
				{op: "forgetOwner", owner: "a"}, answer(2, "7", ""), event("x", "4", "5", ""), event("y", "", "7", ""),
				event("z", "", "8", "b"), answer(3, "8", "")},
		},
		"BoundedObjects": {
			reason: "Past the bound of objects every write is forgotten, which costs at most one reconcile each.",
			limit:  2,
			steps: []step{write(1, "a", "x", Patch()), answer(1, "5", ""), write(2, "a", "y", Patch()), answer(2, "5", ""),
				write(3, "a", "z", Patch()), answer(3, "5", ""), event("x", "4", "5", ""), event("y", "4", "5", ""),
				event("z", "4", "5", "a")},
		},
		"BoundedClearKeepsTheMissInFlight": {
			reason: "A write in flight when the bound forgets it still reports the event it took.",
			limit:  1,
			steps: []step{write(1, "a", "x", Create()), event("x", "", "5", "a"), write(2, "a", "y", Patch()),
				answer(1, "6", "missed"), answer(2, "5", "")},
			left: 1,
		},
		"BoundedVersions": {
			reason: "Writes whose events never come (they changed nothing) are forgotten beyond the bound of versions.",
			steps: []step{write(1, "a", "x", Patch()), answer(1, "1", ""), write(2, "a", "x", Patch()), answer(2, "2", ""),
				write(3, "a", "x", Patch()), answer(3, "3", ""), write(4, "a", "x", Patch()), answer(4, "4", ""),
				write(5, "a", "x", Patch()), answer(5, "5", ""), write(6, "a", "x", Patch()), answer(6, "6", ""),
				event("x", "0", "1", ""), event("x", "1", "2", ""), event("x", "2", "3", "a")},
			left: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := New[string]()
			if tc.limit > 0 {
				f.limit = tc.limit
			}
			want := make([]string, 0, len(tc.steps))
			for _, s := range tc.steps {
				want = append(want, fmt.Sprintf("%s %s", s.op, s.want))
			}
			if diff := cmp.Diff(want, run(f, tc.steps)); diff != "" {
				t.Errorf("%s\nsteps: -want, +got:\n%s", tc.reason, diff)
			}
			if f.Len() != tc.left {
				t.Errorf("%s\n%d objects have writes remembered, want %d", tc.reason, f.Len(), tc.left)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			for k, r := range f.records {
				if _, ok := f.byOwner[r.owner][k]; !ok {
					t.Errorf("%s\nobject %q is not among its owner's", tc.reason, k)
				}
			}
		})
	}
}

func TestNilFilter(t *testing.T) {
	var f *Filter[string]
	if f.Writing(owner("a"), "x", Create())("5", nil) {
		t.Error("a nil Filter's write reported a miss")
	}
	if _, h := f.Await("x", Event{Old: "4", New: "5"}, nil); h != Others {
		t.Error("a nil Filter awaited an event")
	}
	if _, ok := f.Heard("x", Event{New: "5"}); ok || f.Own(owner("a"), "x", Event{New: "5"}) {
		t.Error("a nil Filter took an event for an own write")
	}
	f.Forget("x")
	f.ForgetOwner(owner("a"))
	if f.Len() != 0 {
		t.Error("a nil Filter remembers writes")
	}
}
