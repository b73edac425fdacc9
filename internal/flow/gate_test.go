package flow

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestRoutineCountsReadsAndWritesButNotWatches(t *testing.T) {
	cases := map[string]struct {
		url    string
		urgent bool
		want   bool
	}{
		"Get":             {url: "/apis/apps/v1/namespaces/a/deployments/d", want: true},
		"List":            {url: "/api/v1/namespaces/a/configmaps?labelSelector=x", want: true},
		"UrgentGet":       {url: "/apis/apps/v1/namespaces/a/deployments/d", urgent: true},
		"Watch":           {url: "/api/v1/namespaces/a/configmaps?watch=true&resourceVersion=1"},
		"LegacyWatchPath": {url: "/api/v1/watch/namespaces/a/configmaps"},
		"Lease":           {url: "/apis/coordination.k8s.io/v1/namespaces/crossplane-system/leases/x"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if tc.urgent {
				ctx = WithUrgent(ctx)
			}
			req := httptest.NewRequest(http.MethodGet, tc.url, nil).WithContext(ctx)
			if got := Routine(req); got != tc.want {
				t.Errorf("Routine(%s, urgent %t) = %t, want %t", tc.url, tc.urgent, got, tc.want)
			}
		})
	}
}

// TestGateHoldsRoutineRequestsBeyondTheBound runs a real client against a server that holds every request
// until released: routine requests beyond the bound wait, an urgent one
// does not, and a waiting one gives up with its context.
func TestGateHoldsRoutineRequestsBeyondTheBound(t *testing.T) {
	release := make(chan struct{})
	var inFlight, most atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m; m = most.Load() {
			if most.CompareAndSwap(m, n) {
				break
			}
		}
		if r.URL.Query().Get("hold") == "true" {
			<-release
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	hc, fc := gatedClient(t, srv.URL, 2, 0)
	get := func(ctx context.Context, hold bool) error {
		u := srv.URL + "/api/v1/namespaces/a/configmaps/c"
		if hold {
			u += "?hold=true"
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}

	done := make(chan error, 3)
	for range 3 {
		go func() { done <- get(context.Background(), true) }()
	}
	waitFor(t, func() bool { return inFlight.Load() == 2 && testutil.ToFloat64(fc.metrics.waiting) == 1 })

	if err := get(WithUrgent(context.Background()), false); err != nil {
		t.Errorf("an urgent request with the gate full: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := get(ctx, false); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a routine request with the gate full: got %v, want it to wait until its context ends", err)
	}

	close(release)
	for range 3 {
		if err := <-done; err != nil {
			t.Errorf("held request: %v", err)
		}
	}
	if m := most.Load(); m != 3 {
		t.Errorf("most requests in flight = %d, want 3: the bound of 2, plus the urgent one", m)
	}
}

// gatedClient is an HTTP client for url behind a Control bounding routine requests to n, and quiet.
func gatedClient(t *testing.T, url string, n, quiet int) (*http.Client, *Control) {
	t.Helper()
	cfg := &rest.Config{Host: url}
	fc := testControl(t, nil, n, quiet)
	fc.Bound(cfg)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return hc, fc
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
	}
}

func TestLimitedMarksUrgent(t *testing.T) {
	var got []bool
	fc := testControl(t, nil, 0, 0)
	r := fc.Reconciler("test", reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
		got = append(got, IsUrgent(ctx))
		return reconcile.Result{}, nil
	}), nil)
	req := reconcile.Request{}
	req.Namespace, req.Name = "gate", "marked"
	fc.pending.Store(req, struct{}{})
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got[0] {
		t.Errorf("urgent reconcile's context IsUrgent: got %v, want [true]", got)
	}
}

// TestGateQuietsWhileUrgent runs a real client against a server that holds
// requests until released: while an urgent reconcile runs, routine requests
// are let in only once those in flight are down to the quiet bound, and the
// full bound is back once it ends.
func TestGateQuietsWhileUrgent(t *testing.T) {
	var mu sync.Mutex
	holds := map[string]chan struct{}{}
	hold := func(id string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if holds[id] == nil {
			holds[id] = make(chan struct{})
		}
		return holds[id]
	}
	var inFlight atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		if id := r.URL.Query().Get("hold"); id != "" {
			<-hold(id)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	// Before the server closes, which waits for every request it holds.
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range holds {
			select {
			case <-c:
			default:
				close(c)
			}
		}
	}()

	hc, fc := gatedClient(t, srv.URL, 4, 1)
	get := func(id string) chan error {
		done := make(chan error, 1)
		go func() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/api/v1/namespaces/a/configmaps/c?hold="+id, nil)
			resp, err := hc.Do(req)
			if err == nil {
				err = resp.Body.Close()
			}
			done <- err
		}()
		return done
	}
	finished := func(done chan error) bool {
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
			return true
		default:
			return false
		}
	}

	held := map[string]chan error{}
	for _, id := range []string{"a", "b", "c", "d"} {
		held[id] = get(id)
	}
	waitFor(t, func() bool { return inFlight.Load() == 4 })

	end := fc.urgent.begin()
	next := get("next")
	// Two of four done: the quiet bound of one is still exceeded.
	close(hold("a"))
	close(hold("b"))
	// finished takes the result: each is waited for on its own.
	waitFor(t, func() bool { return finished(held["a"]) })
	waitFor(t, func() bool { return finished(held["b"]) })
	time.Sleep(50 * time.Millisecond)
	if n := inFlight.Load(); n != 2 {
		t.Fatalf("in flight while urgent with two routine requests left: %d, want 2: a routine request was let in above the quiet bound", n)
	}
	close(hold("c"))
	waitFor(t, func() bool { return finished(held["c"]) })
	time.Sleep(50 * time.Millisecond)
	if n := inFlight.Load(); n != 1 {
		t.Fatalf("in flight while urgent at the quiet bound: %d, want 1", n)
	}
	close(hold("d"))
	waitFor(t, func() bool { return finished(held["d"]) })
	waitFor(t, func() bool { return inFlight.Load() == 1 })
	// The waiting request is in, alone: held by "next".

	end()
	more := []chan error{get("more"), get("more"), get("more")}
	waitFor(t, func() bool { return inFlight.Load() == 4 })
	close(hold("next"))
	close(hold("more"))
	waitFor(t, func() bool { return finished(next) })
	for _, d := range more {
		waitFor(t, func() bool { return finished(d) })
	}
}
