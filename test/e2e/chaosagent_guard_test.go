//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	pcv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// tantrumAgent kills one pod of app every interval, outright.
func tantrumAgent(ns, name, app string, interval time.Duration) *chaosv1alpha1.ChaosAgent {
	return &chaosv1alpha1.ChaosAgent{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: chaosv1alpha1.ChaosAgentSpec{ForProvider: chaosv1alpha1.ChaosAgentParameters{
			TantrumMode: true, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			RespectDisruptionBudgets: ptr.To(false), Eagerness: 100, MaxActionsPerRound: 1,
			Interval: metav1.Duration{Duration: interval},
		}},
	}
}

func createAll(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// available waits until the Deployment has all its replicas available.
func available(t *testing.T, c client.Client, d *appsv1.Deployment) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "Deployment "+d.Name+" to be available", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(d), d)
		return d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.Replicas == *d.Spec.Replicas, err
	})
}

// actingIs waits until the agent's Acting condition has the status and reason.
func actingIs(t *testing.T, c client.Client, ca *chaosv1alpha1.ChaosAgent, status corev1.ConditionStatus, reason xpv2.ConditionReason) {
	t.Helper()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("Acting=%s (%s)", status, reason), func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ca), ca); err != nil {
			return false, err
		}
		cond := ca.GetCondition(chaosv1alpha1.TypeActing)
		if cond.Status == status && cond.Reason == reason {
			return true, nil
		}
		return false, fmt.Errorf("acting %s %s %q, summary %q", cond.Status, cond.Reason, cond.Message, ca.Status.AtProvider.LastRoundSummary)
	})
}

// killedAtLeast waits until the agent has killed n pods.
func killedAtLeast(t *testing.T, c client.Client, ca *chaosv1alpha1.ChaosAgent, n int64) {
	t.Helper()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("%d pods killed", n), func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(ca), ca)
		return ca.Status.AtProvider.PodsKilled >= n, err
	})
}

// TestChaosAgentGuardOnLocalControlPlane: while a Deployment the guard looks
// at cannot be scheduled, the agent pauses; once the scheduler places its
// pods and they run, the agent resumes.
func TestChaosAgentGuardOnLocalControlPlane(t *testing.T) {
	env := provider(t)
	ns := env.Namespace(t, "e2e-chaos-guard", nil)
	// The guard selects workloads and pods by their own labels.
	web := fakeDeployment(ns, "web", 2, map[string]string{"app": "web"})
	web.Spec.Template.Spec.NodeSelector = map[string]string{"e2e.clusterops.io/nowhere": "true"}
	victim := fakeDeployment(ns, "victim", 2, nil)
	createAll(t, env.Client, web, victim)
	available(t, env.Client, victim)

	ca := tantrumAgent(ns, "guarded", "victim", time.Second)
	ca.Spec.ForProvider.SteadyState = &chaosv1alpha1.SteadyState{
		MinAvailablePercent: ptr.To[int32](100), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
	}
	createAll(t, env.Client, ca)
	actingIs(t, env.Client, ca, corev1.ConditionFalse, chaosv1alpha1.ReasonSteadyStateViolated)
	before := podUIDs(t, env.Client, ns, "victim")
	paused := ca.Status.AtProvider.RoundsRun
	testenv.Eventually(t, time.Minute, "three paused rounds", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca)
		return ca.Status.AtProvider.RoundsRun >= paused+3, err
	})
	if ca.Status.AtProvider.PodsKilled != 0 {
		t.Errorf("podsKilled = %d while the steady state did not hold", ca.Status.AtProvider.PodsKilled)
	}
	if after := podUIDs(t, env.Client, ns, "victim"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("pods changed while the agent was paused: %v -> %v", before, after)
	}

	env.Update(t, web, func() { web.Spec.Template.Spec.NodeSelector = nil })
	available(t, env.Client, web)
	actingIs(t, env.Client, ca, corev1.ConditionTrue, chaosv1alpha1.ReasonActing)
	killedAtLeast(t, env.Client, ca, 1)
}

