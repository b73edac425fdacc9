package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// shardedResult and replicaResult are what BenchmarkShardedFleet writes; see
// test/bench/sharded_test.go.
type shardedResult struct {
	Kind                      string
	N, Namespaces             int
	Replicas, Shards          int
	Seconds                   float64
	Replica                   []replicaResult
	APIServerWatchersDelta    float64
	LeaseSeconds, KillSeconds float64
	Commit                    string
}

type replicaResult struct {
	Shards                    int
	BaseHeap, Heap            float64
	Goroutines, Watches       float64
	Requests, Reconciles, CPU float64
	Killed                    bool
}

// The targets of the sharded tier: beyond its base, a replica of N holds at
// most 1/N + 10% of the heap one replica needs for the same fleet; all
// replicas send within 10% of one replica's requests; a killed replica's
// share converges within the lease duration + 10 s.
const (
	shareSlack      = 0.10
	requestSlack    = 0.10
	killGraceSecond = 10
)

// readSharded reads the sharded results in dir (none: nil).
func readSharded(dir string) ([]shardedResult, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []shardedResult
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r shardedResult
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b shardedResult) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		if a.Replicas != b.Replicas {
			return a.Replicas - b.Replicas
		}
		return strings.Compare(fmt.Sprint(a.KillSeconds > 0), fmt.Sprint(b.KillSeconds > 0))
	})
	return out, nil
}

// growth is what a replica holds beyond its base.
func (r replicaResult) growth() float64 { return r.Heap - r.BaseHeap }

// shardedReport is the sharded tier's section: per kind and number of
// replicas, converge time, each replica's heap growth against its share of
// one replica's, watches, requests against one replica's, and a killed
// replica's share converged against the lease.
func shardedReport(rs []shardedResult) string {
	if len(rs) == 0 {
		return ""
	}
	one := map[string]shardedResult{}
	for _, r := range rs {
		if r.Replicas == 1 && r.KillSeconds == 0 {
			one[r.Kind] = r
		}
	}
	var b strings.Builder
	b.WriteString("\n## Sharded (`make bench-sharded`)\n\n")
	b.WriteString("The same fleet spread over N/10 namespaces, shared by 1, 2 and 4 replicas (`--shards`); with a kill, the first replica is SIGKILLed once half the fleet is Ready. ")
	b.WriteString("The API server runs on the same two cores, so total time shows no speed-up: the table shows what each replica holds and sends. ")
	fmt.Fprintf(&b, "Targets: beyond its base, each of N replicas holds at most 1/N + %.0f%% of the heap growth one replica needs; all replicas together send within %.0f%% of one replica's requests; a killed replica's share converges within the lease duration + %d s.\n\n",
		shareSlack*100, requestSlack*100, killGraceSecond)
	b.WriteString("| kind | N | replicas | converge s | heap growth per replica, MiB (target) | watches per replica | requests (vs 1 replica) | CPU s per replica | kill → all Ready |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		base, hasOne := one[r.Kind]
		var heaps, watches, cpus []string
		var requests float64
		worst := 0.0
		for _, x := range r.Replica {
			if x.Killed {
				heaps, watches, cpus = append(heaps, "killed"), append(watches, "–"), append(cpus, "–")
				continue
			}
			heaps = append(heaps, fmt.Sprintf("%.1f", x.growth()/(1<<20)))
			watches = append(watches, fmt.Sprintf("%.0f", x.Watches))
			cpus = append(cpus, fmt.Sprintf("%.0f", x.CPU))
			requests += x.Requests
			worst = max(worst, x.growth())
		}
		heap := strings.Join(heaps, " / ")
		reqs := fmt.Sprintf("%.0f", requests)
		if hasOne && len(base.Replica) == 1 {
			bound := base.Replica[0].growth() * (1/float64(r.Replicas) + shareSlack)
			heap += fmt.Sprintf(" (≤ %.1f%s)", bound/(1<<20), missed(worst > bound))
			ratio := requests / max(base.Replica[0].Requests, 1)
			reqs += fmt.Sprintf(" (%.2f×%s)", ratio, missed(r.KillSeconds == 0 && ratio > 1+requestSlack))
		}
		kill := "–"
		if r.KillSeconds > 0 {
			kill = fmt.Sprintf("%.1f s (≤ %.0f s%s)", r.KillSeconds, r.LeaseSeconds+killGraceSecond, missed(r.KillSeconds > r.LeaseSeconds+killGraceSecond))
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f | %s | %s | %s | %s | %s |\n", r.Kind, r.N, r.Replicas, r.Seconds, heap, strings.Join(watches, " / "), reqs, strings.Join(cpus, " / "), kill)
	}
	return b.String()
}

// missed marks a target missed.
func missed(m bool) string {
	if m {
		return ", **missed**"
	}
	return ""
}
