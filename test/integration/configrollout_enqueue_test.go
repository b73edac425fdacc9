package integration

import (
	"context"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestConfigRolloutWorkloadEventReconcilesOnlyItsRollouts puts many
// ConfigRollouts in one namespace, each naming its own Deployment and
// ConfigMap. An edit of one Deployment reconciles the one rollout that names
// it, once: not the other rollouts of the namespace, and not the rollout
// again for its own repair. A reconcile of rollout i reads ConfigMap cm-i,
// which is how the test tells which rollouts were reconciled.
func TestConfigRolloutWorkloadEventReconcilesOnlyItsRollouts(t *testing.T) {
	ns := env.Namespace(t, "rollout-fleet", nil)
	rolloutFleet(t, ns, 12, func(i int, p *workloadv1alpha1.ConfigRolloutParameters) {
		p.Workloads = []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: fmt.Sprintf("d-%d", i)}}
	})
	reconcilesOnly(t, ns, 3, 7)
}

// TestConfigRolloutAutoEventReconcilesOnlyItsReaders is the same for auto
// rollouts, which name no workload: many in one namespace, each rolling
// whatever reads its own ConfigMap. An edit of one Deployment reconciles the
// one auto rollout whose ConfigMap it reads, not every auto rollout of the
// namespace (which of them it reads is in its pod template, which the
// provider's metadata watch does not carry).
func TestConfigRolloutAutoEventReconcilesOnlyItsReaders(t *testing.T) {
	ns := env.Namespace(t, "rollout-auto-fleet", nil)
	rolloutFleet(t, ns, 8, func(_ int, p *workloadv1alpha1.ConfigRolloutParameters) { p.Auto = true })
	reconcilesOnly(t, ns, 2, 5)
}

// TestConfigRolloutAutoFleetReadsEachWorkloadOnce: auto rollouts find their
// workloads in the provider's metadata cache, and learn from the API server
// what each one's pod template reads. A fleet of them made together in a
// namespace of as many Deployments lists the namespace's Deployments once,
// not a read of every Deployment by every rollout, and reads each Deployment
// itself at most twice (for the rollout that rolls it, and for the event of
// that roll if it comes before the write's response): not for each rollout
// that looks at it, and not again for the generation a rollout's own write
// gave it.
func TestConfigRolloutAutoFleetReadsEachWorkloadOnce(t *testing.T) {
	ns := env.Namespace(t, "rollout-auto-reads", nil)
	const n = 16
	for i := range n {
		env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: ns}, Data: map[string]string{"k": "v"}},
			consumer(ns, fmt.Sprintf("d-%d", i), fmt.Sprintf("cm-%d", i)))
	}
	// The Deployments' events, heard while no auto rollout is there, read
	// nothing; the fleet is counted from its creation.
	testenv.WaitIdle(t, wait)
	// What a template reads is read through the manager's client, the
	// workloads to roll through the cluster's.
	mark, markManager := env.Requests.Len(), env.ManagerWrites.Len()
	for i := range n {
		cr := &workloadv1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r-%d", i), Namespace: ns}}
		cr.Spec.ForProvider.ConfigMaps = []workloadv1alpha1.SourceRef{{Name: fmt.Sprintf("cm-%d", i)}}
		cr.Spec.ForProvider.Auto = true
		env.Create(t, cr)
	}
	for i := range n {
		rolledTo(t, ns, fmt.Sprintf("r-%d", i), fmt.Sprintf("d-%d", i))
	}
	testenv.WaitIdle(t, wait)
	reads := map[string]int{}
	var lists []string
	deployments := "GET /apis/apps/v1/namespaces/" + ns + "/deployments"
	for _, r := range append(env.Requests.Since(mark), env.ManagerWrites.Since(markManager)...) {
		switch {
		case strings.HasPrefix(r, deployments+"/"):
			reads[strings.TrimPrefix(r, deployments+"/")]++
		case r == deployments || strings.HasPrefix(r, deployments+"?"):
			lists = append(lists, r)
		}
	}
	total := 0
	for d, c := range reads {
		total += c
		if c > 2 {
			t.Errorf("Deployment %s was read %d times, want at most 2", d, c)
		}
	}
	if len(lists) == 0 {
		t.Errorf("the namespace's Deployments were not listed once for the fleet; %d reads of %d Deployments: %v", total, n, reads)
	}
	t.Logf("%d lists, %d reads of %d Deployments: %v", len(lists), total, n, reads)
}

// rolloutFleet makes n rollouts r-i in ns, each of ConfigMap cm-i, which
// Deployment d-i reads; pick says how rollout i finds its workloads. It
// returns once each has rolled its Deployment.
func rolloutFleet(t *testing.T, ns string, n int, pick func(i int, p *workloadv1alpha1.ConfigRolloutParameters)) {
	t.Helper()
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: ns}, Data: map[string]string{"k": "v"}}
		cr := &workloadv1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r-%d", i), Namespace: ns}}
		cr.Spec.ForProvider.ConfigMaps = []workloadv1alpha1.SourceRef{{Name: cm.Name}}
		pick(i, &cr.Spec.ForProvider)
		env.Create(t, cm, consumer(ns, fmt.Sprintf("d-%d", i), cm.Name), cr)
	}
	for i := range n {
		rolledTo(t, ns, fmt.Sprintf("r-%d", i), fmt.Sprintf("d-%d", i))
	}
}

