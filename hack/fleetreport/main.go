// Command fleetreport turns the results of make bench-fleet (one JSON file per
// scenario, written by test/bench's BenchmarkFleet) into a Markdown report
// with the targets of the fleet tier, and an SVG chart of time to converge and
// memory against the fleet's size.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// result is what BenchmarkFleet writes; see test/bench/fleet_test.go.
type result struct {
	Kind, Layout  string
	N, Namespaces int

	Seconds, FloorSeconds           float64
	FloorWritesPerMR, WritesPerMR   float64
	ReconcilesPerMR, RequestsPerMR  float64
	Requests                        map[string]float64
	BaseHeap, Heap, BaseRSS, RSS    float64
	BaseGoroutines, Goroutines      float64
	Watches, APIServerWatchersDelta float64

	DuringMs, AfterMs []float64

	RestartSeconds, RestartRequests, RestartWrites float64
	RestartNotIdle                                 bool

	FloorCPU, CPU map[string]float64
	Cores         int

	// Commit is the provider's source the scenario ran.
	Commit string
	// WallSeconds is the whole scenario's time, setup and restart included
	// (0 in a result that did not record it).
	WallSeconds float64
	// Phases is what each step of the scenario took, in seconds (nil in a
	// result that did not record them).
	Phases map[string]float64
	// Recovered says where a result whose raw form was lost was read back
	// from; its event → action latencies are then the summaries below, not
	// the samples.
	Recovered                                string
	DuringP50, DuringP99, AfterP50, AfterP99 float64
	DuringN                                  int
}

// during is the event → action latency while converging: p50, p99 (ms) and
// the number of samples.
func (r result) during() (float64, float64, int) {
	if r.DuringMs == nil && r.Recovered != "" {
		return r.DuringP50, r.DuringP99, r.DuringN
	}
	return percentile(r.DuringMs, 0.5), percentile(r.DuringMs, 0.99), len(r.DuringMs)
}

// after is the event → action latency once converged: p50 and p99 (ms).
func (r result) after() (float64, float64) {
	if r.AfterMs == nil && r.Recovered != "" {
		return r.AfterP50, r.AfterP99
	}
	return percentile(r.AfterMs, 0.5), percentile(r.AfterMs, 0.99)
}

// restart is the restart column: seconds until idle, or how long the bench
// waited for a restart that never was.
func (r result) restart() string {
	if r.RestartNotIdle {
		return fmt.Sprintf("not idle in %.0f s / %.0f / %.0f", r.RestartSeconds, r.RestartRequests, r.RestartWrites)
	}
	return fmt.Sprintf("%.1f / %.0f / %.0f", r.RestartSeconds, r.RestartRequests, r.RestartWrites)
}

// mrs is what growth is divided by: the fleet, not the probes, which were
// converged before the base sample.
func (r result) mrs() float64 { return float64(r.N) }

func (r result) heapPerMR() float64 { return (r.Heap - r.BaseHeap) / r.mrs() / 1024 }

func (r result) goroutinesPerMR() float64 { return (r.Goroutines - r.BaseGoroutines) / r.mrs() }

