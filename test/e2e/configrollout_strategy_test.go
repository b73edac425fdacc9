//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// The annotations a ConfigRollout writes on a workload when it rolls it: the
// hash in its pod template, and the lock (the rollout it follows) on its
// metadata.
const (
	configHash = "workload.clusterops.io/config-hash"
	configLock = "workload.clusterops.io/config-rollout"
)

// staggerFleet creates n Deployments named <prefix>1..n that read ConfigMap
// conf, waits until they are available, and returns their references in
// order.
func staggerFleet(t *testing.T, c client.Client, ns, prefix string, n int, broken map[int]bool) []workloadv1alpha1.WorkloadRef {
	t.Helper()
	var refs []workloadv1alpha1.WorkloadRef
	for i := 1; i <= n; i++ {
		d := fakeDeployment(ns, fmt.Sprintf("%s%d", prefix, i), 1, nil)
		d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}}}
		createAll(t, c, d)
		available(t, c, d)
		if broken[i] {
			// From its next rollout on, no node takes its pods: the old pod
			// keeps running, the new one stays Pending, so the Deployment
			// never becomes available again.
			if err := c.Patch(context.Background(), d, client.RawPatch(types.StrategicMergePatchType, []byte(`{"spec":{"template":{"spec":{"nodeSelector":{"clusterops.io/no-such-node":"true"}}}}}`))); err != nil {
				t.Fatal(err)
			}
		}
		refs = append(refs, workloadv1alpha1.WorkloadRef{Kind: "Deployment", Name: d.Name})
	}
	return refs
}

// rolloutWatch follows every event of the namespace's Deployments from a
// list on, so that it sees each state they pass through (one watch orders
// the events of every Deployment), and records the most Deployments ever
// rolled and not available at once, and the order in which they first came
// to carry a hash other than the one before the change. Lists at intervals
// would miss a wave that kwok makes available within one.
type rolloutWatch struct {
	mu          sync.Mutex
	maxInFlight int
	order       []string
	seen        map[string]bool
	stop        context.CancelFunc
	done        chan struct{}
}

// watchRollout starts a rolloutWatch of the Deployments of ns; prev is the
// rollout's hash before the change, which a Deployment not yet rolled
// carries (or none, before the first roll).
func watchRollout(t *testing.T, cfg *rest.Config, ns, prev string) *rolloutWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &rolloutWatch{seen: map[string]bool{}, stop: cancel, done: make(chan struct{})}
	deployments := kubernetes.NewForConfigOrDie(cfg).AppsV1().Deployments(ns)
	l, err := deployments.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]*appsv1.Deployment{}
	for i := range l.Items {
		state[l.Items[i].Name] = &l.Items[i]
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, l.ResourceVersion, &toolscache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return deployments.Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.note(state, prev)
	go func() {
		defer close(w.done)
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				d, isDeployment := ev.Object.(*appsv1.Deployment)
				if !isDeployment {
					continue
				}
				if ev.Type == watch.Deleted {
					delete(state, d.Name)
				} else {
					state[d.Name] = d
				}
				w.note(state, prev)
			}
		}
	}()
	return w
}

// note records the rollout as the Deployments in state show it.
func (w *rolloutWatch) note(state map[string]*appsv1.Deployment, prev string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := slices.Sorted(maps.Keys(state))
	n := 0
	for _, name := range names {
		d := state[name]
		if h := d.Spec.Template.Annotations[configHash]; h == "" || h == prev {
			continue
		}
		if !w.seen[d.Name] {
			w.seen[d.Name] = true
			w.order = append(w.order, d.Name)
		}
		if !configrollout.RolledOut(d) {
			n++
		}
	}
	w.maxInFlight = max(w.maxInFlight, n)
}

func (w *rolloutWatch) halt() (int, []string) {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxInFlight, w.order
}

