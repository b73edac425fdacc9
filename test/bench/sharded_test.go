//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A sharded scenario applies one kind's fleet, spread over N/10 namespaces,
// to replicas of the provider that share it (--shards), and measures what
// each replica holds and sends: whether a replica's share costs it its share
// of what one replica needs for the same fleet, beyond a fixed base. With
// FLEET_KILL a replica is SIGKILLed once half the fleet is Ready, and the
// result says how long the others took to converge the rest. make
// bench-fleet runs it with 1, 2 and 4 replicas (FLEET_SHARDED); on 2 cores
// the API server bounds the total time, so the report shows shares and cost,
// not speed-up.

// shardedLease is the replicas' lease duration (their shard Leases' too),
// what a killed replica's shards wait for before the others take them.
const shardedLease = 8 * time.Second

// shardedResult is what BenchmarkShardedFleet writes; hack/fleetreport reads
// it.
type shardedResult struct {
	Kind                      string
	N, Namespaces             int
	Replicas, Shards          int
	Seconds                   float64 // apply → all Ready
	Replica                   []replicaResult
	APIServerWatchersDelta    float64
	LeaseSeconds, KillSeconds float64 `json:",omitempty"` // FLEET_KILL: kill → all Ready
	// TakeoverSeconds, with FLEET_KILL: kill → the survivors act on every
	// shard, the killed replica's share included.
	TakeoverSeconds float64 `json:",omitempty"`
	// StoppedReady, with FLEET_DEADLINE, is how many were Ready when the
	// deadline stopped a fleet this machine could not converge in time;
	// Seconds is then the deadline.
	StoppedReady int `json:",omitempty"`
	// Change, with FLEET_CHANGE, is what a replica joining or leaving cost
	// once the fleet was converged and idle.
	Change *changeResult `json:",omitempty"`
	Commit string        `json:",omitempty"`
}

// changeResult is what a change of the replicas (FLEET_CHANGE: join, one
// more replica; leave, the last one stops) cost the fleet, converged and
// idle before it: the shards whose holder changed and the resources they
// hold, and what every replica reconciled and wrote from the change until
// all shards were acted on and the replicas idle again. The leaving
// replica's own figures go with it.
type changeResult struct {
	Change         string
	Seconds        float64
	MovedShards    int
	MovedResources int
	Reconciles     float64
	// Writes are the replicas' creates, updates, patches and deletes of
	// anything but Leases and events.
	Writes float64
	// ReconcilesPerMoved is Reconciles over MovedResources: the target is
	// at most 1.1.
	ReconcilesPerMoved float64
	// ReconcilesBy are every replica's reconciles by "replica controller
	// result", to say where they were spent.
	ReconcilesBy map[string]float64 `json:",omitempty"`
}

// replicaResult is one replica's figures, once the fleet is converged and
// idle: heap after a GC (and the base, with the shards taken and no fleet),
// goroutines, watches, and what it sent and reconciled while converging.
type replicaResult struct {
	Shards                    int
	BaseHeap, Heap            float64
	Goroutines, Watches       float64
	Requests, Reconciles, CPU float64
	LeaseRequests             float64 // of Requests, those to Leases
	// RequestsBy are Requests by "verb resource", to say where a
	// difference between replica counts comes from.
	RequestsBy map[string]float64 `json:",omitempty"`
	Killed     bool               `json:",omitempty"`

	baseBy                                            map[string]float64
	baseRequests, baseLeases, baseReconciles, baseCPU float64
	pid                                               int
	p                                                 *providerProcess
}

