//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// fleetBundles is how many AppBundles TestAppBundleFleetConverges creates.
const fleetBundles = 20

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

	f := newFleet(t, env, ns, workloadv1alpha1.AppBundleGroupKind, fleetBundles, &workloadv1alpha1.AppBundle{},
		func() client.ObjectList { return &workloadv1alpha1.AppBundleList{} })
	f.begin(t)

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
	// What comes after Ready is reported, not asserted: trailing events of
	// the Deployments (a last status write) may still arrive.
	f.converged(t, "AppBundles", false)
}
