//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestAppBundleOnLocalControlPlane: the claim binds to a volume, the scheduler
// and kwok run the pod, the Deployment becomes Available, and the AppBundle's
// Ready follows it, through a deletion of the Deployment and back.
func TestAppBundleOnLocalControlPlane(t *testing.T) {
	env := provider(t)
	ctx := context.Background()
	ns := env.Namespace(t, "e2e-bundle", nil)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-pv"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns}},
			ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: "web-data"},
		},
	}
	if err := env.Client.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })

	ab := &workloadv1alpha1.AppBundle{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       workloadv1alpha1.AppBundleSpec{ForProvider: workloadv1alpha1.AppBundleParameters{Image: "nginx:1.21", Port: ptrTo[int32](80), Service: workloadv1alpha1.ServiceClusterIP}},
	}
	if err := env.Client.Create(ctx, ab); err != nil {
		t.Fatal(err)
	}
	ready := func(what string) {
		t.Helper()
		testenv.Eventually(t, time.Minute, what, func(ctx context.Context) (bool, error) {
			err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, ab)
			return ab.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue, err
		})
	}
	ready("the AppBundle to be Ready")
	if o := ab.Status.AtProvider; o.PVCPhase != corev1.ClaimBound || o.ReadyReplicas != 1 || o.ServiceAddress == "" {
		t.Errorf("status.atProvider = %+v, want a Bound claim, 1 ready replica and a Service address", o)
	}

	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	// The replacement runs in well under 100 ms on kwok, too fast for a poll
	// to catch the gap: watch every write to the AppBundle from the version
	// last read instead.
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	w, err := wc.Watch(wctx, &workloadv1alpha1.AppBundleList{}, client.InNamespace(ns),
		client.MatchingFields{"metadata.name": "web"}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: ab.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	deleted := d.UID
	if err := env.Client.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	dropped := false
	for ev := range w.ResultChan() {
		if got, ok := ev.Object.(*workloadv1alpha1.AppBundle); ok &&
			(got.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue || got.Status.AtProvider.ReadyReplicas == 0) {
			dropped = true
			break
		}
	}
	if !dropped {
		t.Fatal("the AppBundle never reported itself not Ready while its Deployment was replaced")
	}
	ready("the AppBundle to be Ready again")
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	if d.UID == deleted {
		t.Errorf("Deployment web is still %s, want a replacement", deleted)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestAppBundleGrowsExpandableClaim grows a bound claim whose storage class
// allows expansion (the API server accepts a resize only for bound claims).
func TestAppBundleGrowsExpandableClaim(t *testing.T) {
	env := provider(t)
	ctx := context.Background()
	ns := env.Namespace(t, "e2e-grow", nil)
	class := ns + "-expandable"
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "example.com/none", AllowVolumeExpansion: ptrTo(true)}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-pv"},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:       class,
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns}},
			ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: "db-data"},
		},
	}
	for _, o := range []client.Object{sc, pv} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	ab := &workloadv1alpha1.AppBundle{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: workloadv1alpha1.AppBundleSpec{ForProvider: workloadv1alpha1.AppBundleParameters{
			Image: "postgres:16", Storage: workloadv1alpha1.Storage{StorageClassName: ptrTo(class)},
		}},
	}
	if err := env.Client.Create(ctx, ab); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	testenv.Eventually(t, time.Minute, "the claim to be bound", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db-data"}, pvc)
		return pvc.Status.Phase == corev1.ClaimBound, err
	})
	q := resource.MustParse("2Gi")
	env.Update(t, ab, func() { ab.Spec.ForProvider.Storage.Size = &q })
	testenv.Eventually(t, time.Minute, "the claim to request 2Gi", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db-data"}, pvc)
		got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		return got.Cmp(q) == 0, err
	})
	testenv.Eventually(t, time.Minute, "StorageSynced to be True", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db"}, ab)
		return ab.GetCondition("StorageSynced").Status == corev1.ConditionTrue, err
	})
}
