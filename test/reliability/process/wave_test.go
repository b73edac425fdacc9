package process

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/appbundle"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/controller/copyrule"
)

// A waveSize is how big a wave's fleet is, its namespaces all within the
// default ClusterProviderConfig's reach (team-*).
type waveSize struct {
	namespaces int
	// rollouts ConfigRollouts, each with its own ConfigMap conf-<j> and
	// Deployment web-<j>.
	rollouts int
	// rules CopyRules, each copying its own ConfigMap copy-<j> into the
	// next two namespaces.
	rules int
	// bundles AppBundles, which reference no ConfigMap: the wave and the
	// restarts must leave their objects as they are.
	bundles int
}

// fullWave is the fleet of TestFleetWaveSurvivesKills: 1,000 managed
// resources in ten namespaces.
var fullWave = waveSize{namespaces: 10, rollouts: 500, rules: 400, bundles: 100}

// waveKills is how many times the provider is killed during the wave.
const waveKills = 3

// waveRate is the --max-reconcile-rate of the provider that sees the wave.
// A source's change is urgent: its reconciles skip the rate limiter, and only
// the controller's workers (as many as the rate) bound them. At 4, four
// rollouts and four rules at a time take on the wave's 1,300 writes, against
// the test's 64 patches at a time of the 900 ConfigMaps: the change is made
// before the provider is far into it, and the kills land while most of the
// wave is left (at crashRate, 40 workers would share the API server with the
// test's patches and could be most of the way through by the time the test
// first looks). The restarted processes hear no change, only their initial
// lists, which the rate limiter spreads: they are the crash test's (killer,
// crashProvider).
const waveRate = 4

// waveProvider runs the provider that sees the wave: crashProvider's
// process (one replica, no leader election, a poll an hour away) with
// fewer workers.
func (c *cluster) waveProvider(t *testing.T) *provider {
	t.Helper()
	return c.runProvider(t, "wave", "--poll=1h", fmt.Sprintf("--max-reconcile-rate=%d", waveRate*faultScale))
}

// TestFleetWaveSurvivesKills converges 1,000 managed resources of three kinds
// , changes every ConfigMap they reference at once, and SIGKILLs
// the provider three times while it works through the change, starting it
// again at once each time. Once settled: every Deployment rolled exactly once
// (its generation moved by one, never two: a kill between a roll and the
// status write that records it must not roll it again), carries its
// rollout's current hash, and its rollout counts one rollout; every copy
// holds its source's new data, and no copy is anywhere its rule does not
// name; every AppBundle is Ready with the Deployment and claim it made
// before the wave, neither made again nor rewritten. It holds again once the
// last provider has reconciled every rollout and gone quiet.
//
// envtest runs no Deployment controller: a Deployment is its spec, whose
// generation moves only when the spec does, and the test marks the
// AppBundles' Deployments available as that controller would.
func TestFleetWaveSurvivesKills(t *testing.T) {
	c := startCluster(t, false)
	f := newWaveFleet(fullWave.times(faultScale))
	figures := map[string]float64{"resources": float64(len(f.managed()))}
	recordFault(t, figures)
	start := time.Now()
	f.create(t, c)
	k := &killer{t: t, c: c, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)), p: c.waveProvider(t)}
	f.record(c.waveConverge(t, f))
	figures["converge_s"] = time.Since(start).Seconds()
	t.Logf("%d ConfigRollouts, %d CopyRules (%d copies), %d AppBundles created and converged in %s",
		len(f.rollouts), len(f.rules), 2*len(f.rules), len(f.bundles), time.Since(start).Round(time.Millisecond))

	f.change(t, c)
	start = time.Now()
	k.phase("wave", waveKills, f.work(), func(ctx context.Context) (int, error) { return c.waveDone(ctx, f) })
	figures["kills"], figures["kills_in_flight"], figures["writes"] = float64(k.kills), float64(k.inFlight), float64(f.work())
	// killer.phase leaves a kill point out when an earlier process already
	// did the work past it: it takes two points close together near the
	// end of the work, so the test allows one.
	if k.inFlight+k.skipped != waveKills || k.inFlight < waveKills-1 {
		t.Errorf("the provider was killed %d times with work in flight and %d kill points were left out, want %d in all and at least %d in flight",
			k.inFlight, k.skipped, waveKills, waveKills-1)
	}

	asWanted := f.changed(t, c, f.bundlesAsWanted)
	restarted := time.Now()
	eventuallyFleet(t, settle, "every resource of the fleet as the change wants it", asWanted)
	figures["settled_after_last_restart_s"], figures["wave_s"] = time.Since(restarted).Seconds(), time.Since(start).Seconds()
	t.Logf("settled %s after the last restart", time.Since(restarted).Round(time.Millisecond))
	// Nothing comes after: the last provider has reconciled every rollout
	// and sends nothing more, and the fleet is still as wanted.
	k.p.idleAfter(t, managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind), len(f.rollouts))
	if ok, err := asWanted(context.Background()); !ok {
		t.Errorf("once the provider is idle: %v", err)
	}
}

