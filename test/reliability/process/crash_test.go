package process

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/copyrule"
)

const (
	fanout     = 1000
	sourceNS   = "team-crash-src"
	sourceName = "shared"
)

// settle is how long a provider gets to finish its work once it is left
// running.
var settle = scaled(3 * time.Minute)

// crashRate is the crash provider's --max-reconcile-rate. Its clients may
// send 5 requests per second per unit (a burst of 10 per unit): at 20, a
// process writes its first 200 copies at once and 100 a second after that,
// so each phase of 790 to 980 copies takes seconds, and the test sees the
// copies come and kills while they do.
const crashRate = 20

// crashProvider runs the provider the crash test kills: one replica without
// leader election (a restarted process starts at once), and a poll interval
// far longer than the test, so recovery comes from the restart itself.
func (c *cluster) crashProvider(t *testing.T, n int) *provider {
	t.Helper()
	return c.runProvider(t, fmt.Sprintf("crash-%02d", n), "--poll=1h", fmt.Sprintf("--max-reconcile-rate=%d", crashRate*faultScale))
}

// A copySet is what the test sees of a rule's copies.
type copySet struct {
	// byNamespace are the rule's copies, by namespace.
	byNamespace map[string][]corev1.ConfigMap
	// current counts copies with the source's current data.
	current int
}

func (c *cluster) copies(ctx context.Context, uid string, data map[string]string) (copySet, error) {
	l := &corev1.ConfigMapList{}
	if err := c.Client.List(ctx, l, client.MatchingLabels{copyrule.LabelRuleUID: uid}); err != nil {
		return copySet{}, err
	}
	s := copySet{byNamespace: map[string][]corev1.ConfigMap{}}
	for _, cm := range l.Items {
		s.byNamespace[cm.Namespace] = append(s.byNamespace[cm.Namespace], cm)
		if maps.Equal(cm.Data, data) {
			s.current++
		}
	}
	return s, nil
}

