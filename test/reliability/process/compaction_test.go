//go:build unix

package process

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/controller/copyrule"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

const (
	// compaction is how often the API server of TestProviderRelistsAfterCompaction
	// compacts etcd: a cut of seconds leaves the provider's watches behind
	// the oldest revision etcd holds.
	compaction = 5 * time.Second
	// relistChanged ConfigRollouts and CopyRules (the wave's first ones)
	// reference ConfigMaps that change while their provider is cut off;
	// relistQuiet of each kind reference a Secret that does not.
	relistChanged = 75
	relistQuiet   = 25
	// relisted bounds how long the provider takes to act on every change
	// once it goes on: its informers back off for a second or so before
	// they relist.
	relisted = 2 * time.Minute
	// relistSlack is how many reconciles of each kind beyond one per
	// changed resource the relist may cost: a status write that conflicts
	// is retried.
	relistSlack = 3
)

// TestProviderRelistsAfterCompaction converges 100 ConfigRollouts and 100
// CopyRules, then cuts their provider off: its process is frozen (SIGSTOP),
// its API server restarted under it so that every watch it holds is gone, the
// ConfigMaps of three quarters of the fleet change, and etcd compacts past
// every revision the provider saw. Let go on (SIGCONT), its watches cannot
// resume where they were ("too old resource version"), and it relists.
//
// Within relisted every change is acted on once: each changed rollout rolls
// its Deployment once (its generation moves by one) and counts one rollout,
// and each changed rule's copies hold the new data, the same objects (UIDs)
// as before. Nothing else in the fleet's namespaces is made, deleted or
// written. The relist costs the changes and nothing more: each changed
// resource is reconciled once and reads its own objects once; the quarter whose
// Secret did not change reads nothing (only it reads Secrets, so the
// provider's Secret requests are its cost); each informer relists once, and
// the provider holds the same watches after as before.
func TestProviderRelistsAfterCompaction(t *testing.T) {
	c := startClusterWith(t, testenv.Options{Restartable: true, CompactionInterval: compaction})
	f, q := newWaveFleet(fullWave.times(faultScale)), newQuietFleet(relistQuiet*faultScale)
	f.rollouts, f.rules, f.bundles = f.rollouts[:relistChanged*faultScale], f.rules[:relistChanged*faultScale], nil
	figures := map[string]float64{"changed": float64(len(f.rollouts) + len(f.rules)), "quiet": float64(len(q.rules) + len(q.follow.rollouts))}
	recordFault(t, figures)
	f.create(t, c)
	q.create(t, c)
	p := c.runProvider(t, "relist", "--poll=1h", fmt.Sprintf("--max-reconcile-rate=%d", crashRate*faultScale))
	f.record(c.waveConverge(t, f))
	eventuallyFleet(t, settle, "the quiet resources to converge", c.quietAsWanted(q))

	rules := managed.ControllerName(copyv1alpha1.CopyRuleGroupKind)
	rollouts := managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind)
	// Read before the cut: a frozen provider serves no metrics.
	sentBefore := p.idleAfter(t, rollouts, len(f.rollouts)+len(q.follow.rollouts))
	reconciledBefore := p.reconcileCounts(t, rules, rollouts)
	held, openedBefore := p.openWatches(t), p.watchesOpened(t)
	for _, res := range []string{"configmaps", "secrets", "deployments"} {
		if held[res] == 0 {
			t.Fatalf("the provider holds no watch of %s before the cut: %v", res, held)
		}
	}
	versions := c.objectVersions(t)

	c.cutOff(t, p, f)
	start := time.Now()
	signal(t, p, syscall.SIGCONT)
	asWanted := f.changed(t, c, q.follow.rolloutsFollow)
	eventuallyFleet(t, scaled(relisted), "every change acted on once", asWanted)
	figures["acted_s"] = time.Since(start).Seconds()
	t.Logf("every change acted on %s after the provider went on", time.Since(start).Round(time.Millisecond))

	sent := p.idleAfter(t, rollouts, int(reconciledBefore[rollouts])+len(f.rollouts))
	if ok, err := asWanted(context.Background()); !ok {
		t.Errorf("once the provider is idle: %v", err)
	}
	if d := versions.changedBut(c.objectVersions(t), relistWrites(f)); len(d) > 0 {
		t.Errorf("%d objects made, deleted or written that the change does not ask for, first: %v", len(d), d[:min(10, len(d))])
	}
	reconciled := p.reconcileCounts(t, rules, rollouts)
	cost := relistCost{
		rules:    reconciled[rules] - reconciledBefore[rules],
		rollouts: reconciled[rollouts] - reconciledBefore[rollouts],
		sent: func(resource, verb string) float64 {
			k := fmt.Sprintf("resource=%q,verb=%q", resource, verb)
			return sent[k] - sentBefore[k]
		},
	}
	cost.check(t, f)
	opened := p.watchesOpened(t)
	cost.opened = func(resource string) float64 { return opened[resource] - openedBefore[resource] }
	cost.terminated = c.terminatedWatchers(t)
	cost.checkRelisted(t, held, p.openWatches(t))
	figures["watches_terminated"] = 0
	for _, n := range cost.terminated {
		figures["watches_terminated"] += n
	}
	figures["copyrule_reconciles"], figures["configrollout_reconciles"] = cost.rules, cost.rollouts
	for _, res := range []string{"configmaps", "deployments", "secrets"} {
		figures[res+"_gets"] = cost.sent(res, "get")
		figures[res+"_lists"] = cost.sent(res, "list")
	}
}

