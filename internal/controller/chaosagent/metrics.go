package chaosagent

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// actionsTotal counts the actions agents took, dry runs excluded.
var actionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "clusterops_chaos_actions_total",
	Help: "Actions taken by ChaosAgents (DeletePod, EvictPod, EvictionRefused, ScaleDeployment, RewriteConfigMap), by agent (namespace/name) and the namespace acted in.",
}, []string{"agent", "action", "namespace"})

func init() {
	metrics.Registry.MustRegister(actionsTotal)
}
