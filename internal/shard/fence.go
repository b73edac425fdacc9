package shard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
)

// A Fence says whether this replica may still write on behalf of a shard:
// only while its own clock says the shard's Lease is its own, that is less
// than the renew deadline after the start of its last renewal that the API
// server accepted. Another replica takes the Lease only a lease duration
// after it last saw it change, so a replica that was frozen or cut off past
// that point writes nothing when it resumes, though its in-flight work goes
// on until it notices (TestFenceHoldsOnlyShardsRenewedInTime). Time is read from the process's
// monotonic clock; a step of the wall clock does not move it.
type Fence struct {
	name     string // the provider's, the prefix of the shard Leases
	identity string
	deadline time.Duration
	now      func() time.Time

	mu      sync.Mutex
	renewed map[string]time.Time // by shard (Name), the start of the last renewal
	working map[string]int       // by shard, the reconciles under way (Enter)
}

// NewFence returns the fence of replica identity of provider name, whose
// Leases are renewed within deadline.
func NewFence(name, identity string, deadline time.Duration) *Fence {
	return &Fence{name: name, identity: identity, deadline: deadline, now: time.Now, renewed: map[string]time.Time{}, working: map[string]int{}}
}

// Check returns nil while this replica may write for shard (a value of
// Label), and why not otherwise.
func (f *Fence) Check(shard string) error {
	f.mu.Lock()
	at, ok := f.renewed[shard]
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("not writing for shard %q: this replica does not hold its Lease", shard)
	}
	if age := f.now().Sub(at); age >= f.deadline {
		return fmt.Errorf("not writing for shard %q: this replica last renewed its Lease %s ago, past the renew deadline of %s; another replica may act on it now", shard, age.Round(time.Millisecond), f.deadline)
	}
	return nil
}

// Holds is whether this replica may write for shard now (Check is nil).
func (f *Fence) Holds(shard string) bool { return f.Check(shard) == nil }

// Enter begins a reconcile of a resource of shard, unless this replica may
// not write for it (Check); the reconcile calls the returned func as it
// ends. A shard given up waits for the reconciles under way (dropAndWait).
func (f *Fence) Enter(shard string) (func(), error) {
	if err := f.Check(shard); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.working[shard]++
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.working[shard]--; f.working[shard] <= 0 {
				delete(f.working, shard)
			}
		})
	}, nil
}

// dropAndWait forgets shards and waits, at most wait, until no reconcile
// that entered them is under way: a replica gives a shard's Lease up only
// once nothing acts on it any more (TestFenceWaitsForReconcilesUnderWay).
func (f *Fence) dropAndWait(shards []string, wait time.Duration) {
	if f == nil {
		return
	}
	for _, s := range shards {
		f.drop(s)
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		busy := slices.ContainsFunc(shards, func(s string) bool { return f.working[s] > 0 })
		f.mu.Unlock()
		if !busy {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// start is when a request on a Lease begins, for wrote.
func (f *Fence) start() time.Time {
	if f == nil {
		return time.Time{}
	}
	return f.now()
}

// wrote notes a request that wrote lease, begun at start: a shard's Lease
// that now names this replica is renewed as of start; one that names
// another, or none, is not this replica's.
func (f *Fence) wrote(lease *coordinationv1.Lease, start time.Time) {
	if f == nil || lease == nil {
		return
	}
	shard, ok := shardOfLease(f.name, lease.Name)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ptr.Deref(lease.Spec.HolderIdentity, "") == f.identity {
		f.renewed[shard] = start
		return
	}
	delete(f.renewed, shard)
}

// drop forgets shard: this replica gave it up or lost it.
func (f *Fence) drop(shard string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.renewed, shard)
}

func shardOfLease(name, lease string) (string, bool) {
	s, ok := strings.CutPrefix(lease, name+"-shard-")
	return s, ok && s != ""
}

type fenceKey struct{}

type writesKey struct{}

// WithFence is ctx carrying the fence of the replica whose share runs with
// it: every reconcile of that share's controllers inherits it.
func WithFence(ctx context.Context, f *Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceFrom is the fence ctx carries; nil without sharding.
func FenceFrom(ctx context.Context) *Fence {
	f, _ := ctx.Value(fenceKey{}).(*Fence)
	return f
}

// WritingFor is ctx of a reconcile of a managed resource of shard: the
// writes made with it are checked against the fence (CheckWrite).
func WritingFor(ctx context.Context, shard string) context.Context {
	return context.WithValue(ctx, writesKey{}, shard)
}

// CheckWrite returns nil unless ctx is of a reconcile on a sharded replica
// (WritingFor) whose fence no longer lets it write for the shard.
func CheckWrite(ctx context.Context) error {
	shard, ok := ctx.Value(writesKey{}).(string)
	if !ok {
		return nil
	}
	f := FenceFrom(ctx)
	if f == nil {
		return nil
	}
	return f.Check(shard)
}
