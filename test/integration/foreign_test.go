package integration

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// These tests put an object the provider did not create where a managed
// resource would put one of its own, then delete the managed resource: the
// object is never changed or deleted, and never keeps the managed resource
// from going away.

func foreignDeployment(ns, name string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"owner": "someone-else"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "postgres"}}},
			},
		},
	}
}

func foreignClaim(ns, name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"owner": "someone-else"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}},
		},
	}
}

func foreignService(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"owner": "someone-else"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "other"},
			Ports:    []corev1.ServicePort{{Name: "db", Port: 5432}},
		},
	}
}

// untouched fails the test unless o still exists with the UID and
// resourceVersion it had when created: neither deleted, replaced nor written.
func untouched(t *testing.T, o client.Object) {
	t.Helper()
	uid, rv := o.GetUID(), o.GetResourceVersion()
	got, _ := o.DeepCopyObject().(client.Object)
	if !exists(t, got) {
		t.Fatalf("the foreign %T %q was deleted", o, o.GetName())
	}
	if got.GetUID() != uid || got.GetResourceVersion() != rv {
		t.Errorf("the foreign %T %q was replaced or written: uid %s -> %s, resourceVersion %s -> %s", o, o.GetName(), uid, got.GetUID(), rv, got.GetResourceVersion())
	}
}

// waitSyncedSays waits for mg's Synced condition to be status and its message to
// contain msg.
func waitSyncedSays(t *testing.T, mg interface {
	client.Object
	GetCondition(xpv2.ConditionType) xpv2.Condition
}, status corev1.ConditionStatus, msg, what string) {
	t.Helper()
	testenv.Eventually(t, wait, what, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(mg), mg)
		c := mg.GetCondition(xpv2.TypeSynced)
		return c.Status == status && strings.Contains(c.Message, msg), err
	})
}

// deleted deletes o and waits until it is gone.
func deleted(t *testing.T, o client.Object, what string) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	gone, _ := o.DeepCopyObject().(client.Object)
	testenv.Eventually(t, wait, what, func(context.Context) (bool, error) {
		return !exists(t, gone), nil
	})
}

func TestAppBundleForeignObjectNeverBlocksDeletion(t *testing.T) {
	withService := func(ab *workloadv1alpha1.AppBundle) {
		ab.Spec.ForProvider.Service, ab.Spec.ForProvider.Port = workloadv1alpha1.ServiceClusterIP, ptr.To[int32](80)
	}
	cases := map[string]struct {
		reason  string
		foreign func(ns string) client.Object
		bundle  func(ab *workloadv1alpha1.AppBundle)
		// conflict is what Synced=False says; empty when the object is not
		// wanted and the bundle must sync around it.
		conflict string
	}{
		"WantedDeployment": {
			reason:   "a Deployment in the way is a conflict, not a wedge",
			foreign:  func(ns string) client.Object { return foreignDeployment(ns, "app") },
			conflict: `Deployment "app" exists and was not created by this AppBundle`,
		},
		"WantedClaim": {
			reason:   "a claim in the way is a conflict, not a wedge",
			foreign:  func(ns string) client.Object { return foreignClaim(ns, "app-data") },
			conflict: `PersistentVolumeClaim "app-data" exists and was not created by this AppBundle`,
		},
		"WantedService": {
			reason:   "a Service in the way of a wanted one is a conflict, not a wedge",
			foreign:  func(ns string) client.Object { return foreignService(ns, "app") },
			bundle:   withService,
			conflict: `Service "app" exists and was not created by this AppBundle`,
		},
		"UnwantedService": {
			reason:  "a Service named like a bundle that wants none is none of its business",
			foreign: func(ns string) client.Object { return foreignService(ns, "app") },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := env.Namespace(t, "bundle-foreign", nil)
			foreign := tc.foreign(ns)
			env.Create(t, foreign)
			ab := bundle(ns, "app")
			// As if it had been reconciled before the object came: the
			// finalizer is what an Observe that fails would keep forever.
			ab.Finalizers = []string{managed.FinalizerName}
			if tc.bundle != nil {
				tc.bundle(ab)
			}
			env.Create(t, ab)
			if tc.conflict != "" {
				waitSyncedSays(t, ab, corev1.ConditionFalse, tc.conflict, "a Synced=False condition about the foreign object")
			} else {
				waitSyncedSays(t, ab, corev1.ConditionTrue, "", "the AppBundle to sync around the foreign object")
				deploymentImage(t, ns, "app", "nginx:1.21", "the AppBundle's Deployment")
			}
			untouched(t, foreign)

			deleted(t, ab, "the AppBundle to be deleted ("+tc.reason+")")
			untouched(t, foreign)
			if tc.conflict == "" {
				// What the bundle created goes with it (the claim stays, under
				// the default Retain policy).
				if exists(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}) {
					t.Errorf("the AppBundle's Deployment outlived it")
				}
			}
		})
	}
}

