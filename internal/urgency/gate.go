package urgency

import (
	"context"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	"k8s.io/client-go/rest"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

type urgentKey struct{}

// WithUrgent marks ctx as an urgent reconcile's: its API requests skip the
// gate Gate puts on routine requests.
func WithUrgent(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, true)
}

// IsUrgent is whether ctx is an urgent reconcile's.
func IsUrgent(ctx context.Context) bool {
	u, _ := ctx.Value(urgentKey{}).(bool)
	return u
}

var waiting = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "clusterops_api_routine_requests_waiting",
	Help: "Routine API requests (new resources, polls, resyncs) held by the provider because --max-routine-requests are in flight; requests of reconciles a change caused never wait here.",
})

// Gate keeps at most n routine requests of every client built from cfg, or
// from a copy of it, in flight at once; n <= 0 leaves cfg as it is. The API
// server's flow control queues one client's requests in one flow, first come
// first served: with 100 workers converging a fleet, an urgent reconcile's
// few requests queued behind ~100 routine ones and took seconds. Held here
// instead, routine requests leave the flow short, and urgent ones, which
// skip the gate, wait behind at most n. Watches hold their stream for as long
// as they run and leases must be renewed on time: neither is gated.
func Gate(cfg *rest.Config, n int, reg prometheus.Registerer) error {
	if n <= 0 {
		return nil
	}
	if err := register(reg, waiting); err != nil {
		return err
	}
	sem := semaphore.NewWeighted(int64(n))
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return gated{sem: sem, next: rt} })
	return nil
}

type gated struct {
	sem  *semaphore.Weighted
	next http.RoundTripper
}

func (g gated) RoundTrip(req *http.Request) (*http.Response, error) {
	if !Routine(req) {
		return g.next.RoundTrip(req)
	}
	if !g.sem.TryAcquire(1) {
		waiting.Inc()
		err := g.sem.Acquire(req.Context(), 1)
		waiting.Dec()
		if err != nil {
			return nil, err
		}
	}
	// Released once the response's headers are in: the server has done the
	// work, and a watch-like body is not expected here.
	defer g.sem.Release(1)
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
