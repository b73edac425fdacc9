package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

var (
	observeOnly = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
	allPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionAll}
)

// planOf renders a plan's actions as "Action Kind ns/name [fields]", sorted.
func planOf(p *v1alpha1.Plan) []string {
	if p == nil {
		return nil
	}
	out := make([]string, 0, len(p.Actions))
	for _, a := range p.Actions {
		out = append(out, fmt.Sprintf("%s %s %s/%s %v", a.Action, a.Kind, a.Namespace, a.Name, a.Fields))
	}
	slices.Sort(out)
	return out
}

// waitPlan waits until mg is Synced at its generation with a plan, read by
// plan, of this summary and these actions (planOf).
func waitPlan(t *testing.T, what string, mg resource.Managed, plan func() *v1alpha1.Plan, summary string, want []string) {
	t.Helper()
	testenv.Eventually(t, wait, what, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mg), mg); err != nil {
			return false, err
		}
		if p := plan(); p == nil || p.Summary != summary || !slices.Equal(planOf(p), want) {
			return false, fmt.Errorf("plan %+v", p)
		}
		if s := mg.GetCondition(xpv2.TypeSynced); s.Status != corev1.ConditionTrue || s.ObservedGeneration != mg.GetGeneration() {
			return false, fmt.Errorf("synced %s %s", s.Status, s.Message)
		}
		return true, nil
	})
}

// TestCopyRulePlansUnderObserve makes a CopyRule whose management policies
// are only Observe: it lists the copies it would create, and writes none.
// With all policies it makes exactly those. Back under Observe, a changed
// source and a source no longer named are planned as updates (naming the
// changed key) and deletes, and done as planned once all policies return.
func TestCopyRulePlansUnderObserve(t *testing.T) {
	ctx := context.Background()
	src := env.Namespace(t, "copy-plan-src", nil)
	t1 := env.Namespace(t, "copy-plan-a", nil)
	t2 := env.Namespace(t, "copy-plan-b", nil)
	env.Create(t, configMap(src, "a", map[string]string{"k": "v1"}, nil), configMap(src, "b", map[string]string{"j": "1"}, nil))
	ensureCopyConfig(t)
	r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "plan"}}
	r.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: copyConfig}
	r.Spec.ManagementPolicies = observeOnly
	r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{"a", "b"}, Namespaces: []string{t1, t2}, ConflictPolicy: copyv1alpha1.ConflictSkip, MaxParallelWrites: 4}
	env.Create(t, r)

	planned := func(what, summary string, want []string) {
		t.Helper()
		waitPlan(t, what, r, func() *v1alpha1.Plan { return r.Status.AtProvider.Plan }, summary, want)
	}
	planned("the plan to create four copies", "Create 4", []string{
		"Create ConfigMap " + t1 + "/a []", "Create ConfigMap " + t1 + "/b []",
		"Create ConfigMap " + t2 + "/a []", "Create ConfigMap " + t2 + "/b []",
	})
	for _, ns := range []string{t1, t2} {
		for _, n := range []string{"a", "b"} {
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, &corev1.ConfigMap{}); !kerrors.IsNotFound(err) {
				t.Errorf("a rule that only plans made %s/%s: %v", ns, n, err)
			}
		}
	}

	env.Update(t, r, func() { r.Spec.ManagementPolicies = allPolicies })
	for _, ns := range []string{t1, t2} {
		copyHolds(t, ns, "a", map[string]string{"k": "v1"})
		copyHolds(t, ns, "b", map[string]string{"j": "1"})
	}
	env.WaitConverged(t, wait, r)
	if r.Status.AtProvider.Plan != nil {
		t.Errorf("a rule that acts keeps a plan: %+v", r.Status.AtProvider.Plan)
	}

	env.Update(t, r, func() { r.Spec.ManagementPolicies = observeOnly })
	source := &corev1.ConfigMap{}
	get(t, src, "a", source)
	env.Update(t, source, func() { source.Data["k"] = "v2" })
	env.Update(t, r, func() { r.Spec.ForProvider.Names = []string{"a"} })
	planned("the plan to update two copies and delete two", "Update 2, Delete 2", []string{
		"Delete ConfigMap " + t1 + "/b []", "Delete ConfigMap " + t2 + "/b []",
		"Update ConfigMap " + t1 + "/a [data.k]", "Update ConfigMap " + t2 + "/a [data.k]",
	})
	copyHolds(t, t1, "a", map[string]string{"k": "v1"})

	env.Update(t, r, func() { r.Spec.ManagementPolicies = allPolicies })
	for _, ns := range []string{t1, t2} {
		copyHolds(t, ns, "a", map[string]string{"k": "v2"})
		gone(t, ns, "b")
	}
	testenv.Eventually(t, wait, "one event of the planned writes", func(ctx context.Context) (bool, error) {
		l := &corev1.EventList{}
		err := env.Client.List(ctx, l, client.InNamespace(src))
		for _, e := range l.Items {
			if e.InvolvedObject.Name == r.Name && e.Reason == "SyncedCopies" && strings.HasPrefix(e.Message, "Updated 2, pruned 2") {
				return true, err
			}
		}
		return false, err
	})
}

