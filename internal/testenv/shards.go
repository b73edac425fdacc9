package testenv

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// ShardsActing is how many shards the sharded replica whose metrics g
// gathers acts on (clusterops_shard_acting); -1 when they cannot be read.
func ShardsActing(g prometheus.Gatherer) float64 {
	mfs, err := g.Gather()
	if err != nil {
		return -1
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "clusterops_shard_acting" {
			for _, m := range mf.GetMetric() {
				n += m.GetGauge().GetValue()
			}
		}
	}
	return n
}

// ShardsActingNamed are the shards a replica's registry g says it acts on.
func ShardsActingNamed(g prometheus.Gatherer) []string {
	mfs, err := g.Gather()
	if err != nil {
		return nil
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "clusterops_shard_acting" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetGauge().GetValue() != 1 {
				continue
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "shard" {
					out = append(out, l.GetValue())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
