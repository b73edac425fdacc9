package urgency

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The two parts of a change's reaction that happen in the provider: how long
// its urgent request waited in the queue for a worker, and how long its
// reconcile took (reads and writes included). What a reaction takes beyond
// them is the watch event's way to the provider and the write's way back.
var (
	urgentBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

	urgentWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "clusterops_urgent_wait_seconds",
		Help:    "Time from a change's urgent request being queued to its reconcile starting, by controller.",
		Buckets: urgentBuckets,
	}, []string{"controller"})

	urgentReconcile = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "clusterops_urgent_reconcile_seconds",
		Help:    "Time an urgent reconcile (one caused by a change) took, by controller.",
		Buckets: urgentBuckets,
	}, []string{"controller"})
)

func init() {
	metrics.Registry.MustRegister(urgentWait, urgentReconcile)
}
