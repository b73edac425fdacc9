//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
)

// BenchmarkCopyRuleFanOut copies one ConfigMap into BENCH_COPY_NAMESPACES
// (default 1000) namespaces: the time until every copy exists, and after a
// source update until every copy holds the new data; each starts 2 s after
// the provider's last work (rested). Beside it, in the same
// run, a raw client writes the same objects with the rule's parallelism (16),
// as the floor the API server allows a client of the provider's standing
// (floorUser). Both are timed by one watch: from the first request until it
// has delivered the last object.
func BenchmarkCopyRuleFanOut(b *testing.B) {
	e := provider(b)
	ctx := context.Background()
	floor := rest.CopyConfig(e.Config)
	floor.Impersonate = rest.ImpersonationConfig{UserName: floorUser}
	rawClient, err := client.New(floor, client.Options{Scheme: e.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	nss, sel, cpc := fanOutNamespaces(b, envInt("BENCH_COPY_NAMESPACES", 1000))
	n := len(nss)
	// The first run of a process is a warm-up, not measured: it meets cold
	// caches and connections on both sides (it was 1.3–2.4× the floor where
	// the next runs were 1.0–1.4×).
	// rested waits 2 s before each phase: a source changes long after its
	// rule fanned out. It was the refill of the client-side limit the
	// provider had until --client-qps (none by default), which the pruning
	// of the last run or the fan-out before an update spent; timing the
	// refill would not have timed the rule.
	rested := func() { time.Sleep(2 * time.Second) }
	first := 0
	if !fanOutWarmedUp {
		first, fanOutWarmedUp = -1, true
	}
	for run := first; run < b.N; run++ {
		b.StopTimer()
		src := namespaceWith(b, e.Client, "bench-copy-src", nil)
		// Copies keep their source's labels: a watch on this one sees every
		// copy arrive and change, without lists that would load the API server
		// while the provider works. The raw client's objects carry it too.
		rawRuns++
		id := fmt.Sprintf("%d-%d", time.Now().Unix()%100000, rawRuns)
		if err := e.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "shared", Labels: map[string]string{"bench-copy-run": id}}, Data: map[string]string{"k": "v1"}}); err != nil {
			b.Fatal(err)
		}
		r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "fan-out"}}
		r.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: cpc}
		r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{"shared"}, NamespaceSelector: &metav1.LabelSelector{MatchLabels: sel}, ConflictPolicy: copyv1alpha1.ConflictSkip, MaxParallelWrites: 16}

		cs, err := kubernetes.NewForConfig(e.Config)
		if err != nil {
			b.Fatal(err)
		}
		wctx, stop := context.WithCancel(ctx)
		w, err := cs.CoreV1().ConfigMaps("").Watch(wctx, metav1.ListOptions{LabelSelector: "bench-copy-run=" + id})
		if err != nil {
			b.Fatal(err)
		}
		held := map[string]map[string]string{} // name → namespace → the value its object holds
		// until returns how long it took from start until the watch has seen
		// every object called name outside src hold v, and until it saw the
		// first. The provider's copies and the raw client's objects are timed
		// alike: until the same watch delivers the first and the last of them.
		until := func(start time.Time, name, v string) (all, first time.Duration) {
			count := func() int {
				c := 0
				for ns, got := range held[name] {
					if ns != src && got == v {
						c++
					}
				}
				return c
			}
			timeout := time.After(30 * time.Minute)
			for c := count(); c < n; c = count() {
				if c > 0 && first == 0 {
					first = time.Since(start)
				}
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						b.Fatal("the watch of the copies ended")
					}
					cm, isCM := ev.Object.(*corev1.ConfigMap)
					if !isCM {
						continue
					}
					if held[cm.Name] == nil {
						held[cm.Name] = map[string]string{}
					}
					if ev.Type == watch.Deleted {
						delete(held[cm.Name], cm.Namespace)
					} else {
						held[cm.Name][cm.Namespace] = cm.Data["k"]
					}
				case <-timeout:
					b.Fatalf("%d of %d objects %s hold %q after 30 minutes", count(), n, name, v)
				}
			}
			if first == 0 {
				first = time.Since(start)
			}
			return time.Since(start), first
		}

		// The first measured run's CPU profile covers the fan-out and the update.
		profiled := make(chan error, 1)
		if dir := os.Getenv("BENCH_OUT"); dir != "" && run == 0 && !fanOutProfiled {
			fanOutProfiled = true
			go func() { profiled <- prov.profile("profile", "seconds=15", filepath.Join(dir, "fanout.cpu.pprof")) }()
		} else {
			profiled <- nil
		}
		rested()
		b.StartTimer()
		start := time.Now()
		if err := e.Client.Create(ctx, r); err != nil {
			b.Fatal(err)
		}
		initial, _ := until(start, "shared", "v1")
		rested()
		cm := &corev1.ConfigMap{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: src, Name: "shared"}, cm); err != nil {
			b.Fatal(err)
		}
		cm.Data["k"] = "v2"
		start = time.Now()
		if err := e.Client.Update(ctx, cm); err != nil {
			b.Fatal(err)
		}
		update, updateFirst := until(start, "shared", "v2")
		b.StopTimer()
		if err := <-profiled; err != nil {
			b.Log("no CPU profile:", err)
		}

		// The raw client: the same creates, then the same updates, 16 at a
		// time, watched by the same watch. It has no client-side rate limit
		// (it copies the bench's config): the floor is what the API server
		// allows.
		name := "raw-" + id
		lbls := map[string]string{"bench-copy-run": id}
		raw := func(v string, fn func(i int) error) (time.Duration, time.Duration) {
			start := time.Now()
			parallelN(b, 16, n, fn)
			return until(start, name, v)
		}
		rawCreate, _ := raw("v1", func(i int) error {
			return rawClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nss[i], Name: name, Labels: lbls}, Data: map[string]string{"k": "v1"}})
		})
		rawUpdate, _ := raw("v2", func(i int) error {
			return rawClient.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nss[i], Name: name, Labels: lbls}, Data: map[string]string{"k": "v2"}})
		})
		stop()
		if run >= 0 {
			b.ReportMetric(initial.Seconds(), "s-initial")
			b.ReportMetric(update.Seconds(), "s-update")
			b.ReportMetric(rawCreate.Seconds(), "s-raw-create")
			b.ReportMetric(rawUpdate.Seconds(), "s-raw-update")
			// Where the provider's time goes: until the first copy changed
			// (noticing the change and planning), then the writes. (The raw
			// client's watch is read only after its writes.)
			b.ReportMetric(updateFirst.Seconds(), "s-update-first")
			b.ReportMetric(initial.Seconds()/rawCreate.Seconds(), "x-floor-initial")
			b.ReportMetric(update.Seconds()/rawUpdate.Seconds(), "x-floor-update")
			b.ReportMetric(float64(n), "namespaces")
		}

		// The rule prunes its copies before the next run.
		if err := e.Client.Delete(ctx, r); err != nil {
			b.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
			l := &corev1.ConfigMapList{}
			err := e.Client.List(ctx, l, client.MatchingLabels{"copy.clusterops.io/rule-uid": string(r.UID)}, client.Limit(1))
			return err == nil && len(l.Items) == 0, nil
		}); err != nil {
			b.Fatalf("copies not pruned: %v", err)
		}
		deleteNamespaces(e.Client, src)
	}
}