// A quietFleet is ConfigRollouts and CopyRules whose inputs do not change
// across the cut: each reads a Secret of its own, in the wave's namespaces.
type quietFleet struct {
	// follow holds the rollouts, each following a Deployment of its own,
	// checked as the wave's are before their change (rolloutsFollow).
	follow *waveFleet
	// rules each copy a Secret into the next two namespaces.
	rules   []*copyv1alpha1.CopyRule
	secrets []*corev1.Secret
}

func newQuietFleet(n int) *quietFleet {
	q := &quietFleet{follow: &waveFleet{}}
	for j := range n {
		ns, v := waveNS(j), map[string]string{"v": "1"}
		conf := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("quiet-conf-%d", j)}, StringData: v}
		src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("quiet-copy-%d", j)}, StringData: v}
		web := deployment(ns, fmt.Sprintf("quiet-web-%d", j), 0)
		q.follow.rollouts = append(q.follow.rollouts, &waveRollout{web: web, ro: &workloadv1alpha1.ConfigRollout{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: web.Name},
			Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
				Secrets:   []workloadv1alpha1.SourceRef{{Name: conf.Name}},
				Workloads: []workloadv1alpha1.WorkloadRef{{Kind: configrollout.KindDeployment, Name: web.Name}},
			}},
		}})
		q.rules = append(q.rules, &copyv1alpha1.CopyRule{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: src.Name},
			Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
				Kind: copyv1alpha1.KindSecret, Names: []string{src.Name}, Namespaces: []string{waveNS(j + 1), waveNS(j + 2)},
			}},
		})
		q.secrets = append(q.secrets, conf, src)
	}
	return q
}

// create makes the Secrets and Deployments, then the managed resources, in
// the namespaces the wave's fleet made.
func (q *quietFleet) create(t *testing.T, c *cluster) {
	t.Helper()
	var refs, mrs []client.Object
	for _, s := range q.secrets {
		refs = append(refs, s)
	}
	for _, r := range q.follow.rollouts {
		refs = append(refs, r.web)
		mrs = append(mrs, r.ro)
	}
	for _, r := range q.rules {
		mrs = append(mrs, r)
	}
	createAll(t, c, refs)
	createAll(t, c, mrs)
}

// quietAsWanted reports whether every quiet rollout follows its Deployment
// without having rolled it, and every quiet rule is Ready with its two Secret
// copies in sync.
func (c *cluster) quietAsWanted(q *quietFleet) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		v, err := c.waveView(ctx)
		if err != nil {
			return false, err
		}
		copies := &corev1.SecretList{}
		if err := c.Client.List(ctx, copies, client.HasLabels{copyrule.LabelRuleUID}); err != nil {
			return false, err
		}
		perRule := map[string]int{}
		for _, s := range copies.Items {
			perRule[s.Labels[copyrule.LabelRuleUID]]++
		}
		o := offenders{}
		q.follow.rolloutsFollow(v, o)
		for _, r := range q.rules {
			rule := v.rules[client.ObjectKeyFromObject(r)]
			if rule == nil || !ready(rule) || rule.Status.AtProvider.CopiesInSync != 2 || perRule[string(r.UID)] != 2 {
				o.add("quiet rules not Ready with their two Secret copies", r.Name)
			}
		}
		return len(o) == 0, o.err()
	}
}

