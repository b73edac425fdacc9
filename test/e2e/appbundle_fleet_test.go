//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// fleetBundles is how many AppBundles TestAppBundleFleetConverges creates.
const fleetBundles = 20

// maxReconcilesPerBundle is issue #17's target: an AppBundle converges in at
// most this many reconciles, however often its Deployment's status changes on
// the way to Available.
const maxReconcilesPerBundle = 3

// TestAppBundleFleetConverges creates a fleet of AppBundles at once, half of
// them with a Service, on a control plane where their Deployments really come
// up (the claims bind, the scheduler places the pods, kwok runs them and the
// Deployment controller writes their status), and counts the AppBundle
// controller's reconciles from before the first create until all are Ready.
func TestAppBundleFleetConverges(t *testing.T) {
	env := provider(t)
	ctx := context.Background()
	ns := env.Namespace(t, "e2e-fleet", nil)
	for i := range fleetBundles {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", ns, i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns}},
				ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: fmt.Sprintf("app-%d-data", i)},
			},
		}
		if err := env.Client.Create(ctx, pv); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
	}

	// The bundles go while the provider runs, before their namespace: one
	// deleted with it would hold its finalizer in a namespace where the
	// provider can no longer write, long after this test.
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Client.DeleteAllOf(ctx, &workloadv1alpha1.AppBundle{}, client.InNamespace(ns))
		testenv.Eventually(t, 2*time.Minute, "the fleet to be deleted", func(ctx context.Context) (bool, error) {
			l := &workloadv1alpha1.AppBundleList{}
			err := env.Client.List(ctx, l, client.InNamespace(ns))
			return len(l.Items) == 0, err
		})
	})

	// What an earlier test left must not count: start once the provider is
	// idle.
	testenv.WaitIdle(t, 2*time.Minute)
	before := reconciles(t)
	requests := env.Requests.Len()
	managerRequests := env.ManagerWrites.Len()
	start := time.Now()

	for i := range fleetBundles {
		ab := &workloadv1alpha1.AppBundle{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", i), Namespace: ns},
			Spec:       workloadv1alpha1.AppBundleSpec{ForProvider: workloadv1alpha1.AppBundleParameters{Image: "nginx:1.27"}},
		}
		if i%2 == 0 {
			ab.Spec.ForProvider.Port, ab.Spec.ForProvider.Service = ptrTo[int32](80), workloadv1alpha1.ServiceClusterIP
		}
		if err := env.Client.Create(ctx, ab); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 3*time.Minute, fmt.Sprintf("all %d AppBundles to be Ready", fleetBundles), func(ctx context.Context) (bool, error) {
		l := &workloadv1alpha1.AppBundleList{}
		if err := env.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			return false, err
		}
		ready := 0
		for _, ab := range l.Items {
			if ab.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue {
				ready++
			}
		}
		if ready < fleetBundles {
			return false, fmt.Errorf("%d of %d Ready", ready, fleetBundles)
		}
		return true, nil
	})
	toReady := reconciles(t) - before
	took := time.Since(start)
	byVerb := countByVerb(append(env.Requests.Since(requests), env.ManagerWrites.Since(managerRequests)...), "/namespaces/"+ns+"/")

	// What comes after Ready is reported, not asserted: trailing events of
	// the Deployments (a last status write) may still arrive.
	testenv.WaitIdle(t, 2*time.Minute)
	settled := reconciles(t) - before
	t.Logf("%d AppBundles Ready in %s: %.2f reconciles per bundle to Ready, %.2f once settled; requests per bundle to Ready (provider and its manager, in the namespace): %s",
		fleetBundles, took.Round(time.Millisecond), toReady/fleetBundles, settled/fleetBundles, perBundle(byVerb, fleetBundles))
	if per := toReady / fleetBundles; per > maxReconcilesPerBundle {
		t.Errorf("%.2f reconciles per AppBundle from create to Ready, want at most %d", per, maxReconcilesPerBundle)
	}
}

// reconciles is how many reconciles the AppBundle controller of the
// in-process provider has run, by controller-runtime's metric.
func reconciles(t *testing.T) float64 {
	t.Helper()
	n, err := testenv.Reconciles(managed.ControllerName(workloadv1alpha1.AppBundleGroupKind))
	if err != nil {
		t.Fatalf("cannot gather metrics: %v", err)
	}
	return n
}

// countByVerb counts the requests whose path contains part (a namespace's
// path) by method and resource, such as "PUT appbundles/status".
func countByVerb(requests []string, part string) map[string]int {
	out := map[string]int{}
	for _, r := range requests {
		method, path, _ := strings.Cut(r, " ")
		path, _, _ = strings.Cut(path, "?")
		_, rest, ok := strings.Cut(path, part)
		if !ok {
			continue
		}
		segs := strings.Split(rest, "/")
		res := segs[0]
		if len(segs) > 2 {
			res += "/" + segs[2]
		}
		out[method+" "+res]++
	}
	return out
}

// perBundle says the requests per bundle, in all and by method and resource.
func perBundle(byVerb map[string]int, n int) string {
	keys := make([]string, 0, len(byVerb))
	total := 0
	for k, c := range byVerb {
		keys = append(keys, k)
		total += c
	}
	sort.Strings(keys)
	parts := []string{fmt.Sprintf("%.2f in all", float64(total)/float64(n))}
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(byVerb[k])/float64(n)))
	}
	return strings.Join(parts, ", ")
}