var (
	fanOutWarmedUp bool // the process has run its unmeasured fan-out
	fanOutProfiled bool // the first measured fan-out has been profiled
	rawRuns        int  // names the raw client's objects apart across runs
	fanOutOnce     sync.Once
	fanOutNSs      []string
)

// fanOutNamespaces creates n namespaces once per bench process, labelled so a
// selector picks them all, and a ClusterProviderConfig that reaches them.
func fanOutNamespaces(b *testing.B, n int) ([]string, map[string]string, string) {
	b.Helper()
	e, ctx := provider(b), context.Background()
	run := fmt.Sprintf("%d", time.Now().Unix()%100000)
	sel := map[string]string{"bench-copy": "fan-out"}
	cpc := "bench-copy"
	fanOutOnce.Do(func() {
		err := e.Client.Create(ctx, &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: cpc}, Spec: v1alpha1.ClusterProviderConfigSpec{
			Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity},
			Reach:       &v1alpha1.Reach{NamespaceSelector: &metav1.LabelSelector{MatchLabels: sel}},
		}})
		if client.IgnoreAlreadyExists(err) != nil {
			b.Fatal(err)
		}
		fanOutNSs = make([]string, n)
		parallel(b, n, func(i int) error {
			fanOutNSs[i] = fmt.Sprintf("bench-copy-%s-%d", run, i)
			return e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fanOutNSs[i], Labels: sel}})
		})
	})
	return fanOutNSs, sel, cpc
}

// removeFanOutNamespaces deletes the namespaces fanOutNamespaces made.
func removeFanOutNamespaces() { deleteNamespaces(env.Client, fanOutNSs...) }

// BenchmarkCopyRuleNewNamespace creates b.N namespaces one by one that a
// CopyRule's namespace selector picks, and measures the time from the create
// call until the copy exists in the new namespace.
func BenchmarkCopyRuleNewNamespace(b *testing.B) {
	e := provider(b)
	ctx := context.Background()
	run := fmt.Sprintf("%d", time.Now().UnixNano()%1000000)
	sel := map[string]string{"bench-newns": run, "clusterops.io/reachable": "true"}
	src := namespaceWith(b, e.Client, "bench-newns-src", reachable)
	r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "follow"},
		Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
			Kind: copyv1alpha1.KindConfigMap, Names: []string{"shared"}, NamespaceSelector: &metav1.LabelSelector{MatchLabels: sel},
		}}}
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "shared"}, Data: map[string]string{"k": "v"}}, r,
	} {
		if err := e.Client.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	var made []string
	// The first namespace, unmeasured, shows that the rule is running.
	for i := -1; i < b.N; i++ {
		if i == 0 {
			b.ResetTimer()
			lat = lat[:0]
		}
		ns := fmt.Sprintf("bench-newns-%s-%d", run, i)
		start := time.Now()
		if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: sel}}); err != nil {
			b.Fatal(err)
		}
		made = append(made, ns)
		err := wait.PollUntilContextTimeout(ctx, 2*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			return e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shared"}, &corev1.ConfigMap{}) == nil, nil
		})
		if err != nil {
			b.Fatalf("no copy in namespace %s: %v", ns, err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
	cleanUp(b, e.Client, src)
	deleteNamespaces(e.Client, made...)
}
