package flow

import (
	"container/list"
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
)

type urgentKey struct{}

// WithUrgent marks ctx as an urgent reconcile's: its API requests skip the
// gate Gate puts on routine requests.
func WithUrgent(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, true)
}

// urgentRuns counts the urgent reconciles running in a provider. While any
// runs, calm is an open channel, closed when the last one ends: the period
// during which the gate holds routine requests to its quiet bound.
type urgentRuns struct {
	mu   sync.Mutex
	n    int
	calm atomic.Pointer[chan struct{}]
}

// begin counts an urgent reconcile in; the returned func counts it out.
func (u *urgentRuns) begin() (end func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n == 0 {
		c := make(chan struct{})
		u.calm.Store(&c)
	}
	u.n++
	return sync.OnceFunc(func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.n--
		if u.n == 0 {
			close(*u.calm.Swap(nil))
		}
	})
}

// period is the calm channel of the urgent reconciles running now; nil when
// none runs.
func (u *urgentRuns) period() <-chan struct{} {
	if c := u.calm.Load(); c != nil {
		return *c
	}
	return nil
}

// IsUrgent is whether ctx is an urgent reconcile's.
func IsUrgent(ctx context.Context) bool {
	u, _ := ctx.Value(urgentKey{}).(bool)
	return u
}

// Bound makes every client built from cfg, or from a copy of it, keep at
// most MaxRoutineRequests routine requests in flight at once, and at most
// QuietRoutineRequests while an urgent reconcile runs; requests that are not
// routine (Routine) pass at once. It turns client-go's rate limiter off,
// which would make every request wait its turn: urgent ones would queue
// behind up to a second's worth of routine ones.
//
// The API server's priority and fairness queues one client's requests in
// one flow, first come first served: with a worker per reconcile a second
// converging a fleet, an urgent reconcile's few requests would queue behind
// as many routine ones. Held here instead, routine requests leave that flow short, and
// urgent ones wait behind at most MaxRoutineRequests. Past the queue, the
// API server serves the requests in flight side by side: on a small control
// plane an urgent request shares it with the routine ones, and the quiet
// bound leaves it fewer to share with. Watches hold their stream for as long
// as they run and leases must be renewed on time: neither is bounded.
func (c *Control) Bound(cfg *rest.Config) {
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	if c.gate == nil {
		return
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return gatedTripper{gated: c.gate, next: rt} })
}

// gated is one Control's bound on routine requests, shared by every client of its config: a
// semaphore whose size is n, or quiet while urgent reconciles run, whose
// waiters are let in first come first served.
type gated struct {
	n, quiet int
	urgent   *urgentRuns
	waiting  prometheus.Gauge
	mu       sync.Mutex
	inFlight int
	waiters  list.List // of chan struct{}, closed when let in
	// watched is the urgent period (its calm channel) at whose end the
	// waiters are woken: the bound is n again.
	watched <-chan struct{}
}

// bound is how many routine requests may be in flight now.
func (g *gated) bound() int {
	if g.quiet > 0 && g.urgent.period() != nil {
		return g.quiet
	}
	return g.n
}

func (g *gated) acquire(ctx context.Context) error {
	g.mu.Lock()
	g.watch()
	if g.inFlight < g.bound() && g.waiters.Len() == 0 {
		g.inFlight++
		g.mu.Unlock()
		return nil
	}
	in := make(chan struct{})
	e := g.waiters.PushBack(in)
	g.mu.Unlock()
	g.waiting.Inc()
	defer g.waiting.Dec()
	select {
	case <-in:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		select {
		case <-in:
			// Let in as it gave up: its place goes to the next.
			g.inFlight--
			g.wake()
		default:
			g.waiters.Remove(e)
		}
		return ctx.Err()
	}
}

func (g *gated) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inFlight--
	g.wake()
}

// wake lets waiters in, first come first served, up to the bound; g.mu is
// held.
func (g *gated) wake() {
	for g.waiters.Len() > 0 && g.inFlight < g.bound() {
		in, _ := g.waiters.Remove(g.waiters.Front()).(chan struct{})
		g.inFlight++
		close(in)
	}
}

// watch wakes the waiters when the urgent period that runs now ends, once
// per period; g.mu is held.
func (g *gated) watch() {
	if g.quiet == 0 {
		return
	}
	calm := g.urgent.period()
	if calm == nil || calm == g.watched {
		return
	}
	g.watched = calm
	go func() {
		<-calm
		g.mu.Lock()
		defer g.mu.Unlock()
		g.wake()
	}()
}

type gatedTripper struct {
	*gated
	next http.RoundTripper
}

func (g gatedTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if !Routine(req) {
		return g.next.RoundTrip(req)
	}
	if err := g.acquire(req.Context()); err != nil {
		return nil, err
	}
	// Released once the response's headers are in: the server has done the
	// work, and a watch-like body is not expected here.
	defer g.release()
	return g.next.RoundTrip(req)
}

// Routine is whether req waits at the bound: any request but an urgent
// reconcile's, a watch, or a lease's.
func Routine(req *http.Request) bool {
	if IsUrgent(req.Context()) || req.URL.Query().Get("watch") == "true" {
		return false
	}
	p := req.URL.Path
	return !strings.Contains(p, "/watch/") && !strings.HasPrefix(p, "/apis/coordination.k8s.io/")
}
