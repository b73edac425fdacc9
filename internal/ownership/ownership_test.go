package ownership

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecideTakesOnlyWhatIsMarkedOrAdoptable(t *testing.T) {
	cases := map[string]struct {
		reason string
		facts  Facts
		want   Stake
	}{
		"Absent":               {"nothing to take", Facts{Wanted: true, Adopt: true}, None},
		"Marked":               {"its own object", Facts{Exists: true, Marked: true, Wanted: true}, Mine},
		"MarkedUnwanted":       {"its own object, no longer wanted, may be removed", Facts{Exists: true, Marked: true}, Mine},
		"MarkedWhileDeleting":  {"what it made is deleted with it", Facts{Exists: true, Marked: true, Deleting: true}, Mine},
		"ForeignWanted":        {"someone else's object where it wants one", Facts{Exists: true, Wanted: true}, InTheWay},
		"ForeignWantedAdopted": {"adoption takes over what is wanted", Facts{Exists: true, Wanted: true, Adopt: true}, Mine},
		"ForeignUnwanted":      {"an object it does not want is no conflict", Facts{Exists: true}, None},
		"ForeignUnwantedAdopt": {"adoption never takes what is not wanted", Facts{Exists: true, Adopt: true}, None},
		"ForeignWhileDeleting": {"a foreign object never blocks deletion", Facts{Exists: true, Wanted: true, Deleting: true}, None},
		"ForeignAdoptDeleting": {"nor is it adopted on the way out", Facts{Exists: true, Wanted: true, Adopt: true, Deleting: true}, None},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Decide(tc.facts)); diff != "" {
				t.Errorf("%s\nDecide(%+v): -want, +got:\n%s", tc.reason, tc.facts, diff)
			}
		})
	}
}

// TestDecidePromises checks every combination of facts against the promises
// the package makes.
func TestDecidePromises(t *testing.T) {
	for i := range 32 {
		f := Facts{Exists: i&1 != 0, Marked: i&2 != 0, Wanted: i&4 != 0, Adopt: i&8 != 0, Deleting: i&16 != 0}
		got := Decide(f)
		switch {
		case !f.Exists && got != None:
			t.Errorf("%+v: %v, want None for an object that does not exist", f, got)
		case f.Exists && !f.Marked && got == Mine && (f.Deleting || !f.Wanted || !f.Adopt):
			t.Errorf("%+v: an unmarked object is taken without a wanted adoption", f)
		case f.Deleting && got == InTheWay:
			t.Errorf("%+v: an object in the way would block deletion", f)
		case f.Exists && f.Marked && got != Mine:
			t.Errorf("%+v: %v, want Mine for a marked object", f, got)
		}
	}
}
