package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/drift"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

func bundle(ns, name string) *workloadv1alpha1.AppBundle {
	return &workloadv1alpha1.AppBundle{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       workloadv1alpha1.AppBundleSpec{ForProvider: workloadv1alpha1.AppBundleParameters{Image: "nginx:1.21"}},
	}
}

func get(t *testing.T, ns, name string, o client.Object) {
	t.Helper()
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, o); err != nil {
		t.Fatal(err)
	}
}

// deploymentImage waits until Deployment name runs image.
func deploymentImage(t *testing.T, ns, name, image, what string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	testenv.Eventually(t, wait, what, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d)
		return err == nil && d.DeletionTimestamp == nil && len(d.Spec.Template.Spec.Containers) > 0 && d.Spec.Template.Spec.Containers[0].Image == image, err
	})
	return d
}

func TestAppBundleCreatesAndRepairsItsObjects(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "bundle", nil)
	ab := bundle(ns, "web")
	if err := env.Client.Create(ctx, ab); err != nil {
		t.Fatal(err)
	}
	d := deploymentImage(t, ns, "web", "nginx:1.21", "the Deployment")
	c := d.Spec.Template.Spec.Containers[0]
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/data" || d.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "web-data" {
		t.Errorf("the Deployment does not mount claim web-data at /data: %+v", d.Spec.Template.Spec)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy = %q, want Recreate for a ReadWriteOnce claim", d.Spec.Strategy.Type)
	}
	if len(d.OwnerReferences) != 1 || d.OwnerReferences[0].Name != "web" {
		t.Errorf("Deployment owner references = %v, want the AppBundle", d.OwnerReferences)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	get(t, ns, "web-data", pvc)
	if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("1Gi")) != 0 || pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce {
		t.Errorf("claim = %v %v, want 1Gi ReadWriteOnce", got.String(), pvc.Spec.AccessModes)
	}
	if len(pvc.OwnerReferences) != 0 {
		t.Errorf("a claim under the Retain policy has owner references %v: the garbage collector would delete its data", pvc.OwnerReferences)
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, &corev1.Service{}); !kerrors.IsNotFound(err) {
		t.Errorf("a Service exists without being asked for: %v", err)
	}
	testenv.Eventually(t, wait, "status to show the claim's phase", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, ab)
		return ab.Status.AtProvider.PVCPhase == corev1.ClaimPending && ab.GetCondition(xpv2.TypeSynced).Status == corev1.ConditionTrue, err
	})

	// Edited by someone else: restored on the event.
	d.Spec.Template.Spec.Containers[0].Image = "evil:latest"
	if err := env.Client.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	d = deploymentImage(t, ns, "web", "nginx:1.21", "the edited image to be restored")
	recent := func() []apisv1alpha1.Drift { return ab.Status.AtProvider.RecentDrift }
	driftReported(t, ab, recent, drift.Of("Deployment", ns, "web", []string{"spec.template.spec.containers[0].image"}))

	// Fields the AppBundle does not set are left alone: replicas (unset here,
	// so an HPA may own them) and another manager's annotation.
	d.Spec.Replicas = ptr.To[int32](5)
	d.Annotations = map[string]string{"example.com/owner": "team-a"}
	if err := env.Client.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	// Trigger a full reconcile through a change of the AppBundle that needs a write.
	env.Update(t, ab, func() {
		ab.Spec.ForProvider.Env = []corev1.EnvVar{{Name: "MODE", Value: "prod"}}
	})
	testenv.Eventually(t, wait, "the new env to be applied", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d)
		return len(d.Spec.Template.Spec.Containers[0].Env) == 1, err
	})
	if *d.Spec.Replicas != 5 || d.Annotations["example.com/owner"] != "team-a" {
		t.Errorf("fields owned by others were changed: replicas %d, annotations %v", *d.Spec.Replicas, d.Annotations)
	}
	// A change of the AppBundle's own spec is no drift.
	get(t, ns, "web", ab)
	if n := len(ab.Status.AtProvider.RecentDrift); n != 1 {
		t.Errorf("recent drift after a spec change: %+v, want the image's alone", ab.Status.AtProvider.RecentDrift)
	}

	// Deleted: recreated on the event.
	if err := env.Client.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	old := d.UID
	testenv.Eventually(t, wait, "the deleted Deployment to be recreated", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d)
		return d.UID != old && d.DeletionTimestamp == nil, err
	})
	driftReported(t, ab, recent, drift.Deleted("Deployment", ns, "web"))

	// A Service is created when asked for, and deleted when no longer wanted.
	env.Update(t, ab, func() {
		ab.Spec.ForProvider.Port = ptr.To[int32](80)
		ab.Spec.ForProvider.Service = workloadv1alpha1.ServiceClusterIP
	})
	svc := &corev1.Service{}
	testenv.Eventually(t, wait, "the Service and its address in status", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, svc); err != nil {
			return false, err
		}
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, ab)
		return ab.Status.AtProvider.ServiceAddress == svc.Spec.ClusterIP+":80", err
	})
	// The Service, edited or deleted, is repaired too.
	env.Update(t, svc, func() { svc.Spec.Type = corev1.ServiceTypeNodePort })
	testenv.Eventually(t, wait, "the Service type to be restored", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, svc)
		return svc.Spec.Type == corev1.ServiceTypeClusterIP, err
	})
	driftReported(t, ab, recent, drift.Of("Service", ns, "web", []string{"spec.type"}))
	if err := env.Client.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	oldSvc := svc.UID
	testenv.Eventually(t, wait, "the deleted Service to be recreated", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, svc)
		return svc.UID != oldSvc, err
	})

	env.Update(t, ab, func() { ab.Spec.ForProvider.Service = workloadv1alpha1.ServiceNone })
	testenv.Eventually(t, wait, "the Service to be deleted", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, &corev1.Service{})
		return kerrors.IsNotFound(err), nil
	})

	// Deleting the AppBundle deletes the Deployment and keeps the claim.
	if err := env.Client.Delete(ctx, ab); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the AppBundle and its Deployment to be gone", func(ctx context.Context) (bool, error) {
		errAB := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, ab)
		errD := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, &appsv1.Deployment{})
		return kerrors.IsNotFound(errAB) && kerrors.IsNotFound(errD), nil
	})
	get(t, ns, "web-data", pvc)
	if pvc.DeletionTimestamp != nil {
		t.Errorf("the claim is being deleted under the Retain policy")
	}
}

