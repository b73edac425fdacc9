// Package sharechange changes a sharded replica's share of the fleet again
// and again, as replicas join and leave, against an API server that lacks
// one managed kind's CRD (as when Crossplane's activation policy leaves a
// kind inactive), and holds that nothing of a shard given up outlives it:
// neither its goroutines nor its caches, and no replica's manager or
// clients once it stopped.
package sharechange

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/provider"
	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

var env *testenv.Env

const (
	shards = 4
	// rules are the CopyRules each share caches: an old share kept alive
	// holds its cache of them.
	rules = 300
	// cycles of replica b joining and leaving: each builds replica a's
	// share again twice.
	cycles = 5
	wait   = 3 * time.Minute
	// slack is how many goroutines more than before the cycles the process
	// may run once they settle: far fewer than one share starts.
	slack = 10
	// heapSlack bounds the growth of the heap in use over the cycles, after
	// a collection.
	heapSlack = 16 << 20
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	dir, err := crdsWithout("chaos.clusterops.io_chaosagents.yaml")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	e, err := testenv.StartWith(testenv.Options{CRDDirs: []string{dir}, ShardedListAndWatch: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer e.Stop() //nolint:errcheck // Best effort at exit.
	env = e
	return m.Run()
}

// crdsWithout copies package/crds but the file skip into a directory of its
// own.
func crdsWithout(skip string) (string, error) {
	dir, err := os.MkdirTemp("", "sharechange-crds-")
	if err != nil {
		return "", err
	}
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "package", "crds", "*.yaml"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		if filepath.Base(f) == skip {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// TestShareChangesLeaveNothingBehind: replica a acts on every shard; b
// joins and leaves five times, so a drops half its shards and takes them
// back five times, with ChaosAgent's CRD never installed (its controller
// waits on safe-start's gate). a reads the resources of a shard only when it
// takes it: the shards it keeps are never read again. Once a acts on every
// shard again and is quiet, the process runs about as many goroutines as
// before the cycles, the heap in use is about as large, and every client a
// stopped replica made has been collected: none of its managers is
// reachable any more.
func TestShareChangesLeaveNothingBehind(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fleet(ctx, t)

	a := startReplica(ctx, t, "a")
	a.waitActing(t, shards, 0)
	// Every rule reconciled: the watches of their sources run too.
	testenv.EventuallyEvery(t, time.Second, wait, "every CopyRule to be reconciled", func(ctx context.Context) (bool, error) {
		l := &copyv1alpha1.CopyRuleList{}
		if err := env.Client.List(ctx, l); err != nil {
			return false, err
		}
		for _, r := range l.Items {
			if r.GetCondition(xpv2.TypeSynced).Status == "" {
				return false, fmt.Errorf("CopyRule %s/%s is not reconciled", r.Namespace, r.Name)
			}
		}
		return len(l.Items) == rules, nil
	})
	base := quietGoroutines(t, nil)
	heapBase, liveBase := heapInUse(), a.live()
	t.Logf("before: %d goroutines (%d controller workers, %d informers), %d MiB of heap in use, %d of a's clients live",
		total(base), count(base, worker), count(base, informer), heapBase>>20, liveBase)

	var gone []*replica
	taken := map[string]int{} // by shard, how often a took it back
	for i := range cycles {
		bctx, stop := context.WithCancel(ctx)
		b := startReplica(bctx, t, "b")
		a.waitActing(t, shards/2, -1)
		b.waitActing(t, shards/2, 0)
		kept := testenv.ShardsActingNamed(a.reg)
		mark := a.shareBuilds()
		stop()
		b.waitStopped(t)
		a.waitActing(t, shards, mark)
		for _, s := range testenv.ShardsActingNamed(a.reg) {
			if !slices.Contains(kept, s) {
				taken[s]++
			}
		}
		gone = append(gone, b)
		t.Logf("cycle %d: %d goroutines; a kept shards %v", i+1, runtime.NumGoroutine(), kept)
	}
	// A shard a keeps is listed once, when a starts; one it gave up and
	// took back, once more each time at most (a shard given up again
	// before its cache was read is not listed for that time).
	for _, s := range testenv.ShardsActingNamed(a.reg) {
		got := a.lists(s)
		switch {
		case taken[s] == 0 && got != 1:
			t.Errorf("a listed the CopyRules of shard %s, which it kept, %d times, want once", s, got)
		case taken[s] > 0 && (got < 2 || got > 1+taken[s]):
			t.Errorf("a listed the CopyRules of shard %s %d times, want 2 to %d: once at start and at most once each of the %d times it took the shard back", s, got, 1+taken[s], taken[s])
		}
	}

	after := quietGoroutines(t, base)
	heapAfter, liveAfter := heapInUse(), a.live()
	t.Logf("after %d share changes: %d goroutines (%d controller workers, %d informers), %d MiB of heap in use, %d of a's clients live",
		2*cycles, total(after), count(after, worker), count(after, informer), heapAfter>>20, liveAfter)
	if liveAfter > liveBase {
		t.Errorf("%d of the clients replica a made are live, %d before the cycles: an old manager is still reachable", liveAfter, liveBase)
	}
	for i, b := range gone {
		if n := b.live(); n > 0 {
			t.Errorf("%d clients of replica b's run %d are live after it stopped: it is still reachable", n, i+1)
		}
	}
	if heapAfter > heapBase+heapSlack {
		t.Errorf("heap in use grew from %d to %d MiB over the cycles", heapBase>>20, heapAfter>>20)
	}
}

// fleet makes the provider's namespace, the default ClusterProviderConfig and
// the CopyRules the replicas share.
func fleet(ctx context.Context, t *testing.T) {
	t.Helper()
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testenv.ProviderNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	if _, err := testenv.ApplyFile(ctx, c, testenv.RepoRoot()+"/examples/providerconfig/clusterproviderconfig.yaml"); err != nil {
		t.Fatal(err)
	}
	var nss []string
	for i := range 2 * shards {
		ns := fmt.Sprintf("team-%d", i)
		nss = append(nss, ns)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range rules {
		ns := nss[i%len(nss)]
		r := &copyv1alpha1.CopyRule{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("rule-%d", i)},
			Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
				Kind: copyv1alpha1.KindConfigMap, Names: []string{"absent"}, Namespaces: []string{ns},
			}},
		}
		if err := c.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
}

// A replica is a sharded provider run in-process. Every client it makes
// goes through a tracker, which keeps a weak pointer to it and counts the
// share's reads of CopyRules.
type replica struct {
	id      string
	reg     *prometheus.Registry
	stopped chan error

	mu     sync.Mutex
	made   []weak.Pointer[tracker]
	listed map[string]int // lists of CopyRules, by label selector
	builds atomic.Int64
}

// lists is how many times the replica listed the CopyRules of shard s.
func (r *replica) lists(s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listed[shard.Label+" in ("+s+")"]
}

type tracker struct {
	r    *replica
	next http.RoundTripper
}

func (tr *tracker) RoundTrip(req *http.Request) (*http.Response, error) {
	// A share's cache lists and watches the CopyRules of its shards; the
	// lead manager's, those of none.
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/copyrules") &&
		strings.Contains(req.URL.Query().Get("labelSelector"), shard.Label+" in ") {
		tr.r.builds.Add(1)
		// A list, or a watch that starts with the list (WatchList).
		if q := req.URL.Query(); q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true" {
			tr.r.mu.Lock()
			tr.r.listed[req.URL.Query().Get("labelSelector")]++
			tr.r.mu.Unlock()
		}
	}
	return tr.next.RoundTrip(req)
}

func (r *replica) wrap(next http.RoundTripper) http.RoundTripper {
	tr := &tracker{r: r, next: next}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.made = append(r.made, weak.Make(tr))
	return tr
}

func startReplica(ctx context.Context, t *testing.T, id string) *replica {
	t.Helper()
	r := &replica{id: id, reg: prometheus.NewRegistry(), stopped: make(chan error, 1), listed: map[string]int{}}
	o := testenv.ProviderOptions(env.Config, time.Hour, 50)
	o.Shards, o.Identity, o.SkipNameValidation = shards, id, true
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	o.MetricsRegistry = r.reg
	o.WrapManager = r.wrap
	p, err := provider.New(o)
	if err != nil {
		t.Fatal(err)
	}
	go func() { r.stopped <- p.Start(ctx) }()
	return r
}

// shareBuilds counts the reads of CopyRules by the replica's shares so far.
func (r *replica) shareBuilds() int64 { return r.builds.Load() }

// waitActing waits until the replica acts on n shards, and, unless mark is
// negative, its cache read CopyRules after mark (shareBuilds).
func (r *replica) waitActing(t *testing.T, n int, mark int64) {
	t.Helper()
	testenv.Eventually(t, wait, fmt.Sprintf("replica %s to act on %d shards", r.id, n), func(context.Context) (bool, error) {
		if got := testenv.ShardsActing(r.reg); got != float64(n) {
			return false, fmt.Errorf("acting on %v shards", got)
		}
		if mark >= 0 && r.shareBuilds() <= mark {
			return false, fmt.Errorf("no share built since %d reads of CopyRules", mark)
		}
		return true, nil
	})
}

func (r *replica) waitStopped(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.stopped:
		if err != nil {
			t.Fatalf("replica %s: %v", r.id, err)
		}
	case <-time.After(wait):
		t.Fatalf("replica %s did not stop within %s", r.id, wait)
	}
}

// live is how many of the replica's clients are reachable after a
// collection.
func (r *replica) live() int {
	runtime.GC()
	runtime.GC()
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, w := range r.made {
		if w.Value() != nil {
			n++
		}
	}
	return n
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// quietGoroutines waits until the goroutines are quiet: no reconcile runs, the
// controllers' workers and informers are as many for ten polls in a row,
// and the number of goroutines stopped falling. With base, it also waits until as many
// controller workers and informers run as in base (fewer would hide a leak
// behind those yet to start), and until at most slack more goroutines than
// in base run, and says which stacks grew when they do not. It returns the
// goroutines, by stack.
func quietGoroutines(t *testing.T, base map[string]int) map[string]int {
	t.Helper()
	var now map[string]int
	low, calm, shape := -1, 0, [2]int{}
	testenv.EventuallyEvery(t, 200*time.Millisecond, wait, "the goroutines to settle", func(context.Context) (bool, error) {
		now = goroutines()
		n := total(now)
		if s := [2]int{count(now, worker), count(now, informer)}; s != shape {
			shape, calm = s, 0
		}
		switch {
		case count(now, reconciling) > 0:
			calm = 0
			return false, fmt.Errorf("%d reconciles run, such as:\n%s", count(now, reconciling), most(now, reconciling))
		case base != nil && count(now, worker) < count(base, worker):
			return false, fmt.Errorf("%d controller workers run, %d before", count(now, worker), count(base, worker))
		case base != nil && count(now, informer) < count(base, informer):
			return false, fmt.Errorf("%d informers run, %d before", count(now, informer), count(base, informer))
		case low < 0 || n < low:
			low, calm = n, 0
			return false, nil
		}
		calm++
		if base != nil && n > total(base)+slack {
			return false, fmt.Errorf("%d goroutines, %d before the cycles; more now:\n%s", n, total(base), grown(base, now))
		}
		return calm >= 10, nil
	})
	return now
}

// The stacks of goroutines that count says how many run.
const (
	worker      = "processNextWorkItem"
	reconciling = "reconcileHandler"
	informer    = "(*controller).processLoop"
)

// total is how many goroutines run.
func total(stacks map[string]int) int {
	n := 0
	for _, c := range stacks {
		n += c
	}
	return n
}

// count is how many goroutines run a stack with frame in it.
func count(stacks map[string]int, frame string) int {
	n := 0
	for s, c := range stacks {
		if strings.Contains(s, frame) {
			n += c
		}
	}
	return n
}

// most is the stack with frame in it that most goroutines run.
func most(stacks map[string]int, frame string) string {
	top, n := "", 0
	for s, c := range stacks {
		if strings.Contains(s, frame) && c > n {
			top, n = s, c
		}
	}
	return top
}

// goroutines counts the running goroutines by stack (pprof's goroutine
// profile, debug=1: one entry per distinct stack, its frames' functions and
// lines).
func goroutines() map[string]int {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	out := map[string]int{}
	s := bufio.NewScanner(&b)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	n, stack := 0, ""
	flush := func() {
		if n > 0 {
			out[stack] += n
		}
		n, stack = 0, ""
	}
	for s.Scan() {
		line := s.Text()
		switch {
		case strings.Contains(line, " @ 0x"):
			flush()
			_, _ = fmt.Sscanf(line, "%d @", &n)
		case strings.HasPrefix(line, "#\t"):
			f := strings.Fields(line)
			if len(f) >= 4 {
				stack += f[2] + " " + f[3] + "\n"
			}
		}
	}
	flush()
	return out
}

// grown lists the stacks that more goroutines run now than before, most
// first.
func grown(before, now map[string]int) string {
	type g struct {
		stack string
		more  int
	}
	var gs []g
	for s, n := range now {
		if d := n - before[s]; d > 0 {
			gs = append(gs, g{s, d})
		}
	}
	slices.SortFunc(gs, func(a, b g) int { return b.more - a.more })
	var out strings.Builder
	for _, g := range gs {
		fmt.Fprintf(&out, "+%d\n%s\n", g.more, g.stack)
	}
	return out.String()
}
