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
	TakeoverSeconds           float64
	StoppedReady              int
	Change                    *changeResult
	Commit                    string
}

// changeResult is what a replica joining or leaving a converged fleet cost.
type changeResult struct {
	Change                      string
	Seconds                     float64
	MovedShards, MovedResources int
	Reconciles, Writes          float64
	ReconcilesPerMoved          float64
}

// changeSlack bounds the reconciles a change of the replicas causes: at
// most this many per resource of the shards that moved.
const changeSlack = 1.1

// apart splits the results of fleets shared throughout from those of a
// change of the replicas once converged.
func apart(rs []shardedResult) (shared, changes []shardedResult) {
	for _, r := range rs {
		if r.Change != nil {
			changes = append(changes, r)
		} else {
			shared = append(shared, r)
		}
	}
	return shared, changes
}

// changeReport is the table of the changes of the replicas: the shards and
// resources that moved, and the reconciles and writes every replica made
// from the change until idle again.
func changeReport(rs []shardedResult, why map[string]string) string {
	if len(rs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n### A replica joins or leaves\n\n")
	fmt.Fprintf(&b, "The fleet converged and idle on its replicas, then a replica joins (3 become 4) or the last leaves (4 become 3). Counted from the change until every shard is acted on again and the replicas are idle: every replica's reconciles and its writes of anything but Leases and events. Target: at most %.1f reconciles per resource of the shards that moved.\n\n", changeSlack)
	b.WriteString("| kind | N | change | shards moved | resources moved | reconciles (per moved, target) | writes | settled s |\n|---|---|---|---|---|---|---|---|\n")
	miss := map[string]bool{}
	for _, r := range rs {
		c := r.Change
		per := fmt.Sprintf("%.0f (%.2f, ≤ %.1f%s)", c.Reconciles, c.ReconcilesPerMoved, changeSlack, note(miss, "sharded-change", c.ReconcilesPerMoved > changeSlack))
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %d | %s | %.0f | %.1f |\n", r.Kind, r.N, c.Change, c.MovedShards, c.MovedResources, per, c.Writes, c.Seconds)
	}
	commits := make([]string, 0, len(rs))
	for _, r := range rs {
		commits = append(commits, r.Commit)
	}
	b.WriteString(uncommittedNote(commits))
	if miss["sharded-change"] && why["sharded-change"] != "" {
		fmt.Fprintf(&b, "\nWhy the target marked missed is (bench/results/fleet/why.txt): %s\n", why["sharded-change"])
	}
	return b.String()
}

type replicaResult struct {
	Shards                    int
	BaseHeap, Heap            float64
	Goroutines, Watches       float64
	Requests, Reconciles, CPU float64
	LeaseRequests             float64
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

// shardedSVG is the sharded tier's chart, next to the fleet chart.
const shardedSVG = "fleet-sharded.svg"

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
//
// why holds the reasons for the targets missed (why.txt's sharded-*
// lines), listed under the table for each target some row misses.
func shardedReport(rs []shardedResult, why map[string]string) string {
	if len(rs) == 0 {
		return ""
	}
	one := map[string]shardedResult{}
	for _, r := range rs {
		if r.Replicas == 1 && r.KillSeconds == 0 && r.StoppedReady == 0 {
			one[r.Kind+fmt.Sprint(r.N)] = r
		}
	}
	var b strings.Builder
	b.WriteString("\n## Sharded (`make bench-sharded`)\n\n")
	b.WriteString("The same fleet spread over N/10 namespaces, shared by 1, 2 and 4 replicas (`--shards`); with a kill, the first replica is SIGKILLed once half the fleet is Ready. ")
	b.WriteString("The API server runs on the same two cores, so total time shows no speed-up: the table shows what each replica holds and sends. ")
	fmt.Fprintf(&b, "Targets: beyond its base, each of N replicas holds at most 1/N + %.0f%% of the heap growth and watches one replica needs (judged where N replicas share the fleet throughout, not after a kill); all replicas together send within %.0f%% of one replica's requests; a killed replica's shares are taken over within the lease duration + %d s.\n\n",
		shareSlack*100, requestSlack*100, killGraceSecond)
	b.WriteString("Requests count everything the replicas sent while the fleet converged, their Leases' renewals too; the column after shows those alone.\n\n")
	b.WriteString("![each replica's heap growth and watches against one replica's](" + shardedSVG + ")\n\n")
	miss := map[string]bool{}
	b.WriteString("| kind | N | replicas | converge s | heap growth per replica, MiB (target) | watches per replica (target) | requests (vs 1 replica) | of them Leases | CPU s per replica | kill → all Ready |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		base, hasOne := one[r.Kind+fmt.Sprint(r.N)]
		var heaps, watches, cpus []string
		var requests, leases float64
		worst, worstWatches := 0.0, 0.0
		for _, x := range r.Replica {
			if x.Killed {
				heaps, watches, cpus = append(heaps, "killed"), append(watches, "–"), append(cpus, "–")
				continue
			}
			heaps = append(heaps, fmt.Sprintf("%.1f", x.growth()/(1<<20)))
			watches = append(watches, fmt.Sprintf("%.0f", x.Watches))
			cpus = append(cpus, fmt.Sprintf("%.0f", x.CPU))
			requests, leases = requests+x.Requests, leases+x.LeaseRequests
			worst, worstWatches = max(worst, x.growth()), max(worstWatches, x.Watches)
		}
		heap, watch := strings.Join(heaps, " / "), strings.Join(watches, " / ")
		reqs := fmt.Sprintf("%.0f", requests)
		if hasOne && len(base.Replica) == 1 {
			// A kill's survivors took shares over and built theirs again: the
			// shares' targets are for replicas that share the fleet throughout.
			if r.KillSeconds == 0 {
				bound := base.Replica[0].growth() * (1/float64(r.Replicas) + shareSlack)
				heap += fmt.Sprintf(" (≤ %.1f%s)", bound/(1<<20), note(miss, "sharded-heap", worst > bound))
				wbound := base.Replica[0].Watches * (1/float64(r.Replicas) + shareSlack)
				watch += fmt.Sprintf(" (≤ %.0f%s)", wbound, note(miss, "sharded-watches", worstWatches > wbound))
			}
			ratio := requests / max(base.Replica[0].Requests, 1)
			reqs += fmt.Sprintf(" (%.2f×%s)", ratio, note(miss, "sharded-requests", r.KillSeconds == 0 && ratio > 1+requestSlack))
		}
		kill := "–"
		if r.KillSeconds > 0 {
			bound := r.LeaseSeconds + killGraceSecond
			kill = fmt.Sprintf("shares taken over in %.1f s (≤ %.0f s%s); all Ready after %.1f s", r.TakeoverSeconds, bound, note(miss, "sharded-kill", r.TakeoverSeconds > bound || r.TakeoverSeconds == 0), r.KillSeconds)
		}
		converge := fmt.Sprintf("%.1f", r.Seconds)
		if r.StoppedReady > 0 {
			converge = fmt.Sprintf("stopped at %.0f with %d Ready", r.Seconds, r.StoppedReady)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s | %.0f | %s | %s |\n", r.Kind, r.N, r.Replicas, converge, heap, watch, reqs, leases, strings.Join(cpus, " / "), kill)
	}
	commits := make([]string, 0, len(rs))
	for _, r := range rs {
		commits = append(commits, r.Commit)
	}
	b.WriteString(uncommittedNote(commits))
	first := true
	for _, t := range []string{"sharded-heap", "sharded-watches", "sharded-requests", "sharded-kill"} {
		if miss[t] && why[t] != "" {
			if first {
				b.WriteString("\nWhy the targets marked missed are (bench/results/fleet/why.txt):\n\n")
				first = false
			}
			fmt.Fprintf(&b, "- **%s**: %s\n", strings.TrimPrefix(t, "sharded-"), why[t])
		}
	}
	return b.String()
}

// note marks a target missed, and records it in miss.
func note(miss map[string]bool, target string, m bool) string {
	miss[target] = miss[target] || m
	return missed(m)
}

// missed marks a target missed.
func missed(m bool) string {
	if m {
		return ", **missed**"
	}
	return ""
}

// shardedChart draws, per kind, the worst replica's heap growth and watches
// as a share of one replica's, against the target 1/N + 10%, for 1, 2 and 4
// replicas (the runs without a kill).
func shardedChart(rs []shardedResult) string {
	one := map[string]replicaResult{}
	var kinds []string
	size := map[string]int{}
	for _, r := range rs {
		if r.Replicas == 1 && r.KillSeconds == 0 && r.StoppedReady == 0 && len(r.Replica) == 1 {
			one[r.Kind], size[r.Kind] = r.Replica[0], r.N
			kinds = append(kinds, r.Kind)
		}
	}
	const w, h, pad, bar = 300, 240, 45, 14
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", w*max(len(kinds), 1)+20, h+50)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	py := func(f float64) float64 { return float64(h) - f*float64(h-pad) }
	for k, kind := range kinds {
		x0 := 10 + k*w
		fmt.Fprintf(&b, `<text x="%d" y="14" font-weight="bold">%s: worst replica / one replica</text>`+"\n", x0+pad, kind)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", x0+pad, h, x0+w-10, h)
		for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
			fmt.Fprintf(&b, `<text x="%d" y="%.0f" text-anchor="end">%.2f</text><line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="#ddd"/>`+"\n", x0+pad-4, py(f)+4, f, x0+pad, py(f), x0+w-10, py(f))
		}
		slot := 0
		for _, r := range rs {
			if r.Kind != kind || r.N != size[kind] || r.KillSeconds > 0 {
				continue
			}
			var heap, watches float64
			for _, x := range r.Replica {
				heap, watches = max(heap, x.growth()), max(watches, x.Watches)
			}
			heap /= max(one[kind].growth(), 1)
			watches /= max(one[kind].Watches, 1)
			cx := x0 + pad + 20 + slot*75
			slot++
			target := 1/float64(r.Replicas) + shareSlack
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="#1f77b4"/>`+"\n", cx, py(heap), bar, float64(h)-py(heap))
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="#ff7f0e"/>`+"\n", cx+bar+2, py(watches), bar, float64(h)-py(watches))
			if r.Replicas > 1 {
				fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#d62728" stroke-width="2"/>`+"\n", cx-4, py(target), cx+2*bar+6, py(target))
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%d</text>`+"\n", cx+bar, h+14, r.Replicas)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">replicas</text>`+"\n", x0+pad+(w-pad)/2, h+28)
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="#1f77b4"/><text x="%d" y="%d">heap growth</text>`, 10+pad, h+36, 25+pad, h+45)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="#ff7f0e"/><text x="%d" y="%d">watches</text>`, 110+pad, h+36, 125+pad, h+45)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#d62728" stroke-width="2"/><text x="%d" y="%d">target 1/N + 10%%</text>`+"\n", 190+pad, h+41, 205+pad, h+41, 210+pad, h+45)
	b.WriteString("</svg>\n")
	return b.String()
}