// BenchmarkShardedFleet runs FLEET_KIND × FLEET_N on FLEET_REPLICAS replicas
// with --shards=FLEET_SHARDS (default 12) and writes its result to
// $FLEET_OUT/sharded/<kind>-<n>-r<replicas>[-kill].json.
func BenchmarkShardedFleet(b *testing.B) {
	kindName := os.Getenv("FLEET_KIND")
	k, ok := fleetKinds[kindName]
	if !ok {
		b.Fatalf("FLEET_KIND %q unknown", kindName)
	}
	n, replicas, shards := envInt("FLEET_N", 1000), envInt("FLEET_REPLICAS", 2), envInt("FLEET_SHARDS", 12)
	kill := os.Getenv("FLEET_KILL") != "" && replicas > 1
	ctx := context.Background()
	c := env.Client
	f := &fleet{kind: kindName, n: n, nss: make([]string, max(1, n/10))}
	run := strconv.FormatInt(time.Now().Unix()%100000, 10)
	parallel(b, len(f.nss), func(i int) error {
		f.nss[i] = fmt.Sprintf("sharded-%s-%s-%d", run, kindName, i)
		return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.nss[i]}})
	})
	if k.prepare != nil {
		k.prepare(ctx, b, f)
	}
	if k.prereqs != nil {
		parallel(b, n, func(i int) error {
			for _, o := range k.prereqs(f.ns(i), i) {
				if err := c.Create(ctx, o); err != nil {
					return err
				}
			}
			return nil
		})
	}
	// The package's provider gives way to the replicas.
	prov.stop()
	quiesce(ctx, b)
	rs := startReplicas(ctx, b, replicas, shards)
	defer func() {
		for _, r := range rs {
			r.p.stop()
		}
	}()
	for i := range rs {
		s, err := sampleOf(ctx, rs[i].p)
		if err != nil {
			b.Fatal(err)
		}
		rs[i].BaseHeap, rs[i].baseRequests, rs[i].baseReconciles, rs[i].baseCPU = s.heap, s.total(), s.reconciles, cpuOfPid(rs[i].pid)
		rs[i].baseLeases, rs[i].baseBy = s.leases(), s.requests
	}
	watchers := func() float64 {
		m, err := apiserverMetrics(ctx)
		if err != nil {
			return 0
		}
		return m.sum("apiserver_longrunning_requests", map[string]string{"verb": "WATCH"})
	}
	watchersBefore := watchers()

	r := shardedResult{Kind: kindName, N: n, Namespaces: len(f.nss), Replicas: replicas, Shards: shards}
	b.ResetTimer()
	start := time.Now()
	// FLEET_DEADLINE stops a fleet too large to converge in a run's time
	// and records how far it got.
	deadline, capped := 60*time.Minute, false
	if d, err := time.ParseDuration(os.Getenv("FLEET_DEADLINE")); err == nil && d > 0 {
		deadline, capped = d, true
	}
	converged := make(chan error, 1)
	go func() { converged <- awaitReady(ctx, "", n, deadline, k.list()) }()
	parallel(b, n, func(i int) error {
		return c.Create(ctx, k.mr(f.ns(i), fmt.Sprintf("mr-%d", i), i, f))
	})
	if kill {
		// Half the fleet Ready, then the first replica goes.
		if err := awaitReady(ctx, "", n/2, 60*time.Minute, k.list()); err != nil {
			b.Fatal(err)
		}
		rs[0].p.Kill()
		rs[0].Killed = true
		killed := time.Now()
		// The killed replica's shards are taken over once the survivors act
		// on every shard again.
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
			acting := 0.0
			for _, x := range rs[1:] {
				v, err := x.p.shardMetric("clusterops_shard_acting")
				if err != nil {
					return false, nil //nolint:nilerr // Busy; try again.
				}
				acting += v
			}
			return acting == float64(shards), nil
		})
		if err != nil {
			b.Fatalf("the survivors did not take the killed replica's shards over: %v", err)
		}
		r.TakeoverSeconds = time.Since(killed).Seconds()
		if err := <-converged; err != nil {
			b.Fatal(err)
		}
		r.KillSeconds, r.LeaseSeconds = time.Since(killed).Seconds(), shardedLease.Seconds()
	} else if err := <-converged; err != nil {
		var nr *notReady
		if !capped || !errors.As(err, &nr) {
			b.Fatal(err)
		}
		r.StoppedReady = nr.ready
		b.Logf("stopped at the deadline: %v", err)
	}
	r.Seconds = time.Since(start).Seconds()
	b.StopTimer()

	var live []*replicaResult
	for i := range rs {
		if !rs[i].Killed {
			live = append(live, &rs[i])
		}
	}
	if r.StoppedReady == 0 {
		idle(ctx, b, live, n)
	}
	for _, x := range live {
		s, err := sampleOf(ctx, x.p)
		if err != nil {
			b.Fatal(err)
		}
		x.Heap, x.Goroutines, x.Watches = s.heap, s.goroutines, s.watches
		x.Requests, x.Reconciles = s.total()-x.baseRequests, s.reconciles-x.baseReconciles
		x.LeaseRequests = s.leases() - x.baseLeases
		x.RequestsBy = map[string]float64{}
		for k, v := range s.requests {
			if d := v - x.baseBy[k]; d > 0 {
				x.RequestsBy[k] = d
			}
		}
		x.CPU = cpuOfPid(x.pid) - x.baseCPU
		held, err := x.p.shardMetric("clusterops_shard_acting")
		if err != nil {
			b.Fatal(err)
		}
		x.Shards = int(held)
	}
	r.APIServerWatchersDelta = watchers() - watchersBefore
	if how := os.Getenv("FLEET_CHANGE"); how != "" && r.StoppedReady == 0 {
		var joined *providerProcess
		r.Change, joined = changeReplicas(ctx, b, how, live, shards, k)
		defer joined.stop()
	}
	r.Replica = append(r.Replica, rs...)
	r.Commit = os.Getenv("BENCH_COMMIT")
	b.ReportMetric(r.Seconds, "s-converge")
	if err := writeShardedResult(r, kill); err != nil {
		b.Fatal(err)
	}
	for _, x := range rs {
		x.p.stop()
	}
	if !disposable() {
		abandon(b, c, []client.ObjectList{k.list()}, f.nss)
	}
}