// TestAppBundleAdoptionTakesOnlyWhatItWants: adoptExisting takes over the
// Deployment the bundle wants, never a Service it does not want.
func TestAppBundleAdoptionTakesOnlyWhatItWants(t *testing.T) {
	ns := env.Namespace(t, "bundle-adopt", nil)
	svc := foreignService(ns, "cache")
	env.Create(t, svc)
	ab := bundle(ns, "cache")
	ab.Spec.ForProvider.AdoptExisting = true
	env.Create(t, ab)
	waitSyncedSays(t, ab, corev1.ConditionTrue, "", "the adopting AppBundle to sync")
	deploymentImage(t, ns, "cache", "nginx:1.21", "the AppBundle's Deployment")
	// A poll later the Service must still be there: the reconcile that
	// synced the bundle is the one that deleted it before.
	untouched(t, svc)
	env.Update(t, ab, func() { ab.Spec.ForProvider.Image = "nginx:1.22" })
	deploymentImage(t, ns, "cache", "nginx:1.22", "the AppBundle to apply its new image")
	untouched(t, svc)
	deleted(t, ab, "the adopting AppBundle to be deleted")
	untouched(t, svc)
}

func TestImmortalContainerForeignPodNeverBlocksDeletion(t *testing.T) {
	ns := env.Namespace(t, "immortal-foreign", nil)
	foreign := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-immortalpod", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "postgres"}}},
	}
	env.Create(t, foreign)
	ic := immortal(ns, "db")
	ic.Finalizers = []string{managed.FinalizerName}
	env.Create(t, ic)
	waitSyncedSays(t, ic, corev1.ConditionFalse, `pod "db-immortalpod" exists but was not created by this ImmortalContainer`, "a Synced=False condition about the foreign pod")
	deleted(t, ic, "the ImmortalContainer to be deleted")
	untouched(t, foreign)
}

func TestChaosAgentForeignBackupNeverBlocksDeletion(t *testing.T) {
	ns := env.Namespace(t, "chaos-foreign", nil)
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "monkey-chaos-backup", Namespace: ns},
		Data:       map[string]string{"someone": "else's"},
	}
	env.Create(t, foreign)
	d := foreignDeployment(ns, "web")
	d.Spec.Replicas = ptr.To[int32](1)
	env.Create(t, d)
	ca := chaosAgent(ns, "monkey", func(p *chaosv1alpha1.ChaosAgentParameters) { p.CancerMode, p.MaxReplicas = true, 4 })
	env.Create(t, ca)
	// The agent cannot back up what it would change, so it changes nothing.
	waitSyncedSays(t, ca, corev1.ConditionFalse, `ConfigMap "monkey-chaos-backup" exists but is not the backup of this ChaosAgent`, "a Synced=False condition about the foreign backup")
	deleteAgent(t, ca)
	untouched(t, foreign)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas = %d (%v), want 1: the agent acted without a backup", *d.Spec.Replicas, err)
	}
}
