package integration

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clusterops/provider-clusterops/internal/controller/appbundle"
	"github.com/clusterops/provider-clusterops/internal/controller/immortalcontainer"
	"github.com/clusterops/provider-clusterops/internal/provider"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestProviderRunsProductionWiring shows that the provider the tests run is
// built as cmd/provider builds it: its cache holds only the pods, claims and
// Services the provider made, without managedFields, workloads as the
// metadata ConfigRollout reads, and CRDs without their
// schemas (safe-start is on).
func TestProviderRunsProductionWiring(t *testing.T) {
	ns := env.Namespace(t, "wiring", nil)
	cases := map[string]struct {
		reason string
		label  string
		object func(name string, lbls map[string]string) client.Object
	}{
		"Pods": {
			reason: "Only pods an ImmortalContainer made are cached.",
			label:  immortalcontainer.LabelOwner,
			object: func(name string, lbls map[string]string) client.Object {
				return &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
				}
			},
		},
		"Claims": {
			reason: "Only claims an AppBundle made are cached.",
			label:  appbundle.LabelOwner,
			object: func(name string, lbls map[string]string) client.Object {
				return &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
					},
				}
			},
		},
		"Services": {
			reason: "Only Services an AppBundle made are cached.",
			label:  appbundle.LabelOwner,
			object: func(name string, lbls map[string]string) client.Object {
				return &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
					Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
				}
			},
		},
	}
	cache := env.Provider.Manager.GetCache()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// The foreign object is made first: once the owned one is in the
			// cache, an unscoped cache would hold the foreign one too.
			foreign := tc.object("foreign", nil)
			owned := tc.object("owned", map[string]string{tc.label: "someone"})
			for _, o := range []client.Object{foreign, owned} {
				if err := env.Client.Create(context.Background(), o); err != nil {
					t.Fatalf("cannot create %s: %v", o.GetName(), err)
				}
			}
			if len(owned.GetManagedFields()) == 0 {
				t.Fatalf("\n%s\nthe API server set no managedFields on %s: nothing to strip", tc.reason, owned.GetName())
			}
			cached := tc.object("", nil)
			testenv.Eventually(t, 30*time.Second, "the owned object in the provider's cache", func(ctx context.Context) (bool, error) {
				return true, cache.Get(ctx, client.ObjectKeyFromObject(owned), cached)
			})
			if diff := cmp.Diff([]metav1.ManagedFieldsEntry(nil), cached.GetManagedFields()); diff != "" {
				t.Errorf("\n%s\ncached managedFields: -want, +got:\n%s", tc.reason, diff)
			}
			if err := cache.Get(context.Background(), client.ObjectKeyFromObject(foreign), tc.object("", nil)); !kerrors.IsNotFound(err) {
				t.Errorf("\n%s\nGet of the unlabelled object from the cache: want NotFound, got %v", tc.reason, err)
			}
		})
	}

	t.Run("Workloads", func(t *testing.T) {
		// Every workload is cached as metadata for ConfigRollout, which keeps
		// only what it decides on: not what a client-side apply leaves.
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "applied", Labels: map[string]string{"app": "applied"}, Annotations: map[string]string{
				"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"apps/v1","kind":"Deployment"}`,
				"workload.clusterops.io/config-rollout":            "conf",
			}},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "applied"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "applied"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}},
			},
		}
		if err := env.Client.Create(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		cached := &metav1.PartialObjectMetadata{}
		cached.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
		testenv.Eventually(t, 30*time.Second, "the Deployment in the provider's cache", func(ctx context.Context) (bool, error) {
			return true, cache.Get(ctx, client.ObjectKeyFromObject(d), cached)
		})
		want := map[string]string{"workload.clusterops.io/config-rollout": "conf"}
		if diff := cmp.Diff(want, cached.GetAnnotations()); diff != "" {
			t.Errorf("cached annotations: -want, +got:\n%s", diff)
		}
		if diff := cmp.Diff(d.Labels, cached.GetLabels()); diff != "" {
			t.Errorf("cached labels: -want, +got:\n%s", diff)
		}
	})

	t.Run("CRDs", func(t *testing.T) {
		// The safe-start gate's cache, which only a provider with safe-start has.
		crd := &apiextensionsv1.CustomResourceDefinition{}
		testenv.Eventually(t, 30*time.Second, "the ImmortalContainer CRD in the provider's cache", func(ctx context.Context) (bool, error) {
			return true, cache.Get(ctx, client.ObjectKey{Name: "immortalcontainers.workload.clusterops.io"}, crd)
		})
		for _, v := range crd.Spec.Versions {
			if v.Schema != nil {
				t.Errorf("cached CRD version %s keeps its schema: want it stripped", v.Name)
			}
		}
	})
}

// TestProviderBuildsTwiceInOneProcess shows that providers in one process
// register their metrics, every kind's included, without a panic or an
// error: tests build several, and controller-runtime's registry is global.
// A provider registers them with the registry it is given.
func TestProviderBuildsTwiceInOneProcess(t *testing.T) {
	build := func(reg prometheus.Registerer) error {
		o := testenv.ProviderOptions(env.Config, time.Hour, 10)
		// Without safe-start every kind is set up, and registers its
		// metrics, in New.
		o.SkipNameValidation, o.SafeStart, o.MetricsRegistry = true, false, reg
		_, err := provider.New(o)
		return err
	}
	if err := build(nil); err != nil {
		t.Errorf("cannot build a second provider into controller-runtime's registry: %v", err)
	}
	reg := prometheus.NewRegistry()
	for i := range 2 {
		if err := build(reg); err != nil {
			t.Fatalf("cannot build provider %d into one registry: %v", i, err)
		}
	}
	for _, name := range []string{
		"clusterops_chaos_actions_total",
		"clusterops_chaos_recovery_seconds",
		"clusterops_chaos_unrecovered_total",
		"clusterops_chaos_acting",
		"clusterops_copy_oldest_unsynced_timestamp_seconds",
		"clusterops_drift_repaired_total",
		"clusterops_urgent_wait_seconds",
		"clusterops_api_requests_total",
	} {
		// A registry refuses a second metric of a name it holds.
		if err := reg.Register(prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe"})); err == nil {
			t.Errorf("the provider's registry lacks %s", name)
		}
	}
}
