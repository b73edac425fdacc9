// Package shard cuts the fleet of managed resources into a fixed number of
// shards and shares them out among the provider's live replicas, on
// Kubernetes' own primitives: a Lease per replica says who is alive, a Lease
// per shard says who acts on it, and the crossplane.io/shard label on each
// managed resource says which shard it is in, so that a replica's caches
// select its share.
//
// A resource's shard follows its namespace: what a resource acts on mostly
// lives in its namespace, so one replica's watches of a namespace are not
// repeated on every other. The labeler records with the shard the count it
// placed under (LabelShards), so a change of --shards recuts what it placed;
// a shard label set by hand, without that count, pins a resource to a shard.
// A replica writes for a shard only while its own clock says it holds the
// shard's Lease (Fence). Where the API server filters by shardSelector, namespaces are placed by
// ranges of its own hash (Ranges), so that a replica's watches of objects
// without the label ask for its namespaces alone (Placement).
package shard

import (
	"hash/fnv"
	"math/bits"
	"slices"
	"strconv"
)

// Label is the label that names a managed resource's shard, as in
// Crossplane's design for sharded providers (crossplane/crossplane#7267).
const Label = "crossplane.io/shard"

// Of is the shard, of shards, that a resource in namespace falls in: the
// index of the equal range of the hash space its namespace's mixed 64-bit
// FNV-1a hash lies in. Not the API server's shardRange of the namespace: its
// plain FNV-1a's high bits hardly depend on a name's last characters, so it
// puts team-1 to team-9 in one shard.
func Of(namespace string, shards int) int {
	if shards <= 1 {
		return 0
	}
	hi, _ := bits.Mul64(mix(hash(namespace)), uint64(shards))
	return int(hi) //nolint:gosec // hi < shards, an int.
}

// Name is the value of Label for shard i.
func Name(i int) string { return strconv.Itoa(i) }

// Parse is the shard a value of Label names, and whether it names one of
// shards.
func Parse(v string, shards int) (int, bool) {
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 || i >= shards || Name(i) != v {
		return 0, false
	}
	return i, true
}

// Names are the values of Label for shards is.
func Names(is []int) []string {
	out := make([]string, len(is))
	for k, i := range is {
		out[k] = Name(i)
	}
	return out
}

// All are the values of Label of shards 0 to shards-1.
func All(shards int) []string {
	out := make([]string, shards)
	for i := range out {
		out[i] = Name(i)
	}
	return out
}

// Assign gives each of shards to one of members by rendezvous hashing with
// bounded loads: each shard goes to the member that scores highest on it
// among those that own fewer than ⌈shards/members⌉, so shares differ by at
// most one shard, and a member joining or leaving moves few shards besides
// the ones it wins or held. Every member computes the same answer from the
// same members. With no members every owner is "".
func Assign(shards int, members []string) []string {
	owners := make([]string, shards)
	members = slices.Compact(slices.Sorted(slices.Values(members)))
	if len(members) == 0 {
		return owners
	}
	capacity := (shards + len(members) - 1) / len(members)
	load := make(map[string]int, len(members))
	for i := range owners {
		var best uint64
		for _, m := range members {
			if load[m] >= capacity {
				continue
			}
			if s := mix(hash(m + "/" + Name(i))); owners[i] == "" || s > best {
				owners[i], best = m, s
			}
		}
		load[owners[i]]++
	}
	return owners
}

// Owned are the shards owners gives to member, in order.
func Owned(owners []string, member string) []int {
	var out []int
	for i, o := range owners {
		if o == member {
			out = append(out, i)
		}
	}
	return out
}

// Diff is what changes from the shards held to those wanted: the ones to
// give up and the ones to take, in order.
func Diff(held, wanted []int) (release, take []int) {
	for _, i := range held {
		if !slices.Contains(wanted, i) {
			release = append(release, i)
		}
	}
	for _, i := range wanted {
		if !slices.Contains(held, i) {
			take = append(take, i)
		}
	}
	return release, take
}

// mix spreads every bit of h over all of them (MurmurHash3's finalizer): two
// members' names that differ in their last characters have FNV-1a hashes
// whose high bits hardly differ, so that one would win every shard.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

func hash(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}
