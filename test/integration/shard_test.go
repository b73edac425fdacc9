package integration

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// A ledger records which replica works on which shard, and every time a
// replica started on a shard another was still working on.
type ledger struct {
	mu      sync.Mutex
	owner   map[int]string
	overlap []string
}

func (l *ledger) start(who string, owned []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, i := range owned {
		if o := l.owner[i]; o != "" && o != who {
			l.overlap = append(l.overlap, fmt.Sprintf("%s started on shard %d while %s worked on it", who, i, o))
		}
		l.owner[i] = who
	}
}

func (l *ledger) stop(who string, owned []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, i := range owned {
		if l.owner[i] == who {
			delete(l.owner, i)
		}
	}
}

// ledgerWork is a replica's work that records in a ledger the shards it
// holds.
type ledgerWork struct {
	ledger *ledger
	id     string

	mu    sync.Mutex
	owned []int
}

func (w *ledgerWork) Run(ctx context.Context) error {
	<-ctx.Done()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ledger.stop(w.id, w.owned)
	w.owned = nil
	return nil
}

func (w *ledgerWork) Hold(owned []int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	dropped, added := shard.Diff(w.owned, owned)
	w.ledger.stop(w.id, dropped)
	w.ledger.start(w.id, added)
	w.owned = slices.Clone(owned)
	return nil
}

// shares are the shards each replica works on.
func (l *ledger) shares() map[string][]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]int{}
	for i, o := range l.owner {
		out[o] = append(out[o], i)
	}
	for _, s := range out {
		slices.Sort(s)
	}
	return out
}

func (l *ledger) overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.overlap)
}

// TestReplicasShareShards runs three replicas' share of the fleet against the
// real API server, with work that only records which shards it holds: they
// split the shards evenly, a replica that leaves hands its shards over at
// once, a replica cut off from the API server stops before another takes its
// shards within the lease's bound, and no shard is ever worked on by two.
func TestReplicasShareShards(t *testing.T) {
	const (
		shards        = 12
		leaseDuration = 4 * time.Second
		renewDeadline = 3 * time.Second
		retryPeriod   = 500 * time.Millisecond
	)
	l := &ledger{owner: map[int]string{}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testenv.ProviderNamespace}}
	if err := env.Client.Create(context.Background(), ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	type replica struct {
		cancel context.CancelFunc
		net    *partition
		done   chan struct{} // closed once Run returned
	}
	run := func(id string) *replica {
		server, err := url.Parse(env.Config.Host)
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{net: newPartition(t, server.Host), done: make(chan struct{})}
		cfg := rest.CopyConfig(env.Config)
		cfg.Host = "https://" + r.net.ln.Addr().String()
		ctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		o := shard.Options{
			Config: cfg, Namespace: testenv.ProviderNamespace, Name: "share-test", Identity: id, Shards: shards,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		}
		go func() {
			defer close(r.done)
			err := shard.Run(ctx, o, &ledgerWork{ledger: l, id: id})
			if err != nil {
				t.Errorf("replica %s: %v", id, err)
			}
		}()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	sharesAre := func(within time.Duration, what string, want map[string]int) {
		t.Helper()
		testenv.Eventually(t, within, what, func(context.Context) (bool, error) {
			got := l.shares()
			n := 0
			for id, size := range want {
				if len(got[id]) != size {
					return false, nil
				}
				n += size
			}
			return n == shards && len(got) == len(want), nil
		})
		t.Logf("%s: %v", what, l.shares())
	}

	a := run("a")
	sharesAre(10*time.Second, "one replica works on every shard", map[string]int{"a": 12})
	run("b")
	c := run("c")
	sharesAre(15*time.Second, "three replicas work on 4 shards each", map[string]int{"a": 4, "b": 4, "c": 4})

	// A replica that stops gives its shards up: it deletes its own Lease and
	// releases its shards' Leases, so that the others take them at their next
	// retry rather than when its Leases run out. That it released them is
	// asserted, not how soon they were taken: a loaded machine delays the
	// retries, never the release.
	left := time.Now()
	c.cancel()
	<-c.done
	leases := &coordinationv1.LeaseList{}
	if err := env.Client.List(context.Background(), leases, client.InNamespace(testenv.ProviderNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if !strings.HasPrefix(l.Name, "share-test-") {
			continue
		}
		if l.Name == "share-test-replica-c" || ptr.Deref(l.Spec.HolderIdentity, "") == "c" {
			t.Errorf("Lease %s is still c's once it stopped: %s held by %q", l.Name, l.Name, ptr.Deref(l.Spec.HolderIdentity, ""))
		}
	}
	sharesAre(2*leaseDuration+4*retryPeriod+10*time.Second, "two replicas work on 6 shards each once c left", map[string]int{"a": 6, "b": 6})
	t.Logf("c's shards taken over %s after it left", time.Since(left).Round(time.Millisecond))

	// A replica cut off from the API server, whose requests go unanswered,
	// cannot renew: it stops working within the renew deadline, before its
	// Leases run out, and the other takes its shards once they have.
	cut := time.Now()
	a.net.dark.Store(true)
	sharesAre(2*leaseDuration+4*retryPeriod+10*time.Second, "b works on every shard once a is cut off", map[string]int{"b": 12})
	t.Logf("a's shards taken over %s after it was cut off", time.Since(cut).Round(time.Millisecond))

	if o := l.overlaps(); len(o) > 0 {
		t.Errorf("shards worked on by two replicas at once:\n%v", o)
	}
}