// progressIs waits until the ConfigRollout's progress is in phase with the
// given counts.
func progressIs(t *testing.T, c client.Client, cr *workloadv1alpha1.ConfigRollout, timeout time.Duration, phase string, rolled, pending int64) {
	t.Helper()
	testenv.Eventually(t, timeout, fmt.Sprintf("phase %s with %d rolled and %d pending", phase, rolled, pending), func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(cr), cr)
		p := cr.Status.AtProvider.Progress
		return p != nil && p.Phase == phase && p.Rolled == rolled && p.Pending == pending, err
	})
}

// TestConfigRolloutStaggeredOnLocalControlPlane: six running Deployments,
// which the rollout starts to follow without rolling any; then, for each of
// two changes of the ConfigMap, all six roll, two at a time, each wave only
// once the Deployment controller reports the previous one available on kwok's
// nodes, in order, never more than two at once, each Deployment exactly once.
// The first change rolls them from the baseline recorded in the rollout's
// status, the second from the hash the first wrote into their pod templates.
func TestConfigRolloutStaggeredOnLocalControlPlane(t *testing.T) {
	env := provider(t)
	ns := env.Namespace(t, "e2e-stagger", nil)
	createAll(t, env.Client, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "v1"}})
	refs := staggerFleet(t, env.Client, ns, "web", 6, nil)
	gens := generations(t, env.Client, ns)
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "waves", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
			Workloads:  refs,
			Strategy:   &workloadv1alpha1.RolloutStrategy{MaxConcurrent: 2, ProgressDeadline: &metav1.Duration{Duration: 2 * time.Minute}},
		}},
	}
	createAll(t, env.Client, cr)
	followed(t, env.Client, cr, gens)
	if p := cr.Status.AtProvider.Progress; p == nil || p.Phase != workloadv1alpha1.PhaseComplete || p.Pending != 0 || len(p.InFlight) != 0 {
		t.Errorf("progress %+v once the rollout follows the Deployments, want Complete with nothing pending or in flight", p)
	}
	// For each of two changes of the ConfigMap.
	for i, v := range []string{"v2", "v3"} {
		w := watchRollout(t, env.Config, ns, cr.Status.AtProvider.Hash)
		rollouts := cr.Status.AtProvider.Rollouts
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}}
		env.Update(t, cm, func() { cm.Data["k"] = v })
		testenv.Eventually(t, 3*time.Minute, fmt.Sprintf("rollout %d to complete", i+1), func(ctx context.Context) (bool, error) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
				return false, err
			}
			p := cr.Status.AtProvider.Progress
			if p != nil && p.Phase == workloadv1alpha1.PhaseComplete && p.Rolled == 6 && cr.Status.AtProvider.Rollouts == rollouts+6 &&
				cr.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue {
				return true, nil
			}
			// Where it stands, for the timeout's message.
			st, _ := json.Marshal(cr.Status)
			return false, fmt.Errorf("want rollouts %d; status %s", rollouts+6, st)
		})
		most, order := w.halt()
		t.Logf("rollout %d: at most %d Deployments rolling at once, rolled in the order %v", i+1, most, order)
		if most > 2 {
			t.Errorf("rollout %d: %d Deployments rolling at once, want at most 2", i+1, most)
		}
		if most < 1 {
			t.Errorf("rollout %d: no Deployment seen rolling", i+1)
		}
		// Spec order: each Deployment rolls no earlier than the one listed
		// before it (two rolled in one reconcile show up together, listed by
		// name, which is spec order here).
		if want := []string{"web1", "web2", "web3", "web4", "web5", "web6"}; fmt.Sprint(order) != fmt.Sprint(want) {
			t.Errorf("rollout %d: rolled in the order %v, want %v", i+1, order, want)
		}
		var last time.Time
		for _, wl := range cr.Status.AtProvider.Workloads {
			if wl.LastRollout == nil || wl.LastRollout.Time.Before(last) {
				t.Errorf("rollout %d: %s rolled at %v, before the one listed ahead of it (%s)", i+1, wl.Name, wl.LastRollout, last)
			}
			if wl.LastRollout != nil {
				last = wl.LastRollout.Time
			}
		}
		// Each rolled once per change: its controller saw one new template.
		runCurrent(t, env.Client, cr)
		for name, gen := range gens {
			d := &appsv1.Deployment{}
			if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
				t.Fatal(err)
			}
			if want := gen + int64(i+1); d.Generation != want {
				t.Errorf("rollout %d: Deployment %s at generation %d, want %d: one roll per change", i+1, name, d.Generation, want)
			}
		}
	}
}

