package fight

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestBundleSettlesWithEveryField: an AppBundle detects drift by comparing
// what it wants with what its field manager owns of each object. Whatever the
// API server normalises or defaults in what the bundle applies (a quantity
// written another way, an empty value, a fieldRef's apiVersion, a port's
// protocol, the ports of a Service) must compare equal, or the bundle would
// write on every reconcile. With every field it sets in use, a settled bundle
// writes nothing.
func TestBundleSettlesWithEveryField(t *testing.T) {
	q := resource.MustParse
	params := func(accessMode corev1.PersistentVolumeAccessMode, service workloadv1alpha1.ServiceType) workloadv1alpha1.AppBundleParameters {
		return workloadv1alpha1.AppBundleParameters{
			Image:    "nginx:1.21",
			Replicas: ptr.To[int32](2),
			Port:     ptr.To[int32](8080),
			Service:  service,
			Env: []corev1.EnvVar{
				{Name: "MODE", Value: "prod"},
				{Name: "EMPTY"},
				{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: q("1m")}}},
				{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "requests.memory"}}},
				{Name: "CM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "mode", Optional: ptr.To(true)}}},
				{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
			},
			Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: q("0.5"), corev1.ResourceMemory: q("1024Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: q("1000m"), corev1.ResourceMemory: q("2Gi")},
			},
			Storage: workloadv1alpha1.Storage{Size: ptr.To(q("1024Mi")), AccessModes: []corev1.PersistentVolumeAccessMode{accessMode}},
		}
	}
	cases := map[string]struct {
		reason string
		params workloadv1alpha1.AppBundleParameters
	}{
		"RecreateNodePort": {
			reason: "A ReadWriteOnce claim (Recreate) and a NodePort Service, whose node port the API server picks.",
			params: params(corev1.ReadWriteOnce, workloadv1alpha1.ServiceNodePort),
		},
		"RollingClusterIP": {
			reason: "A ReadWriteMany claim (the strategy left to the API server's default) and a ClusterIP Service.",
			params: params(corev1.ReadWriteMany, workloadv1alpha1.ServiceClusterIP),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := env.Namespace(t, "fight-settle", nil)
			ab := &workloadv1alpha1.AppBundle{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
				Spec:       workloadv1alpha1.AppBundleSpec{ForProvider: tc.params},
			}
			env.Create(t, ab)
			testenv.Eventually(t, wait, "the AppBundle's objects, and the bundle synced", func(ctx context.Context) (bool, error) {
				for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
					if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, o); err != nil {
						return false, client.IgnoreNotFound(err)
					}
				}
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-data"}, &corev1.PersistentVolumeClaim{}); err != nil {
					return false, client.IgnoreNotFound(err)
				}
				err := env.Client.Get(ctx, client.ObjectKeyFromObject(ab), ab)
				return err == nil && ab.GetCondition(xpv2.TypeSynced).Status == corev1.ConditionTrue, err
			})
			for _, p := range []string{"/deployments/web", "/services/web", "/persistentvolumeclaims/web-data"} {
				writesNothingMore(t, tc.reason+" "+p, ab, workloadv1alpha1.AppBundleGroupKind, "/namespaces/"+ns+p)
			}
		})
	}
}
