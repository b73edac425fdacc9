package watchset

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// TestOwnerSet adds and removes owners across the size where an ownerSet
// turns from a slice into a map: it holds each owner once, whichever form.
func TestOwnerSet(t *testing.T) {
	name := func(i int) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(i)} }
	var nilSet *ownerSet
	if nilSet.len() != 0 || len(slices.Collect(nilSet.all())) != 0 {
		t.Error("a nil ownerSet holds owners, want none")
	}
	for _, n := range []int{1, fewOwners, fewOwners + 1, 3 * fewOwners} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			o := &ownerSet{}
			want := map[types.NamespacedName]bool{}
			for i := range n {
				o.add(name(i))
				o.add(name(i)) // Twice is once.
				want[name(i)] = true
			}
			for i := 0; i < n; i += 2 {
				o.del(name(i))
				delete(want, name(i))
			}
			o.del(name(n + 100)) // Never added.
			got := map[types.NamespacedName]bool{}
			for m := range o.all() {
				if got[m] {
					t.Errorf("all() yields %v twice", m)
				}
				got[m] = true
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("owners: -want, +got:\n%s", diff)
			}
			if o.len() != len(want) {
				t.Errorf("len() = %d, want %d", o.len(), len(want))
			}
		})
	}
}