func TestAppBundleDeletePolicyDeletesClaim(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "bundle-delete", nil)
	ab := bundle(ns, "tmp")
	ab.Spec.ForProvider.PVCDeletionPolicy = workloadv1alpha1.PVCDelete
	if err := env.Client.Create(ctx, ab); err != nil {
		t.Fatal(err)
	}
	deploymentImage(t, ns, "tmp", "nginx:1.21", "the Deployment")
	pvc := &corev1.PersistentVolumeClaim{}
	get(t, ns, "tmp-data", pvc)
	if len(pvc.OwnerReferences) != 1 {
		t.Errorf("a claim under the Delete policy should be owned by its AppBundle, got %v", pvc.OwnerReferences)
	}
	if err := env.Client.Delete(ctx, ab); err != nil {
		t.Fatal(err)
	}
	// envtest runs no pvc-protection controller, so the claim stays
	// Terminating: its deletion having been asked for is what counts.
	testenv.Eventually(t, wait, "the claim to be deleted", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "tmp-data"}, pvc)
		return kerrors.IsNotFound(err) || pvc.DeletionTimestamp != nil, nil
	})
}

func TestAppBundleRefusesToTakeOver(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "bundle-foreign", nil)
	foreign := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "postgres"}}},
			},
		},
	}
	if err := env.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	ab := bundle(ns, "db")
	if err := env.Client.Create(ctx, ab); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "a Synced=False condition about the foreign Deployment", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db"}, ab)
		c := ab.GetCondition(xpv2.TypeSynced)
		return c.Status == corev1.ConditionFalse && strings.Contains(c.Message, `Deployment "db" exists and was not created by this AppBundle`), err
	})
	events := &corev1.EventList{}
	testenv.Eventually(t, wait, "a Warning event on the AppBundle", func(ctx context.Context) (bool, error) {
		err := env.Client.List(ctx, events, client.InNamespace(ns))
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "db" && e.InvolvedObject.Kind == "AppBundle" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "exists and was not created by this AppBundle") {
				return true, nil
			}
		}
		return false, err
	})
	d := &appsv1.Deployment{}
	get(t, ns, "db", d)
	if d.Spec.Template.Spec.Containers[0].Image != "postgres" || d.Labels["workload.clusterops.io/appbundle"] != "" {
		t.Errorf("the foreign Deployment was changed")
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db-data"}, &corev1.PersistentVolumeClaim{}); !kerrors.IsNotFound(err) {
		t.Errorf("a claim was created although the AppBundle could not proceed: %v", err)
	}

	// With adoptExisting, a Deployment whose immutable selector differs is
	// still refused, with the reason.
	env.Update(t, ab, func() {
		ab.Spec.ForProvider.AdoptExisting = true
	})
	testenv.Eventually(t, wait, "a condition explaining why the Deployment cannot be adopted", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db"}, ab)
		c := ab.GetCondition(xpv2.TypeSynced)
		return c.Status == corev1.ConditionFalse && strings.Contains(c.Message, `cannot adopt Deployment "db": its selector app=db differs from workload.clusterops.io/appbundle=db`), err
	})

	// A compatible one is taken over: labelled, and running the AppBundle's container.
	compatible := foreign.DeepCopy()
	compatible.ObjectMeta = metav1.ObjectMeta{Name: "cache", Namespace: ns}
	compatible.Spec.Selector.MatchLabels = map[string]string{"workload.clusterops.io/appbundle": "cache"}
	compatible.Spec.Template.Labels = map[string]string{"workload.clusterops.io/appbundle": "cache"}
	if err := env.Client.Create(ctx, compatible); err != nil {
		t.Fatal(err)
	}
	adopter := bundle(ns, "cache")
	adopter.Spec.ForProvider.AdoptExisting = true
	if err := env.Client.Create(ctx, adopter); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the Deployment to be adopted", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "cache"}, adopter); err != nil {
			return false, err
		}
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "cache"}, d)
		if c := adopter.GetCondition(xpv2.TypeSynced); err == nil && c.Status == corev1.ConditionFalse {
			err = errors.New(c.Message)
		}
		return d.Labels["workload.clusterops.io/appbundle"] == "cache" && container(d, "app") != nil, err
	})
}

