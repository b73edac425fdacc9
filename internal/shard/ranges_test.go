package shard

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apisharding "k8s.io/apiserver/pkg/sharding"
)

// selects is whether the API server's own parser and matcher pass an object
// of namespace through selector.
func selects(t *testing.T, selector, namespace string) bool {
	t.Helper()
	s, err := apisharding.Parse(selector)
	if err != nil {
		t.Fatalf("the API server refuses %q: %v", selector, err)
	}
	ok, err := s.Matches(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func names(format string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i)
	}
	return out
}

// TestQuantilesSpreadSimilarNames: the ranges cut where the namespaces are,
// so that names TestShardRangeClustersSimilarNames finds in a few equal
// ranges share out evenly.
func TestQuantilesSpreadSimilarNames(t *testing.T) {
	for _, shards := range []int{2, 3, 8, 12} {
		nss := names("team-wave-%d", 24*shards)
		r := Quantiles(nss, shards)
		count := make([]int, shards)
		for _, ns := range nss {
			count[r.Of(ns)]++
		}
		for i, c := range count {
			if c != 24 {
				t.Errorf("%d shards: shard %d holds %d namespaces, want 24: %v", shards, i, c, count)
			}
		}
	}
}

func TestRangesSelector(t *testing.T) {
	nss := names("tenant-%d", 40)
	r := Quantiles(nss, 4)
	byShard := map[int][]string{}
	for _, ns := range nss {
		byShard[r.Of(ns)] = append(byShard[r.Of(ns)], ns)
	}
	cases := map[string]struct {
		owned   []int
		outside []string
		terms   int
	}{
		"OneShard":       {owned: []int{1}, terms: 1},
		"AdjacentMerged": {owned: []int{1, 2}, terms: 1},
		"Apart":          {owned: []int{0, 2}, terms: 2},
		"FirstAndLast":   {owned: []int{0, 3}, terms: 2},
		"All":            {owned: []int{0, 1, 2, 3}, terms: 1},
		"PinnedOutside":  {owned: []int{1}, outside: []string{byShard[3][0]}, terms: 2},
		"PinnedInside":   {owned: []int{1}, outside: []string{byShard[1][0]}, terms: 1},
		"OnlyPinned":     {outside: []string{byShard[0][0], byShard[2][1]}, terms: 2},
		"UnknownShard":   {owned: []int{7}, terms: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sel := r.Selector(tc.owned, tc.outside)
			terms := 0
			if sel != "" {
				terms = strings.Count(sel, "||") + 1
			}
			if terms != tc.terms {
				t.Errorf("Selector(%v, %v) has %d ranges, want %d: %s", tc.owned, tc.outside, terms, tc.terms, sel)
			}
			if sel == "" {
				return
			}
			p := Placement{Shards: 4, Ranges: &r, Served: true}
			for _, ns := range append(slices.Clone(nss), "other", "") {
				want := p.Covers(tc.owned, tc.outside, ns)
				if got := selects(t, sel, ns); got != want {
					t.Errorf("namespace %q (shard %d): the API server selects it: %t, Covers: %t", ns, r.Of(ns), got, want)
				}
			}
		})
	}
}

func TestRangesEdges(t *testing.T) {
	// Bounds at the ends of the hash space: an empty first range, and a
	// namespace whose hash is the last one a range holds.
	r := Ranges{bounds: []uint64{0, hash("b"), hash("b") + 1}}
	if _, ok := r.span(0); ok {
		t.Error("a range that ends at 0 is not empty")
	}
	if got := r.Selector([]int{0}, nil); got != "" {
		t.Errorf("the empty range selects %q", got)
	}
	if !selects(t, r.Selector([]int{2}, nil), "b") || selects(t, r.Selector([]int{1}, nil), "b") {
		t.Error("the one-hash range of b does not hold b alone")
	}
	top := r.Selector([]int{3}, nil)
	if !strings.HasSuffix(top, "'0x10000000000000000')") {
		t.Errorf("the last range does not end at 2^64: %s", top)
	}
	full := Ranges{bounds: []uint64{math.MaxUint64}}
	if got := full.Selector([]int{0, 1}, nil); strings.Count(got, "shardRange") != 1 {
		t.Errorf("two ranges that cover the space are not one: %s", got)
	}
}

