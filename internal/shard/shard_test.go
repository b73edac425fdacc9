package shard

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/sharding"
)

func TestParseAcceptsOnlyShardNumbers(t *testing.T) {
	cases := map[string]struct {
		v    string
		want int
		ok   bool
	}{
		"First":       {"0", 0, true},
		"Last":        {"15", 15, true},
		"TooHigh":     {"16", 0, false},
		"Negative":    {"-1", 0, false},
		"LeadingZero": {"01", 0, false},
		"NotANumber":  {"shard-a", 0, false},
		"Empty":       {"", 0, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := Parse(tc.v, 16)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Parse(%q, 16): want %d, %t, got %d, %t", tc.v, tc.want, tc.ok, got, ok)
			}
		})
	}
}

func TestAssignSpreadsShardsAcrossMembers(t *testing.T) {
	t.Run("NoMembers", func(t *testing.T) {
		if diff := cmp.Diff([]string{"", ""}, Assign(2, nil)); diff != "" {
			t.Errorf("Assign(2, nil): -want, +got:\n%s", diff)
		}
	})
	t.Run("OneMemberOwnsAll", func(t *testing.T) {
		if diff := cmp.Diff([]int{0, 1, 2, 3}, Owned(Assign(4, []string{"a"}), "a")); diff != "" {
			t.Errorf("-want, +got:\n%s", diff)
		}
	})
	t.Run("OrderOfMembersDoesNotMatter", func(t *testing.T) {
		if diff := cmp.Diff(Assign(16, []string{"a", "b", "c"}), Assign(16, []string{"c", "a", "b"})); diff != "" {
			t.Errorf("-abc, +cab:\n%s", diff)
		}
	})
	t.Run("SharesDifferByOne", func(t *testing.T) {
		members := []string{"provider-7c9f-x2k", "provider-7c9f-q8z", "provider-7c9f-m4t"}
		owners := Assign(16, members)
		for _, m := range members {
			if n := len(Owned(owners, m)); n < 5 || n > 6 {
				t.Errorf("member %s owns %d of 16 shards, want 5 or 6", m, n)
			}
		}
	})
	t.Run("AJoinerMovesLittleElse", func(t *testing.T) {
		// The joiner takes its share, 4 of 16; the bounded loads move at most
		// a few more between the members that stay.
		before := Assign(16, []string{"a", "b", "c"})
		after := Assign(16, []string{"a", "b", "c", "d"})
		moved := 0
		for i := range before {
			if after[i] != before[i] && after[i] != "d" {
				moved++
			}
		}
		if moved > 3 {
			t.Errorf("%d shards moved between members that stayed, want at most 3", moved)
		}
	})
	t.Run("AJoinOrALeaveMovesAboutItsShareOnAverage", func(t *testing.T) {
		// Over many fleets of 3 replicas and 12 shards, a fourth joining
		// must move 3 shards and a member leaving of 4 must move 3: the
		// bounded loads add less than one on average (about 3.8), so the
		// sharded tier's join moving 4 or 5 is within their spread.
		const fleets, shards = 1000, 12
		joins, leaves := 0, 0
		for f := range fleets {
			var ms []string
			for j := range 4 {
				ms = append(ms, fmt.Sprintf("provider-%d-%d", f, j))
			}
			four := Assign(shards, ms)
			joins += moves(Assign(shards, ms[:3]), four)
			leaves += moves(four, Assign(shards, ms[1:]))
		}
		for what, n := range map[string]int{"join": joins, "leave": leaves} {
			if avg := float64(n) / fleets; avg > 4 {
				t.Errorf("a %s moves %.2f of %d shards on average, want at most 4 (3 must move)", what, avg, shards)
			}
		}
	})
}

// moves is how many shards changed owner from before to after.
func moves(before, after []string) int {
	n := 0
	for i := range before {
		if before[i] != after[i] {
			n++
		}
	}
	return n
}

func TestIdentityIsALabelValueFromTheName(t *testing.T) {
	cases := map[string]struct {
		host, suffix, want string
	}{
		"PodName":       {"provider-clusterops-7c9f-x2k", "Q8ZT", "provider-clusterops-7c9f-x2k-q8zt"},
		"DotsAndCase":   {"Node_1.Example.COM", "ab", "node-1-example-com-ab"},
		"EmptyHost":     {"", "ab", "ab"},
		"LongSuffixCut": {"p", "abcdefghijkl", "p-abcdefgh"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Identity(tc.host, tc.suffix); got != tc.want {
				t.Errorf("Identity(%q, %q): want %q, got %q", tc.host, tc.suffix, tc.want, got)
			}
		})
	}
}