// exactly reports how the copies differ from exactly one copy of the source,
// with its data and labels, in each of want and nowhere else; "" when they
// do not.
func (s copySet) exactly(want map[string]bool, src *corev1.ConfigMap) string {
	var diffs []string
	for ns := range want {
		switch cms := s.byNamespace[ns]; {
		case len(cms) == 0:
			diffs = append(diffs, "missing in "+ns)
		case len(cms) > 1:
			diffs = append(diffs, fmt.Sprintf("%d copies in %s", len(cms), ns))
		case cms[0].Name != src.Name || !maps.Equal(cms[0].Data, src.Data) || cms[0].Labels["copy"] != src.Labels["copy"]:
			diffs = append(diffs, fmt.Sprintf("copy %s/%s differs from the source", ns, cms[0].Name))
		}
	}
	for ns, cms := range s.byNamespace {
		if !want[ns] {
			diffs = append(diffs, fmt.Sprintf("%d copies left in %s", len(cms), ns))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	sort.Strings(diffs)
	return fmt.Sprintf("%d differences, first: %v", len(diffs), diffs[:min(5, len(diffs))])
}

// TestCopyRuleSurvivesKills fans a CopyRule out to 1,000 namespaces, changes
// its source, and prunes most of its copies, while its provider is killed
// with SIGKILL 20 times at random points of the work and restarted at once.
// Every kill lands while work is in flight: the killed process has done some
// of the phase's work, and some is left for the next one (counted once the
// process is gone). Once settled: every intended copy exists once with the source's content,
// no copy is left where it is no longer wanted, and objects the rule did not
// create (same-named ConfigMaps in its way, bystanders, the source) are not
// written at all.
func TestCopyRuleSurvivesKills(t *testing.T) {
	c := startCluster(t, false)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))

	// 1,000 target namespaces; every fifth stays a target after the prune.
	targets, kept := map[string]bool{}, map[string]bool{}
	nss := []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: sourceNS}}, {ObjectMeta: metav1.ObjectMeta{Name: "team-crash-outside"}}}
	for i := range fanout {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("team-crash-%04d", i), Labels: map[string]string{"fanout": "crash"}}}
		if i%5 == 0 {
			n.Labels["keep"] = "true"
		}
		nss = append(nss, n)
	}
	// Objects the rule must never write: same-named ConfigMaps in its way
	// (conflictPolicy Skip), unrelated ones among its copies and outside its
	// targets, and one in the source namespace that it does not select.
	var untouched []*corev1.ConfigMap
	for i := range fanout {
		ns := fmt.Sprintf("team-crash-%04d", i)
		switch {
		case i%100 == 0 || i%100 == 7:
			untouched = append(untouched, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sourceName}, Data: map[string]string{"owner": "someone else"}})
		case i%50 == 3:
			untouched = append(untouched, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bystander"}, Data: map[string]string{"owner": "someone else"}})
			targets[ns], kept[ns] = true, i%5 == 0
		default:
			targets[ns], kept[ns] = true, i%5 == 0
		}
	}
	untouched = append(untouched,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-crash-outside", Name: sourceName}, Data: map[string]string{"owner": "someone else"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: sourceNS, Name: "not-selected", Labels: map[string]string{"copy": "no"}}, Data: map[string]string{"k": "v"}})
	maps.DeleteFunc(kept, func(_ string, k bool) bool { return !k })
	createAll(t, c, nss)
	createAll(t, c, untouched)

	src := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: sourceNS, Name: sourceName, Labels: map[string]string{"copy": "yes"}},
		Data:       map[string]string{"endpoint": "https://registry.example.com", "version": "1"},
	}
	if err := c.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	rule := &copyv1alpha1.CopyRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: sourceNS, Name: "fanout"},
		Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
			Kind:              copyv1alpha1.KindConfigMap,
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"copy": "yes"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"fanout": "crash"}},
			ConflictPolicy:    copyv1alpha1.ConflictSkip,
			// Fewer parallel writes spread the work over more of the kills.
			MaxParallelWrites: 4,
		}},
	}
	if err := c.Client.Create(ctx, rule); err != nil {
		t.Fatal(err)
	}
	uid := string(rule.GetUID())
	t.Logf("%d target namespaces, %d after the prune; %d objects the rule must not write", len(targets), len(kept), len(untouched))

	k := &killer{t: t, c: c, rng: rng}
	k.p = c.crashProvider(t, 0)

	// Fan out: kills while the copies are created.
	k.phase("fan-out", 8, len(targets), func(ctx context.Context) (int, error) {
		s, err := c.copies(ctx, uid, src.Data)
		return s.current, err
	})
	c.settled(t, uid, targets, src)

	// The source changes: kills while the copies are updated.
	c.Update(t, src, func() { src.Data["version"] = "2" })
	k.phase("update", 4, len(targets), func(ctx context.Context) (int, error) {
		s, err := c.copies(ctx, uid, src.Data)
		return s.current, err
	})
	c.settled(t, uid, targets, src)

	// Most namespaces stop being targets: kills while the copies are pruned.
	c.Update(t, rule, func() { rule.Spec.ForProvider.NamespaceSelector.MatchLabels["keep"] = "true" })
	k.phase("prune", 8, len(targets)-len(kept), func(ctx context.Context) (int, error) {
		s, err := c.copies(ctx, uid, src.Data)
		return len(targets) - len(s.byNamespace), err
	})
	c.settled(t, uid, kept, src)
	if k.inFlight+k.skipped != 20 || k.inFlight < 10 {
		t.Errorf("the provider was killed %d times with work in flight and %d kill points were left out, want 20 in all and at least 10 in flight", k.inFlight, k.skipped)
	}

	for _, o := range untouched {
		got := &corev1.ConfigMap{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Errorf("cannot get %s/%s, which the rule must not touch: %v", o.Namespace, o.Name, err)
			continue
		}
		if got.ResourceVersion != o.ResourceVersion {
			t.Errorf("%s/%s, which the rule did not create, was written: resourceVersion %s, was %s; labels %v", o.Namespace, o.Name, got.ResourceVersion, o.ResourceVersion, got.Labels)
		}
	}
	// The source was written only by the test.
	got := &corev1.ConfigMap{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(src), got); err != nil || got.ResourceVersion != src.ResourceVersion {
		t.Errorf("the source was written by someone else than the test: resourceVersion %s, want %s (%v)", got.ResourceVersion, src.ResourceVersion, err)
	}
}

