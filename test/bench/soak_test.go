//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
)

// The soak runs a mixed fleet under steady churn for an hour and samples
// what the provider holds each minute: what stays flat over time (heap,
// goroutines, watches, open files) and what a change costs (requests,
// writes, reconciles). make soak runs it; hack/fleetreport -soak turns the
// result into docs/faults.md with the slope of each.

// soakShares is the fleet's mix, as the fault scenarios' wave: half
// ConfigRollouts, 40% CopyRules, 10% AppBundles.
var soakShares = []struct {
	kind  string
	share float64
}{{"configrollout", 0.5}, {"copyrule", 0.4}, {"appbundle", 0.1}}

// soakChurnLabel marks the namespaces the soak creates and deletes, which
// its namespace-following CopyRule copies into.
const soakChurnLabel = "bench.clusterops.io/soak-churn"

// soakSample is one minute of the soak.
type soakSample struct {
	// Minute counts from the end of the fleet's convergence.
	Minute int
	// Changes made this minute, and how long the provider took to act on
	// them (event → action, ms); Unacted those it had not acted on within
	// soakActTimeout.
	Changes, Unacted     int
	ActP50Ms, ActMaxMs   float64
	Heap, RSS            float64
	Goroutines, Watches  float64
	OpenFDs              float64
	Requests, Writes     float64 // this minute's
	Reconciles, Failures float64 // this minute's; Failures are reconciles that ended in an error
}

// soakResult is what BenchmarkSoak writes; hack/fleetreport reads it.
type soakResult struct {
	N, Namespaces, Minutes int
	// PercentPerMinute of the fleet's sources change each minute.
	PercentPerMinute float64
	ConvergeSeconds  float64
	Samples          []soakSample
	Commit           string `json:",omitempty"`
}

const (
	// soakActTimeout bounds the wait for one change to be acted on.
	soakActTimeout = 5 * time.Minute
	// soakPercent of the fleet's sources change each minute.
	soakPercent = 1.0
)

