//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestConfigRolloutOnLocalControlPlane: a changed ConfigMap produces a new
// ReplicaSet, whose pods run.
func TestConfigRolloutOnLocalControlPlane(t *testing.T) {
	env := provider(t)
	ctx := context.Background()
	ns := env.Namespace(t, "e2e-rollout", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"app.conf": "v1"}}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: "nginx", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}}}}},
				},
			},
		},
	}
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}}, Auto: true,
		}},
	}
	for _, o := range []client.Object{cm, d, cr} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	replicaSets := func(n int, what string) {
		t.Helper()
		testenv.Eventually(t, time.Minute, what, func(ctx context.Context) (bool, error) {
			rs := &appsv1.ReplicaSetList{}
			if err := env.Client.List(ctx, rs, client.InNamespace(ns)); err != nil {
				return false, err
			}
			err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d)
			available := false
			for _, c := range d.Status.Conditions {
				available = available || (c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue)
			}
			return len(rs.Items) == n && d.Status.UpdatedReplicas == 1 && d.Status.ObservedGeneration == d.Generation && available, err
		})
	}
	// The first ConfigRollout stamps the hash: one rollout from the original ReplicaSet.
	replicaSets(2, "the Deployment to roll out the first hash")
	env.Update(t, cm, func() { cm.Data["app.conf"] = "v2" })
	replicaSets(3, "a new ReplicaSet for the changed ConfigMap")
}
