// Package sharded runs sharded replicas of the provider against an API server
// with the ShardedListAndWatch feature gate on: each replica asks the API
// server, by shardSelector, for the workloads of its shards' namespaces only.
package sharded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	apisharding "k8s.io/apiserver/pkg/sharding"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/provider"
	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

var env *testenv.Env

const (
	shards     = 4
	namespaces = 12
	wait       = 90 * time.Second
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	e, err := testenv.StartWith(testenv.Options{ProviderCRDs: true, ShardedListAndWatch: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer e.Stop() //nolint:errcheck // Best effort at exit.
	env = e
	return m.Run()
}

// selectors records, per replica, the shardSelector of each watch of
// Deployments' metadata its manager holds open: one per part of its share.
type selectors struct {
	mu   sync.Mutex
	open map[string]map[string]int
}

func newSelectors() *selectors { return &selectors{open: map[string]map[string]int{}} }

func (s *selectors) wrap(id string) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTrip(func(r *http.Request) (*http.Response, error) {
			// ConfigRollout's watch asks for metadata; AppBundle's own
			// cache of the Deployments it made asks for whole objects.
			if r.Method != http.MethodGet || r.URL.Path != "/apis/apps/v1/deployments" || r.URL.Query().Get("watch") != "true" ||
				!strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata") {
				return next.RoundTrip(r)
			}
			sel := r.URL.Query().Get("shardSelector")
			res, err := next.RoundTrip(r)
			if err != nil || res.StatusCode != http.StatusOK {
				return res, err
			}
			s.add(id, sel, 1)
			res.Body = &closed{ReadCloser: res.Body, close: func() { s.add(id, sel, -1) }}
			return res, nil
		})
	}
}

func (s *selectors) add(id, sel string, by int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[id] == nil {
		s.open[id] = map[string]int{}
	}
	s.open[id][sel] += by
	if s.open[id][sel] <= 0 {
		delete(s.open[id], sel)
	}
}

// current are the selectors of replica id's open watches.
func (s *selectors) current(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for sel := range s.open[id] {
		out = append(out, sel)
	}
	return out
}

// closed is a response body that tells when it is closed.
type closed struct {
	io.ReadCloser
	once  sync.Once
	close func()
}

func (c *closed) Close() error {
	c.once.Do(c.close)
	return c.ReadCloser.Close()
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func selects(t *testing.T, selectors []string, namespace string) bool {
	t.Helper()
	for _, s := range selectors {
		if selectsOne(t, s, namespace) {
			return true
		}
	}
	return false
}

func selectsOne(t *testing.T, selector, namespace string) bool {
	t.Helper()
	if selector == "" {
		return true
	}
	s, err := apisharding.Parse(selector)
	if err != nil {
		t.Fatalf("selector %q: %v", selector, err)
	}
	ok, err := s.Matches(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace}})
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func deployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}},
					Volumes: []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}}}},
				},
			},
		},
	}
}