// cutOff cuts the provider off while the fleet's ConfigMaps change: it
// freezes the process, restarts the API server under it so that every watch
// it holds is gone, changes the ConfigMaps, and waits until etcd has
// compacted past every revision the provider saw. Its watches then cannot
// resume where they were: it learns of the change by relisting only.
func (c *cluster) cutOff(t *testing.T, p *provider, f *waveFleet) {
	t.Helper()
	ctx := context.Background()
	signal(t, p, syscall.SIGSTOP)
	// Frozen, the provider has seen no revision past the current one.
	l := &corev1.ConfigMapList{}
	if err := c.Client.List(ctx, l, client.InNamespace(providerNamespace)); err != nil {
		t.Fatal(err)
	}
	seen := l.ResourceVersion
	// One write past it before the restart: the restarted API server's watch
	// cache starts after it, so it holds no snapshot at seen and leaves a
	// read at exactly that revision to etcd (compactedPast). The provider
	// watches no Lease.
	mark := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: providerNamespace, Name: "relist-mark"}}
	if err := c.Client.Create(ctx, mark); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("API server restarted under the frozen provider in %s", time.Since(start).Round(time.Millisecond))
	f.change(t, c)
	start = time.Now()
	eventually(t, time.Minute, "etcd to compact past revision "+seen, c.compactedPast(seen))
	t.Logf("etcd compacted past revision %s %s after the change", seen, time.Since(start).Round(time.Millisecond))
}

// compactedPast reports whether etcd has compacted past revision rv: a list
// at exactly rv, which the API server's watch cache (started after rv)
// leaves to etcd, is refused as too old (410 Expired).
func (c *cluster) compactedPast(rv string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		err := c.Client.List(ctx, &corev1.ConfigMapList{}, &client.ListOptions{
			Namespace: providerNamespace,
			Raw:       &metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact},
		})
		switch {
		case kerrors.IsResourceExpired(err) || kerrors.IsGone(err):
			return true, nil
		case err != nil:
			return false, err
		}
		return false, errors.Errorf("etcd still holds revision %s", rv)
	}
}

// signal sends sig to the provider's process. SIGSTOP freezes it where it
// is, its connections open and unread, as a debugger or a stalled node would;
// SIGCONT lets it go on, with every timer that came due meanwhile.
func signal(t *testing.T, p *provider, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(p.Pid(), sig); err != nil {
		t.Fatalf("cannot send %v to provider %s: %v", sig, p.name, err)
	}
}

// reconcileCounts returns how many reconciles each controller has finished.
func (p *provider) reconcileCounts(t *testing.T, controllers ...string) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := make(map[string]float64, len(controllers))
	for _, name := range controllers {
		n, err := p.reconciles(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = n
	}
	return out
}

// openWatches returns the watch streams the provider holds open, by resource
// (clusterops_api_watches), leaving out the resources it holds none of.
func (p *provider) openWatches(t *testing.T) map[string]float64 {
	t.Helper()
	return p.byResource(t, "clusterops_api_watches")
}

// watchesOpened returns how many watch streams the provider has opened, by
// resource (clusterops_api_watches_opened_total): requests an API server
// refused are not among them.
func (p *provider) watchesOpened(t *testing.T) map[string]float64 {
	t.Helper()
	return p.byResource(t, "clusterops_api_watches_opened_total")
}

