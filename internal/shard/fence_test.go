package shard

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestFenceHoldsOnlyShardsRenewedInTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	lease := func(shard, holder string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "p-shard-" + shard}}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
		}
		return l
	}
	type write struct {
		lease *coordinationv1.Lease
		at    time.Duration // after t0
	}
	cases := map[string]struct {
		reason  string
		writes  []write
		dropped string
		now     time.Duration
		shard   string
		want    bool
	}{
		"NeverHeld": {
			reason: "A shard whose Lease this replica never wrote is not its own.",
			now:    time.Second, shard: "0",
		},
		"Renewed": {
			reason: "Within the renew deadline of the start of its last renewal, the shard is its own.",
			writes: []write{{lease("0", "me"), 0}}, now: 5999 * time.Millisecond, shard: "0", want: true,
		},
		"PastTheDeadline": {
			reason: "At the renew deadline, another replica may be about to take it: no more writes.",
			writes: []write{{lease("0", "me"), 0}}, now: 6 * time.Second, shard: "0",
		},
		"RenewedAgain": {
			reason: "A later renewal moves the deadline.",
			writes: []write{{lease("0", "me"), 0}, {lease("0", "me"), 5 * time.Second}}, now: 10 * time.Second, shard: "0", want: true,
		},
		"Released": {
			reason: "A Lease written to name no holder (released) is not its own.",
			writes: []write{{lease("0", "me"), 0}, {lease("0", ""), time.Second}}, now: 2 * time.Second, shard: "0",
		},
		"TakenByAnother": {
			reason: "A Lease written to name another holder is not its own.",
			writes: []write{{lease("0", "me"), 0}, {lease("0", "other"), time.Second}}, now: 2 * time.Second, shard: "0",
		},
		"Dropped": {
			reason: "A shard the replica lost or gave up is not its own.",
			writes: []write{{lease("0", "me"), 0}}, dropped: "0", now: time.Second, shard: "0",
		},
		"OtherShard": {
			reason: "A renewal of one shard's Lease says nothing of another's.",
			writes: []write{{lease("1", "me"), 0}}, now: time.Second, shard: "0",
		},
		"NotAShardLease": {
			reason: "The replica's membership Lease is no shard's.",
			writes: []write{{&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "p-replica-me"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me")}}, 0}},
			now:    time.Second, shard: "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := NewFence("p", "me", 6*time.Second)
			for _, w := range tc.writes {
				f.wrote(w.lease, t0.Add(w.at))
			}
			if tc.dropped != "" {
				f.drop(tc.dropped)
			}
			f.now = func() time.Time { return t0.Add(tc.now) }
			err := f.Check(tc.shard)
			if diff := cmp.Diff(tc.want, err == nil); diff != "" {
				t.Errorf("\n%s\nCheck(%q) = %v: -want allowed, +got:\n%s", tc.reason, tc.shard, err, diff)
			}
			// The same answer through a reconcile's context.
			ctx := WritingFor(WithFence(context.Background(), f), tc.shard)
			if got := CheckWrite(ctx) == nil; got != tc.want {
				t.Errorf("\n%s\nCheckWrite(...) allowed %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

func TestCheckWriteWithoutSharding(t *testing.T) {
	if err := CheckWrite(context.Background()); err != nil {
		t.Errorf("CheckWrite without a fence: %v, want nil", err)
	}
	if err := CheckWrite(WithFence(context.Background(), NewFence("p", "me", time.Second))); err != nil {
		t.Errorf("CheckWrite outside a managed resource's reconcile: %v, want nil", err)
	}
}

// TestFenceWaitsForReconcilesUnderWay: a shard given up refuses new
// reconciles at once, and dropAndWait returns only once the reconcile under
// way ended, or its wait ran out.
func TestFenceWaitsForReconcilesUnderWay(t *testing.T) {
	f := NewFence("p", "me", time.Minute)
	f.wrote(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "p-shard-1"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me")}}, time.Now())
	done, err := f.Enter("1")
	if err != nil {
		t.Fatalf("Enter on a shard held: %v", err)
	}
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		f.dropAndWait([]string{"1"}, time.Minute)
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-returned:
		t.Fatal("dropAndWait returned while a reconcile of the shard was under way")
	default:
	}
	if _, err := f.Enter("1"); err == nil {
		t.Error("Enter on a shard given up: nil error, want a refusal")
	}
	done()
	done() // Twice is once.
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("dropAndWait did not return once the reconcile ended")
	}
	// A reconcile that does not end holds the hand-over for the wait only.
	g := NewFence("p", "me", time.Minute)
	g.wrote(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "p-shard-2"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me")}}, time.Now())
	if _, err := g.Enter("2"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	g.dropAndWait([]string{"2"}, 200*time.Millisecond)
	if d := time.Since(start); d < 200*time.Millisecond || d > 5*time.Second {
		t.Errorf("dropAndWait with a reconcile that never ends took %s, want about its wait of 200ms", d)
	}
}
