package shard

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Ranges cut the hash space of the API server's shardSelector into shards:
// shard i holds the namespaces whose plain 64-bit FNV-1a hash (the one
// shardRange() computes) lies in [bounds[i-1], bounds[i]), from 0 for the
// first and up to 2^64 for the last. Equal ranges of that hash would put
// namespaces with similar names (team-1 to team-9) in one shard, so the
// bounds come from the namespaces themselves (Quantiles); namespaces made
// later fall in whichever range their hash does.
type Ranges struct {
	bounds []uint64
}

// Quantiles are the ranges that give each of shards as many of namespaces
// as may be; equal ranges when there are fewer namespaces than shards.
func Quantiles(namespaces []string, shards int) Ranges {
	if shards <= 1 {
		return Ranges{}
	}
	hs := make([]uint64, 0, len(namespaces))
	for _, ns := range namespaces {
		hs = append(hs, hash(ns))
	}
	slices.Sort(hs)
	hs = slices.Compact(hs)
	bounds := make([]uint64, shards-1)
	for k := range bounds {
		if len(hs) < shards {
			bounds[k] = uint64(k+1) * (math.MaxUint64 / uint64(shards))
			continue
		}
		bounds[k] = hs[(k+1)*len(hs)/shards]
	}
	return Ranges{bounds: bounds}
}

// Shards is how many shards r cuts the hash space into.
func (r Ranges) Shards() int { return len(r.bounds) + 1 }

// Of is the shard whose range namespace's hash lies in.
func (r Ranges) Of(namespace string) int {
	h := hash(namespace)
	i, _ := slices.BinarySearchFunc(r.bounds, h, func(b, h uint64) int {
		if b <= h {
			return -1
		}
		return 1
	})
	return i
}

// A span is the hashes first to last, both included, so that the top of the
// hash space needs no 65th bit.
type span struct{ first, last uint64 }

// span is shard i's range; ok is false when it is empty.
func (r Ranges) span(i int) (span, bool) {
	s := span{first: 0, last: math.MaxUint64}
	if i > 0 {
		s.first = r.bounds[i-1]
	}
	if i < len(r.bounds) {
		if r.bounds[i] == 0 {
			return span{}, false
		}
		s.last = r.bounds[i] - 1
	}
	return s, s.first <= s.last
}

// Selector is the shardSelector of the objects in the namespaces of shards
// owned and in namespaces, which may lie outside them (resources pinned to
// a shard by hand): one shardRange() of object.metadata.namespace per run of
// adjacent ranges, and one per namespace outside them. Empty when it would
// select nothing.
func (r Ranges) Selector(owned []int, namespaces []string) string {
	var spans []span
	for _, i := range owned {
		if i < 0 || i >= r.Shards() {
			continue
		}
		if s, ok := r.span(i); ok {
			spans = append(spans, s)
		}
	}
	for _, ns := range namespaces {
		if !slices.Contains(owned, r.Of(ns)) {
			h := hash(ns)
			spans = append(spans, span{first: h, last: h})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.first, b.first) })
	var merged []span
	for _, s := range spans {
		if n := len(merged); n > 0 && (merged[n-1].last == math.MaxUint64 || s.first <= merged[n-1].last+1) {
			merged[n-1].last = max(merged[n-1].last, s.last)
			continue
		}
		merged = append(merged, s)
	}
	terms := make([]string, len(merged))
	for k, s := range merged {
		end := "0x10000000000000000"
		if s.last < math.MaxUint64 {
			end = fmt.Sprintf("0x%016x", s.last+1)
		}
		terms[k] = fmt.Sprintf("shardRange(object.metadata.namespace, '0x%016x', '%s')", s.first, end)
	}
	return strings.Join(terms, " || ")
}

// String is r as ParseRanges reads it: the bounds in hexadecimal, separated
// by commas.
func (r Ranges) String() string {
	out := make([]string, len(r.bounds))
	for k, b := range r.bounds {
		out[k] = fmt.Sprintf("%016x", b)
	}
	return strings.Join(out, ",")
}

// ParseRanges reads the ranges String wrote, which must cut the hash space
// into shards.
func ParseRanges(s string, shards int) (Ranges, error) {
	if shards <= 1 {
		if s != "" {
			return Ranges{}, errors.New("one shard has no bounds")
		}
		return Ranges{}, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != shards-1 {
		return Ranges{}, errors.Errorf("%d bounds cut the namespaces into %d shards, not %d", len(parts), len(parts)+1, shards)
	}
	r := Ranges{bounds: make([]uint64, len(parts))}
	for k, p := range parts {
		b, err := strconv.ParseUint(p, 16, 64)
		if err != nil {
			return Ranges{}, errors.Wrapf(err, "bound %d", k)
		}
		if k > 0 && b < r.bounds[k-1] {
			return Ranges{}, errors.Errorf("bound %d is below bound %d", k, k-1)
		}
		r.bounds[k] = b
	}
	return r, nil
}
