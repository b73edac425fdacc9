package integration

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// A partition is a TCP proxy in front of an API server that can go dark as a
// network partition does: nothing it holds or accepts is forwarded, and no
// connection is refused or reset, so only timeouts notice.
type partition struct {
	ln       net.Listener
	upstream string
	dark     atomic.Bool
	accepted atomic.Int64

	mu    sync.Mutex
	conns []net.Conn
}

func newPartition(t *testing.T, upstream string) *partition {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &partition{ln: ln, upstream: upstream}
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *partition) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		if p.dark.Load() {
			continue // held, never answered
		}
		go p.forward(c)
	}
}

func (p *partition) forward(c net.Conn) {
	u, err := net.Dial("tcp", p.upstream)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, u)
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			for p.dark.Load() {
				// Frozen: what was sent is never delivered.
				time.Sleep(50 * time.Millisecond)
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = dst.Close()
				return
			}
		}
	}
	go pipe(u, c)
	pipe(c, u)
}

// cut closes every connection the proxy holds.
func (p *partition) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// heal ends the partition: the connections frozen in it are reset, as a
// stateful middlebox that lost them would, and new ones are forwarded.
func (p *partition) heal() {
	p.dark.Store(false)
	p.cut()
}

// TestRemoteClusterGoesDark runs CopyRules that copy on a remote cluster and
// ConfigRollouts that roll Deployments there, behind a partition, next to a
// CopyRule on the provider's own cluster, and makes the remote cluster go dark
// while every remote resource is being reconciled: the local rule goes on
// acting on changes at once, the remote resources report Synced=False with the
// reason and retry without a connection each, nothing is deleted, and once
// the partition heals, within a minute, the changes made on the remote cluster
// meanwhile are acted on (a copy updated, a Deployment rolled once) and every
// remote resource is Synced again. Its full version (make bench-faults) runs
// 1,000 of each remote kind, dark for five minutes.
func TestRemoteClusterGoesDark(t *testing.T) {
	ctx := context.Background()
	remote, err := testenv.Start(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remote.Stop() })
	server, err := url.Parse(remote.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := newPartition(t, server.Host)
	kc := proxiedKubeconfig(t, remote, p.ln.Addr().String())

	home := env.Namespace(t, "dark-home", nil)
	cpc := "dark-" + home
	remoteConfig(t, home, cpc, kc)

	// More remote rules than the provider has workers for the kind (50 in
	// these tests): if each held one while the cluster is dark, the local rule
	// would wait.
	n, m, darkFor := 60, 20, time.Duration(0)
	if s := testenv.FaultScale(); s > 1 {
		n, m, darkFor = 100*s, 100*s, 5*time.Minute
	}
	figures := map[string]float64{"remote_copyrules": float64(n), "remote_configrollouts": float64(m)}
	testenv.RecordFault(t, figures)
	rules := remoteRules(t, remote, home, cpc, n)
	for i := range n {
		remoteCopyHolds(t, remote, fmt.Sprintf("conf-%d", i), "v1")
	}
	rollouts := remoteRollouts(t, remote, home, cpc, m)
	local := env.Namespace(t, "copy-dark-src", nil)
	localTarget := env.Namespace(t, "copy-dark", nil)
	env.Create(t, configMap(local, "conf", map[string]string{"k": "v1"}, nil))
	lr := copyRule(t, local, "local", copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{"conf"}, Namespaces: []string{localTarget}})
	env.WaitConverged(t, wait, lr)
	copyHolds(t, localTarget, "conf", map[string]string{"k": "v1"})

	// Dark, while every remote resource is reconciled (a spec change, as a
	// poll would make).
	p.dark.Store(true)
	for _, r := range rules {
		env.Update(t, r, func() { r.Spec.ForProvider.MaxParallelWrites = 5 })
	}
	for _, r := range rollouts {
		env.Update(t, r, func() { r.Spec.ForProvider.Debounce = &metav1.Duration{Duration: time.Millisecond} })
	}
	darkAt := time.Now()
	// Changes on the remote cluster while it is dark for the provider.
	src := &corev1.ConfigMap{}
	if err := remote.Client.Get(ctx, types.NamespacedName{Namespace: home, Name: "conf-0"}, src); err != nil {
		t.Fatal(err)
	}
	src.Data["k"] = "v2"
	if err := remote.Client.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	if err := remote.Client.Patch(ctx, configMap(home, "roll-conf-0", nil, nil), client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"v2"}}`))); err != nil {
		t.Fatal(err)
	}

	// The local rule keeps acting: its change is copied while the remote
	// resources wait for the dark cluster.
	patchData(t, local, "conf", "v2")
	start := time.Now()
	copyHolds(t, localTarget, "conf", map[string]string{"k": "v2"})
	figures["local_first_s"] = time.Since(start).Seconds()
	t.Logf("a local change copied %s after the remote cluster went dark, in %s", start.Sub(darkAt).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	// Once, while the remote resources' requests wait: the 3 s stall and the
	// 3 s probe that find the cluster dark, and then a reconcile (7 s
	// measured; the bound leaves room for a loaded machine, and is a quarter
	// of the reconcile timeout a dark request would otherwise hold a worker
	// for).
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("a local change took %s to copy when the remote cluster went dark, want at most 15 s", d)
	}

	// Every remote resource says why it does not sync.
	testenv.EventuallyEvery(t, testenv.Scaled(50*time.Millisecond), testenv.Scaled(45*time.Second), "every remote resource to report the dark cluster", func(ctx context.Context) (bool, error) {
		for _, r := range append(managedOf(rules), managedOf(rollouts)...) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
				return false, err
			}
			c := r.GetCondition(xpv2.TypeSynced)
			if c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "unreachable since") {
				return false, nil
			}
		}
		return true, nil
	})
	figures["all_reported_s"] = time.Since(darkAt).Seconds()
	t.Logf("every remote resource reported Synced=False %s after the cluster went dark", time.Since(darkAt).Round(time.Second))
	// Retries take no connection each: probes and watches back off.
	mark := p.accepted.Load()
	time.Sleep(20 * time.Second)
	got := p.accepted.Load() - mark
	figures["connections_in_20s"] = float64(got)
	t.Logf("%d connections to the dark cluster in 20 s", got)
	if got > int64(n+m)/2 {
		t.Errorf("%d connections to the dark cluster in 20 s from %d remote resources, want fewer than %d", got, n+m, (n+m)/2)
	}
	// Local changes are acted on at once again, for as long as the cluster
	// stays dark.
	for i := 3; i == 3 || time.Since(darkAt) < darkFor; i++ {
		v := fmt.Sprintf("v%d", i)
		patchData(t, local, "conf", v)
		start = time.Now()
		copyHolds(t, localTarget, "conf", map[string]string{"k": v})
		d := time.Since(start)
		figures["local_while_dark_max_s"] = max(figures["local_while_dark_max_s"], d.Seconds())
		if d > 5*time.Second {
			t.Errorf("a local change took %s to copy while the remote cluster was dark", d)
		}
		if darkFor > 0 {
			time.Sleep(10 * time.Second)
		}
	}
	figures["dark_s"] = time.Since(darkAt).Seconds()

	// Healed: the changes made meanwhile are acted on and every remote
	// resource is Synced again within a minute; every other copy is still
	// there.
	p.heal()
	healed := time.Now()
	testenv.Eventually(t, time.Minute, "the change made while dark to reach its copy", func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		err := remote.Client.Get(ctx, types.NamespacedName{Namespace: "far-away", Name: "conf-0"}, cm)
		return err == nil && cm.Data["k"] == "v2", nil
	})
	testenv.Eventually(t, time.Minute, "the change made while dark to roll its Deployment once", func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		err := remote.Client.Get(ctx, types.NamespacedName{Namespace: home, Name: "roll-web-0"}, d)
		if err == nil && d.Generation > 2 {
			return false, fmt.Errorf("roll-web-0 at generation %d: rolled more than once", d.Generation)
		}
		return err == nil && d.Generation == 2, err
	})
	testenv.EventuallyEvery(t, testenv.Scaled(50*time.Millisecond), time.Minute, "every remote resource Synced again", func(ctx context.Context) (bool, error) {
		for _, r := range append(managedOf(rules), managedOf(rollouts)...) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
				return false, err
			}
			if c := r.GetCondition(xpv2.TypeSynced); c.Status != corev1.ConditionTrue {
				return false, fmt.Errorf("%s: %s", r.GetName(), c.Message)
			}
		}
		return true, nil
	})
	figures["converged_after_heal_s"] = time.Since(healed).Seconds()
	t.Logf("converged %s after the partition healed", time.Since(healed).Round(time.Second))
	for i := 1; i < n; i++ {
		remoteCopyHolds(t, remote, fmt.Sprintf("conf-%d", i), "v1")
	}
	ds := &appsv1.DeploymentList{}
	if err := remote.Client.List(ctx, ds, client.InNamespace(home)); err != nil {
		t.Fatal(err)
	}
	if len(ds.Items) != m {
		t.Errorf("%d Deployments on the remote cluster, want the %d there before", len(ds.Items), m)
	}
	for _, d := range ds.Items {
		if d.Name != "roll-web-0" && d.Generation != 1 {
			t.Errorf("Deployment %s at generation %d: rolled without a change", d.Name, d.Generation)
		}
	}
}

// conditioned is a managed resource whose conditions the test reads.
type conditioned interface {
	client.Object
	GetCondition(xpv2.ConditionType) xpv2.Condition
}

// managedOf is objs as conditioned managed resources.
func managedOf[T conditioned](objs []T) []conditioned {
	out := make([]conditioned, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// remoteRollouts makes, on the remote cluster in home, m ConfigMaps
// roll-conf-i each read by Deployment roll-web-i, and ConfigRollouts roll-i
// of them acting there, and waits until each follows its Deployment.
func remoteRollouts(t *testing.T, remote *testenv.Env, home, cpc string, m int) []*workloadv1alpha1.ConfigRollout {
	t.Helper()
	ctx := context.Background()
	var out []*workloadv1alpha1.ConfigRollout
	for i := range m {
		conf, web := fmt.Sprintf("roll-conf-%d", i), fmt.Sprintf("roll-web-%d", i)
		for _, o := range []client.Object{configMap(home, conf, map[string]string{"k": "v1"}, nil), consumer(home, web, conf)} {
			if err := remote.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		r := &workloadv1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: fmt.Sprintf("roll-%d", i)}}
		r.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: cpc}
		r.Spec.ForProvider.ConfigMaps = []workloadv1alpha1.SourceRef{{Name: conf}}
		r.Spec.ForProvider.Workloads = []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: web}}
		env.Create(t, r)
		out = append(out, r)
	}
	testenv.EventuallyEvery(t, testenv.Scaled(50*time.Millisecond), testenv.Scaled(wait), "every remote ConfigRollout to follow its Deployment", func(ctx context.Context) (bool, error) {
		for _, r := range out {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
				return false, err
			}
			web := r.Spec.ForProvider.Workloads[0].Name
			if h := r.Status.AtProvider.Hash; h == "" || baseline(r, "Deployment", web) != h {
				return false, fmt.Errorf("%s does not follow %s yet", r.Name, web)
			}
		}
		return true, nil
	})
	return out
}

// proxiedKubeconfig is an admin kubeconfig of remote that reaches it through
// addr.
func proxiedKubeconfig(t *testing.T, remote *testenv.Env, addr string) []byte {
	t.Helper()
	raw, err := remote.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// remoteRules makes n CopyRules in namespace home, each copying ConfigMap
// conf-<i> of namespace home on the remote cluster into its namespace
// far-away.
func remoteRules(t *testing.T, remote *testenv.Env, home, cpc string, n int) []*copyv1alpha1.CopyRule {
	t.Helper()
	ctx := context.Background()
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: home}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "far-away"}}} {
		if err := remote.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	var rules []*copyv1alpha1.CopyRule
	for i := range n {
		name := fmt.Sprintf("conf-%d", i)
		if err := remote.Client.Create(ctx, configMap(home, name, map[string]string{"k": "v1"}, nil)); err != nil {
			t.Fatal(err)
		}
		r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: name}}
		r.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: cpc}
		r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{name}, Namespaces: []string{"far-away"}, ConflictPolicy: copyv1alpha1.ConflictSkip, MaxParallelWrites: 4}
		env.Create(t, r)
		rules = append(rules, r)
	}
	return rules
}

func remoteCopyHolds(t *testing.T, remote *testenv.Env, name, v string) {
	t.Helper()
	testenv.Eventually(t, wait, "the remote copy "+name+" to hold "+v, func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		err := remote.Client.Get(ctx, types.NamespacedName{Namespace: "far-away", Name: name}, cm)
		return err == nil && cm.Data["k"] == v, nil
	})
}

func patchData(t *testing.T, ns, name, v string) {
	t.Helper()
	p := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"data":{"k":%q}}`, v))
	if err := env.Client.Patch(context.Background(), configMap(ns, name, nil, nil), p); err != nil {
		t.Fatal(err)
	}
}
