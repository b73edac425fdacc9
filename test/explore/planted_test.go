package explore

import (
	"context"
	"net/http"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/copyrule"
)

// plantedSeed is the world of TestEveryOracleCatchesItsPlantedDefect: no
// corpus sequence or fixed seed uses it.
const plantedSeed = 1100

// A planting is the defect one oracle is there to catch, as a provider bug
// would leave it, and how to take it away.
type planting struct {
	oracle string
	defect string
	plant  func(ctx context.Context, t *testing.T, s *State)
	undo   func(ctx context.Context, t *testing.T, s *State)
}

// TestEveryOracleCatchesItsPlantedDefect builds a world, lets two replicas
// settle it, and stops them, so that nothing repairs what is planted. Then,
// for each oracle in turn, it plants the defect the oracle is there to
// catch: the oracle must report it, and hold again once it is taken away.
// Teardown's oracles follow: the world deleted with no replica to remove
// its finalizers, and its copies left behind.
func TestEveryOracleCatchesItsPlantedDefect(t *testing.T) {
	r := newRun(t, env, Sequence{Seed: plantedSeed}, NewSummary(), "")
	defer r.close()
	if v := r.setup(); v != nil {
		t.Fatalf("setup: %q: %s", v.Oracle, v.Detail)
	}
	if err := r.st.Fleet.StopAll(); err != nil {
		t.Fatal(err)
	}
	all := append(append(append([]oracle{}, safety()...), liveness()...), baselines()...)
	if name, err := settle(all, r.st, settleTimeout); err != nil {
		t.Fatalf("before any planting: %q: %v", name, err)
	}
	byName := map[string]oracle{}
	for _, o := range all {
		byName[o.name] = o
	}
	for _, p := range plantings() {
		o, ok := byName[p.oracle]
		if !ok {
			t.Fatalf("no oracle %q", p.oracle)
		}
		t.Run(p.oracle+": "+p.defect, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// Taken away however the subtest ends, as later ones share the world.
			undone := false
			undo := func() {
				if !undone {
					undone = true
					p.undo(ctx, t, r.st)
				}
			}
			defer undo()
			p.plant(ctx, t, r.st)
			// Some defects show after a moment: a watch opens, a freeze arms.
			caught := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
				err := o.check(ctx, r.st)
				if err != nil {
					t.Logf("caught: %v", err)
				}
				return err != nil, nil
			})
			if caught != nil {
				t.Errorf("the oracle did not catch its planted defect")
			}
			undo()
			if _, err := settle([]oracle{o}, r.st, 15*time.Second); err != nil {
				t.Errorf("the oracle does not hold once the defect is taken away: %v", err)
			}
		})
	}
	t.Run("teardown", func(t *testing.T) { catchesLeftovers(t, r.st) })
}

// plantings are the defects of the safety, liveness and baseline oracles.
func plantings() []planting {
	var p []planting
	p = append(p, safetyPlantings()...)
	p = append(p, livenessPlantings()...)
	return append(p, baselinePlantings()...)
}

func safetyPlantings() []planting {
	stray := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "planted-copy",
		Labels: map[string]string{copyrule.LabelRuleUID: "planted"}}}
	return []planting{{
		oracle: "no copy in a denied namespace",
		defect: "a copy in kube-system",
		plant:  func(ctx context.Context, t *testing.T, s *State) { must(t, s.World.c.Create(ctx, stray.DeepCopy())) },
		undo:   func(ctx context.Context, t *testing.T, s *State) { must(t, s.World.c.Delete(ctx, stray.DeepCopy())) },
	}, {
		oracle: "no roll without a change",
		defect: "a roll of web-0 that no change asked for",
		plant: func(ctx context.Context, t *testing.T, s *State) {
			d := &appsv1.Deployment{}
			providerWrite(ctx, t, s, types.NamespacedName{Namespace: s.World.Target(0), Name: web(0)}, d, func() {
				d.Spec.Template.Annotations = map[string]string{"planted": "roll"}
			})
		},
		// Counted as the explorer's own rise of the generation.
		undo: func(_ context.Context, _ *testing.T, s *State) { s.Bumps[0]++ },
	}, {
		oracle: "nothing written where writes are frozen",
		defect: "a write into a denied namespace",
		plant: func(ctx context.Context, t *testing.T, s *State) {
			must(t, s.deny(ctx, 1, true))
			armed(ctx, t, s)
			cm := &corev1.ConfigMap{}
			providerWrite(ctx, t, s, types.NamespacedName{Namespace: s.World.Target(1), Name: local}, cm, func() {
				cm.Data = map[string]string{dataKey: "planted"}
			})
		},
		undo: func(ctx context.Context, t *testing.T, s *State) { must(t, s.deny(ctx, 1, false)) },
	}, {
		oracle: "nothing written where writes are frozen",
		defect: "a read of a denied namespace",
		plant: func(ctx context.Context, t *testing.T, s *State) {
			must(t, s.deny(ctx, 2, true))
			armed(ctx, t, s)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://planted/api/v1/namespaces/"+s.World.Target(2)+"/configmaps/"+local, nil)
			must(t, err)
			s.Fleet.requests.record("planted", req)
		},
		undo: func(ctx context.Context, t *testing.T, s *State) { must(t, s.deny(ctx, 2, false)) },
	}}
}

