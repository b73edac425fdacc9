//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

func fakeDeployment(ns, name string, replicas int32, lbls map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "fake", Image: "example.invalid/e2e/fake:v1"}}},
			},
		},
	}
}

// TestChaosAgentOnLocalControlPlane runs an agent where the disruption
// controller keeps PodDisruptionBudgets current: evictions a budget forbids
// are refused and reported, evictions it allows happen, a labelled Deployment
// doubles up to maxReplicas, and deleting the agent restores its replicas.
func TestChaosAgentOnLocalControlPlane(t *testing.T) {
	env := provider(t)
	ctx := context.Background()
	ns := env.Namespace(t, "e2e-chaos", nil)
	guarded := fakeDeployment(ns, "guarded", 3, nil)
	grower := fakeDeployment(ns, "grower", 1, map[string]string{"chaos.clusterops.io/victim": "true"})
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(3)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}
	for _, o := range []client.Object{guarded, grower, pdb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, time.Minute, "the budget to count 3 healthy pods and allow no disruption", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(pdb), pdb)
		s := pdb.Status
		return s.ObservedGeneration == pdb.Generation && s.CurrentHealthy == 3 && s.DisruptionsAllowed == 0, err
	})
	before := podUIDs(t, env.Client, ns, "guarded")

	ca := &chaosv1alpha1.ChaosAgent{
		ObjectMeta: metav1.ObjectMeta{Name: "edmund", Namespace: ns},
		Spec: chaosv1alpha1.ChaosAgentSpec{ForProvider: chaosv1alpha1.ChaosAgentParameters{
			TantrumMode: true, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
			CancerMode: true, MaxReplicas: 4, DeploymentSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"chaos.clusterops.io/victim": "true"}},
			Eagerness: 100, MaxActionsPerRound: 2, Interval: metav1.Duration{Duration: time.Second}, Seed: ptr.To[int64](1605),
		}},
	}
	if err := env.Client.Create(ctx, ca); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "refused evictions to be reported and the Deployment to reach maxReplicas", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(grower), grower); err != nil {
			return false, err
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca); err != nil {
			return false, err
		}
		o := ca.Status.AtProvider
		if o.Refused >= 2 && *grower.Spec.Replicas == 4 {
			return true, nil
		}
		return false, fmt.Errorf("refused %d, replicas %d, summary %q", o.Refused, *grower.Spec.Replicas, o.LastRoundSummary)
	})
	if after := podUIDs(t, env.Client, ns, "guarded"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("pods under a budget that allows no disruption changed: %v -> %v", before, after)
	}
	if ca.Status.AtProvider.PodsKilled != 0 {
		t.Errorf("podsKilled = %d while the budget allowed no disruption", ca.Status.AtProvider.PodsKilled)
	}

	// A budget that allows one disruption lets the agent evict.
	pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(2))
	if err := env.Client.Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "an eviction the budget allows", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca)
		return ca.Status.AtProvider.PodsKilled >= 1, err
	})

	if err := env.Client.Delete(ctx, ca); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the agent to be gone with the replicas restored and its backup removed", func(ctx context.Context) (bool, error) {
		errCA := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca)
		errBackup := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "edmund-chaos-backup"}, &corev1.ConfigMap{})
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(grower), grower); err != nil {
			return false, err
		}
		return kerrors.IsNotFound(errCA) && kerrors.IsNotFound(errBackup) && *grower.Spec.Replicas == 1, nil
	})
}

func podUIDs(t *testing.T, c client.Client, ns, app string) []types.UID {
	t.Helper()
	pods := &corev1.PodList{}
	if err := c.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
		t.Fatal(err)
	}
	var out []types.UID
	for _, p := range pods.Items {
		out = append(out, p.UID)
	}
	return out
}
