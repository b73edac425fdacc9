package shard

import (
	"maps"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
)

func TestDecidePlacesAResourceByItsNamespace(t *testing.T) {
	const ns = "team-a"
	under3 := Placement{Shards: 3}
	own := Name(Of(ns, 3))
	other := Name((Of(ns, 3) + 1) % 3)
	both := map[string]string{Label: own, LabelShards: "3"}
	ranges := Quantiles([]string{"team-a", "team-b", "team-c", "team-d", "team-e", "team-f"}, 3)
	byRanges := Placement{Shards: 3, Ranges: &ranges}
	cases := map[string]struct {
		reason string
		labels map[string]string
		place  Placement
		want   decision
	}{
		"Unlabelled": {
			reason: "A resource without a shard label is placed by its namespace, under the count it is placed under.",
			place:  under3,
			want:   decision{set: both},
		},
		"UnlabelledByRanges": {
			reason: "With ranges, a resource is placed in the range its namespace's hash lies in.",
			place:  byRanges,
			want:   decision{set: map[string]string{Label: Name(ranges.Of(ns)), LabelShards: "3"}},
		},
		"CountWithoutShard": {
			reason: "A resource placed by the labeler whose shard label was removed is placed again.",
			labels: map[string]string{LabelShards: "3"},
			place:  under3,
			want:   decision{set: both},
		},
		"PlacedUnderMoreShards": {
			reason: "A label the labeler wrote under 6 shards that names no shard of 3 is recut, with its count, in one patch.",
			labels: map[string]string{Label: "4", LabelShards: "6"},
			place:  under3,
			want:   decision{set: both},
		},
		"PlacedUnderMoreShardsStillValid": {
			reason: "A label the labeler wrote under 6 shards is recut even where it names a shard of 3: it placed the namespace by another cut.",
			labels: map[string]string{Label: other, LabelShards: "6"},
			place:  under3,
			want:   decision{set: both},
		},
		"PlacedUnderFewerShards": {
			reason: "A change to more shards recuts as well.",
			labels: map[string]string{Label: "0", LabelShards: "2"},
			place:  under3,
			want:   decision{set: both},
		},
		"CountNotANumber": {
			reason: "A count label that is no count is not this count: the resource is placed again.",
			labels: map[string]string{Label: own, LabelShards: "three"},
			place:  under3,
			want:   decision{set: both},
		},
		"PlacedUnderThisCount": {
			reason: "A resource placed under this count is left as it is.",
			labels: both,
			place:  under3,
			want:   decision{},
		},
		"PlacedUnderThisCountMovedByHand": {
			reason: "A resource placed under this count whose shard label was set to another shard is left there.",
			labels: map[string]string{Label: other, LabelShards: "3"},
			place:  under3,
			want:   decision{},
		},
		"PlacedUnderThisCountEditedToNoShard": {
			reason: "A resource placed under this count whose shard label was set to name no shard is placed again: it carries the labeler's count, so it is no pin.",
			labels: map[string]string{Label: "99", LabelShards: "3"},
			place:  under3,
			want:   decision{set: both},
		},
		"PinToAnotherShard": {
			reason: "A shard label without a count, naming a shard other than its namespace's, is a pin: kept.",
			labels: map[string]string{Label: other},
			place:  under3,
			want:   decision{},
		},
		"PinToItsOwnShard": {
			reason: "A shard label without a count naming its namespace's shard (an older provider's label, or a pin no different from it) is taken as the labeler's: its count is added.",
			labels: map[string]string{Label: own},
			place:  under3,
			want:   decision{set: map[string]string{LabelShards: "3"}},
		},
		"PinToNoShard": {
			reason: "A pin that names no shard of this count is reported and left as it is.",
			labels: map[string]string{Label: "4"},
			place:  under3,
			want:   decision{unknown: true},
		},
		"PinNotANumber": {
			reason: "A pin that is no shard's name is reported.",
			labels: map[string]string{Label: "shard-a"},
			place:  under3,
			want:   decision{unknown: true},
		},
		"PinEmpty": {
			reason: "An empty shard label is a value that names no shard, not a missing label: reported.",
			labels: map[string]string{Label: ""},
			place:  under3,
			want:   decision{unknown: true},
		},
		"OtherLabelsUntouched": {
			reason: "Only the two labels of placement are ever set.",
			labels: map[string]string{"app": "x", LabelShards: "6", Label: "5"},
			place:  under3,
			want:   decision{set: both},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := decide(tc.labels, ns, tc.place)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(decision{})); diff != "" {
				t.Errorf("%s\ndecide(%v): -want, +got:\n%s", tc.reason, tc.labels, diff)
			}
		})
	}
}

