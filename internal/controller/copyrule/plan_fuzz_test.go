package copyrule

import (
	"errors"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
)

// FuzzMakePlan builds a rule's world from the fuzzer's bytes (sources,
// target namespaces some of which are out of reach, copies with stale or
// current data, strangers' objects in the way, a conflict policy, whether the
// management policies allow Delete) and checks what MakePlan may and must do:
// at most one write per object; never a write into a namespace out of reach;
// a prune only of the rule's own copies, only when Delete is allowed and the
// namespace is in reach; a stranger's object changed only as the policy says;
// the counts add up; and once the plan is applied, planning again finds
// nothing to write.
func FuzzMakePlan(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{255, 17, 3, 200, 9, 42, 0, 0, 1, 128, 64, 7})
	f.Add([]byte("copyrule plan"))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := planWorld(b)
		p := MakePlan(in)

		written := map[Ref]Op{}
		stranger := func(r Ref) bool { _, ok := in.Occupied[r]; return ok }
		own := map[Ref]bool{}
		for _, c := range in.Copies {
			own[Ref{c.Namespace, c.Name}] = true
		}
		for _, a := range p.Actions {
			r := Ref{a.Object.Namespace, a.Object.Name}
			if prev, dup := written[r]; dup {
				t.Fatalf("two writes to %v: %s and %s", r, prev, a.Op)
			}
			written[r] = a.Op
			if _, out := in.Targets.OutOfReach[r.Namespace]; out {
				t.Fatalf("%s of %v, in a namespace out of reach", a.Op, r)
			}
			if in.Reachable(r.Namespace) != nil {
				t.Fatalf("%s of %v, in a namespace the rule may not reach", a.Op, r)
			}
			if len(a.Drift) > 0 && (!in.Synced || (a.Op != OpUpdate && a.Op != OpReplace) || !own[r]) {
				t.Fatalf("%s of %v reports drift %q: synced %t, own copy %t", a.Op, r, a.Drift, in.Synced, own[r])
			}
			switch a.Op {
			case OpPrune, OpRelease:
				if !own[r] || !in.MayDelete {
					t.Fatalf("%s of %v: own copy %t, Delete allowed %t", a.Op, r, own[r], in.MayDelete)
				}
			case OpUpdate, OpReplace:
				if stranger(r) && !own[r] && in.Policy == v1alpha1.ConflictSkip {
					t.Fatalf("%s of a stranger's %v under conflictPolicy Skip", a.Op, r)
				}
			}
		}
		if p.InSync+p.Skipped > p.Intended {
			t.Fatalf("in sync %d + skipped %d > intended %d", p.InSync, p.Skipped, p.Intended)
		}

		// Apply the plan, then plan again: nothing is left to write.
		next := apply(in, p)
		again := MakePlan(next)
		for _, a := range again.Actions {
			t.Fatalf("after applying %d writes, planning again still writes: %s %s/%s", len(p.Actions), a.Op, a.Object.Namespace, a.Object.Name)
		}
	})
}

// planWorld decodes a PlanInput from b, on a small alphabet of names so that
// sources, copies and strangers collide.
func planWorld(b []byte) PlanInput {
	next := byteReader(b)
	names := []string{"a", "b", "c"}
	nss := []string{"n1", "n2", "n3", "n4"}
	owner := Owner{UID: "uid-1", Namespace: "apps", Name: "rule"}
	in := PlanInput{
		Owner:     owner,
		Targets:   Targets{OutOfReach: map[string]string{}},
		Occupied:  map[Ref]Object{},
		Policy:    []v1alpha1.ConflictPolicy{v1alpha1.ConflictSkip, v1alpha1.ConflictAdopt, v1alpha1.ConflictOverwrite}[next()%3],
		MayDelete: next()%2 == 0,
	}
	reach := map[string]bool{}
	for _, ns := range nss {
		switch next() % 4 {
		case 0:
			in.Targets.Namespaces = append(in.Targets.Namespaces, ns)
			reach[ns] = true
		case 1:
			in.Targets.OutOfReach[ns] = "not in the config's reach"
		case 2:
			reach[ns] = true // Reachable, no longer a target.
		}
	}
	in.Reachable = func(ns string) error {
		if reach[ns] {
			return nil
		}
		return errors.New("out of reach")
	}
	data := func(v byte) map[string]string { return map[string]string{"k": fmt.Sprint(v % 3)} }
	for _, n := range names {
		if v := next(); v%2 == 0 {
			in.Sources = append(in.Sources, Object{ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: n, Labels: map[string]string{"team": "x"}}, Data: data(v / 2)})
		}
	}
	for _, ns := range nss {
		for _, n := range names {
			v := next()
			switch v % 4 {
			case 1: // The rule's copy, of whatever data.
				src := Object{ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: n}, Data: data(v / 4)}
				c := Desired(owner, src, Hash(src), ns, nil, v&16 != 0)
				c.Immutable = v&32 != 0
				in.Copies = append(in.Copies, c)
			case 2: // A stranger's object.
				in.Occupied[Ref{ns, n}] = Object{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}, Data: data(v / 4), Immutable: v&32 != 0}
			}
		}
	}
	in.Synced = next()%2 == 0
	return in
}

// byteReader returns the bytes of b one at a time, then zeros: a fuzzer's
// input decoded into choices.
func byteReader(b []byte) func() byte {
	return func() byte {
		if len(b) == 0 {
			return 0
		}
		v := b[0]
		b = b[1:]
		return v
	}
}

// apply is what the writer does with a plan, as the next Observe would read
// it back.
func apply(in PlanInput, p Plan) PlanInput {
	copies := map[Ref]Object{}
	for _, c := range in.Copies {
		copies[Ref{c.Namespace, c.Name}] = c
	}
	occupied := map[Ref]Object{}
	for r, o := range in.Occupied {
		occupied[r] = o
	}
	for _, a := range p.Actions {
		r := Ref{a.Object.Namespace, a.Object.Name}
		switch a.Op {
		case OpCreate, OpUpdate, OpReplace:
			copies[r] = a.Object
			delete(occupied, r)
		case OpPrune:
			delete(copies, r)
		case OpRelease:
			delete(copies, r)
			occupied[r] = a.Object
		}
	}
	out := in
	out.Copies = nil
	for _, c := range copies {
		out.Copies = append(out.Copies, c)
	}
	out.Occupied = occupied
	return out
}