func container(d *appsv1.Deployment, name string) *corev1.Container {
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == name {
			return &d.Spec.Template.Spec.Containers[i]
		}
	}
	return nil
}

func TestAppBundleRefusesImmutableStorageChanges(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "bundle-storage", nil)
	ab := bundle(ns, "store")
	if err := env.Client.Create(ctx, ab); err != nil {
		t.Fatal(err)
	}
	deploymentImage(t, ns, "store", "nginx:1.21", "the Deployment")
	cases := map[string]struct {
		size string
		want string
	}{
		"Shrink": {size: "500Mi", want: `PersistentVolumeClaim "store-data" cannot shrink from 1Gi to 500Mi`},
		"Grow":   {size: "2Gi", want: `PersistentVolumeClaim "store-data" cannot grow from 1Gi to 2Gi: its storage class does not allow volume expansion`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q := resource.MustParse(tc.size)
			env.Update(t, ab, func() { ab.Spec.ForProvider.Storage.Size = &q })
			testenv.Eventually(t, wait, "a StorageSynced=False condition", func(ctx context.Context) (bool, error) {
				err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "store"}, ab)
				c := ab.GetCondition("StorageSynced")
				return c.Status == corev1.ConditionFalse && c.Reason == "ChangeRefused" && c.Message == tc.want, err
			})
			pvc := &corev1.PersistentVolumeClaim{}
			get(t, ns, "store-data", pvc)
			if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("1Gi")) != 0 {
				t.Errorf("the claim was changed to %s", got.String())
			}
			if c := ab.GetCondition(xpv2.TypeSynced); c.Status != corev1.ConditionTrue {
				t.Errorf("a refused storage change must not stop the rest from syncing: %+v", c)
			}
		})
	}
}

// A create cut short, the provider restarted after crossplane-runtime
// marked the AppBundle create-pending and before it recorded the result, is
// carried on: what a bundle makes is named after it, so the next Observe
// finds whatever was made and nothing leaks. crossplane-runtime's default
// stops reconciling such a resource for good until someone removes the
// annotation by hand.
func TestAppBundleCreateCutShortIsResumed(t *testing.T) {
	ns := env.Namespace(t, "bundle-cut", nil)
	ab := bundle(ns, "web")
	meta.SetExternalCreatePending(ab, time.Now())
	if err := env.Client.Create(context.Background(), ab); err != nil {
		t.Fatal(err)
	}
	deploymentImage(t, ns, "web", "nginx:1.21", "the Deployment")
	testenv.Eventually(t, wait, "the AppBundle to be Synced", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, ab)
		s := ab.GetCondition(xpv2.TypeSynced)
		if s.Status == corev1.ConditionFalse {
			return false, fmt.Errorf("%s: %s", s.Reason, s.Message)
		}
		return s.Status == corev1.ConditionTrue, err
	})
}