// follows is whether ConfigRollout web in ns follows Deployment name.
func follows(ctx context.Context, ns, name string) (bool, error) {
	r := &workloadv1alpha1.ConfigRollout{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, r); err != nil {
		return false, err
	}
	if r.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue {
		return false, nil
	}
	for _, w := range r.Status.AtProvider.Workloads {
		if w.Kind == "Deployment" && w.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// TestReplicasWatchTheirShareOfWorkloads: two replicas share 4 shards of 12
// namespaces, placed by ranges of the API server's own namespace hash. Each
// watches only the workloads of its shards' namespaces, by shardSelector;
// together they watch every namespace, and a Deployment made later in any
// namespace is followed by its ConfigRollout through that watch alone (the
// poll is an hour). A ConfigRollout pinned by hand to the other replica's
// shard is followed there: that replica adds a watch of the namespace.
func TestReplicasWatchTheirShareOfWorkloads(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := env.Client
	for _, ns := range []string{testenv.ProviderNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	if _, err := testenv.ApplyFile(ctx, c, testenv.RepoRoot()+"/examples/providerconfig/clusterproviderconfig.yaml"); err != nil {
		t.Fatal(err)
	}
	// The tenants' namespaces exist before the replicas start: the first to
	// start cuts the ranges where they are.
	var nss []string
	for i := range namespaces {
		ns := fmt.Sprintf("tenant-%d", i)
		nss = append(nss, ns)
		for _, o := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"a": "1"}},
			deployment(ns, "web"),
		} {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}

	sel := startReplicas(ctx, t, shards, "a", "b")

	cs := kubernetes.NewForConfigOrDie(env.Config)
	place, err := shard.Place(ctx, cs, testenv.ProviderNamespace, provider.LeaderElectionID, shards)
	if err != nil {
		t.Fatal(err)
	}
	if !place.Served || place.Ranges == nil {
		t.Fatalf("with the feature gate on, the fleet has no ranges: %+v", place)
	}
	count := make([]int, shards)
	for _, ns := range nss {
		count[place.Of(ns)]++
	}
	// The ranges are cut over every namespace, the system's too.
	for i, n := range count {
		if n < namespaces/shards-1 || n > namespaces/shards+1 {
			t.Errorf("shard %d holds %d of the tenants' namespaces, want %d±1: %v", i, n, namespaces/shards, count)
		}
	}

	// Both replicas hold two shards each and watch their namespaces'
	// workloads, before any rollout exists.
	testenv.Eventually(t, wait, "a and b to hold two shards each and watch their share", func(ctx context.Context) (bool, error) {
		held := map[string]int{}
		for i := range shards {
			l, err := cs.CoordinationV1().Leases(testenv.ProviderNamespace).Get(ctx, fmt.Sprintf("%s-shard-%d", provider.LeaderElectionID, i), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			held[ptr.Deref(l.Spec.HolderIdentity, "")]++
		}
		if held["a"] != 2 || held["b"] != 2 {
			return false, fmt.Errorf("shards held: %v", held)
		}
		sa, sb := sel.current("a"), sel.current("b")
		if len(sa) != 2 || len(sb) != 2 || slices.Contains(sa, "") || slices.Contains(sb, "") {
			return false, fmt.Errorf("selectors: a %q, b %q", sa, sb)
		}
		for _, ns := range nss {
			if selects(t, sa, ns) == selects(t, sb, ns) {
				return false, fmt.Errorf("namespace %s selected by both or neither: a %q, b %q", ns, sa, sb)
			}
		}
		return true, nil
	})

	for _, ns := range nss {
		cr := &workloadv1alpha1.ConfigRollout{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
				ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
				Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			}},
		}
		if err := c.Create(ctx, cr); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range nss {
		testenv.Eventually(t, wait, "ConfigRollout "+ns+"/web to follow web", func(ctx context.Context) (bool, error) {
			return follows(ctx, ns, "web")
		})
		cr := &workloadv1alpha1.ConfigRollout{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, cr); err != nil {
			t.Fatal(err)
		}
		if got, want := cr.GetLabels()[shard.Label], shard.Name(place.Of(ns)); got != want {
			t.Errorf("ConfigRollout %s/web is labelled shard %q, want %q: the range its namespace's hash lies in", ns, got, want)
		}
	}

	// Each replica's watch selects the namespaces of its shards; the two
	// together select every tenant's namespace once.
	sa, sb := sel.current("a"), sel.current("b")
	if slices.Contains(sa, "") || slices.Contains(sb, "") {
		t.Fatalf("a replica watches Deployments without a shardSelector: a %q, b %q", sa, sb)
	}
	for _, ns := range nss {
		if selects(t, sa, ns) == selects(t, sb, ns) {
			t.Errorf("namespace %s: selected by a: %t, by b: %t; want exactly one", ns, selects(t, sa, ns), selects(t, sb, ns))
		}
	}
	for _, one := range sa {
		l, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{ShardSelector: one})
		if err != nil {
			t.Fatal(err)
		}
		if l.ShardInfo == nil || l.ShardInfo.Selector != one {
			t.Errorf("the API server did not filter a's list by its selector: %+v", l.ShardInfo)
		}
		for _, d := range l.Items {
			if !selectsOne(t, one, d.Namespace) {
				t.Errorf("a's filtered list holds Deployment %s/%s", d.Namespace, d.Name)
			}
		}
	}

	// A Deployment made now is seen through the filtered watches alone.
	for _, ns := range nss {
		if err := c.Create(ctx, deployment(ns, "web-2")); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range nss {
		testenv.Eventually(t, wait, "ConfigRollout "+ns+"/web to follow web-2", func(ctx context.Context) (bool, error) {
			return follows(ctx, ns, "web-2")
		})
	}

	// Pin a's first namespace's rollout to one of b's shards.
	var pinned string
	for _, ns := range nss {
		if selects(t, sa, ns) {
			pinned = ns
			break
		}
	}
	bShard := -1
	for i := range shards {
		for _, ns := range nss {
			if place.Of(ns) == i && selects(t, sb, ns) {
				bShard = i
			}
		}
	}
	if pinned == "" || bShard < 0 {
		t.Fatalf("no namespace of a (%q) or shard of b (%d)", pinned, bShard)
	}
	cr := &workloadv1alpha1.ConfigRollout{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: pinned, Name: "web"}, cr); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cr.DeepCopy())
	cr.Labels[shard.Label] = shard.Name(bShard)
	if err := c.Patch(ctx, cr, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "b to watch the workloads of pinned namespace "+pinned, func(context.Context) (bool, error) {
		return selects(t, sel.current("b"), pinned), nil
	})
	if err := c.Create(ctx, deployment(pinned, "web-3")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "pinned ConfigRollout "+pinned+"/web to follow web-3", func(ctx context.Context) (bool, error) {
		return follows(ctx, pinned, "web-3")
	})
}