func main() {
	in := flag.String("in", ".cache/bench/fleet", "directory of the scenarios' JSON results")
	md := flag.String("md", "docs/fleet/report.md", "Markdown report to write")
	svg := flag.String("svg", "docs/fleet.svg", "chart to write")
	findings := flag.String("findings", "", "hand-written notes appended to the report, when set and the file exists")
	ab := flag.String("ab", "", "directory of make bench-ab's settings: write their table to -md instead")
	cost := flag.String("cost", "", "directory of make bench-cost's runs: write their table to -md instead")
	explore := flag.String("explore", "", "directory of the explorer's run summaries: write their page to -md instead")
	sizing := flag.String("sizing", "", "page whose sizing table to write from the sharded results, when set")
	flag.Parse()
	if *ab != "" || *cost != "" || *explore != "" {
		text, err := "", error(nil)
		switch {
		case *ab != "":
			text, err = abReport(*ab)
		case *cost != "":
			text, err = costReport(*cost)
		default:
			text, err = exploreReport(*explore, sameExploreInputs)
		}
		if err == nil {
			err = os.WriteFile(*md, []byte(text), 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleetreport:", err)
			os.Exit(1)
		}
		return
	}
	rs, err := read(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetreport:", err)
		os.Exit(1)
	}
	took, _ := os.ReadFile(filepath.Join(*in, "took"))
	fanout, _ := filepath.Glob(filepath.Join(*in, "copyrule-fanout-*.txt"))
	why, err := readWhy(filepath.Join(*in, "why.txt"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetreport:", err)
		os.Exit(1)
	}
	sharded, err := readSharded(filepath.Join(*in, "sharded"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetreport:", err)
		os.Exit(1)
	}
	sharded, changes := apart(sharded)
	if *sizing != "" {
		if err := writeSizing(*sizing, sharded); err != nil {
			fmt.Fprintln(os.Stderr, "fleetreport:", err)
			os.Exit(1)
		}
	}
	text := report(rs, strings.TrimSpace(string(took)), fanout, filepath.Base(*svg), why) + shardedReport(sharded, why) + changeReport(changes, why)
	if f, err := os.ReadFile(*findings); err == nil {
		text += "\n" + string(f)
	}
	if err := os.WriteFile(*md, []byte(text), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "fleetreport:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*svg, []byte(chart(rs)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "fleetreport:", err)
		os.Exit(1)
	}
	if len(sharded) > 0 {
		if err := os.WriteFile(filepath.Join(filepath.Dir(*svg), shardedSVG), []byte(shardedChart(sharded)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "fleetreport:", err)
			os.Exit(1)
		}
	}
}

func read(dir string) ([]result, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	rs := make([]result, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r result
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Layout != b.Layout {
			return a.Layout < b.Layout
		}
		return a.N < b.N
	})
	return rs, nil
}

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// check marks a value against a target: ✔ when ok.
func check(ok bool) string {
	if ok {
		return "✔"
	}
	return "✘"
}

// tierMinutes is the tier's time as its results tell it: the sum of the
// scenarios' wall times, each scenario without one counted by its timed
// phases, floor, converge and restart, which are less than its wall time.
func tierMinutes(rs []result) (total, timed float64, estimated int) {
	for _, r := range rs {
		phases := r.FloorSeconds + r.Seconds + r.RestartSeconds
		timed += phases
		if r.WallSeconds > 0 {
			total += r.WallSeconds
			continue
		}
		total += phases
		estimated++
	}
	return total / 60, timed / 60, estimated
}

// tierResult is the tier row: how long the tier took, and what its time was
// spent on. A whole run's took ("every scenario … (N min)") gives its
// minutes end to end, the tools' build included; a tier assembled from
// narrowed runs is the sum of its scenarios' wall times.
func tierResult(rs []result, took string, fanout []string) (string, bool) {
	total, timed, estimated := tierMinutes(rs)
	var floor float64
	for _, r := range rs {
		floor += r.FloorSeconds / 60
	}
	// The fan-out scenarios are make bench's benchmark: its time per op.
	for _, f := range fanout {
		raw, _ := os.ReadFile(f)
		if fs := strings.Fields(string(raw)); len(fs) > 2 {
			var ns float64
			if _, err := fmt.Sscan(fs[2], &ns); err == nil {
				total, timed, estimated = total+ns/6e10, timed+ns/6e10, estimated+1
			}
		}
	}
	var tier string
	var whole float64
	// A narrowed run appends "; <when>: <scenarios> (N min)" to a whole run's.
	oneRun := strings.HasPrefix(took, "every scenario") && !strings.Contains(took, "; ")
	if _, err := fmt.Sscanf(took[strings.LastIndex(took, "(")+1:], "%f min)", &whole); err == nil && oneRun {
		total = whole
		tier = fmt.Sprintf("%.0f min for the %d scenarios in one run, the tools' build included", total, len(rs)+len(fanout))
	} else {
		tier = fmt.Sprintf("%.0f min for the %d scenarios, the sum of their runs", total, len(rs)+len(fanout))
		if estimated > 0 {
			tier += fmt.Sprintf(" (%d of them counted by their timed phases alone, which is less than their wall time: the fan-out ones, and those whose result records no wall time)", estimated)
		}
	}
	tier += fmt.Sprintf("; their timed phases alone, floor, converge and restart: %.0f min. The raw client's phases take %.0f min, so floor and converge take at least %.0f min even with every converge at its 1.5× target", timed, floor, floor*2.5)
	// Where the rest goes, from the scenarios that recorded their steps.
	phases, with := map[string]float64{}, 0
	for _, r := range rs {
		if r.Phases != nil {
			with++
		}
		for k, v := range r.Phases {
			phases[k] += v / 60
		}
	}
	if with > 0 {
		names := slices.Collect(maps.Keys(phases))
		sort.Slice(names, func(i, j int) bool { return phases[names[i]] > phases[names[j]] })
		var parts []string
		for _, k := range names {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, phases[k]))
		}
		tier += fmt.Sprintf(". Minutes by step, over the %d scenarios that recorded them: %s", with, strings.Join(parts, "; "))
	}
	return tier, total <= 45
}