// waveRestarts are the shares of the wave's work done at which
// TestFleetWaveSurvivesAPIServerRestarts restarts the API server.
var waveRestarts = []float64{0.2, 0.5}

// TestFleetWaveSurvivesAPIServerRestarts converges the wave's fleet, changes
// every ConfigMap it references at once, and restarts the API server (same
// port, certificates and etcd) twice while the same provider process works
// through the change: once a fifth of the work is done and once half of it is.
// Once settled, the fleet is as after TestFleetWaveSurvivesKills: every
// Deployment rolled exactly once, every copy current and nowhere else, every
// AppBundle's objects neither made again nor rewritten; and the provider is
// the process that started, idle once it reconciled every rollout.
func TestFleetWaveSurvivesAPIServerRestarts(t *testing.T) {
	c := startCluster(t, true)
	f := newWaveFleet(fullWave.times(faultScale))
	figures := map[string]float64{"resources": float64(len(f.managed())), "writes": float64(f.work())}
	recordFault(t, figures)
	f.create(t, c)
	p := c.waveProvider(t)
	f.record(c.waveConverge(t, f))

	f.change(t, c)
	start := time.Now()
	for i, share := range waveRestarts {
		point := int(share * float64(f.work()))
		eventuallyFleet(t, settle, fmt.Sprintf("%d of %d writes of the wave done", point, f.work()), func(ctx context.Context) (bool, error) {
			done, err := c.waveDone(ctx, f)
			return done >= point, err
		})
		restart := time.Now()
		if err := c.RestartAPIServer(); err != nil {
			t.Fatal(err)
		}
		figures[fmt.Sprintf("restart_%d_s", i+1)] = time.Since(restart).Seconds()
		var done int
		eventuallyFleet(t, settle, "the work done once the API server is back", func(ctx context.Context) (bool, error) {
			var err error
			done, err = c.waveDone(ctx, f)
			return err == nil, err
		})
		figures[fmt.Sprintf("restart_%d_writes_done", i+1)] = float64(done)
		t.Logf("API server restarted in %s with %d of %d writes of the wave done", time.Since(restart).Round(time.Millisecond), done, f.work())
	}
	asWanted := f.changed(t, c, f.bundlesAsWanted)
	eventuallyFleet(t, settle, "every resource of the fleet as the change wants it", asWanted)
	figures["wave_s"] = time.Since(start).Seconds()
	t.Logf("settled %s after the change", time.Since(start).Round(time.Millisecond))
	p.idleAfter(t, managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind), len(f.rollouts))
	if ok, err := asWanted(context.Background()); !ok {
		t.Errorf("once the provider is idle: %v", err)
	}
	if !p.Running() {
		t.Errorf("the provider exited: %v", p.ExitErr())
	}
}

// changed is the check that the fleet is as the change of every source
// wants it: every rollout rolled once, every copy current, and what also
// holds (more, on the same view). A rollout rolled twice fails the test at
// once: no later state undoes it.
func (f *waveFleet) changed(t *testing.T, c *cluster, also func(*waveView, offenders)) func(context.Context) (bool, error) {
	t.Helper()
	return func(ctx context.Context) (bool, error) {
		v, err := c.waveView(ctx)
		if err != nil {
			return false, err
		}
		o := offenders{}
		if twice := f.rolloutsRolled(v, o); len(twice) > 0 {
			t.Fatalf("%d Deployments rolled more than once by one change, first: %v", len(twice), twice[:min(5, len(twice))])
		}
		f.rulesCopy(v, o)
		also(v, o)
		return len(o) == 0, o.err()
	}
}

// A waveFleet is the test's managed resources and what they act on, with
// what the test recorded of them once they converged.
type waveFleet struct {
	size     waveSize
	rollouts []*waveRollout
	rules    []*waveRule
	bundles  []*waveBundle
}

