package urgency

import (
	"container/list"
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

type urgentKey struct{}

// WithUrgent marks ctx as an urgent reconcile's: its API requests skip the
// gate Gate puts on routine requests.
func WithUrgent(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, true)
}

// urgentRuns counts the urgent reconciles running in this process. While
// any runs, calm is an open channel, closed when the last one ends: the
// period during which gates hold routine requests to their quiet bound.
// It is the process's: a test that runs several providers in one process
// quiets them all at once.
var urgentRuns struct {
	sync.Mutex
	n    int
	calm atomic.Pointer[chan struct{}]
}

// beginUrgent counts an urgent reconcile in; the returned func counts it out.
func beginUrgent() (end func()) {
	urgentRuns.Lock()
	defer urgentRuns.Unlock()
	if urgentRuns.n == 0 {
		c := make(chan struct{})
		urgentRuns.calm.Store(&c)
	}
	urgentRuns.n++
	return sync.OnceFunc(func() {
		urgentRuns.Lock()
		defer urgentRuns.Unlock()
		urgentRuns.n--
		if urgentRuns.n == 0 {
			close(*urgentRuns.calm.Swap(nil))
		}
	})
}

// urgentPeriod is the calm channel of the urgent reconciles running now; nil
// when none runs.
func urgentPeriod() <-chan struct{} {
	if c := urgentRuns.calm.Load(); c != nil {
		return *c
	}
	return nil
}

// IsUrgent is whether ctx is an urgent reconcile's.
func IsUrgent(ctx context.Context) bool {
	u, _ := ctx.Value(urgentKey{}).(bool)
	return u
}

var waiting = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "clusterops_api_routine_requests_waiting",
	Help: "Routine API requests (new resources, polls, resyncs) held by the provider because --max-routine-requests are in flight, or --quiet-routine-requests while a reconcile a change caused runs; requests of reconciles a change caused never wait here.",
})

// Gate keeps at most n routine requests of every client built from cfg, or
// from a copy of it, in flight at once, and at most quiet while a reconcile
// that a change caused runs; n <= 0 leaves cfg as it is, and quiet <= 0 or
// >= n keeps n throughout. The API server's flow control queues one
// client's requests in one flow, first come first served: with 100 workers
// converging a fleet, an urgent reconcile's few requests queued behind ~100
// routine ones and took seconds. Held here instead, routine requests leave
// the flow short, and urgent ones, which skip the gate, wait behind at most
// n. Past the queue, the API server serves the requests in flight side by
// side: on a small control plane an urgent request shares it with n routine
// ones, and quiet leaves it fewer to share with. Watches hold their stream
// for as long as they run and leases must be renewed on time: neither is
// gated.
func Gate(cfg *rest.Config, n, quiet int, reg prometheus.Registerer) error {
	if n <= 0 {
		return nil
	}
	if err := register(reg, waiting); err != nil {
		return err
	}
	g := &gated{n: n}
	if quiet > 0 && quiet < n {
		g.quiet = quiet
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return gatedTripper{gated: g, next: rt} })
	return nil
}

// gated is one Gate's bound, shared by every client of its config: a
// semaphore whose size is n, or quiet while urgent reconciles run, whose
// waiters are let in first come first served.
type gated struct {
	n, quiet int
	mu       sync.Mutex
	inFlight int
	waiters  list.List // of chan struct{}, closed when let in
	// watched is the urgent period (its calm channel) at whose end the
	// waiters are woken: the bound is n again.
	watched <-chan struct{}
}

// bound is how many routine requests may be in flight now.
func (g *gated) bound() int {
	if g.quiet > 0 && urgentPeriod() != nil {
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
	waiting.Inc()
	defer waiting.Dec()
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
	calm := urgentPeriod()
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

// Routine is whether req waits at the gate: any request but an urgent
// reconcile's, a watch, or a lease's.
func Routine(req *http.Request) bool {
	if IsUrgent(req.Context()) || req.URL.Query().Get("watch") == "true" {
		return false
	}
	p := req.URL.Path
	return !strings.Contains(p, "/watch/") && !strings.HasPrefix(p, "/apis/coordination.k8s.io/")
}

// register adds c to r; again, as each provider a test process builds does,
// is not an error.
func register(r prometheus.Registerer, c prometheus.Collector) error {
	if err := r.Register(c); err != nil && !errors.As(err, &prometheus.AlreadyRegisteredError{}) {
		return errors.Wrap(err, "cannot register the provider's request metrics")
	}
	return nil
}
