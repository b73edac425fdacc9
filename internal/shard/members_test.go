package shard

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// TestReadPeersAndSweeps: a replica shares with the live replicas of its
// own --shards only, and deletes the Leases of shards beyond its count once
// nobody renewed them for a lease duration, each once, never one that is
// renewed.
func TestReadPeersAndSweeps(t *testing.T) {
	const duration = 10 * time.Second
	lease := func(name, holder string, ls map[string]string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "1", Labels: map[string]string{LabelReplicaOf: "p"}}}
		for k, v := range ls {
			l.Labels[k] = v
		}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
		}
		return l
	}
	three, six := map[string]string{LabelShards: "3"}, map[string]string{LabelShards: "6"}
	cs := fake.NewClientset(
		lease("p-replica-a", "a", three),
		lease("p-replica-b", "b", three),
		lease("p-replica-c", "c", six),
		lease("p-replica-old", "old", nil), // a provider older than LabelShards
		lease("p-shard-0", "c", nil),
		lease("p-shard-3", "", nil),     // released by a replica of 6 that left
		lease("p-shard-4", "c", nil),    // held by a live replica of 6
		lease("p-shard-5", "gone", nil), // held by one that died
	)
	leases := cs.CoordinationV1().Leases("ns")
	now := time.Unix(1000, 0)
	m := &members{leases: leases, name: "p", identity: "a", shards: 3, duration: duration, now: func() time.Time { return now }}
	ctx := context.Background()
	renew := func(names ...string) {
		for _, n := range names {
			l, err := leases.Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			l.ResourceVersion += "1"
			if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	read := func() view {
		t.Helper()
		v, err := m.read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(v.live)
		return v
	}
	names := func() []string {
		l, err := leases.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range l.Items {
			out = append(out, x.Name)
		}
		slices.Sort(out)
		return out
	}
	deletes := func() []string {
		var out []string
		for _, a := range cs.Actions() {
			if d, ok := a.(k8stesting.DeleteAction); ok {
				out = append(out, d.GetName())
			}
		}
		slices.Sort(out)
		return out
	}

	// At first sight every Lease is fresh: nothing is swept.
	if diff := cmp.Diff([]string{"a", "b"}, read().live); diff != "" {
		t.Errorf("live replicas of 3 shards: -want, +got:\n%s", diff)
	}
	if got := deletes(); len(got) > 0 {
		t.Errorf("deleted %v at first sight", got)
	}

	// A lease duration on, the Leases of shards 3 and 5, unrenewed, are
	// deleted; shard 4's, renewed, is kept; shard 0's may be taken over.
	now = now.Add(duration)
	renew("p-replica-b", "p-replica-c", "p-shard-4")
	v := read()
	if diff := cmp.Diff([]string{"a", "b"}, v.live); diff != "" {
		t.Errorf("live replicas of 3 shards: -want, +got:\n%s", diff)
	}
	if _, ok := v.stale[0]; !ok || len(v.stale) != 1 {
		t.Errorf("stale shard Leases: %v, want shard 0's alone", v.stale)
	}
	want := []string{"p-replica-a", "p-replica-b", "p-replica-c", "p-replica-old", "p-shard-0", "p-shard-4"}
	if diff := cmp.Diff(want, names()); diff != "" {
		t.Errorf("Leases after the sweep: -want, +got:\n%s", diff)
	}

	// Each is deleted once; shard 4's goes once it is no longer renewed.
	read()
	if diff := cmp.Diff([]string{"p-shard-3", "p-shard-5"}, deletes()); diff != "" {
		t.Errorf("deletes: -want, +got:\n%s", diff)
	}
	now = now.Add(duration)
	read()
	if diff := cmp.Diff([]string{"p-shard-3", "p-shard-4", "p-shard-5"}, deletes()); diff != "" {
		t.Errorf("deletes once shard 4's ran out: -want, +got:\n%s", diff)
	}

	// A replica of no count shares with every live one, and sweeps nothing.
	all := &members{leases: leases, name: "p", identity: "a", duration: duration, now: func() time.Time { return now }}
	renew("p-replica-b", "p-replica-c", "p-replica-old")
	v, err := all.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(v.live)
	if diff := cmp.Diff([]string{"a", "b", "c", "old"}, v.live); diff != "" {
		t.Errorf("live replicas of any count: -want, +got:\n%s", diff)
	}
}

// TestRenewLabelsCount: a replica's membership Lease carries its count of
// shards, also when it was made by an older provider.
func TestRenewLabelsCount(t *testing.T) {
	cs := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-replica-b", Labels: map[string]string{LabelReplicaOf: "p"}}})
	leases := cs.CoordinationV1().Leases("ns")
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		m := &members{leases: leases, name: "p", identity: id, shards: 3, duration: time.Second, now: time.Now}
		if err := m.renew(ctx); err != nil {
			t.Fatal(err)
		}
		l, err := leases.Get(ctx, "p-replica-"+id, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]string{LabelReplicaOf: "p", LabelShards: "3"}, l.Labels); diff != "" {
			t.Errorf("replica %s's Lease labels: -want, +got:\n%s", id, diff)
		}
	}
}