// TestSelectorsHoldEveryResourceToLabel: the labeler's two caches together hold every resource decide
// would change or report, and none it would leave as it is once placed.
func TestSelectorsHoldEveryResourceToLabel(t *testing.T) {
	toPlace, err := ToPlace(3)
	if err != nil {
		t.Fatal(err)
	}
	strays, err := Strays(3)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		labels map[string]string
		want   bool
	}{
		"Unlabelled":           {nil, true},
		"PlacedUnderSix":       {map[string]string{Label: "4", LabelShards: "6"}, true},
		"PlacedUnderThree":     {map[string]string{Label: "1", LabelShards: "3"}, false},
		"CountWithoutShard":    {map[string]string{LabelShards: "3"}, true},
		"CountAndNoShard":      {map[string]string{Label: "7", LabelShards: "3"}, true},
		"PinWithoutCount":      {map[string]string{Label: "1"}, true},
		"PinToNoShard":         {map[string]string{Label: "9"}, true},
		"OtherLabelsOnly":      {map[string]string{"app": "x"}, true},
		"PlacedAndMovedByHand": {map[string]string{Label: "2", LabelShards: "3"}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ls := labels.Set(tc.labels)
			if got := toPlace.Matches(ls) || strays.Matches(ls); got != tc.want {
				t.Errorf("labels %v: selected by %q or %q: %t, want %t", tc.labels, toPlace, strays, got, tc.want)
			}
		})
	}
}

// FuzzDecide: whatever labels a user sets, decide sets only the two labels
// of placement; what it sets is a fixed point (deciding again changes
// nothing); after it, the resource names a shard some replica acts on, or
// it is reported; a pin that names a shard keeps it; and the labeler's caches
// (ToPlace, Strays) hold every resource decide would change or report.
func FuzzDecide(f *testing.F) {
	f.Add("4", true, "6", true, "team-a", uint8(3))
	f.Add("1", true, "", false, "team-b", uint8(3))
	f.Add("", false, "3", true, "team-c", uint8(3))
	f.Add("99", true, "3", true, "default", uint8(8))
	f.Add("01", true, "", false, "x", uint8(1))
	f.Fuzz(func(t *testing.T, shard string, hasShard bool, count string, hasCount bool, ns string, n uint8) {
		place := Placement{Shards: int(n%16) + 1}
		ls := map[string]string{"app": "x"}
		if hasShard {
			ls[Label] = shard
		}
		if hasCount {
			ls[LabelShards] = count
		}
		d := decide(ls, ns, place)
		after := maps.Clone(ls)
		for k, v := range d.set {
			if k != Label && k != LabelShards {
				t.Fatalf("decide(%v) sets label %s", ls, k)
			}
			after[k] = v
		}
		if d.unknown && len(d.set) > 0 {
			t.Fatalf("decide(%v) both reports and sets %v", ls, d.set)
		}
		if again := decide(after, ns, place); len(again.set) > 0 {
			t.Fatalf("decide(%v) sets %v, then decide(%v) sets %v", ls, d.set, after, again.set)
		}
		_, valid := Parse(after[Label], place.Shards)
		if !valid && !d.unknown {
			t.Fatalf("decide(%v) leaves shard label %q under %d shards unreported", ls, after[Label], place.Shards)
		}
		if _, pinned := Parse(shard, place.Shards); hasShard && !hasCount && pinned && after[Label] != shard {
			t.Fatalf("decide(%v) moves the pin %q to %q", ls, shard, after[Label])
		}
		toPlace, err := ToPlace(place.Shards)
		if err != nil {
			t.Fatal(err)
		}
		strays, err := Strays(place.Shards)
		if err != nil {
			t.Fatal(err)
		}
		watched := toPlace.Matches(labels.Set(ls)) || strays.Matches(labels.Set(ls))
		if (len(d.set) > 0 || d.unknown) && !watched {
			t.Fatalf("decide(%v) under %s shards acts, but neither cache holds it", ls, strconv.Itoa(place.Shards))
		}
	})
}