// shardedArgs are the flags of a replica sharing shards.
func shardedArgs(shards int) []string {
	return []string{
		fmt.Sprintf("--shards=%d", shards),
		"--leader-election-lease-duration=" + shardedLease.String(),
		"--leader-election-renew-deadline=" + (shardedLease * 3 / 4).String(),
		"--leader-election-retry-period=1s",
	}
}

// startReplicas starts replicas providers sharing shards and waits until
// every shard is acted on by one of them.
func startReplicas(ctx context.Context, b *testing.B, replicas, shards int) []replicaResult {
	b.Helper()
	args := shardedArgs(shards)
	// The replicas' Leases live in the provider's namespace, which a
	// disposable control plane does not have: a single provider without
	// leader election never needed it.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crossplane-system"}}
	if err := env.Client.Create(ctx, ns); err != nil && !kerrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	rs := make([]replicaResult, replicas)
	for i := range rs {
		p, err := startReplica(ctx, fmt.Sprintf("r%d", i), prov.bin, prov.kubeconfig, prov.rate, args...)
		if err != nil {
			b.Fatal(err)
		}
		rs[i].p, rs[i].pid = p, p.Pid()
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		acting := 0.0
		for _, r := range rs {
			v, err := r.p.shardMetric("clusterops_shard_acting")
			if err != nil {
				return false, nil //nolint:nilerr // Not up yet.
			}
			acting += v
		}
		return acting == float64(shards), nil
	})
	if err != nil {
		b.Fatalf("the %d replicas did not share the %d shards: %v", replicas, shards, err)
	}
	return rs
}

// idle waits until the replicas have reconciled at least n resources
// together and then, for two seconds, sent no request, their Leases'
// renewals and watches aside (work), and reconciled nothing: a reconcile
// that reads only its caches sends no request.
func idle(ctx context.Context, b *testing.B, rs []*replicaResult, n int) {
	b.Helper()
	var last, lastReconciled float64
	quiet := 0
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) {
		var sent, reconciled float64
		for _, r := range rs {
			s, err := scrapeOf(r.p)
			if err != nil {
				return false, nil //nolint:nilerr // Try again.
			}
			sent, reconciled = sent+s.work(), reconciled+s.reconciles
		}
		if reconciled >= float64(n) && sent == last && reconciled == lastReconciled {
			quiet++
		} else {
			quiet = 0
		}
		last, lastReconciled = sent, reconciled
		return quiet >= 4, nil
	})
	if err != nil {
		b.Logf("the replicas did not become idle: %v", err)
	}
}

// shardMetric sums a per-shard metric of the replica over its shards.
func (p *providerProcess) shardMetric(name string) (float64, error) {
	m, err := p.providerMetrics()
	if err != nil {
		return 0, err
	}
	return m.sum(name, nil), nil
}

func writeShardedResult(r shardedResult, kill bool) error {
	dir := os.Getenv("FLEET_OUT")
	if dir == "" {
		dir = filepath.Join(os.Getenv("BENCH_OUT"), "fleet")
	}
	dir = filepath.Join(dir, "sharded")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%s-%d-r%d", r.Kind, r.N, r.Replicas)
	if kill {
		name += "-kill"
	}
	if r.Change != nil {
		name += "-" + r.Change.Change
	}
	return os.WriteFile(filepath.Join(dir, name+".json"), out, 0o644)
}