type waveRollout struct {
	conf *corev1.ConfigMap
	web  *appsv1.Deployment
	ro   *workloadv1alpha1.ConfigRollout
	// generation is web's, rollouts and hash the rollout's count and hash,
	// once converged.
	generation, rollouts int64
	hash                 string
}

type waveRule struct {
	src     *corev1.ConfigMap
	rule    *copyv1alpha1.CopyRule
	targets map[string]bool
}

type waveBundle struct {
	ab *workloadv1alpha1.AppBundle
	// deployment and claim are the objects it made, once converged.
	deployment *appsv1.Deployment
	claim      *corev1.PersistentVolumeClaim
}

// ns is the namespace of the j-th object of a kind: the kinds spread over
// every namespace.
func (s waveSize) ns(j int) string { return fmt.Sprintf("team-wave-%d", j%s.namespaces) }

// waveNS is the namespace of the j-th object of a kind in the full wave.
func waveNS(j int) string { return fullWave.ns(j) }

func newWaveFleet(size waveSize) *waveFleet {
	f := &waveFleet{size: size}
	for j := range size.rollouts {
		ns, name := size.ns(j), fmt.Sprintf("web-%d", j)
		conf := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("conf-%d", j)}, Data: map[string]string{"v": "1"}}
		// No replicas: nothing runs, a roll is the template's change. Its
		// pods read the ConfigMap, as users' do.
		web := deployment(ns, name, 0)
		web.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: conf.Name}}}}
		ro := &workloadv1alpha1.ConfigRollout{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
				ConfigMaps: []workloadv1alpha1.SourceRef{{Name: conf.Name}},
				Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: configrollout.KindDeployment, Name: name}},
			}},
		}
		f.rollouts = append(f.rollouts, &waveRollout{conf: conf, web: web, ro: ro})
	}
	for j := range size.rules {
		ns, name := size.ns(j), fmt.Sprintf("copy-%d", j)
		targets := []string{size.ns(j + 1), size.ns(j + 2)}
		f.rules = append(f.rules, &waveRule{
			src: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"v": "1"}},
			rule: &copyv1alpha1.CopyRule{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
					Kind: copyv1alpha1.KindConfigMap, Names: []string{name}, Namespaces: targets,
				}},
			},
			targets: map[string]bool{targets[0]: true, targets[1]: true},
		})
	}
	for j := range size.bundles {
		f.bundles = append(f.bundles, &waveBundle{ab: &workloadv1alpha1.AppBundle{
			ObjectMeta: metav1.ObjectMeta{Namespace: size.ns(j), Name: fmt.Sprintf("app-%d", j)},
			Spec:       workloadv1alpha1.AppBundleSpec{ForProvider: workloadv1alpha1.AppBundleParameters{Image: "nginx:1.27"}},
		}})
	}
	return f
}

// create makes the namespaces, the ConfigMaps and Deployments the fleet
// references, then its managed resources, 16 at a time (createAll).
func (f *waveFleet) create(t *testing.T, c *cluster) {
	t.Helper()
	var nss, refs, mrs []client.Object
	for i := range f.size.namespaces {
		nss = append(nss, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.size.ns(i)}})
	}
	for _, r := range f.rollouts {
		refs = append(refs, r.conf, r.web)
		mrs = append(mrs, r.ro)
	}
	for _, r := range f.rules {
		refs = append(refs, r.src)
		mrs = append(mrs, r.rule)
	}
	for _, b := range f.bundles {
		mrs = append(mrs, b.ab)
	}
	createAll(t, c, nss)
	createAll(t, c, refs)
	createAll(t, c, mrs)
}

// waveConverge waits until every rollout follows its Deployment without
// rolling it, every rule's copies hold the sources' data, and every AppBundle
// is Ready with its Deployment and claim; it returns the fleet as it then is.
func (c *cluster) waveConverge(t *testing.T, f *waveFleet) *waveView {
	t.Helper()
	var last *waveView
	eventuallyFleet(t, settle, "the fleet to converge", func(ctx context.Context) (bool, error) {
		v, err := c.waveView(ctx)
		if err != nil {
			return false, err
		}
		if err := c.bundlesAvailable(ctx, f, v); err != nil {
			return false, err
		}
		o := offenders{}
		f.rolloutsFollow(v, o)
		f.rulesCopy(v, o)
		f.bundlesAsWanted(v, o)
		last = v
		return len(o) == 0, o.err()
	})
	return last
}