// TestAppBundlePlansUnderObserve makes an AppBundle whose management policies
// are only Observe: it plans its claim and Deployment, Synced and without
// making them; with all policies it makes them. Back under Observe, a new
// image is planned as an update of the Deployment's image, and done once all
// policies return.
func TestAppBundlePlansUnderObserve(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "plan-bundle", nil)
	ab := bundle(ns, "web")
	ab.Spec.ManagementPolicies = observeOnly
	env.Create(t, ab)
	planned := func(what, summary string, want []string) {
		t.Helper()
		waitPlan(t, what, ab, func() *v1alpha1.Plan { return ab.Status.AtProvider.Plan }, summary, want)
	}
	planned("the plan to make the claim and the Deployment", "Create 2", []string{
		"Create Deployment " + ns + "/web []", "Create PersistentVolumeClaim " + ns + "/web-data []",
	})
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, &appsv1.Deployment{}); !kerrors.IsNotFound(err) {
		t.Errorf("a bundle that only plans made its Deployment: %v", err)
	}

	env.Update(t, ab, func() { ab.Spec.ManagementPolicies = allPolicies })
	deploymentImage(t, ns, "web", "nginx:1.21", "the planned Deployment")
	get(t, ns, "web-data", &corev1.PersistentVolumeClaim{})

	env.Update(t, ab, func() {
		ab.Spec.ManagementPolicies = observeOnly
		ab.Spec.ForProvider.Image = "nginx:1.27"
	})
	planned("the plan to change the image", "Update 1", []string{
		"Update Deployment " + ns + "/web [spec.template.spec.containers[0].image]",
	})
	deploymentImage(t, ns, "web", "nginx:1.21", "the Deployment left as it is while planning")
	env.Update(t, ab, func() { ab.Spec.ManagementPolicies = allPolicies })
	deploymentImage(t, ns, "web", "nginx:1.27", "the planned image")
}

// TestImmortalContainerPlansUnderObserve makes an ImmortalContainer whose
// management policies are only Observe: it plans its pod without making it;
// with all policies it makes it. Back under Observe, a new image is planned
// as the pod's replacement, and done once all policies return.
func TestImmortalContainerPlansUnderObserve(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "plan-immortal", nil)
	ic := immortal(ns, "web")
	ic.Spec.ManagementPolicies = observeOnly
	env.Create(t, ic)
	planned := func(what, summary string, want []string) {
		t.Helper()
		waitPlan(t, what, ic, func() *v1alpha1.Plan { return ic.Status.AtProvider.Plan }, summary, want)
	}
	planned("the plan to make the pod", "Create 1", []string{"Create Pod " + ns + "/web-immortalpod []"})
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-immortalpod"}, &corev1.Pod{}); !kerrors.IsNotFound(err) {
		t.Errorf("an ImmortalContainer that only plans made its pod: %v", err)
	}

	env.Update(t, ic, func() { ic.Spec.ManagementPolicies = allPolicies })
	pod := podAfter(t, ns, "web", "")
	env.Update(t, ic, func() {
		ic.Spec.ManagementPolicies = observeOnly
		ic.Spec.ForProvider.Image = "nginx:1.28"
	})
	planned("the plan to replace the pod", "Replace 1", []string{"Replace Pod " + ns + "/web-immortalpod []"})
	get(t, ns, "web-immortalpod", pod)
	if pod.DeletionTimestamp != nil || pod.Spec.Containers[0].Image != "nginx:1.27" {
		t.Errorf("the pod was touched while planning: image %s, deleting %v", pod.Spec.Containers[0].Image, pod.DeletionTimestamp)
	}
	env.Update(t, ic, func() { ic.Spec.ManagementPolicies = allPolicies })
	testenv.Eventually(t, wait, "the planned replacement", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-immortalpod"}, pod)
		return err == nil && pod.Spec.Containers[0].Image == "nginx:1.28" && pod.DeletionTimestamp == nil, nil
	})
}

// TestConfigRolloutPlansUnderObserve follows a Deployment with a ConfigRollout
// whose management policies are only Observe: following it plans nothing; a
// change of a listed key plans its roll, naming the source and key, and
// leaves the Deployment as it is; with all policies it rolls once.
func TestConfigRolloutPlansUnderObserve(t *testing.T) {
	ns := env.Namespace(t, "plan-rollout", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"app.conf": "a"}}
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf", Keys: []string{"app.conf"}}},
			Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "web"}},
		}},
	}
	cr.Spec.ManagementPolicies = observeOnly
	env.Create(t, cm, consumer(ns, "web", "conf"), cr)
	planned := func(what, summary string, want []string) {
		t.Helper()
		waitPlan(t, what, cr, func() *v1alpha1.Plan { return cr.Status.AtProvider.Plan }, summary, want)
	}
	planned("following to plan nothing", "Nothing to do", nil)
	d := &appsv1.Deployment{}
	get(t, ns, "web", d)
	gen := d.Generation

	env.Update(t, cm, func() { cm.Data["app.conf"] = "b" })
	planned("the roll to be planned", "Update 1", []string{"Update Deployment " + ns + "/web [spec.template.metadata.annotations[" + hashKey + "]]"})
	if r := cr.Status.AtProvider.Plan.Actions[0].Reason; r != "rolls its pods: ConfigMap conf changed (keys app.conf)" {
		t.Errorf("the planned roll's reason: %q", r)
	}
	get(t, ns, "web", d)
	if d.Generation != gen {
		t.Errorf("a rollout that only plans rolled its Deployment: generation %d → %d", gen, d.Generation)
	}

	env.Update(t, cr, func() { cr.Spec.ManagementPolicies = allPolicies })
	r, d := rolledTo(t, ns, "web", "web")
	if d.Generation != gen+1 || r.Status.AtProvider.Rollouts != 1 || r.Status.AtProvider.Plan != nil {
		t.Errorf("generation %d → %d, rollouts %d, plan %+v: want the planned roll, once, and no plan", gen, d.Generation, r.Status.AtProvider.Rollouts, r.Status.AtProvider.Plan)
	}
}
