// Package pollcost counts what a safety-net poll of a converged managed
// resource of each kind sends, with nothing else running in the provider, so
// every request it sees is the poll's.
package pollcost

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

var env *testenv.Env

// wait is how long the test waits for the provider to settle.
const wait = 30 * time.Second

func TestMain(m *testing.M) {
	// An hour's poll: every reconcile the test sees is one it caused.
	os.Exit(testenv.Main(m, time.Hour, func(e *testenv.Env) { env = e }, nil))
}

// pollCost is what one safety-net poll of a converged managed resource may
// send: no write, and at most reads requests (watches excluded). The reads are
// the poll's purpose: it re-reads what the resource acts on, so drift a watch
// did not report is still repaired.
type pollCost struct {
	mr    testenv.Conditioned
	kind  string // the GroupKind, which names its controller
	reads int
}

// TestPollRoundCost checks what a poll of a converged managed resource of
// each kind costs the API server. The safety-net poll re-checks every
// resource; with thousands of them its cost is the provider's idle cost.
// A label change makes the managed reconciler run once, as a poll does; the
// requests are counted once that reconcile has run (its controller's
// controller_runtime_reconcile_total moved by one) and nothing is queued, so
// "nothing written" is what the poll did, not a quiet moment before it.
func TestPollRoundCost(t *testing.T) {
	reachable := map[string]string{"clusterops.io/reachable": "true"}
	ns := env.Namespace(t, "pollcost", reachable)
	dst := env.Namespace(t, "pollcost-dst", reachable)
	readsConf(t, ns)
	costs := []pollCost{
		{mr: &workloadv1alpha1.ImmortalContainer{ObjectMeta: metav1.ObjectMeta{Name: "immortal", Namespace: ns},
			Spec: workloadv1alpha1.ImmortalContainerSpec{ForProvider: workloadv1alpha1.ImmortalContainerParameters{Image: "nginx"}}}, kind: workloadv1alpha1.ImmortalContainerGroupKind, reads: 1},
		{mr: &workloadv1alpha1.AppBundle{ObjectMeta: metav1.ObjectMeta{Name: "bundle", Namespace: ns},
			Spec: workloadv1alpha1.AppBundleSpec{ForProvider: workloadv1alpha1.AppBundleParameters{Image: "nginx"}}}, kind: workloadv1alpha1.AppBundleGroupKind, reads: 3},
		{mr: &workloadv1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: "rollout", Namespace: ns},
			Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
				ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
				Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "web"}},
			}}}, kind: workloadv1alpha1.ConfigRolloutGroupKind, reads: 2},
		{mr: &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Name: "copy", Namespace: ns},
			Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
				Kind: copyv1alpha1.KindConfigMap, Names: []string{"conf"}, Namespaces: []string{dst},
			}}}, kind: copyv1alpha1.CopyRuleGroupKind, reads: 1},
		{mr: &chaosv1alpha1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Name: "chaos", Namespace: ns},
			Spec: chaosv1alpha1.ChaosAgentSpec{ForProvider: chaosv1alpha1.ChaosAgentParameters{
				TantrumMode: true, PodTolerance: 1000, Eagerness: 1, DryRun: true,
				Interval: metav1.Duration{Duration: time.Hour},
			}}}, kind: chaosv1alpha1.ChaosAgentGroupKind, reads: 0},
	}
	for _, c := range costs {
		env.Create(t, c.mr)
	}
	// Converged first: every managed resource Synced (its last reconcile
	// succeeded). A create is followed by
	// a requeue the controller's rate limiter delays by a second or more, which
	// no queue shows while it waits: wait that out too before counting.
	for _, c := range costs {
		env.WaitSynced(t, wait, c.mr)
	}
	// What a Deployment's controller and a kubelet would write, which the
	// AppBundle and the ImmortalContainer wait for after their create.
	ctx := context.Background()
	if err := deploymentAvailable(ctx, ns, "bundle"); err != nil {
		t.Fatal(err)
	}
	if err := podRunning(ctx, ns, "immortal-immortalpod"); err != nil {
		t.Fatal(err)
	}
	env.WaitReady(t, wait, costs[0].mr)
	env.WaitReady(t, wait, costs[1].mr)
	quiet(t, 3*time.Second)
	testenv.WaitIdle(t, wait)
	for i, c := range costs {
		kind := fmt.Sprintf("%T", c.mr)
		controller := managed.ControllerName(c.kind)
		before, err := testenv.Reconciles(controller)
		if err != nil {
			t.Fatal(err)
		}
		m, r := env.ManagerWrites.Len(), env.Requests.Len()
		// A label as kubectl label sets it: a patch of the label alone. A
		// whole-object update from a typed client would write the spec back
		// in Go's encoding ("5m" as "5m0s"), a spec change of its own.
		o, _ := c.mr.DeepCopyObject().(client.Object)
		if err := env.Client.Patch(context.Background(), o, client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{"poked":"%d"}}}`, i)))); err != nil {
			t.Fatal(err)
		}
		// Proof that the poll ran, to its end, before what it sent is counted.
		after := testenv.WaitReconciled(t, wait, controller, before)
		if after-before != 1 {
			t.Errorf("%s: the label change caused %v reconciles, want 1: the counts below are not one poll's", kind, after-before)
		}
		sent := append(env.ManagerWrites.Since(m), env.Requests.Since(r)...)
		var writes, reads []string
		for _, s := range sent {
			switch {
			case strings.Contains(s, "watch=true"):
			case strings.HasPrefix(s, "GET "):
				reads = append(reads, s)
			default:
				writes = append(writes, s)
			}
		}
		sort.Strings(reads)
		t.Logf("%s: %v reconcile: %d writes %v, %d reads %v", kind, after-before, len(writes), writes, len(reads), reads)
		if len(writes) > 0 {
			t.Errorf("%s: a poll of a converged resource wrote %v; want nothing", kind, writes)
		}
		if len(reads) > c.reads {
			t.Errorf("%s: a poll of a converged resource sent %d reads, want at most %d: %v", kind, len(reads), c.reads, reads)
		}
	}
}

// readsConf makes ConfigMap conf in ns and Deployment web, which reads it.
func readsConf(t *testing.T, ns string) {
	t.Helper()
	zero := int32(0)
	app := map[string]string{"app": "web"}
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "v"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: appsv1.DeploymentSpec{
			Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: app},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: app}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "web", Image: "nginx", EnvFrom: []corev1.EnvFromSource{{
					ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}},
				}}}},
			}},
		}})
}

// quiet waits until the provider has sent nothing for d.
func quiet(t *testing.T, d time.Duration) {
	t.Helper()
	last, since := -1, time.Now()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		n := env.ManagerWrites.Len() + env.Requests.Len()
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > d {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the provider did not settle in %s", wait)
}

// TestNewResourceReconciledOnce checks that a new CopyRule and a new
// ConfigRollout, each the first to read a namespace (so the watches of its
// sources are new), converge in one reconcile. A new watch lists what its
// owner has just read; that list used to reconcile the owner a second time
// for nothing: 0.6 more reconciles per resource for a fleet spread over many
// namespaces, where each namespace's first watches are new.
func TestNewResourceReconciledOnce(t *testing.T) {
	reachable := map[string]string{"clusterops.io/reachable": "true"}
	// Each resource in a namespace of its own, with what it reads.
	fresh := func(prefix string) string {
		ns := env.Namespace(t, prefix, reachable)
		readsConf(t, ns)
		// The provider hears of every Deployment (ConfigRollout's workload
		// watch): a create it heard only after the rollout existed would,
		// rightly, reconcile the rollout that names it once more. Under
		// load that came late enough to count one time in a few CI runs.
		testenv.Eventually(t, wait, "the provider to hear of the Deployment", func(ctx context.Context) (bool, error) {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
			err := env.Provider.Manager.GetCache().Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, m)
			return err == nil, client.IgnoreNotFound(err)
		})
		quiet(t, time.Second)
		return ns
	}
	rule := func(ns string) testenv.Conditioned {
		return &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Name: "copy", Namespace: ns},
			Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
				Kind: copyv1alpha1.KindConfigMap, Names: []string{"conf"}, Namespaces: []string{env.Namespace(t, "once-dst", reachable)},
			}}}
	}
	rollout := func(ns string) testenv.Conditioned {
		return &workloadv1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: "rollout", Namespace: ns},
			Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
				ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
				Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "web"}},
			}}}
	}
	for _, c := range []struct {
		kind string
		mr   func(ns string) testenv.Conditioned
	}{
		{copyv1alpha1.CopyRuleGroupKind, rule},
		{workloadv1alpha1.ConfigRolloutGroupKind, rollout},
	} {
		// The first of its kind starts the watches every one shares (the
		// namespaces) and is not counted.
		first := c.mr(fresh("once-warm"))
		env.Create(t, first)
		env.WaitSynced(t, wait, first)
		quiet(t, 2*time.Second)
		testenv.WaitIdle(t, wait)

		controller := managed.ControllerName(c.kind)
		before, err := testenv.Reconciles(controller)
		if err != nil {
			t.Fatal(err)
		}
		mr := c.mr(fresh("once"))
		env.Create(t, mr)
		env.WaitSynced(t, wait, mr)
		// A create is followed by a requeue the controller's rate limiter
		// delays by a second or more: wait that out before counting.
		quiet(t, 3*time.Second)
		testenv.WaitIdle(t, wait)
		after, err := testenv.Reconciles(controller)
		if err != nil {
			t.Fatal(err)
		}
		if after-before != 1 {
			t.Errorf("%s: a new resource took %v reconciles, want 1", c.kind, after-before)
		}
	}
}

// TestCreateWaitsForReadiness checks that a new AppBundle and a new
// ImmortalContainer are reconciled once to create what they make, and once
// more when that reports its readiness: the managed reconciler's requeue
// right after a create, which found the Deployment or pod not ready yet, is
// the next poll instead. It was a third of a fleet's reconciles.
func TestCreateWaitsForReadiness(t *testing.T) {
	ns := env.Namespace(t, "created", nil)
	ctx := context.Background()
	for _, c := range []struct {
		kind  string
		mr    testenv.Conditioned
		ready func() error // what the Deployment's or the pod's controller would write
	}{
		{workloadv1alpha1.AppBundleGroupKind,
			&workloadv1alpha1.AppBundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
				Spec: workloadv1alpha1.AppBundleSpec{ForProvider: workloadv1alpha1.AppBundleParameters{Image: "nginx"}}},
			func() error { return deploymentAvailable(ctx, ns, "app") }},
		{workloadv1alpha1.ImmortalContainerGroupKind,
			&workloadv1alpha1.ImmortalContainer{ObjectMeta: metav1.ObjectMeta{Name: "forever", Namespace: ns},
				Spec: workloadv1alpha1.ImmortalContainerSpec{ForProvider: workloadv1alpha1.ImmortalContainerParameters{Image: "nginx"}}},
			func() error { return podRunning(ctx, ns, "forever-immortalpod") }},
	} {
		controller := managed.ControllerName(c.kind)
		testenv.WaitIdle(t, wait)
		before, err := testenv.Reconciles(controller)
		if err != nil {
			t.Fatal(err)
		}
		count := func(want float64, what string) {
			t.Helper()
			// The requeue after a create came through the controller's rate
			// limiter a second or more later: wait that out.
			quiet(t, 3*time.Second)
			testenv.WaitIdle(t, wait)
			after, err := testenv.Reconciles(controller)
			if err != nil {
				t.Fatal(err)
			}
			if after-before != want {
				t.Errorf("%s: %s took %v reconciles, want %v", c.kind, what, after-before, want)
			}
		}
		env.Create(t, c.mr)
		env.WaitSynced(t, wait, c.mr)
		count(1, "a create")
		if err := c.ready(); err != nil {
			t.Fatal(err)
		}
		env.WaitReady(t, wait, c.mr)
		count(2, "a create and its readiness")
	}
}

// deploymentAvailable writes what a Deployment's controller writes once its
// replica is available: envtest runs no controllers.
func deploymentAvailable(ctx context.Context, ns, name string) error {
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
		return err
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}}}
	return env.Client.Status().Update(ctx, d)
}

// podRunning writes what a kubelet writes once a pod runs.
func podRunning(ctx context.Context, ns, name string) error {
	p := &corev1.Pod{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
		return err
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9", StartTime: &metav1.Time{Time: time.Now()},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	return env.Client.Status().Update(ctx, p)
}