// record keeps what the checks after the wave compare with: each
// Deployment's generation and each rollout's count and hash (the wave rolls
// each once), and the objects each AppBundle made (the wave leaves them).
func (f *waveFleet) record(v *waveView) {
	for _, r := range f.rollouts {
		s := v.rollouts[client.ObjectKeyFromObject(r.ro)].Status.AtProvider
		r.generation, r.rollouts, r.hash = v.deployments[client.ObjectKeyFromObject(r.web)].Generation, s.Rollouts, s.Hash
	}
	for _, b := range f.bundles {
		b.deployment, b.claim = v.deployments[client.ObjectKeyFromObject(b.ab)], v.claims[claimKey(b.ab)]
	}
}

// change writes new data into every ConfigMap the fleet references, 64 at a
// time, the rollouts' and the rules' in turn: one change of the whole fleet,
// as one commit to a GitOps repository makes it. The test's copies of the
// ConfigMaps hold the new data after.
func (f *waveFleet) change(t *testing.T, c *cluster) {
	t.Helper()
	var cms []*corev1.ConfigMap
	for j := range max(len(f.rollouts), len(f.rules)) {
		if j < len(f.rollouts) {
			cms = append(cms, f.rollouts[j].conf)
		}
		if j < len(f.rules) {
			cms = append(cms, f.rules[j].src)
		}
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"data":{"v":"2"}}`))
	errs := make([]error, len(cms))
	start := time.Now()
	workqueue.ParallelizeUntil(context.Background(), 64, len(cms), func(i int) {
		errs[i] = c.Client.Patch(context.Background(), cms[i], patch)
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("changed %d ConfigMaps in %s", len(cms), time.Since(start).Round(time.Millisecond))
}

// work is how many writes the change asks for: a roll of each Deployment, an
// update of each copy.
func (f *waveFleet) work() int { return len(f.rollouts) + 2*len(f.rules) }

// waveDone counts the work of the change done: Deployments whose generation
// moved, and copies holding the new data.
func (c *cluster) waveDone(ctx context.Context, f *waveFleet) (int, error) {
	ds, cms := &appsv1.DeploymentList{}, &corev1.ConfigMapList{}
	if err := c.Client.List(ctx, ds); err != nil {
		return 0, err
	}
	if err := c.Client.List(ctx, cms, client.HasLabels{copyrule.LabelRuleUID}); err != nil {
		return 0, err
	}
	deployments, done := index(ds.Items), 0
	for _, r := range f.rollouts {
		if d := deployments[client.ObjectKeyFromObject(r.web)]; d != nil && d.Generation > r.generation {
			done++
		}
	}
	for _, cm := range cms.Items {
		if cm.Data["v"] == "2" {
			done++
		}
	}
	return done, nil
}

// A waveView is the cluster as one list of each kind shows it, by namespace
// and name; the copies by the UID of the rule whose label they carry.
type waveView struct {
	deployments map[types.NamespacedName]*appsv1.Deployment
	claims      map[types.NamespacedName]*corev1.PersistentVolumeClaim
	rollouts    map[types.NamespacedName]*workloadv1alpha1.ConfigRollout
	rules       map[types.NamespacedName]*copyv1alpha1.CopyRule
	bundles     map[types.NamespacedName]*workloadv1alpha1.AppBundle
	copies      map[string]copySet
}

// waveView lists the fleet: six lists a poll, where reading each object
// would take 2,500 requests.
func (c *cluster) waveView(ctx context.Context) (*waveView, error) {
	ds, pvcs := &appsv1.DeploymentList{}, &corev1.PersistentVolumeClaimList{}
	ros, rules, abs := &workloadv1alpha1.ConfigRolloutList{}, &copyv1alpha1.CopyRuleList{}, &workloadv1alpha1.AppBundleList{}
	for _, l := range []client.ObjectList{ds, pvcs, ros, rules, abs} {
		if err := c.Client.List(ctx, l); err != nil {
			return nil, err
		}
	}
	cms := &corev1.ConfigMapList{}
	if err := c.Client.List(ctx, cms, client.HasLabels{copyrule.LabelRuleUID}); err != nil {
		return nil, err
	}
	v := &waveView{
		deployments: index(ds.Items), claims: index(pvcs.Items),
		rollouts: index(ros.Items), rules: index(rules.Items), bundles: index(abs.Items),
		copies: map[string]copySet{},
	}
	for _, cm := range cms.Items {
		uid := cm.Labels[copyrule.LabelRuleUID]
		s, ok := v.copies[uid]
		if !ok {
			s = copySet{byNamespace: map[string][]corev1.ConfigMap{}}
		}
		s.byNamespace[cm.Namespace] = append(s.byNamespace[cm.Namespace], cm)
		v.copies[uid] = s
	}
	return v, nil
}

// index maps a list's items by namespace and name.
func index[T any, P interface {
	*T
	client.Object
}](items []T) map[types.NamespacedName]P {
	m := make(map[types.NamespacedName]P, len(items))
	for i := range items {
		p := P(&items[i])
		m[client.ObjectKeyFromObject(p)] = p
	}
	return m
}

func claimKey(ab *workloadv1alpha1.AppBundle) types.NamespacedName {
	return types.NamespacedName{Namespace: ab.Namespace, Name: appbundle.PVCName(ab)}
}

func ready(mg interface {
	GetCondition(xpv2.ConditionType) xpv2.Condition
}) bool {
	return mg.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue
}

// rolloutsFollow adds to o the rollouts that do not yet follow their
// Deployment as it is, without having rolled it: Ready, counting no
// rollout, the current hash the Deployment's baseline, nothing in its pod
// template.
func (f *waveFleet) rolloutsFollow(v *waveView, o offenders) {
	for _, r := range f.rollouts {
		ro, d := v.rollouts[client.ObjectKeyFromObject(r.ro)], v.deployments[client.ObjectKeyFromObject(r.web)]
		if ro == nil || d == nil {
			o.add("rollouts or Deployments missing", r.ro.Name)
			continue
		}
		s := ro.Status.AtProvider
		switch {
		case !ready(ro) || s.Hash == "":
			o.add("rollouts not Ready", r.ro.Name)
		case s.Rollouts != 0 || len(s.Workloads) != 1 || !s.Workloads[0].Baseline || s.Workloads[0].Hash != s.Hash:
			o.add("rollouts not following their Deployment as its baseline", fmt.Sprintf("%s: %+v", r.ro.Name, s.Workloads))
		case d.Spec.Template.Annotations[configrollout.AnnotationHash] != "":
			o.add("Deployments rolled before the change", d.Name)
		}
	}
}

// rolloutsRolled adds to o the rollouts that have not yet rolled their
// Deployment once to the current hash and counted that rollout, and returns
// the Deployments rolled more than once.
func (f *waveFleet) rolloutsRolled(v *waveView, o offenders) (twice []string) {
	for _, r := range f.rollouts {
		ro, d := v.rollouts[client.ObjectKeyFromObject(r.ro)], v.deployments[client.ObjectKeyFromObject(r.web)]
		if ro == nil || d == nil {
			o.add("rollouts or Deployments missing", r.ro.Name)
			continue
		}
		s := ro.Status.AtProvider
		switch moved := d.Generation - r.generation; {
		case moved > 1:
			twice = append(twice, fmt.Sprintf("%s: generation %d, was %d", d.Name, d.Generation, r.generation))
		case moved < 1:
			o.add("Deployments not rolled", d.Name)
		case s.Hash == r.hash || d.Spec.Template.Annotations[configrollout.AnnotationHash] != s.Hash:
			o.add("Deployments without their rollout's current hash", fmt.Sprintf("%s: %q, status %q, was %q", d.Name, d.Spec.Template.Annotations[configrollout.AnnotationHash], s.Hash, r.hash))
		case d.Annotations[configrollout.AnnotationLock] != ro.Name:
			o.add("Deployments without their rollout's lock", d.Name)
		case s.Rollouts != r.rollouts+1:
			o.add("rollouts not counting one rollout more", fmt.Sprintf("%s: %d, was %d", ro.Name, s.Rollouts, r.rollouts))
		case len(s.Workloads) != 1 || s.Workloads[0].Baseline || s.Workloads[0].Hash != s.Hash:
			o.add("rollouts whose status has the Deployment run another hash", fmt.Sprintf("%s: %+v", ro.Name, s.Workloads))
		case !ready(ro):
			o.add("rollouts not Ready", ro.Name)
		}
	}
	return twice
}

// rulesCopy adds to o the rules whose copies are not exactly one in each of
// their targets with their source's data as the test last wrote it (a copy
// anywhere else included), or whose status does not count them in sync; and
// copies whose label names no rule.
func (f *waveFleet) rulesCopy(v *waveView, o offenders) {
	uids := map[string]bool{}
	for _, r := range f.rules {
		uid := string(r.rule.UID)
		uids[uid] = true
		if d := v.copies[uid].exactly(r.targets, r.src); d != "" {
			o.add("rules whose copies differ", r.rule.Name+": "+d)
			continue
		}
		rule := v.rules[client.ObjectKeyFromObject(r.rule)]
		if rule == nil || !ready(rule) || rule.Status.AtProvider.CopiesInSync != int32(len(r.targets)) {
			o.add("rules not Ready with their copies in sync", r.rule.Name)
		}
	}
	for uid, s := range v.copies {
		if uids[uid] {
			continue
		}
		for ns, cms := range s.byNamespace {
			o.add("copies of no rule", fmt.Sprintf("%s/%s (%d)", ns, cms[0].Name, len(cms)))
		}
	}
}

// bundlesAsWanted adds to o the AppBundles that are not Ready with their
// Deployment (the image, the claim mounted) and their claim; once recorded,
// also those whose Deployment or claim was made again or whose Deployment's
// spec was written since.
func (f *waveFleet) bundlesAsWanted(v *waveView, o offenders) {
	for _, b := range f.bundles {
		ab, d, pvc := v.bundles[client.ObjectKeyFromObject(b.ab)], v.deployments[client.ObjectKeyFromObject(b.ab)], v.claims[claimKey(b.ab)]
		switch {
		case ab == nil || !ready(ab):
			o.add("AppBundles not Ready", b.ab.Name)
		case d == nil || d.Labels[appbundle.LabelOwner] != ab.Name || !runs(d, ab):
			o.add("AppBundles without their Deployment as wanted", ab.Name)
		case pvc == nil || pvc.Labels[appbundle.LabelOwner] != ab.Name:
			o.add("AppBundles without their claim", ab.Name)
		case b.deployment != nil && (d.UID != b.deployment.UID || d.Generation != b.deployment.Generation):
			o.add("AppBundles whose Deployment was made again or rewritten", fmt.Sprintf("%s: generation %d, was %d", ab.Name, d.Generation, b.deployment.Generation))
		case b.claim != nil && pvc.UID != b.claim.UID:
			o.add("AppBundles whose claim was made again", ab.Name)
		}
	}
}

// runs reports whether d runs ab's image with ab's claim mounted.
func runs(d *appsv1.Deployment, ab *workloadv1alpha1.AppBundle) bool {
	p := d.Spec.Template.Spec
	return len(p.Containers) == 1 && p.Containers[0].Image == ab.Spec.ForProvider.Image &&
		slices.ContainsFunc(p.Volumes, func(v corev1.Volume) bool {
			return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == appbundle.PVCName(ab)
		})
}

// bundlesAvailable writes, for each AppBundle's Deployment that is not
// available, what its controller would once its replica is: envtest runs
// none, and an AppBundle is Ready when its Deployment is available.
func (c *cluster) bundlesAvailable(ctx context.Context, f *waveFleet, v *waveView) error {
	var todo []*appsv1.Deployment
	for _, b := range f.bundles {
		d := v.deployments[client.ObjectKeyFromObject(b.ab)]
		if d == nil || available(d) {
			continue
		}
		todo = append(todo, d.DeepCopy())
	}
	errs := make([]error, len(todo))
	workqueue.ParallelizeUntil(ctx, 16, len(todo), func(i int) {
		d := todo[i]
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}}}
		errs[i] = c.Client.Status().Update(ctx, d)
	})
	return errors.Join(errs...)
}

// available is whether d's controller, as bundlesAvailable stands for it,
// has seen its spec and found it available.
func available(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration == d.Generation &&
		slices.ContainsFunc(d.Status.Conditions, func(c appsv1.DeploymentCondition) bool {
			return c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue
		})
}

// offenders are what differs from what the test wants, by what differs, each
// with the objects it concerns.
type offenders map[string][]string

func (o offenders) add(what, name string) { o[what] = append(o[what], name) }

// err counts each difference and names its first five objects; nil when
// nothing differs.
func (o offenders) err() error {
	if len(o) == 0 {
		return nil
	}
	parts := make([]string, 0, len(o))
	for _, what := range slices.Sorted(maps.Keys(o)) {
		names := o[what]
		parts = append(parts, fmt.Sprintf("%d %s, first: %v", len(names), what, names[:min(5, len(names))]))
	}
	return errors.New(strings.Join(parts, "; "))
}