func livenessPlantings() []planting {
	var was map[string]string
	return []planting{{
		oracle: "every copy equals its source",
		defect: "a copy that differs from its source",
		plant: func(ctx context.Context, t *testing.T, s *State) {
			setCopy(ctx, t, s, "planted")
		},
		undo: func(ctx context.Context, t *testing.T, s *State) {
			src := &corev1.ConfigMap{}
			must(t, s.World.c.Get(ctx, types.NamespacedName{Namespace: s.World.Source(), Name: conf(0)}, src))
			setCopy(ctx, t, s, src.Data[dataKey])
		},
	}, {
		oracle: "a deleted rule's copies are gone",
		defect: "a deleted rule still there",
		plant:  func(_ context.Context, _ *testing.T, s *State) { s.m.deleted[0] = true },
		undo:   func(_ context.Context, _ *testing.T, s *State) { s.m.deleted[0] = false },
	}, {
		oracle: "every Deployment runs its ConfigMap's latest change",
		defect: "a change not rolled",
		// A change the explorer makes, which no stopped replica rolls.
		plant: func(ctx context.Context, t *testing.T, s *State) {
			was = setLocal(ctx, t, s, map[string]string{dataKey: "planted"})
			s.Changes[0]++
		},
		undo: func(ctx context.Context, t *testing.T, s *State) {
			setLocal(ctx, t, s, was)
			s.Changes[0]--
		},
	}, {
		oracle: "an AppBundle's objects match its spec",
		defect: "a Deployment image that drifted",
		plant:  func(ctx context.Context, t *testing.T, s *State) { setBundleImage(ctx, t, s, "planted:1") },
		undo:   func(ctx context.Context, t *testing.T, s *State) { setBundleImage(ctx, t, s, initialBundleImage) },
	}, {
		oracle: "an ImmortalContainer has one pod and counts its starts",
		defect: "a start counted twice",
		plant:  func(ctx context.Context, t *testing.T, s *State) { addStarts(ctx, t, s, 1) },
		undo:   func(ctx context.Context, t *testing.T, s *State) { addStarts(ctx, t, s, -1) },
	}, {
		oracle: "a deleted workload resource is gone, and what it made",
		defect: "a deleted ImmortalContainer still there",
		plant:  func(_ context.Context, _ *testing.T, s *State) { s.m.immortalGone = true },
		undo:   func(_ context.Context, _ *testing.T, s *State) { s.m.immortalGone = false },
	}, {
		oracle: "every managed resource is Synced and Ready",
		defect: "a rule not Synced",
		plant:  func(ctx context.Context, t *testing.T, s *State) { setSynced(ctx, t, s, corev1.ConditionFalse) },
		undo:   func(ctx context.Context, t *testing.T, s *State) { setSynced(ctx, t, s, corev1.ConditionTrue) },
	}}
}

func baselinePlantings() []planting {
	var release chan struct{}
	var w interface{ Stop() }
	var held []byte
	return []planting{{
		oracle: "goroutines return to their baseline",
		defect: "a goroutine left running",
		plant: func(context.Context, *testing.T, *State) {
			release = make(chan struct{})
			go func() { <-release }()
		},
		undo: func(context.Context, *testing.T, *State) { close(release) },
	}, {
		oracle: "the API server's watches return to their baseline",
		defect: "a watch left open",
		plant: func(ctx context.Context, t *testing.T, s *State) {
			var err error
			w, err = s.cs.CoreV1().ConfigMaps(s.World.Source()).Watch(context.Background(), metav1.ListOptions{})
			must(t, err)
		},
		undo: func(context.Context, *testing.T, *State) { w.Stop() },
	}, {
		oracle: "the heap returns to its baseline",
		defect: "twice the slack held on the heap",
		plant: func(context.Context, *testing.T, *State) {
			held = make([]byte, 2*heapSlack)
			for i := range held {
				held[i] = 1
			}
		},
		undo: func(context.Context, *testing.T, *State) { held = nil },
	}}
}