// TestChaosAgentKillSwitchesOnLocalControlPlane: the namespace's and the
// config's kill switches each stop a running agent within one round, and
// lifting them lets it act again.
func TestChaosAgentKillSwitchesOnLocalControlPlane(t *testing.T) {
	env := provider(t)
	ctx := context.Background()
	ns := env.Namespace(t, "e2e-chaos-switch", nil)
	victim := fakeDeployment(ns, "victim", 3, nil)
	cpc := &pcv1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-chaos-switch"},
		Spec:       pcv1alpha1.ClusterProviderConfigSpec{Credentials: pcv1alpha1.ClusterCredentials{Source: pcv1alpha1.CredentialsSourceInjectedIdentity}},
	}
	createAll(t, env.Client, victim, cpc)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cpc) })
	available(t, env.Client, victim)
	ca := tantrumAgent(ns, "switched", "victim", 2*time.Second)
	ca.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: pcv1alpha1.ClusterProviderConfigKind, Name: cpc.Name}
	createAll(t, env.Client, ca)
	killedAtLeast(t, env.Client, ca, 1)

	// stopped throws a switch and checks that at most the one action already
	// under way when it was thrown lands, over the next rounds.
	stopped := func(obj client.Object, reason xpv2.ConditionReason, lookedAgain func(was *chaosv1alpha1.ChaosAgent) bool) {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca); err != nil {
			t.Fatal(err)
		}
		killed := ca.Status.AtProvider.PodsKilled
		env.Update(t, obj, func() { obj.SetAnnotations(map[string]string{chaosv1alpha1.AnnotationStop: "e2e " + string(reason)}) })
		actingIs(t, env.Client, ca, corev1.ConditionFalse, reason)
		was := ca.DeepCopy()
		for range 2 {
			testenv.Eventually(t, time.Minute, "the stopped agent to look again", func(ctx context.Context) (bool, error) {
				err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca)
				return lookedAgain(was), err
			})
			was = ca.DeepCopy()
		}
		if n := ca.Status.AtProvider.PodsKilled; n > killed+1 {
			t.Errorf("podsKilled went from %d to %d after %s's switch: want at most the one action under way", killed, n, obj.GetName())
		}
		env.Update(t, obj, func() { obj.SetAnnotations(nil) })
		actingIs(t, env.Client, ca, corev1.ConditionTrue, chaosv1alpha1.ReasonActing)
		killedAtLeast(t, env.Client, ca, ca.Status.AtProvider.PodsKilled+1)
	}
	// A namespace-stopped agent still runs (empty) rounds.
	stopped(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, chaosv1alpha1.ReasonStoppedByNamespace, func(was *chaosv1alpha1.ChaosAgent) bool {
		return ca.Status.AtProvider.RoundsRun > was.Status.AtProvider.RoundsRun
	})
	// A config-stopped agent runs no rounds, but looks at the switch again
	// when each would be due.
	stopped(cpc, chaosv1alpha1.ReasonStoppedByConfig, func(was *chaosv1alpha1.ChaosAgent) bool {
		n, w := ca.Status.AtProvider.NextRoundTime, was.Status.AtProvider.NextRoundTime
		return n != nil && w != nil && n.After(w.Time)
	})
}

// TestChaosAgentRecoveryOnLocalControlPlane: each agent kills a pod of its
// Deployment whenever it is whole (its steady state), and measures how long
// the Deployment takes to be whole again. A Deployment whose pods count as
// available only 6s after they are ready (minReadySeconds) recovers no sooner
// than that, and slower than one without.
func TestChaosAgentRecoveryOnLocalControlPlane(t *testing.T) {
	env := provider(t)
	ns := env.Namespace(t, "e2e-chaos-recovery", nil)
	const caused = 6 * time.Second
	fast, slow := fakeDeployment(ns, "fast", 2, map[string]string{"app": "fast"}), fakeDeployment(ns, "slow", 2, map[string]string{"app": "slow"})
	slow.Spec.MinReadySeconds = int32(caused / time.Second)
	createAll(t, env.Client, fast, slow)
	available(t, env.Client, fast)
	available(t, env.Client, slow)
	var agents []*chaosv1alpha1.ChaosAgent
	for _, app := range []string{"fast", "slow"} {
		ca := tantrumAgent(ns, app+"-timer", app, time.Second)
		ca.Spec.ForProvider.SteadyState = &chaosv1alpha1.SteadyState{
			MinAvailablePercent: ptr.To[int32](100), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		}
		agents = append(agents, ca)
		createAll(t, env.Client, ca)
	}
	verdicts := map[string]chaosv1alpha1.WorkloadVerdict{}
	for _, ca := range agents {
		testenv.Eventually(t, 2*time.Minute, "two recoveries measured by "+ca.Name, func(ctx context.Context) (bool, error) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca); err != nil {
				return false, err
			}
			for _, v := range ca.Status.AtProvider.Verdicts {
				verdicts[v.Name] = v
				if v.Recovered >= 2 {
					return true, nil
				}
			}
			return false, fmt.Errorf("verdicts %+v", ca.Status.AtProvider.Verdicts)
		})
	}
	f, s := verdicts["fast"], verdicts["slow"]
	t.Logf("fast: %s p50 %v max %v of %v; slow: %s p50 %v max %v of %v", f.Verdict, f.P50, f.Max, f.RecentRecoveries, s.Verdict, s.P50, s.Max, s.RecentRecoveries)
	for _, v := range []chaosv1alpha1.WorkloadVerdict{f, s} {
		if v.Kind != "Deployment" || v.P50 == nil || v.Max == nil || v.P50.Duration > v.Max.Duration || v.Unrecovered != 0 {
			t.Errorf("verdict %+v: want a Deployment with p50 <= max and nothing unrecovered", v)
		}
	}
	// The Deployment controller counts minReadySeconds from the pod's Ready
	// condition, whose time the API stores to the second: a pod may count as
	// available up to a second before minReadySeconds have passed.
	if s.P50 != nil && (s.P50.Duration < caused-time.Second || s.P50.Duration > caused+30*time.Second) {
		t.Errorf("slow p50 = %s, want at least the %s minReadySeconds caused (less the second the API rounds condition times to), and not far beyond", s.P50.Duration, caused)
	}
	if f.P50 != nil && s.P50 != nil && f.P50.Duration >= s.P50.Duration {
		t.Errorf("fast p50 = %s, slow p50 = %s: want the Deployment without minReadySeconds to recover sooner", f.P50.Duration, s.P50.Duration)
	}
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "clusterops_chaos_recovery_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["namespace"] == ns {
				found[l["workload"]] += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if found["fast"] < 2 || found["slow"] < 2 {
		t.Errorf("clusterops_chaos_recovery_seconds samples = %v, want at least 2 for fast and slow", found)
	}
}