// changeReplicas has a replica join (how "join") or the last of rs leave
// ("leave"), waits until every shard is acted on again and the replicas are
// idle, and says what it cost; it returns the replica that joined.
func changeReplicas(ctx context.Context, b *testing.B, how string, rs []*replicaResult, shards int, k fleetKind) (*changeResult, *providerProcess) {
	b.Helper()
	type cost struct {
		reconciles, writes float64
		by                 map[string]float64
	}
	costOf := func(p *providerProcess) cost {
		m, err := scrapeOf(p)
		if err != nil {
			b.Fatal(err)
		}
		w := 0.0
		for vr, v := range m.requests {
			verb, res, _ := strings.Cut(vr, " ")
			switch verb {
			case "create", "update", "patch", "delete", "deletecollection":
				if res != "leases" && res != "events" {
					w += v
				}
			}
		}
		return cost{m.reconciles, w, m.reconcilesBy}
	}
	holders := func(ps []*providerProcess) map[int]int {
		out := map[int]int{}
		for j, p := range ps {
			m, err := p.providerMetrics()
			if err != nil {
				return nil
			}
			for i := range shards {
				if m.sum("clusterops_shard_acting", map[string]string{"shard": strconv.Itoa(i)}) == 1 {
					out[i] = j
				}
			}
		}
		return out
	}
	var ps []*providerProcess
	for _, x := range rs {
		ps = append(ps, x.p)
	}
	before := holders(ps)
	costs := make([]cost, len(ps))
	for i, p := range ps {
		costs[i] = costOf(p)
	}
	out := &changeResult{Change: how}
	start := time.Now()
	var joined *providerProcess
	switch how {
	case "join":
		p, err := startReplica(ctx, fmt.Sprintf("r%d", len(ps)), prov.bin, prov.kubeconfig, prov.rate, shardedArgs(shards)...)
		if err != nil {
			b.Fatal(err)
		}
		joined, ps, costs = p, append(ps, p), append(costs, cost{})
	case "leave":
		last := len(ps) - 1
		ps[last].stop()
		ps, costs = ps[:last], costs[:last]
	default:
		b.Fatalf("FLEET_CHANGE %q is neither join nor leave", how)
	}
	// Settled once every shard is acted on by one replica, the joiner
	// holding its share.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		h := holders(ps)
		if len(h) != shards {
			return false, nil
		}
		if how == "join" {
			n := 0
			for _, j := range h {
				if j == len(ps)-1 {
					n++
				}
			}
			return n >= shards/len(ps), nil
		}
		return true, nil
	})
	if err != nil {
		b.Fatalf("the shards were not acted on again after the %s: %v", how, err)
	}
	var live []*replicaResult
	for _, p := range ps {
		live = append(live, &replicaResult{p: p})
	}
	idle(ctx, b, live, 0)
	out.Seconds = time.Since(start).Seconds()
	after := holders(ps)
	moved := map[string]bool{}
	for i := range shards {
		if j, ok := before[i]; !ok || after[i] != j || (how == "leave" && j >= len(ps)) {
			moved[strconv.Itoa(i)] = true
		}
	}
	out.MovedShards = len(moved)
	l := k.list()
	if err := env.Client.List(ctx, l); err != nil {
		b.Fatal(err)
	}
	items, err := apimeta.ExtractList(l)
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range items {
		if a, err := apimeta.Accessor(o); err == nil && moved[a.GetLabels()["crossplane.io/shard"]] {
			out.MovedResources++
		}
	}
	out.ReconcilesBy = map[string]float64{}
	for i, p := range ps {
		c := costOf(p)
		out.Reconciles += c.reconciles - costs[i].reconciles
		out.Writes += c.writes - costs[i].writes
		for k, v := range c.by {
			if d := v - costs[i].by[k]; d > 0 {
				out.ReconcilesBy[fmt.Sprintf("r%d %s", i, k)] = d
			}
		}
	}
	if out.MovedResources > 0 {
		out.ReconcilesPerMoved = out.Reconciles / float64(out.MovedResources)
	}
	b.Logf("%s: %d shards moved with %d resources; %.0f reconciles (%.2f per moved), %.0f writes, %.1f s",
		how, out.MovedShards, out.MovedResources, out.Reconciles, out.ReconcilesPerMoved, out.Writes, out.Seconds)
	return out, joined
}