// catchesLeftovers deletes the world with no replica to act on it: its
// managed resources stay, being deleted, until their finalizers are
// removed by hand, and their copies stay until deleted by hand.
func catchesLeftovers(t *testing.T, s *State) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := s.World
	must(t, w.Delete(ctx))
	if err := noneLeft(ctx, s); err == nil {
		t.Error("\"every managed resource is gone\" did not catch managed resources whose finalizer nobody removes")
	}
	mgs, err := w.managed(ctx)
	must(t, err)
	for _, mg := range mgs {
		providerWrite(ctx, t, s, client.ObjectKeyFromObject(mg), mg, func() { mg.SetFinalizers(nil) })
	}
	if _, err := settle([]oracle{{"every managed resource is gone", noneLeft}}, s, 15*time.Second); err != nil {
		t.Errorf("\"every managed resource is gone\" does not hold once the finalizers are removed: %v", err)
	}
	if err := noCopyLeft(ctx, s); err == nil {
		t.Error("\"no copy of a deleted rule is left\" did not catch the copies of rules deleted without their finalizer")
	}
	l := &corev1.ConfigMapList{}
	must(t, w.c.List(ctx, l, client.HasLabels{copyrule.LabelRuleUID}))
	for i := range l.Items {
		must(t, client.IgnoreNotFound(w.c.Delete(ctx, &l.Items[i])))
	}
	if err := noCopyLeft(ctx, s); err != nil {
		t.Errorf("\"no copy of a deleted rule is left\" does not hold once the copies are deleted: %v", err)
	}
	must(t, w.DeleteNamespaces(ctx))
}

// providerWrite updates o at key as the provider would, unrecorded by the
// explorer.
func providerWrite(ctx context.Context, t *testing.T, s *State, key types.NamespacedName, o client.Object, mutate func()) {
	t.Helper()
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.World.c.Get(ctx, key, o); err != nil {
			return err
		}
		mutate()
		return s.World.c.Update(ctx, o)
	}))
}

// armed waits until every freeze has armed.
func armed(ctx context.Context, t *testing.T, s *State) {
	t.Helper()
	must(t, wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := nothingWrittenFrozen(ctx, s); err != nil {
			return false, err
		}
		for _, f := range s.frozen {
			if !f.armed {
				return false, nil
			}
		}
		return true, nil
	}))
}

// setCopy sets rule-0's copy in target 1 to value.
func setCopy(ctx context.Context, t *testing.T, s *State, value string) {
	cm := &corev1.ConfigMap{}
	providerWrite(ctx, t, s, types.NamespacedName{Namespace: s.World.Target(1), Name: conf(0)}, cm, func() {
		cm.Data = map[string]string{dataKey: value}
	})
}

// setLocal sets the data of ConfigMap local of target 0, and returns what
// it held.
func setLocal(ctx context.Context, t *testing.T, s *State, data map[string]string) map[string]string {
	cm := &corev1.ConfigMap{}
	var was map[string]string
	providerWrite(ctx, t, s, types.NamespacedName{Namespace: s.World.Target(0), Name: local}, cm, func() {
		was, cm.Data = cm.Data, data
	})
	return was
}

// setBundleImage sets the image of app's Deployment.
func setBundleImage(ctx context.Context, t *testing.T, s *State, image string) {
	d := &appsv1.Deployment{}
	providerWrite(ctx, t, s, types.NamespacedName{Namespace: s.World.App(), Name: bundleName}, d, func() {
		d.Spec.Template.Spec.Containers[0].Image = image
	})
}

// addStarts adds n to immortal's status.startTimes.
func addStarts(ctx context.Context, t *testing.T, s *State, n int64) {
	t.Helper()
	ic := &workloadv1alpha1.ImmortalContainer{}
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.World.c.Get(ctx, types.NamespacedName{Namespace: s.World.App(), Name: immortalName}, ic); err != nil {
			return err
		}
		ic.Status.AtProvider.StartTimes += n
		return s.World.c.Status().Update(ctx, ic)
	}))
}

// setSynced sets rule-0's Synced condition to status.
func setSynced(ctx context.Context, t *testing.T, s *State, status corev1.ConditionStatus) {
	t.Helper()
	cr := &copyv1alpha1.CopyRule{}
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.World.c.Get(ctx, types.NamespacedName{Namespace: s.World.Source(), Name: rule(0)}, cr); err != nil {
			return err
		}
		c := cr.GetCondition(xpv2.TypeSynced)
		c.Status, c.Reason, c.LastTransitionTime = status, "Planted", metav1.Now()
		cr.SetConditions(c)
		return s.World.c.Status().Update(ctx, cr)
	}))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
