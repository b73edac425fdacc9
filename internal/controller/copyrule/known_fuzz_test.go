package copyrule

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/types"
)

// FuzzSummarizedPlan plans a rule's world twice: from its copies as read, and
// from the summaries the copies cache keeps of them (knownCopy), with copies'
// marks tampered with and the rule adding annotations or not. The two plans
// must decide the same for every object; once the copies the summarized plan
// writes whole are read (summarized), planning again gives the plan made
// from the copies as read, write for write.
func FuzzSummarizedPlan(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, []byte{1, 2, 3})
	f.Add([]byte{255, 17, 3, 200, 9, 42, 0, 0, 1, 128, 64, 7}, []byte{0, 9, 4, 4, 1})
	f.Fuzz(func(t *testing.T, world, tamper []byte) {
		in := planWorld(world)
		next := byteReader(tamper)
		if next()%2 == 1 {
			in.Transform.Annotations = map[string]string{"owner": "platform"}
		}
		for i := range in.Copies {
			c := &in.Copies[i]
			c.UID, c.ResourceVersion = types.UID(fmt.Sprintf("uid-%s-%s", c.Namespace, c.Name)), "7"
			switch next() % 5 {
			case 1:
				c.Annotations[AnnotationHash] = "stale"
			case 2:
				delete(c.Annotations, AnnotationRule)
			case 3:
				c.Annotations["owner"], c.Annotations[AnnotationAdded] = "platform", "owner"
			case 4:
				c.Annotations["owner"], c.Annotations[AnnotationAdded] = "someone", "owner"
			}
		}
		full := MakePlan(in)

		sum := in
		sum.Copies = make([]Object, len(in.Copies))
		for i, c := range in.Copies {
			sum.Copies[i] = c
			if k, ok := summarize(c); ok {
				sum.Copies[i] = k.object(in.Owner, Ref{c.Namespace, c.Name})
			}
		}
		partial := MakePlan(sum)
		if d := cmp.Diff(decisions(full), decisions(partial)); d != "" {
			t.Fatalf("the summarized plan decides otherwise (-read +summarized):\n%s", d)
		}

		refs := map[Ref]bool{}
		for _, r := range summarized(sum.Copies, partial.Actions) {
			refs[r] = true
		}
		for i, c := range sum.Copies {
			if refs[Ref{c.Namespace, c.Name}] {
				sum.Copies[i] = in.Copies[i]
			}
		}
		again := MakePlan(sum)
		for i, a := range again.Actions {
			if a.Op != OpUpdate && a.Op != OpRelease {
				continue
			}
			if d := cmp.Diff(full.Actions[i].Object, a.Object); d != "" {
				t.Fatalf("%s of %s/%s writes otherwise once read (-read +summarized):\n%s", a.Op, a.Object.Namespace, a.Object.Name, d)
			}
		}
	})
}

// decisions is what a plan does to each object, and its counts and problems.
func decisions(p Plan) any {
	ops := map[Ref]Op{}
	for _, a := range p.Actions {
		ops[Ref{a.Object.Namespace, a.Object.Name}] = a.Op
	}
	return struct {
		Ops                       map[Ref]Op
		Intended, InSync, Skipped int
		Problems                  any
	}{ops, p.Intended, p.InSync, p.Skipped, p.Problems}
}

// FuzzCopyTable puts and forgets copies in a copyTable, across the size
// where it turns from a slice into a map: it must always know what a map
// would, and its slice must stay sorted for its searches.
func FuzzCopyTable(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(bytes.Repeat([]byte{3, 9, 27, 81, 243, 5}, 20))
	f.Fuzz(func(t *testing.T, ops []byte) {
		var tbl *copyTable
		want := map[Ref]knownCopy{}
		for i, op := range ops {
			ref := Ref{Namespace: fmt.Sprintf("ns-%d", op%7), Name: fmt.Sprintf("c-%d", (op/7)%9)}
			if op%5 == 0 {
				tbl.del(ref)
				delete(want, ref)
				continue
			}
			if tbl == nil {
				tbl = &copyTable{}
			}
			k := knownCopy{uid: fmt.Sprint(i), version: fmt.Sprint(op)}
			tbl.put(ref, k)
			want[ref] = k
		}
		got := tbl.clone()
		if len(want) == 0 && len(got) == 0 {
			return
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(knownCopy{})); diff != "" {
			t.Errorf("copyTable knows: -want, +got:\n%s", diff)
		}
		if tbl.len() != len(want) {
			t.Errorf("len() = %d, want %d", tbl.len(), len(want))
		}
		if !slices.IsSortedFunc(tbl.few, func(a, b knownEntry) int { return compareRefs(a, b.ref) }) {
			t.Errorf("the slice is not sorted: %v", tbl.few)
		}
		// Made from a list, repeats and all: the last of each ref wins.
		sum := Summary{Content: Hash(Object{}), Marks: marks(nil)}
		listed, wantUIDs := []Object{}, map[Ref]string{}
		for i, op := range ops {
			o := Object{Summary: &sum}
			o.Namespace, o.Name = fmt.Sprintf("ns-%d", op%7), fmt.Sprintf("c-%d", (op/7)%9)
			o.UID, o.ResourceVersion = types.UID(fmt.Sprint(i)), "1"
			listed = append(listed, o)
			wantUIDs[Ref{o.Namespace, o.Name}] = string(o.UID)
		}
		made := newCopyTable(listed)
		gotUIDs := map[Ref]string{}
		for ref, k := range made.clone() {
			gotUIDs[ref] = k.uid
		}
		if diff := cmp.Diff(wantUIDs, gotUIDs, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("newCopyTable(...) knows: -want, +got:\n%s", diff)
		}
		if !slices.IsSortedFunc(made.few, func(a, b knownEntry) int { return compareRefs(a, b.ref) }) {
			t.Errorf("newCopyTable(...): the slice is not sorted: %v", made.few)
		}
	})
}