func TestParseRanges(t *testing.T) {
	r := Quantiles(names("ns-%d", 30), 5)
	back, err := ParseRanges(r.String(), 5)
	if err != nil || !slices.Equal(back.bounds, r.bounds) {
		t.Fatalf("ParseRanges(%q) = %v, %v; want %v", r.String(), back.bounds, err, r.bounds)
	}
	for name, tc := range map[string]struct {
		s      string
		shards int
	}{
		"TooFew":     {s: "10,20", shards: 5},
		"NotHex":     {s: "zz", shards: 2},
		"Descending": {s: "20,10", shards: 3},
		"OneShard":   {s: "10", shards: 1},
	} {
		if _, err := ParseRanges(tc.s, tc.shards); err == nil {
			t.Errorf("%s: ParseRanges(%q, %d) accepted it", name, tc.s, tc.shards)
		}
	}
	if _, err := ParseRanges("", 1); err != nil {
		t.Errorf("one shard: %v", err)
	}
}

func TestPlacementWithoutRanges(t *testing.T) {
	p := Placement{Shards: 8}
	if p.Of("team-1") != Of("team-1", 8) {
		t.Error("without ranges a namespace is not placed by Of")
	}
	if p.Filter([]int{1}, nil) != "" || !p.Covers([]int{1}, nil, "anything") {
		t.Error("without ranges there is a filter")
	}
	r := Quantiles(names("a-%d", 8), 8)
	p = Placement{Shards: 8, Ranges: &r}
	if p.Filter([]int{1}, nil) != "" {
		t.Error("an API server without the feature gate gets a shardSelector")
	}
	// A share with more namespaces outside its ranges than a selector can
	// name watches whole.
	p.Served = true
	many := names("pinned-%d", maxOutside+1)
	if p.Filter([]int{1}, many) != "" || !p.Covers([]int{1}, many, "anything") {
		t.Error("a share with too many namespaces outside its ranges is filtered")
	}
	sel := p.Filter([]int{1}, many[:maxOutside])
	if _, err := apisharding.Parse(sel); err != nil || len(sel) > 100_000 {
		t.Errorf("the API server cannot parse the longest selector (%d characters): %v", len(sel), err)
	}
}

// FuzzRangesSelector: whatever the namespaces, shards and share, the API
// server accepts the selector and passes exactly the namespaces Covers holds.
func FuzzRangesSelector(f *testing.F) {
	f.Add("team-1,team-2,team-3,kube-system", 4, uint16(0b0101), "team-9")
	f.Add("", 3, uint16(0b111), "")
	f.Add("a", 1, uint16(1), "b")
	f.Fuzz(func(t *testing.T, list string, shards int, mask uint16, pinned string) {
		shards = 1 + abs(shards)%16
		nss := strings.Split(list, ",")
		r := Quantiles(nss, shards)
		var owned []int
		for i := range shards {
			if mask&(1<<i) != 0 {
				owned = append(owned, i)
			}
		}
		outside := []string{pinned}
		sel := r.Selector(owned, outside)
		p := Placement{Shards: shards, Ranges: &r, Served: true}
		for _, ns := range append(nss, pinned, "elsewhere") {
			want := p.Covers(owned, outside, ns)
			if sel == "" {
				if want {
					t.Fatalf("no selector, yet %q is covered", ns)
				}
				continue
			}
			if got := selects(t, sel, ns); got != want {
				t.Fatalf("namespace %q (shard %d of %v): selected %t, covered %t; %s", ns, r.Of(ns), owned, got, want, sel)
			}
		}
	})
}
