// Package flow is the provider's flow control: how its reconciles and API
// requests are ranked and bounded on their way from a watch event to the API
// server (docs/operations.md draws the path).
//
// Two kinds of work share one provider. A change made in the cluster (a
// ConfigMap edited, a pod deleted) is urgent: its reconcile runs at once,
// ahead of any backlog, and its requests go straight to the API server.
// Everything else is routine: new managed resources, polls, resyncs, a
// restart's checks. Routine reconciles draw from crossplane-runtime's global
// rate limiter (converged and new resources from a bucket LightShare times
// larger), and routine requests wait at a bound on how many are in flight,
// lowered while an urgent reconcile runs. Applying thousands of managed
// resources at once thus converges as fast as the API server takes it
// (TestNewFleetIsNotPacedByTheRate), and a change heard meanwhile does not
// wait behind them (TestUrgentBeforeBacklog).
//
// The API server's priority and fairness protects the server itself; the
// provider sets no client-side rate of its own (client-go's QPS limiter is
// off), as a rate in front of every request would hold urgent ones behind
// routine ones.
package flow

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"

	"github.com/clusterops/provider-clusterops/internal/apimetrics"
)

// Options bound one provider's flow.
type Options struct {
	// ReconcileRate bounds routine reconciles per second across all
	// controllers; LightShare times as many light ones pass besides.
	ReconcileRate int

	// MaxRoutineRequests bounds the routine requests in flight to the API
	// server; urgent reconciles' requests, watches and lease renewals skip
	// the bound. 0 leaves them unbounded.
	MaxRoutineRequests int

	// QuietRoutineRequests bounds them instead while an urgent reconcile
	// runs, so that its requests share the API server with fewer routine
	// ones. 0, or not below MaxRoutineRequests, keeps MaxRoutineRequests.
	QuietRoutineRequests int
}

// LightShare is how many light reconciles (Light) the limiter lets through
// for each routine one: their bucket has this many times the global bucket's
// rate and burst.
const LightShare = 10

// A Control is one provider's flow control, shared by its controllers and its
// clients. It is safe for concurrent use.
type Control struct {
	global, light ratelimiter.RateLimiter
	gate          *gated // nil when routine requests are unbounded

	// pending are the requests added as urgent and not reconciled since,
	// with when each was first added. Keyed by request alone, a resource of
	// another kind with the same namespace and name may skip the limiter
	// once too: harmless.
	pending sync.Map
	urgent  urgentRuns
	metrics metrics
}

// New returns the flow control o describes, its metrics registered with reg.
// A registry that already holds them (a test process builds several
// providers) shares them.
func New(o Options, reg prometheus.Registerer) (*Control, error) {
	if o.ReconcileRate <= 0 {
		return nil, errors.New("flow control needs a positive reconcile rate")
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	global := ratelimiter.NewGlobal(o.ReconcileRate)
	c := &Control{global: global, light: lightOf(global), metrics: m}
	if o.MaxRoutineRequests > 0 {
		c.gate = &gated{n: o.MaxRoutineRequests, urgent: &c.urgent, waiting: m.waiting}
		if q := o.QuietRoutineRequests; q > 0 && q < o.MaxRoutineRequests {
			c.gate.quiet = q
		}
	}
	return c, nil
}

// RateLimiter is the global limiter of routine reconciles, for
// crossplane-runtime's controller options: every controller shares it.
func (c *Control) RateLimiter() ratelimiter.RateLimiter { return c.global }

// lightOf is the bucket of light reconciles that goes with the global limiter
// l. A limiter other than a token bucket (tests') is shared as it is.
func lightOf(l ratelimiter.RateLimiter) ratelimiter.RateLimiter {
	b, ok := l.(*ratelimiter.BucketRateLimiter)
	if !ok {
		return l
	}
	return &ratelimiter.BucketRateLimiter{Limiter: rate.NewLimiter(b.Limit()*LightShare, b.Burst()*LightShare)}
}

// metrics are a change's reaction inside the provider (how long its urgent
// request waited in the queue for a worker, how long its reconcile took) and
// the routine requests waiting at the bound. What a reaction takes beyond
// them is the watch event's way to the provider and the write's way back.
type metrics struct {
	urgentWait, urgentReconcile *prometheus.HistogramVec
	waiting                     prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (metrics, error) {
	urgentBuckets := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	var m metrics
	var err error
	if m.urgentWait, err = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "clusterops_urgent_wait_seconds",
		Help:    "Time from a change's urgent request being queued to its reconcile starting, by controller.",
		Buckets: urgentBuckets,
	}, []string{"controller"})); err != nil {
		return m, err
	}
	if m.urgentReconcile, err = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "clusterops_urgent_reconcile_seconds",
		Help:    "Time an urgent reconcile (one caused by a change) took, by controller.",
		Buckets: urgentBuckets,
	}, []string{"controller"})); err != nil {
		return m, err
	}
	m.waiting, err = register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clusterops_api_routine_requests_waiting",
		Help: "Routine API requests (new resources, polls, resyncs) held by the provider because --max-routine-requests are in flight, or --quiet-routine-requests while a reconcile a change caused runs; requests of reconciles a change caused never wait here.",
	}))
	return m, err
}

// register registers c with reg, or returns the collector of the same
// metrics already registered there.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	c, err := apimetrics.Existing(reg, c)
	return c, errors.Wrap(err, "cannot register the provider's flow-control metrics")
}