func report(rs []result, took string, fanout []string, svg string, why map[string]string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("## Fleets (`make bench-fleet`)")
	p("")
	// The tier row reads took as written, so the intro gets its own copy.
	intro := took
	if intro != "" {
		intro = ", " + intro
	}
	p("N managed resources of one kind applied at once, each referencing objects of its own, in one namespace or spread over N/10 namespaces; one scenario per control plane and provider process%s. **floor**: a raw client with the provider's standing (impersonated, same priority level, 32 parallel) creating the same resources and doing the writes the provider must (a metadata write standing for the finalizer, what it makes or changes, the status), timed in the same run, its end seen as the provider's is: by a watch of the resources until every one is Ready. Each phase starts on a quiet control plane (the API server taking at most 10 writes a second, two seconds in a row), so the controllers' work on what the setup or the floor made does not run into the next phase. The control planes let the controller-manager and the scheduler send 2,000 requests a second, and ConfigRollout's Deployments keep no old ReplicaSets (`revisionHistoryLimit: 0`), so both phases start with one ReplicaSet a Deployment. Reconciles, requests and writes per resource are the fleet's own, divided by N: the probes' reactions while it converged are taken out, each charged what one cost once the fleet was idle; heap is live heap after a GC, growth over the provider with only the probes. **during / after**: a change to an object a probe references (ConfigRollout: its ConfigMap; CopyRule: its source; AppBundle: its Deployment's image; ImmortalContainer: its pod deleted; ChaosAgent: its spec) until the provider acted, seen by a watch of what it writes; the changes are made one at a time, at most one every 500 ms, while the fleet converges and after. **restart**: a new provider with the converged fleet until every resource was reconciled and a second passed without a request. **at**: the provider's commit the scenario ran.", intro)
	p("")
	for _, r := range rs {
		if r.Recovered != "" {
			p("Rows at \"unrecorded\" were read back from %s, as printed (rounded), so their ratios may differ from the original results in the last digit.", r.Recovered)
			p("")
			break
		}
	}
	p("![time to converge and memory against N](%s)", svg)
	p("")
	p("| kind | layout | N | converge s | floor s | × floor | reconciles /MR | requests /MR | writes /MR (floor) | heap KiB /MR | goroutines /MR | watches | during p50 / p99 ms (n) | after p50 / p99 ms | restart s / requests / writes | at |")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		d50, d99, dn := r.during()
		a50, a99 := r.after()
		at := r.Commit
		if at == "" {
			at = "unrecorded"
		}
		p("| %s | %s | %d | %.1f | %.1f | %.2f | %.2f | %.1f | %.1f (%.0f) | %.1f | %.2f | %.0f | %.0f / %.0f (%d) | %.0f / %.0f | %s | %s |",
			r.Kind, r.Layout, r.N, r.Seconds, r.FloorSeconds, r.Seconds/r.FloorSeconds, r.ReconcilesPerMR, r.RequestsPerMR, r.WritesPerMR, r.FloorWritesPerMR,
			r.heapPerMR(), r.goroutinesPerMR(), r.Watches, d50, d99, dn, a50, a99, r.restart(), at)
	}
	for _, f := range fanout {
		raw, _ := os.ReadFile(f)
		p("")
		p("CopyRule, 1 rule × %s namespaces (make bench's fan-out at this size): `%s`", strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "copyrule-fanout-"), ".txt"), strings.Join(strings.Fields(string(raw)), " "))
	}
	p("")
	p("### Targets")
	p("")
	p("| target | result | why, where missed (bench/results/fleet/why.txt) |")
	p("|---|---|---|")
	// row writes a target's row; the reason is looked up by the target's
	// key, and a missed target without one says so.
	row := func(key, name, result string, met bool) {
		w := why[key]
		switch {
		case met:
			w = ""
		case w == "":
			w = "not written yet"
		}
		p("| %s | %s | %s |", name, result, w)
	}
	worst := func(key, name string, v func(r result) float64, ok func(float64) bool, only func(r result) bool) {
		var parts []string
		all := true
		for _, r := range rs {
			if only != nil && !only(r) {
				continue
			}
			x := v(r)
			if math.IsNaN(x) {
				continue
			}
			all = all && ok(x)
			if !ok(x) {
				parts = append(parts, fmt.Sprintf("%s %s %d: %.4g", r.Kind, r.Layout, r.N, x))
			}
		}
		if all {
			row(key, name, "✔ every scenario", true)
			return
		}
		row(key, name, "✘ "+strings.Join(parts, "; "), false)
	}
	big := func(r result) bool { return r.N >= 1000 }
	worst("converge", "converge ≤ 1.5× the floor (N ≥ 1,000)", func(r result) float64 { return r.Seconds / r.FloorSeconds }, func(x float64) bool { return x <= 1.5 }, big)
	worst("reconciles", "≤ 3 reconciles per resource", func(r result) float64 { return r.ReconcilesPerMR }, func(x float64) bool { return x <= 3 }, nil)
	worst("during", "event → action p99 ≤ 1 s while converging (N ≥ 1,000)", func(r result) float64 { _, d99, _ := r.during(); return d99 / 1000 }, func(x float64) bool { return x <= 1 }, big)
	worst("heap", "≤ 20 KiB heap per resource (N ≥ 1,000)", func(r result) float64 { return r.heapPerMR() }, func(x float64) bool { return x <= 20 }, big)
	worst("goroutines", "≤ 2 goroutines per resource", func(r result) float64 { return r.goroutinesPerMR() }, func(x float64) bool { return x <= 2 }, nil)
	// The provider's fixed watches (its kinds, configs, workloads: about 16),
	// plus at most two per namespace in use: the fleet's and up to 10
	// targets.
	worst("watches", "API-server watches grow with the namespaces in use, not with references (≤ 16 + 2 per namespace)", func(r result) float64 { return (r.Watches - 16) / float64(r.Namespaces+10) }, func(x float64) bool { return x <= 2 }, nil)
	worst("restart-writes", "a restart sends 0 writes", func(r result) float64 { return r.RestartWrites }, func(x float64) bool { return x == 0 }, nil)
	worst("restart-idle", "a restart is idle within 60 s", func(r result) float64 { return r.RestartSeconds }, func(x float64) bool { return x <= 60 }, nil)
	// Growth from 1,000 to the largest N measured: 10,000, or 2,000 for the
	// kinds with pods; the bound is 1.1 × the ratio of N, as 11× is to 10×.
	type key struct{ kind, layout string }
	by := map[key]map[int]result{}
	for _, r := range rs {
		k := key{r.Kind, r.Layout}
		if by[k] == nil {
			by[k] = map[int]result{}
		}
		by[k][r.N] = r
	}
	var growth []string
	grew := true
	for k, m := range by {
		a, okA := m[1000]
		n := 0
		for x := range m {
			n = max(n, x)
		}
		if !okA || n <= 1000 {
			continue
		}
		z, bound := m[n], 1.1*float64(n)/1000
		t := z.Seconds / a.Seconds
		q := (z.RequestsPerMR * z.mrs()) / (a.RequestsPerMR * a.mrs())
		h := (z.Heap - z.BaseHeap) / (a.Heap - a.BaseHeap)
		// The floor's own growth says how much of the time's is the API
		// server's: the same writes of 10× the objects take it longer than
		// 10× as long in one namespace.
		f := z.FloorSeconds / a.FloorSeconds
		ok := t <= bound && q <= bound && h <= bound
		grew = grew && ok
		growth = append(growth, fmt.Sprintf("%s %s to %d: time %.1f× (the floor's %.1f×), requests %.1f×, heap %.1f× %s", k.kind, k.layout, n, t, f, q, h, check(ok)))
	}
	sort.Strings(growth)
	if len(growth) == 0 {
		growth = []string{"not measured: no kind ran at both 1,000 and more"}
	}
	row("growth", "from 1,000 to 10,000 (2,000 for AppBundle and ImmortalContainer): time, requests, memory ≤ 11× (2.2×)", strings.Join(growth, "; "), grew)
	tier, tierMet := tierResult(rs, took, fanout)
	row("tier", "the whole tier ≤ 45 min on 2 cores", check(tierMet)+" "+tier, tierMet)
	p("")
	p("### Requests per resource by verb and resource (the largest scenario of each kind and layout)")
	p("")
	for _, k := range sortedKeys(by) {
		m := by[k]
		n := 0
		for x := range m {
			n = max(n, x)
		}
		r := m[n]
		var parts []string
		for _, vr := range sortedByValue(r.Requests) {
			if r.Requests[vr] >= 0.01 {
				parts = append(parts, fmt.Sprintf("%s %.2f", vr, r.Requests[vr]))
			}
		}
		p("- %s, %s, %d: %s", k.kind, k.layout, n, strings.Join(parts, "; "))
	}
	cpu := cpuLines(rs)
	if len(cpu) > 0 {
		p("")
		p("### CPU seconds while converging, floor → provider")
		p("")
		p("busy: the machine's CPU seconds over the wall time, in cores of the machine's; when busy is near all of them the machine is saturated, and what one process spends more is time the others wait. bench: the bench's own process (the floor's client, the probes, the polls).")
		p("")
		for _, l := range cpu {
			p("- %s", l)
		}
	}
	return b.String()
}