// createAll creates objects, 16 at a time.
func createAll[T client.Object](t *testing.T, c *cluster, objs []T) {
	t.Helper()
	errs := make([]error, len(objs))
	workqueue.ParallelizeUntil(context.Background(), 16, len(objs), func(i int) {
		errs[i] = c.Client.Create(context.Background(), objs[i])
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// settled waits until the rule's copies are exactly one in each of want with
// the source's content, and its status says so.
func (c *cluster) settled(t *testing.T, uid string, want map[string]bool, src *corev1.ConfigMap) {
	t.Helper()
	start := time.Now()
	eventually(t, settle, fmt.Sprintf("exactly one copy of the source in each of %d namespaces", len(want)), func(ctx context.Context) (bool, error) {
		s, err := c.copies(ctx, uid, src.Data)
		if err != nil {
			return false, err
		}
		if d := s.exactly(want, src); d != "" {
			return false, errors.New(d)
		}
		return true, nil
	})
	rule := &copyv1alpha1.CopyRule{}
	eventually(t, settle, "the rule's status to count the copies in sync", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: sourceNS, Name: "fanout"}, rule); err != nil {
			return false, err
		}
		if o := rule.Status.AtProvider; o.CopiesInSync != int32(len(want)) {
			return false, errors.Errorf("status says %d copies in sync, %d skipped, problems %d+%d", o.CopiesInSync, o.Skipped, len(o.Problems), o.MoreProblems)
		}
		return true, nil
	})
	t.Logf("settled in %s: %d copies", time.Since(start).Round(time.Millisecond), len(want))
}

// A killer kills the provider at random points of its work and starts it
// again at once.
type killer struct {
	t   *testing.T
	c   *cluster
	rng *rand.Rand
	p   *provider
	// kills counts the kills, inFlight those that landed while the phase's
	// work was in flight, skipped the kill points a phase left out because
	// an earlier process had already done the work before them.
	kills, inFlight, skipped int
}

// tail is the share of a phase's work no kill point falls in: kills land
// while work is left. At crashRate the last 30% of 980 copies (294) take a
// process that has not used its burst over a second, and one that has about
// three, while the test sees progress every 50ms plus a list of the copies:
// the time between seeing a point reached and the kill (at most 100ms of
// jitter and a poll) is well inside it, even on a loaded machine.
const tail = 0.3

// phase kills the provider n times while work units get done: each time
// progress (units done so far) first reaches one of n random points in the
// first 70% of the work, once the running process has done some of the
// work itself (several points can fall between two observations). Each
// kill must land while work is in flight: once the process is gone, the
// work done is more than when that process was first seen (it did some)
// and less than all of it (some is left for the next process).
func (k *killer) phase(name string, n, work int, progress func(ctx context.Context) (int, error)) {
	k.t.Helper()
	at := make([]int, n)
	room := max(int(float64(work)*(1-tail)), 1)
	for i := range at {
		at[i] = 1 + k.rng.IntN(room)
	}
	slices.Sort(at)
	base := -1
	for i, point := range at {
		if base >= room {
			// The last process was killed past every point left (they can
			// fall between two observations): a process killed now might
			// finish the little work left before the kill lands.
			k.skipped += len(at) - i
			k.t.Logf("%s: %d kill points left out, %d of %d done already", name, len(at)-i, base, work)
			break
		}
		var done int
		eventuallyFleet(k.t, settle, fmt.Sprintf("%s: %d of %d done", name, point, work), func(ctx context.Context) (bool, error) {
			var err error
			done, err = progress(ctx)
			if base < 0 && err == nil {
				base = done
			}
			return (done >= point && done > base) || done >= work || !k.p.Running(), err
		})
		if !k.p.Running() {
			k.t.Fatalf("provider %s exited by itself: %v", k.p.name, k.p.ExitErr())
		}
		// The kill point is random; waiting out the time until it comes is
		// not an assertion.
		time.Sleep(time.Duration(k.rng.IntN(100)) * time.Millisecond)
		k.p.Kill()
		k.kills++
		// What the killed process left: counted with it gone, so no write of
		// its can land after.
		var left int
		eventuallyFleet(k.t, settle, name+": the work done when the provider was killed", func(ctx context.Context) (bool, error) {
			var err error
			left, err = progress(ctx)
			return err == nil, err
		})
		if left > base && left < work {
			k.inFlight++
		} else {
			k.t.Errorf("%s: provider %s was killed with %d of %d done, %d when it was first seen: want it killed while work was in flight", name, k.p.name, left, work, base)
		}
		k.t.Logf("%s: killed provider %s after %d of %d (%d when first seen)", name, k.p.name, left, work, base)
		k.p = k.c.crashProvider(k.t, k.kills)
		base = left
	}
}