// TestReplicaKeepsItsShareWhenItLosesTheLead: a replica that cannot renew
// the leading Lease (here another holder took it) stops its singletons and
// campaigns again, and acts on its shards all the while: it neither exits
// nor hands them over.
func TestReplicaKeepsItsShareWhenItLosesTheLead(t *testing.T) {
	keepsItsShare(t, "solo", nil)
}

// TestReplicaKeepsItsShareWhileTheLeadCannotBeBuilt: as above, while the
// API server refuses the reads that building the lead manager makes first
// (the shards' placement, in the provider's namespace), so that building it
// again fails for a while: the replica retries it, acting on its shards all
// the while, and leads again once the API server answers.
func TestReplicaKeepsItsShareWhileTheLeadCannotBeBuilt(t *testing.T) {
	keepsItsShare(t, "patient", &outage{})
}

// An outage refuses the replica's managers' reads of the ConfigMaps of the
// provider's namespace (where the shards' placement is read) while on, and
// counts them.
type outage struct {
	namespace string
	on        atomic.Bool
	refused   atomic.Int64
}

func (o *outage) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTrip(func(r *http.Request) (*http.Response, error) {
		if o.on.Load() && strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/"+o.namespace+"/configmaps") {
			o.refused.Add(1)
			return nil, errors.New("refused by the test's outage")
		}
		return rt.RoundTrip(r)
	})
}

// keepsItsShare runs replica id alone, takes its lead away, and checks that
// it acts on every shard until it leads again; with an outage, the API
// server refuses those reads from then on for a few seconds.
func keepsItsShare(t *testing.T, id string, down *outage) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A provider namespace of its own: its Leases are its alone, whatever
	// replicas of other tests still leave.
	ns := env.Namespace(t, "keeps-"+id, nil)
	o := testenv.ProviderOptions(env.Config, time.Hour, 50)
	o.Namespace = ns
	// Its controllers' names are checked, as in a process of its own: the
	// lead manager built again must not fail on its own names.
	o.Shards, o.Identity = shards, id
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	reg := prometheus.NewRegistry()
	o.MetricsRegistry = reg
	if down != nil {
		// The names were checked by the test before, in this process.
		down.namespace = ns
		o.WrapManager, o.SkipNameValidation = down.wrap, true
	}
	p, err := provider.New(o)
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- p.Start(ctx) }()

	cs := kubernetes.NewForConfigOrDie(env.Config)
	leases := cs.CoordinationV1().Leases(ns)
	leader := func(ctx context.Context) (string, error) {
		l, err := leases.Get(ctx, provider.LeaderElectionID, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return ptr.Deref(l.Spec.HolderIdentity, ""), nil
	}
	// The only replica leads: the Lease names its lead manager (controller-
	// runtime's identity, not the replica's). Its share has been built: it
	// acts on every shard, as it has for a few seconds.
	var since time.Time
	testenv.Eventually(t, wait, id+" to lead and act on every shard", func(ctx context.Context) (bool, error) {
		holder, err := leader(ctx)
		if testenv.ShardsActing(reg) != shards {
			since = time.Time{}
			return false, err
		}
		if since.IsZero() {
			since = time.Now()
		}
		return holder != "" && holder != "thief" && time.Since(since) > 3*time.Second, err
	})

	// Another holder takes the leading Lease: the replica cannot renew it.
	// The replica renews it meanwhile: the take is tried again on a
	// conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(ctx, provider.LeaderElectionID, metav1.GetOptions{})
		if err != nil {
			return err
		}
		l.Spec.HolderIdentity = ptr.To("thief")
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	outageEnds := time.Now().Add(20 * time.Second)
	if down != nil {
		down.on.Store(true)
	}
	deadline := time.Now().Add(wait)
	for {
		if n := testenv.ShardsActing(reg); n != shards {
			t.Fatalf("%s acts on %v shards after it lost the lead, want all %d", id, n, shards)
		}
		select {
		case err := <-stopped:
			t.Fatalf("%s stopped when it lost the lead: %v", id, err)
		default:
		}
		// Healed once building the lead again failed twice (a retry), or
		// after a while at most.
		if down != nil && down.on.Load() && (down.refused.Load() >= 2 || time.Now().After(outageEnds)) {
			t.Logf("the API server refused %d requests of %s's managers", down.refused.Load(), id)
			down.on.Store(false)
		}
		holder, err := leader(ctx)
		if err == nil && holder != "thief" && holder != "" && (down == nil || !down.on.Load()) {
			t.Logf("%s leads again as %s", id, holder)
			if down != nil && down.refused.Load() == 0 {
				t.Errorf("%s built its lead manager again without meeting the outage", id)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not lead again within %s: the Lease is %q's", id, wait, holder)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