// cpuOrder is the order of the CPU lines' components.
var cpuOrder = []string{"apiserver", "etcd", "controller-manager", "scheduler", "kwok", "provider", "bench"}

// cpuLines says, for each scenario that measured it, what each component's
// CPU was while the floor's writes ran and while the provider converged.
func cpuLines(rs []result) []string {
	var out []string
	for _, r := range rs {
		if r.CPU == nil {
			continue
		}
		parts := []string{fmt.Sprintf("busy %.1f → %.1f of %d cores (%.0f → %.0f s)",
			r.FloorCPU["machine"]/r.FloorSeconds, r.CPU["machine"]/r.Seconds, r.Cores, r.FloorCPU["machine"], r.CPU["machine"])}
		for _, c := range cpuOrder {
			parts = append(parts, fmt.Sprintf("%s %.0f → %.0f", c, r.FloorCPU[c], r.CPU[c]))
		}
		out = append(out, fmt.Sprintf("%s %s %d: %s", r.Kind, r.Layout, r.N, strings.Join(parts, "; ")))
	}
	return out
}

func sortedKeys[K interface{ ~struct{ kind, layout string } }, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return fmt.Sprint(ks[i]) < fmt.Sprint(ks[j]) })
	return ks
}

func sortedByValue(m map[string]float64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return m[ks[i]] > m[ks[j]] || m[ks[i]] == m[ks[j]] && ks[i] < ks[j] })
	return ks
}