func TestDiffSaysWhichShardsCameAndWent(t *testing.T) {
	release, take := Diff([]int{0, 2, 5}, []int{2, 3})
	if diff := cmp.Diff([]int{0, 5}, release); diff != "" {
		t.Errorf("release: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff([]int{3}, take); diff != "" {
		t.Errorf("take: -want, +got:\n%s", diff)
	}
}

// TestOfSpreadsSimilarNames: namespaces named alike, as fleets name them,
// spread over every shard.
func TestOfSpreadsSimilarNames(t *testing.T) {
	for _, shards := range []int{2, 3, 8, 16} {
		count := make([]int, shards)
		for n := range 24 * shards {
			count[Of(fmt.Sprintf("team-wave-%d", n), shards)]++
		}
		for i, c := range count {
			// 24 each on average; a shard with under a third of that is
			// a hash that does not spread.
			if c < 8 {
				t.Errorf("%d shards: shard %d has %d of %d namespaces: %v", shards, i, c, 24*shards, count)
			}
		}
	}
}

// TestShardRangeClustersSimilarNames pins why shares are not the API
// server's shardSelector ranges of object.metadata.namespace: its plain
// FNV-1a leaves the hash's high bits, which the ranges cut, almost the same
// for names that differ in their last characters, so the same namespaces as
// TestOfSpreadsSimilarNames leave most of 8 ranges empty.
func TestShardRangeClustersSimilarNames(t *testing.T) {
	const shards = 8
	count := make([]int, shards)
	for n := range 24 * shards {
		h, err := strconv.ParseUint(sharding.HashField(fmt.Sprintf("team-wave-%d", n)), 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		i, _ := bits.Mul64(h, shards)
		count[i]++
	}
	if empty := len(slices.DeleteFunc(slices.Clone(count), func(c int) bool { return c > 0 })); empty < shards/2 {
		t.Errorf("the API server's namespace ranges spread similar names over %v: Of's mixing may no longer be needed", count)
	}
}

// FuzzAssign: every shard has exactly one owner among the members, and
// shares differ by at most one shard.
func FuzzAssign(f *testing.F) {
	f.Add(16, "a", "b", "c")
	f.Add(1, "x", "x", "y")
	f.Fuzz(func(t *testing.T, shards int, a, b, c string) {
		shards = 1 + abs(shards)%64
		members := []string{a, b, c}
		owners := Assign(shards, members)
		distinct := slices.Compact(slices.Sorted(slices.Values(members)))
		limit := (shards + len(distinct) - 1) / len(distinct)
		for i, o := range owners {
			if !slices.Contains(members, o) {
				t.Fatalf("shard %d owned by %q, not a member", i, o)
			}
		}
		for _, m := range distinct {
			if n := len(Owned(owners, m)); n > limit {
				t.Fatalf("member %q owns %d of %d shards, more than %d", m, n, shards, limit)
			}
		}
	})
}

// FuzzOf: a namespace falls in one of the shards, always the same.
func FuzzOf(f *testing.F) {
	f.Add("default", 16)
	f.Add("", 3)
	f.Fuzz(func(t *testing.T, ns string, shards int) {
		shards = 1 + abs(shards)%1024
		i := Of(ns, shards)
		if i < 0 || i >= shards || Of(ns, shards) != i {
			t.Fatalf("Of(%q, %d) = %d", ns, shards, i)
		}
	})
}

func abs(i int) int {
	if i < 0 {
		if i == -i { // math.MinInt
			return 0
		}
		return -i
	}
	return i
}

func TestShareSelectsOwnedAndCarried(t *testing.T) {
	share, err := Share([]int{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	owned := Carry(map[string]string{"app": "x"}, map[string]string{Label: "3"})
	other := Carry(map[string]string{"app": "x"}, map[string]string{Label: "2"})
	none := Carry(map[string]string{"app": "x"}, nil)
	if _, ok := none[Label]; ok {
		t.Errorf("Carry from an owner without a shard = %v, want no shard label", none)
	}
	base, err := labels.Parse("app")
	if err != nil {
		t.Fatal(err)
	}
	sel := Within(base, share)
	for _, c := range []struct {
		reason string
		labels map[string]string
		want   bool
	}{
		{"An object carrying an owned shard is the replica's.", owned, true},
		{"An object carrying another shard is not.", other, false},
		{"An object without a shard label is not.", none, false},
		{"An owned shard without the base selector's label is not.", map[string]string{Label: "1"}, false},
	} {
		if got := sel.Matches(labels.Set(c.labels)); got != c.want {
			t.Errorf("%s\n%s matches %v = %t, want %t", c.reason, sel, c.labels, got, c.want)
		}
	}
	if got := Within(base, nil); got.String() != base.String() {
		t.Errorf("Within(sel, nil) = %s, want %s", got, base)
	}
}
