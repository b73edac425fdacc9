package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestConfigRolloutFollowsWithoutRolling puts running Deployments under a
// ConfigRollout, named, by selector and in auto mode: none is rolled when the
// rollout starts to follow it, on its creation or on a later workload's, not
// even after further reconciles; one change of the configuration then rolls
// each exactly once.
func TestConfigRolloutFollowsWithoutRolling(t *testing.T) {
	controller := managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind)
	cases := map[string]func(p *workloadv1alpha1.ConfigRolloutParameters){
		"Named": func(p *workloadv1alpha1.ConfigRolloutParameters) {
			for _, n := range []string{"web-0", "web-1", "web-2", "late"} {
				p.Workloads = append(p.Workloads, workloadv1alpha1.WorkloadRef{Kind: "Deployment", Name: n})
			}
		},
		"Selector": func(p *workloadv1alpha1.ConfigRolloutParameters) {
			p.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "front"}}
		},
		"Auto": func(p *workloadv1alpha1.ConfigRolloutParameters) { p.Auto = true },
	}
	for name, pick := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ns := env.Namespace(t, "adopt-"+strings.ToLower(name), nil)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "v1"}}
			front := func(name string) *appsv1.Deployment {
				d := consumer(ns, name, "conf")
				d.Labels["tier"] = "front"
				return d
			}
			env.Create(t, cm, front("web-0"), front("web-1"), front("web-2"))
			cr := &workloadv1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: "follow", Namespace: ns}}
			cr.Spec.ForProvider.ConfigMaps = []workloadv1alpha1.SourceRef{{Name: "conf"}}
			pick(&cr.Spec.ForProvider)
			before, err := testenv.Reconciles(controller)
			if err != nil {
				t.Fatal(err)
			}
			env.Create(t, cr)
			// followed waits until the rollout's status records the current
			// hash as the baseline of each Deployment (a named rollout is not
			// Ready while one it names does not exist).
			followed := func(names ...string) {
				t.Helper()
				for _, n := range names {
					testenv.Eventually(t, wait, "Deployment "+n+" to be followed", func(ctx context.Context) (bool, error) {
						r := &workloadv1alpha1.ConfigRollout{}
						err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "follow"}, r)
						h := r.Status.AtProvider.Hash
						return h != "" && baseline(r, "Deployment", n) == h, err
					})
				}
			}
			followed("web-0", "web-1", "web-2")

			// generations asserts each Deployment's generation, and that those
			// at 1 were not touched in their pod template.
			generations := func(what string, want map[string]int64) {
				t.Helper()
				for n, g := range want {
					d := &appsv1.Deployment{}
					if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, d); err != nil {
						t.Fatal(err)
					}
					if d.Generation != g {
						t.Errorf("%s: Deployment %s at generation %d, want %d", what, n, d.Generation, g)
					}
					if g == 1 && (d.Spec.Template.Annotations[hashKey] != "" || d.Annotations["workload.clusterops.io/config-rollout"] != "") {
						t.Errorf("%s: Deployment %s has template annotations %v and annotations %v, want neither touched", what, n, d.Spec.Template.Annotations, d.Annotations)
					}
				}
			}
			// A reconcile after the rollout settled must not roll either: a
			// change of its spec reconciles it once more.
			n := testenv.WaitReconciled(t, wait, controller, before)
			env.Update(t, cr, func() { cr.Spec.ForProvider.Debounce = &metav1.Duration{Duration: time.Millisecond} })
			testenv.WaitReconciled(t, wait, controller, n)
			generations("after adoption and another reconcile", map[string]int64{"web-0": 1, "web-1": 1, "web-2": 1})

			// A workload created later is followed, not rolled.
			env.Create(t, front("late"))
			followed("late")
			n, err = testenv.Reconciles(controller)
			if err != nil {
				t.Fatal(err)
			}
			generations("after a workload was created", map[string]int64{"web-0": 1, "web-1": 1, "web-2": 1, "late": 1})

			r := &workloadv1alpha1.ConfigRollout{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "follow"}, r); err != nil {
				t.Fatal(err)
			}
			if r.Status.AtProvider.Rollouts != 0 || eventCount(t, ns, "follow", "RolledWorkload") != 0 {
				t.Errorf("rollouts %d, %d RolledWorkload events: want none before a change", r.Status.AtProvider.Rollouts, eventCount(t, ns, "follow", "RolledWorkload"))
			}
			for _, w := range r.Status.AtProvider.Workloads {
				if !w.Baseline || w.Hash != r.Status.AtProvider.Hash {
					t.Errorf("status of %s/%s = %+v, want the current hash as its baseline", w.Kind, w.Name, w)
				}
			}
			if eventCount(t, ns, "follow", "FollowingWorkloads") == 0 {
				t.Errorf("no FollowingWorkloads event")
			}

			// One change rolls each once.
			first := r.Status.AtProvider.Hash
			env.Update(t, cm, func() { cm.Data["k"] = "v2" })
			testenv.Eventually(t, wait, "the change to be seen", func(ctx context.Context) (bool, error) {
				err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "follow"}, r)
				return r.Status.AtProvider.Hash != first, err
			})
			for _, d := range []string{"web-0", "web-1", "web-2", "late"} {
				_, got := rolledTo(t, ns, "follow", d)
				if got.Spec.Template.Annotations[hashKey] != r.Status.AtProvider.Hash {
					t.Errorf("Deployment %s carries %q in its template after the change, want %q", d, got.Spec.Template.Annotations[hashKey], r.Status.AtProvider.Hash)
				}
				if got.Annotations["workload.clusterops.io/config-rollout"] != "follow" {
					t.Errorf("Deployment %s has annotations %v after it was rolled, want the lock of the rollout", d, got.Annotations)
				}
			}
			testenv.WaitReconciled(t, wait, controller, n)
			generations("after one change", map[string]int64{"web-0": 2, "web-1": 2, "web-2": 2, "late": 2})
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "follow"}, r); err != nil {
				t.Fatal(err)
			}
			if got := eventCount(t, ns, "follow", "RolledWorkload"); r.Status.AtProvider.Rollouts != 4 || got != 4 {
				t.Errorf("rollouts %d, %d RolledWorkload events: want 4 and 4, one per workload", r.Status.AtProvider.Rollouts, got)
			}
		})
	}
}