// reconcilesOnly edits the pod template of Deployment d-i for each i, waits
// for rollout r-i to settle, and asserts that the edits reconciled those
// rollouts once each and no other. A reconcile of rollout i reads ConfigMap
// cm-i, which is how it tells which rollouts were reconciled.
func reconcilesOnly(t *testing.T, ns string, is ...int) {
	t.Helper()
	drift := func(i int) {
		t.Helper()
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("d-%d", i)}}
		p := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"edited":"%d"}}}}}`, time.Now().UnixNano())))
		if err := env.Client.Patch(context.Background(), d, p); err != nil {
			t.Fatal(err)
		}
		rolledTo(t, ns, fmt.Sprintf("r-%d", i), d.Name)
	}
	want := map[string]int{}
	for _, i := range is {
		want[fmt.Sprintf("cm-%d", i)] = 1
	}
	// Whatever the fleet's creation left queued (the initial lists of the
	// ConfigMap watches rank below edits) runs before the edits are counted.
	testenv.WaitIdle(t, wait)
	mark := env.Requests.Len()
	for _, i := range is {
		drift(i)
	}
	// Once the queues are empty, every reconcile the edits caused has run.
	testenv.WaitIdle(t, wait)

	reads := map[string]int{}
	var seen []string
	for _, r := range env.Requests.Since(mark) {
		if strings.Contains(r, "/namespaces/"+ns+"/") {
			seen = append(seen, r)
		}
		if strings.HasPrefix(r, "GET /api/v1/namespaces/"+ns+"/configmaps/") {
			reads[path.Base(r)]++
		}
	}
	if diff := cmp.Diff(want, reads); diff != "" {
		t.Errorf("ConfigMaps read after %d Deployment edits (one per reconcile of the rollout that rolls it): -want, +got:\n%s\nthe provider's requests in the namespace:\n%s", len(is), diff, strings.Join(seen, "\n"))
	}
}

// TestConfigRolloutSelectorReadsOnlyWhatItSelects: a selector rollout in a
// namespace of many Deployments matches its selector in the provider's
// metadata cache and reads only the Deployment it selects; the namespace's
// workloads are never listed from the API server, not even when its deletion
// looks for the locks it holds, which it releases.
func TestConfigRolloutSelectorReadsOnlyWhatItSelects(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "rollout-selector", nil)
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "v"}})
	for i := range 8 {
		env.Create(t, consumer(ns, fmt.Sprintf("other-%d", i), "conf"))
	}
	env.Create(t, consumer(ns, "picked", "conf"))
	mark := env.Requests.Len()
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "sel", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "picked"}},
		}},
	}
	env.Create(t, cr)
	rolledTo(t, ns, "sel", "picked")
	if err := env.Client.Delete(ctx, cr); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the lock on Deployment picked to be released", func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "picked"}, d)
		_, held := d.Annotations["workload.clusterops.io/config-rollout"]
		return err == nil && !held, err
	})
	var lists, others []string
	for _, r := range env.Requests.Since(mark) {
		for _, kind := range []string{"apps/v1/namespaces/" + ns + "/deployments", "apps/v1/namespaces/" + ns + "/statefulsets", "apps/v1/namespaces/" + ns + "/daemonsets", "batch/v1/namespaces/" + ns + "/cronjobs"} {
			if strings.HasPrefix(r, "GET /apis/"+kind+"?") || r == "GET /apis/"+kind {
				lists = append(lists, r)
			}
		}
		if strings.HasPrefix(r, "GET /apis/apps/v1/namespaces/"+ns+"/deployments/other-") {
			others = append(others, r)
		}
	}
	if len(lists) > 0 {
		t.Errorf("the namespace's workloads were listed from the API server: %v", lists)
	}
	if len(others) > 0 {
		t.Errorf("Deployments the selector does not pick were read: %v", others)
	}
}

// TestConfigRolloutLockOfAGoneRolloutIsFree: a lock naming a ConfigRollout
// that no longer exists (one released through a cache that had not seen it
// yet) keeps no other rollout from rolling the workload.
func TestConfigRolloutLockOfAGoneRolloutIsFree(t *testing.T) {
	ns := env.Namespace(t, "rollout-ghost-lock", nil)
	d := consumer(ns, "api", "conf")
	d.Annotations = map[string]string{"workload.clusterops.io/config-rollout": "gone"}
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "v"}}, d)
	env.Create(t, &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "live", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
			Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "api"}},
		}},
	})
	rolledTo(t, ns, "live", "api")
}