// byResource reads a metric whose one label is resource, leaving out zeros.
func (p *provider) byResource(t *testing.T, metric string) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := metric + `{resource="`
	out := map[string]float64{}
	err := p.scrape(ctx, func(l string) (bool, error) {
		rest, ok := strings.CutPrefix(l, name)
		if !ok {
			return true, nil
		}
		v, err := sampleValue(l)
		if res, _, _ := strings.Cut(rest, `"`); v > 0 {
			out[res] = v
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// objectVersions are the fleet's objects, by objectKey: what tells whether
// each was written (its resourceVersion) or made again (its UID).
type objectVersions map[string]objectVersion

type objectVersion struct {
	uid types.UID
	rv  string
}

func objectKey(kind string, o metav1.Object) string {
	return kind + " " + o.GetNamespace() + "/" + o.GetName()
}

// objectVersions lists the ConfigMaps, Secrets, Deployments, CopyRules and
// ConfigRollouts of the fleet's namespaces. Other namespaces are left out:
// the API server writes its own ConfigMaps in kube-system as it starts.
func (c *cluster) objectVersions(t *testing.T) objectVersions {
	t.Helper()
	lists := map[string]client.ObjectList{
		"ConfigMap": &corev1.ConfigMapList{}, "Secret": &corev1.SecretList{}, "Deployment": &appsv1.DeploymentList{},
		"CopyRule": &copyv1alpha1.CopyRuleList{}, "ConfigRollout": &workloadv1alpha1.ConfigRolloutList{},
	}
	out := objectVersions{}
	for kind, l := range lists {
		if err := c.Client.List(context.Background(), l); err != nil {
			t.Fatal(err)
		}
		err := apimeta.EachListItem(l, func(o kruntime.Object) error {
			m, err := apimeta.Accessor(o)
			if err == nil && strings.HasPrefix(m.GetNamespace(), "team-wave-") {
				out[objectKey(kind, m)] = objectVersion{uid: m.GetUID(), rv: m.GetResourceVersion()}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// changedBut returns how now differs from v but in the objects of may:
// objects made, deleted, made again (another UID) or written (another
// resourceVersion). Those of may may be written, never made again.
func (v objectVersions) changedBut(now objectVersions, may map[string]bool) []string {
	var out []string
	for k, was := range v {
		is, ok := now[k]
		switch {
		case !ok:
			out = append(out, k+" deleted")
		case is.uid != was.uid:
			out = append(out, k+" made again")
		case is.rv != was.rv && !may[k]:
			out = append(out, k+" written")
		}
	}
	for k := range now {
		if _, ok := v[k]; !ok {
			out = append(out, k+" made")
		}
	}
	slices.Sort(out)
	return out
}

// relistWrites are the objects that the change of f's ConfigMaps and the
// provider's answer to it write, by objectKey: the ConfigMaps, the rules'
// copies, the rolled Deployments, and the managed resources whose status
// records them.
func relistWrites(f *waveFleet) map[string]bool {
	m := map[string]bool{}
	for _, r := range f.rollouts {
		m[objectKey("ConfigMap", r.conf)], m[objectKey("Deployment", r.web)], m[objectKey("ConfigRollout", r.ro)] = true, true, true
	}
	for _, r := range f.rules {
		m[objectKey("ConfigMap", r.src)], m[objectKey("CopyRule", r.rule)] = true, true
		for ns := range r.targets {
			m["ConfigMap "+ns+"/"+r.src.Name] = true
		}
	}
	return m
}

// relistCost is what the provider did from when it went on until it was
// idle.
type relistCost struct {
	// rules and rollouts are the CopyRule and ConfigRollout reconciles.
	rules, rollouts float64
	// sent is how many requests of a resource with a verb it sent
	// (clusterops_api_requests_total).
	sent func(resource, verb string) float64
	// opened is how many watch streams of a resource it opened
	// (clusterops_api_watches_opened_total).
	opened func(resource string) float64
	// terminated is how many of its watches of a resource the API server
	// closed because they did not take their events in time.
	terminated map[string]float64
}

// check asserts that the relist cost the changes of f and nothing more.
func (c relistCost) check(t *testing.T, f *waveFleet) {
	t.Helper()
	r, o := float64(len(f.rules)), float64(len(f.rollouts))
	t.Logf("after the cut: %v CopyRule reconciles for %v changed, %v ConfigRollout reconciles for %v changed; "+
		"ConfigMaps: %v gets, %v updates; Deployments: %v gets, %v patches; Secrets: %v gets",
		c.rules, r, c.rollouts, o, c.sent("configmaps", "get"), c.sent("configmaps", "update"),
		c.sent("deployments", "get"), c.sent("deployments", "patch"), c.sent("secrets", "get"))
	// A relist lists every object again, most at the version the provider
	// last saw them at: such an event tells no owner anything, so each
	// changed rule is reconciled once for its source's change, a quiet one
	// not at all.
	if c.rules > r+relistSlack {
		t.Errorf("CopyRules were reconciled %v times for %v changed ones, want at most %v: once each", c.rules, r, r+relistSlack)
	}
	// A roll is an apply, whose event ownwrite tells apart by the apply's
	// answer: one that comes first is held until the answer (Await), so
	// each changed rollout is reconciled once, as loaded as the machine is.
	if c.rollouts > o+relistSlack {
		t.Errorf("ConfigRollouts were reconciled %v times for %v changed ones, want at most %v: once each", c.rollouts, o, o+relistSlack)
	}
	// Each reconcile reads what it acts on, once: a rule its source and the
	// two copies it writes whole, a rollout its ConfigMap and its Deployment;
	// a quiet resource's reconcile would read its Secret.
	extraRules, extraRollouts := max(c.rules-r, 0), max(c.rollouts-o, 0)
	for _, rd := range []struct {
		resource string
		most     float64
	}{
		{"configmaps", 3*(r+extraRules) + o + extraRollouts},
		{"deployments", o + extraRollouts},
		{"secrets", 0},
	} {
		if n := c.sent(rd.resource, "get"); n > rd.most {
			t.Errorf("the provider read %s %v times, want at most %v", rd.resource, n, rd.most)
		}
	}
	// Each changed rule's two copies updated once, each changed rollout's
	// Deployment applied once, nothing else written.
	writes := map[string]float64{"configmaps update": 2 * r, "deployments patch": o}
	for _, res := range []string{"configmaps", "deployments", "secrets"} {
		for _, verb := range []string{"create", "update", "patch", "delete"} {
			if n, want := c.sent(res, verb), writes[res+" "+verb]; n != want {
				t.Errorf("the provider sent %v %s requests of %s, want %v", n, verb, res, want)
			}
		}
	}
}

// checkRelisted asserts that each informer relisted once. Every watch held
// before the cut came back: each resource's watch streams opened are at least
// its watches (none resumes on a connection the restart closed) and at most
// three each (a resume refused as too old, the relist as a watch-list, and a
// watch after a plain list, should the API server refuse the watch-list), its
// lists at most one each. Watch requests the restarted API server refused
// while it started (429) open no stream and cost no relist, so they are
// logged, not bounded.
//
// Beyond that, each watch the API server closed as unresponsive (its watch
// cache gives a watcher a budget of about 100 ms to take a full buffer of
// events, and a 2-core machine running the API server, etcd and a provider
// catching up with a wave misses it) may open one stream more: a resume from
// the last version the informer saw, or, where it was closed during its
// initial events, the watch-list again. The provider holds the same watches
// after as before.
func (c relistCost) checkRelisted(t *testing.T, before, after map[string]float64) {
	t.Helper()
	for _, res := range slices.Sorted(maps.Keys(before)) {
		n, o, w, l, x := before[res], c.opened(res), c.sent(res, "watch"), c.sent(res, "list"), c.terminated[res]
		t.Logf("%s: %v watches held, %v opened (%v watch requests), %v closed as unresponsive, and %v list requests after the cut", res, n, o, w, x, l)
		if o < n || o > 3*n+x || l > n {
			t.Errorf("%s: %v watch streams opened and %v list requests for %v watches (%v closed as unresponsive), want %v to %v opened and at most %v lists", res, o, l, n, x, n, 3*n+x, n)
		}
	}
	if !maps.Equal(before, after) {
		t.Errorf("the provider holds these watches by resource after the relist: %v, want those before the cut: %v", after, before)
	}
}

// terminatedWatchers returns how many watches the API server closed because
// their client did not take their events in time, by resource (its watch
// cache's apiserver_terminated_watchers_total, counted since it started).
func (c *cluster) terminatedWatchers(t *testing.T) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("cannot read the API server's metrics: %v", err)
	}
	out := map[string]float64{}
	for l := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(l, "apiserver_terminated_watchers_total{")
		if !ok {
			continue
		}
		_, res, _ := strings.Cut(rest, `resource="`)
		res, _, _ = strings.Cut(res, `"`)
		v, err := sampleValue(l)
		if err != nil {
			t.Fatal(err)
		}
		out[res] += v
	}
	return out
}