// TestConfigRolloutFollowerHandover: of two rollouts that start to follow one
// Deployment, the older (created in the same second, the first by name)
// follows it and the newer says why it does not; when the older is deleted,
// the newer follows it at once, without a roll.
func TestConfigRolloutFollowerHandover(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "adopt-handover", nil)
	rollout := func(name, cm string) *workloadv1alpha1.ConfigRollout {
		cr := &workloadv1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		cr.Spec.ForProvider.ConfigMaps = []workloadv1alpha1.SourceRef{{Name: cm}}
		cr.Spec.ForProvider.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
		return cr
	}
	env.Create(t,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}, Data: map[string]string{"k": "a"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns}, Data: map[string]string{"k": "b"}},
		consumer(ns, "web", ""), rollout("first", "a"))
	rolledTo(t, ns, "first", "web")
	newer := rollout("second", "b")
	env.Create(t, newer)
	testenv.Eventually(t, wait, "the newer ConfigRollout to say why it does not follow web", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "second"}, newer)
		return newer.GetCondition(xpv2.TypeReady).Message == `Deployment "web" follows ConfigRollout "first": a workload follows one ConfigRollout, so it is not rolled by this one`, err
	})
	if err := env.Client.Delete(ctx, rollout("first", "a")); err != nil {
		t.Fatal(err)
	}
	r, d := rolledTo(t, ns, "second", "web")
	if d.Generation != 1 || baseline(r, "Deployment", "web") != r.Status.AtProvider.Hash {
		t.Errorf("generation %d, status %+v: want web followed by the newer rollout, not rolled", d.Generation, r.Status.AtProvider.Workloads)
	}
}