// BenchmarkSoak converges SOAK_N (default 10,000) managed resources of three
// kinds over SOAK_N/100 namespaces and one CopyRule that follows namespaces by
// label, then for SOAK_MINUTES (default 60) changes 1% of the fleet's sources
// each minute (a ConfigMap a rollout or a rule reads, an AppBundle's
// Deployment edited), creates a namespace for the following rule and deletes
// the one before. Each minute it waits for every change to be acted on and
// samples the provider. The result goes to $SOAK_OUT (default
// $BENCH_OUT/soak)/soak-<n>.json.
func BenchmarkSoak(b *testing.B) {
	ctx := context.Background()
	c := env.Client
	n, minutes := envInt("SOAK_N", 10000), envInt("SOAK_MINUTES", 60)
	run := strconv.FormatInt(time.Now().Unix()%100000, 10)
	nss := make([]string, max(1, n/100))
	parallel(b, len(nss), func(i int) error {
		nss[i] = fmt.Sprintf("soak-%s-%d", run, i)
		return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nss[i]}})
	})

	type part struct {
		k fleetKind
		f *fleet
	}
	var parts []part
	var lists []client.ObjectList
	total := 0
	for _, s := range soakShares {
		k := fleetKinds[s.kind]
		f := &fleet{kind: s.kind, n: int(float64(n) * s.share), nss: nss}
		if k.prepare != nil {
			k.prepare(ctx, b, f)
		}
		if k.prereqs != nil {
			parallel(b, f.n, func(i int) error {
				for _, o := range k.prereqs(f.ns(i), i) {
					if err := c.Create(ctx, o); err != nil {
						return err
					}
				}
				return nil
			})
		}
		parts = append(parts, part{k, f})
		lists = append(lists, k.list())
		total += f.n
	}
	// The namespace-following rule copies one ConfigMap into every churn
	// namespace while it exists.
	shared := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nss[0], Name: "soak-shared"}, Data: map[string]string{"k": "v"}}
	follow := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: nss[0], Name: "soak-follow"},
		Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
			Kind: copyv1alpha1.KindConfigMap, Names: []string{shared.Name},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{soakChurnLabel: "true"}},
		}}}
	for _, o := range []client.Object{shared, follow} {
		if err := c.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	total++

	start := time.Now()
	for _, p := range parts {
		parallel(b, p.f.n, func(i int) error {
			return c.Create(ctx, p.k.mr(p.f.ns(i), fmt.Sprintf("mr-%d", i), i, p.f))
		})
	}
	if err := awaitReady(ctx, "", total, 60*time.Minute, lists...); err != nil {
		b.Fatal(err)
	}
	r := soakResult{N: total, Namespaces: len(nss), Minutes: minutes, PercentPerMinute: soakPercent, ConvergeSeconds: time.Since(start).Seconds()}
	b.Logf("%d managed resources converged in %.0f s", total, r.ConvergeSeconds)
	if _, err := quietCountsPolling(ctx, total); err != nil {
		b.Fatal(err)
	}

	// next is each part's next resource to change: the churn goes round the
	// fleet, so no resource changes twice before every one changed once.
	next := make([]int, len(parts))
	perMinute := max(1, int(float64(total)*soakPercent/100))
	var churnNS string
	was, err := fleetScrape()
	if err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	for m := range minutes {
		// The changes, spread over the parts by their share.
		var checks []probeCheck
		var at []time.Time
		for pi, p := range parts {
			k := max(1, int(float64(perMinute)*soakShares[pi].share))
			for range k {
				i := next[pi]
				next[pi] = (i + 1) % p.f.n
				at = append(at, time.Now())
				check, err := p.k.probe(ctx, c, p.f.ns(i), fmt.Sprintf("mr-%d", i), i, p.f)
				if err != nil {
					b.Fatal(err)
				}
				checks = append(checks, check)
			}
		}
		// A namespace for the following rule; the one before goes.
		if churnNS != "" {
			deleteChurn(ctx, b, churnNS)
		}
		churnNS = fmt.Sprintf("soak-%s-churn-%d", run, m)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: churnNS,
			Labels: map[string]string{soakChurnLabel: "true", "clusterops.io/reachable": "true"}}}); err != nil {
			b.Fatal(err)
		}
		at = append(at, time.Now())
		checks = append(checks, probeCheck{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: churnNS, Name: shared.Name}}, func(client.Object) bool { return true }})

		s := soakSample{Minute: m, Changes: len(checks)}
		s.ActP50Ms, s.ActMaxMs, s.Unacted = acted(ctx, checks, at)
		is, err := fleetSample(ctx)
		if err != nil {
			b.Fatal(err)
		}
		s.Heap, s.RSS, s.Goroutines, s.Watches, s.OpenFDs = is.heap, is.rss, is.goroutines, is.watches, is.fds
		s.Requests, s.Writes = is.total()-was.total(), is.writes()-was.writes()
		s.Reconciles, s.Failures = is.reconciles-was.reconciles, is.failures-was.failures
		was = is
		r.Samples = append(r.Samples, s)
		b.Logf("minute %d: %d changes acted on in at most %.0f ms (%d not), heap %.1f MiB, %.0f goroutines, %.0f watches, %.0f fds, %.0f requests, %.0f failed reconciles",
			m, s.Changes, s.ActMaxMs, s.Unacted, s.Heap/(1<<20), s.Goroutines, s.Watches, s.OpenFDs, s.Requests, s.Failures)
		if s.Unacted > 0 {
			b.Errorf("minute %d: %d of %d changes not acted on within %s", m, s.Unacted, s.Changes, soakActTimeout)
		}
		// The next minute starts on the minute, however long this one's
		// changes took.
		if wait := time.Until(began.Add(time.Duration(m+1) * time.Minute)); wait > 0 {
			time.Sleep(wait)
		}
	}
	if churnNS != "" {
		deleteChurn(ctx, b, churnNS)
	}
	r.Commit = os.Getenv("BENCH_COMMIT")
	if err := writeSoakResult(r); err != nil {
		b.Fatal(err)
	}
	if !disposable() {
		abandon(b, c, lists, nss)
	}
}

// acted waits for every check, each from its change's time, and returns the
// median and the longest time to action, in ms, and how many were not
// acted on within soakActTimeout.
func acted(ctx context.Context, checks []probeCheck, at []time.Time) (p50, longest float64, unacted int) {
	ms := make([]float64, len(checks))
	var wg sync.WaitGroup
	for j, ch := range checks {
		wg.Go(func() {
			if ok, _ := watchFor(ctx, ch.obj, ch.acted, soakActTimeout); ok {
				ms[j] = float64(time.Since(at[j]).Microseconds()) / 1000
			} else {
				ms[j] = -1
			}
		})
	}
	wg.Wait()
	var got []float64
	for _, v := range ms {
		if v < 0 {
			unacted++
			continue
		}
		got = append(got, v)
	}
	if len(got) == 0 {
		return 0, 0, unacted
	}
	slices.Sort(got)
	return got[len(got)/2], got[len(got)-1], unacted
}

// deleteChurn deletes a churn namespace; the namespace controller removes the
// copy in it, and the following rule forgets it.
func deleteChurn(ctx context.Context, b *testing.B, ns string) {
	b.Helper()
	if err := env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreNotFound(err) != nil {
		b.Fatal(err)
	}
}

func writeSoakResult(r soakResult) error {
	dir := os.Getenv("SOAK_OUT")
	if dir == "" {
		dir = filepath.Join(os.Getenv("BENCH_OUT"), "soak")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, fmt.Sprintf("soak-%d.json", r.N)), out, 0o644)
}
