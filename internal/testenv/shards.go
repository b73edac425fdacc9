package testenv

import "github.com/prometheus/client_golang/prometheus"

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