// TestConfigRolloutHaltsOnLocalControlPlane: the rollout follows four
// Deployments without rolling them; a change of the ConfigMap rolls them one
// at a time, and the second Deployment's new pods fit no node, so it never
// becomes available: the rollout halts with a condition and an event after
// progressDeadline, and the rest are not rolled (status keeps their
// baselines);
// once its pods fit, the rollout resumes and completes, each rolled once.
func TestConfigRolloutHaltsOnLocalControlPlane(t *testing.T) {
	env := provider(t)
	ctx := context.Background()
	ns := env.Namespace(t, "e2e-halt", nil)
	createAll(t, env.Client, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "v1"}})
	refs := staggerFleet(t, env.Client, ns, "app", 4, map[int]bool{2: true})
	gens := generations(t, env.Client, ns)
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "careful", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
			Workloads:  refs,
			Strategy:   &workloadv1alpha1.RolloutStrategy{MaxConcurrent: 1, ProgressDeadline: &metav1.Duration{Duration: 15 * time.Second}},
		}},
	}
	createAll(t, env.Client, cr)
	// It follows the four, app2 mid-rollout included, rolling none; the
	// change of the ConfigMap rolls them one at a time.
	followed(t, env.Client, cr, gens)
	baseline := cr.Status.AtProvider.Hash
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}}
	env.Update(t, cm, func() { cm.Data["k"] = "v2" })
	progressIs(t, env.Client, cr, 2*time.Minute, workloadv1alpha1.PhaseHalted, 1, 2)
	c := cr.GetCondition(workloadv1alpha1.TypeProgressing)
	if c.Status != corev1.ConditionFalse || c.Reason != workloadv1alpha1.ReasonProgressDeadlineExceeded {
		t.Errorf("Progressing = %s/%s, want False/ProgressDeadlineExceeded", c.Status, c.Reason)
	}
	if p := cr.Status.AtProvider.Progress; len(p.InFlight) != 1 || p.InFlight[0].Name != "app2" {
		t.Errorf("in flight %+v, want app2", p.InFlight)
	}
	testenv.Eventually(t, time.Minute, "a RolloutHalted event naming app2", func(ctx context.Context) (bool, error) {
		l := &corev1.EventList{}
		err := env.Client.List(ctx, l, client.InNamespace(ns))
		for _, e := range l.Items {
			if e.InvolvedObject.Name == "careful" && e.Reason == "RolloutHalted" && e.Type == corev1.EventTypeWarning {
				return true, err
			}
		}
		return false, err
	})
	for _, n := range []string{"app3", "app4"} {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, d); err != nil {
			t.Fatal(err)
		}
		if h := d.Spec.Template.Annotations[configHash]; h != "" || d.Generation != gens[n] {
			t.Errorf("%s rolled (hash %s, generation %d, was %d) while the rollout is halted", n, h, d.Generation, gens[n])
		}
		for _, w := range cr.Status.AtProvider.Workloads {
			if w.Name == n && (!w.Baseline || w.Hash != baseline) {
				t.Errorf("status of %s %+v while the rollout is halted, want its baseline %q", n, w, baseline)
			}
		}
	}
	// The pods fit again: app2 becomes available and the rollout resumes.
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "app2"}, d); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(ctx, d, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/template/spec/nodeSelector"}]`))); err != nil {
		t.Fatal(err)
	}
	progressIs(t, env.Client, cr, 2*time.Minute, workloadv1alpha1.PhaseComplete, 4, 0)
	if n := cr.Status.AtProvider.Rollouts; n != 4 {
		t.Errorf("%d rollouts counted, want 4: each Deployment rolled once for the one change", n)
	}
	runCurrent(t, env.Client, cr)
}
