package shard

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/internal/apimetrics"
)

// Metrics say which shards a replica holds and acts on.
type Metrics struct {
	held, acting *prometheus.GaugeVec
}

// NewMetrics registers a replica's metrics with reg, or takes those already
// registered there (a process that builds several providers).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "clusterops_shard_held",
			Help: "1 while this replica holds the Lease of the shard, 0 once it gave it up or lost it.",
		}, []string{"shard"}),
		acting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "clusterops_shard_acting",
			Help: "1 while this replica acts on the managed resources of the shard, 0 once it stopped.",
		}, []string{"shard"}),
	}
	var err error
	if m.held, err = apimetrics.Existing(reg, m.held); err != nil {
		return nil, errors.Wrap(err, "cannot register the shard metrics")
	}
	if m.acting, err = apimetrics.Existing(reg, m.acting); err != nil {
		return nil, errors.Wrap(err, "cannot register the shard metrics")
	}
	return m, nil
}

// setHeld says whether the replica holds the Leases of shards.
func (m *Metrics) setHeld(shards []int, held bool) { m.set(m.heldVec(), shards, held) }

// setActing says whether the replica acts on shards.
func (m *Metrics) setActing(shards []int, acting bool) { m.set(m.actingVec(), shards, acting) }

func (m *Metrics) heldVec() *prometheus.GaugeVec {
	if m == nil {
		return nil
	}
	return m.held
}

func (m *Metrics) actingVec() *prometheus.GaugeVec {
	if m == nil {
		return nil
	}
	return m.acting
}

func (m *Metrics) set(g *prometheus.GaugeVec, shards []int, on bool) {
	if g == nil {
		return
	}
	v := 0.0
	if on {
		v = 1
	}
	for _, i := range shards {
		g.WithLabelValues(Name(i)).Set(v)
	}
}
