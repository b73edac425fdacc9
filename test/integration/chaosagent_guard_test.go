package integration

import (
	"context"
	"fmt"
	"strings"
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

func TestChaosAgentGuardAdmission(t *testing.T) {
	const agent = `{apiVersion: chaos.clusterops.io/v1alpha1, kind: ChaosAgent, metadata: {name: %s}, spec: {forProvider: {tantrumMode: true, %s}}}`
	admit(t, map[string]admission{
		"EmptySteadyState": {
			reason: "A steady state that checks nothing is refused.",
			yaml:   fmt.Sprintf(agent, "g1", "steadyState: {}"),
			want:   "steadyState: set minAvailablePercent, noCrashLoops: true, or both",
		},
		"NoCrashLoopsFalse": {
			reason: "noCrashLoops: false alone checks nothing either.",
			yaml:   fmt.Sprintf(agent, "g2", "steadyState: {noCrashLoops: false}"),
			want:   "an empty steadyState guards nothing",
		},
		"PercentZero": {
			reason: "minAvailablePercent is 1 to 100.",
			yaml:   fmt.Sprintf(agent, "g3", "steadyState: {minAvailablePercent: 0}"),
			want:   "should be greater than or equal to 1",
		},
		"PercentOver100": {
			reason: "minAvailablePercent is 1 to 100.",
			yaml:   fmt.Sprintf(agent, "g4", "steadyState: {minAvailablePercent: 101}"),
			want:   "should be less than or equal to 100",
		},
		"BadSelector": {
			reason: "The guard's selector takes the four operators.",
			yaml:   fmt.Sprintf(agent, "g5", "steadyState: {noCrashLoops: true, selector: {matchExpressions: [{key: a, operator: Equals, values: [b]}]}}"),
			want:   "steadyState.selector.matchExpressions[].operator must be one of In, NotIn, Exists, DoesNotExist",
		},
		"RecoveryTimeoutNotADuration": {
			reason: "recoveryTimeout is a duration.",
			yaml:   fmt.Sprintf(agent, "g6", "recoveryTimeout: soon"),
			want:   "recoveryTimeout is a duration such as 30s, 5m or 1h",
		},
		"RecoveryTimeoutTooShort": {
			reason: "recoveryTimeout is at least a second.",
			yaml:   fmt.Sprintf(agent, "g7", "recoveryTimeout: 500ms"),
			want:   "recoveryTimeout must be between 1s and 24h",
		},
		"RecoveryTimeoutTooLong": {
			reason: "recoveryTimeout is at most a day.",
			yaml:   fmt.Sprintf(agent, "g8", "recoveryTimeout: 25h"),
			want:   "recoveryTimeout must be between 1s and 24h",
		},
		"Valid": {
			reason: "A full guard and a recovery timeout are accepted.",
			yaml:   fmt.Sprintf(agent, "g9", "steadyState: {minAvailablePercent: 80, noCrashLoops: true, selector: {matchLabels: {tier: web}}}, recoveryTimeout: 2m30s"),
		},
	})
}

// startAgent creates an agent that is deleted when the test ends, so that it
// does not keep acting while later tests wait for the provider to be idle.
func startAgent(t *testing.T, ca *chaosv1alpha1.ChaosAgent) {
	t.Helper()
	env.Create(t, ca)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ca) })
}

// acting waits until the agent's Acting condition has the status and reason.
func acting(t *testing.T, ca *chaosv1alpha1.ChaosAgent, status corev1.ConditionStatus, reason xpv2.ConditionReason) xpv2.Condition {
	t.Helper()
	var c xpv2.Condition
	testenv.Eventually(t, wait, fmt.Sprintf("Acting=%s (%s)", status, reason), func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca); err != nil {
			return false, err
		}
		c = ca.GetCondition(chaosv1alpha1.TypeActing)
		if c.Status == status && c.Reason == reason {
			return true, nil
		}
		return false, fmt.Errorf("acting %s %s %q, summary %q", c.Status, c.Reason, c.Message, ca.Status.AtProvider.LastRoundSummary)
	})
	return c
}

// eventFor waits for an event with the reason on the named agent.
func eventFor(t *testing.T, ns, agent, reason string) {
	t.Helper()
	testenv.Eventually(t, wait, "a "+reason+" event on the agent", func(ctx context.Context) (bool, error) {
		l := &corev1.EventList{}
		err := env.Client.List(ctx, l, client.InNamespace(ns))
		for _, e := range l.Items {
			if e.InvolvedObject.Name == agent && e.Reason == reason {
				return true, err
			}
		}
		return false, err
	})
}

// wholeDeployment is a Deployment whose status says it is whole, as its
// controller would (none runs on envtest).
func wholeDeployment(t *testing.T, ns, name string, replicas int32) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
	env.Create(t, d)
	setDeploymentStatus(t, d, replicas, replicas)
	return d
}

// setDeploymentStatus reports replicas, of which available are available, as
// of the Deployment's current spec.
func setDeploymentStatus(t *testing.T, d *appsv1.Deployment, replicas, available int32) {
	t.Helper()
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: available, AvailableReplicas: available}
	if err := env.Client.Status().Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

func TestChaosAgentNamespaceKillSwitch(t *testing.T) {
	ns := env.Namespace(t, "chaos-nsswitch", nil)
	victims(t, ns)
	ca := chaosAgent(ns, "switched", allModes)
	startAgent(t, ca)
	rounds(t, ca, 1)

	// Thrown, the switch stops the agent at its next round and says so.
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	env.Update(t, n, func() { n.SetAnnotations(map[string]string{chaosv1alpha1.AnnotationStop: "INC-42 checkout down"}) })
	c := acting(t, ca, corev1.ConditionFalse, chaosv1alpha1.ReasonStoppedByNamespace)
	if !strings.Contains(c.Message, ns) {
		t.Errorf("Acting message = %q, want it to name the namespace", c.Message)
	}
	eventFor(t, ns, "switched", "Stopped")
	// From the next round on nothing is written.
	stoppedAt := rounds(t, ca, ca.Status.AtProvider.RoundsRun+1).Status.AtProvider.RoundsRun
	before := snapshot(t, ns)
	rounds(t, ca, stoppedAt+3)
	if diff := cmpMaps(before, snapshot(t, ns)); diff != "" {
		t.Errorf("an agent stopped by its namespace's switch wrote to it: %s", diff)
	}
	if got := ca.Status.AtProvider.StoppedNamespaces; len(got) != 1 || got[0] != ns {
		t.Errorf("stoppedNamespaces = %v, want [%s]", got, ns)
	}
	if r := ca.GetCondition(xpv2.TypeReady); r.Status != corev1.ConditionTrue {
		t.Errorf("Ready = %+v, want True: a stopped agent is healthy", r)
	}

	// Switched off, the agent resumes.
	env.Update(t, n, func() { n.SetAnnotations(map[string]string{chaosv1alpha1.AnnotationStop: "false"}) })
	acting(t, ca, corev1.ConditionTrue, chaosv1alpha1.ReasonActing)
	eventFor(t, ns, "switched", "Resumed")
}

func TestChaosAgentConfigKillSwitch(t *testing.T) {
	ns := env.Namespace(t, "chaos-cfgswitch", nil)
	victims(t, ns)
	cpc := &pcv1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "chaos-kill-switch"},
		Spec:       pcv1alpha1.ClusterProviderConfigSpec{Credentials: pcv1alpha1.ClusterCredentials{Source: pcv1alpha1.CredentialsSourceInjectedIdentity}},
	}
	env.Create(t, cpc)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cpc) })
	ca := chaosAgent(ns, "configured", allModes)
	ca.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: pcv1alpha1.ClusterProviderConfigKind, Name: cpc.Name}
	startAgent(t, ca)
	rounds(t, ca, 1)

	env.Update(t, cpc, func() { cpc.SetAnnotations(map[string]string{chaosv1alpha1.AnnotationStop: "freeze"}) })
	c := acting(t, ca, corev1.ConditionFalse, chaosv1alpha1.ReasonStoppedByConfig)
	if !strings.Contains(c.Message, `ClusterProviderConfig "chaos-kill-switch": freeze`) {
		t.Errorf("Acting message = %q, want it to name the config and the reason", c.Message)
	}
	eventFor(t, ns, "configured", "Stopped")
	// A stopped agent runs no rounds; its next round time moving on twice
	// proves it looked at the switch again, and wrote nothing.
	before, ran := snapshot(t, ns), ca.Status.AtProvider.RoundsRun
	for range 2 {
		next := ca.Status.AtProvider.NextRoundTime.DeepCopy()
		testenv.Eventually(t, wait, "the stopped agent to look again", func(ctx context.Context) (bool, error) {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca)
			return ca.Status.AtProvider.NextRoundTime != nil && ca.Status.AtProvider.NextRoundTime.After(next.Time), err
		})
	}
	if diff := cmpMaps(before, snapshot(t, ns)); diff != "" {
		t.Errorf("an agent stopped by its config's switch wrote: %s", diff)
	}
	if ca.Status.AtProvider.RoundsRun != ran {
		t.Errorf("roundsRun went from %d to %d while stopped", ran, ca.Status.AtProvider.RoundsRun)
	}

	env.Update(t, cpc, func() { cpc.SetAnnotations(nil) })
	acting(t, ca, corev1.ConditionTrue, chaosv1alpha1.ReasonActing)
	rounds(t, ca, ran+1)
}

func TestChaosAgentGuardPausesAndResumes(t *testing.T) {
	ns := env.Namespace(t, "chaos-guard", nil)
	web := wholeDeployment(t, ns, "web", 4)
	grower := wholeDeployment(t, ns, "grower", 1)
	env.Update(t, grower, func() { grower.Labels = map[string]string{"app": "grower", "chaos.clusterops.io/victim": "true"} })
	setDeploymentStatus(t, web, 4, 2) // 50%: below the guard's 75
	ca := chaosAgent(ns, "guarded", func(p *chaosv1alpha1.ChaosAgentParameters) {
		p.CancerMode, p.MaxReplicas = true, 100
		p.DeploymentSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"chaos.clusterops.io/victim": "true"}}
		p.SteadyState = &chaosv1alpha1.SteadyState{MinAvailablePercent: ptr.To[int32](75), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	})
	startAgent(t, ca)
	c := acting(t, ca, corev1.ConditionFalse, chaosv1alpha1.ReasonSteadyStateViolated)
	if !strings.Contains(c.Message, "Deployment "+ns+"/web has 2 of 4 replicas available, below minAvailablePercent 75% (3)") {
		t.Errorf("Acting message = %q, want it to say which Deployment breaks the steady state", c.Message)
	}
	eventFor(t, ns, "guarded", "Paused")
	paused := ca.Status.AtProvider.RoundsRun
	rounds(t, ca, paused+2)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(grower), grower); err != nil || *grower.Spec.Replicas != 1 {
		t.Fatalf("grower replicas = %d (%v), want 1: a paused agent scales nothing", *grower.Spec.Replicas, err)
	}

	setDeploymentStatus(t, web, 4, 3)
	acting(t, ca, corev1.ConditionTrue, chaosv1alpha1.ReasonActing)
	eventFor(t, ns, "guarded", "Resumed")
	testenv.Eventually(t, wait, "the resumed agent to scale", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(grower), grower)
		return *grower.Spec.Replicas > 1, err
	})
}

func TestChaosAgentMeasuresRecovery(t *testing.T) {
	ns := env.Namespace(t, "chaos-recovery", nil)
	d := wholeDeployment(t, ns, "web", 1)
	ca := chaosAgent(ns, "timer", func(p *chaosv1alpha1.ChaosAgentParameters) { p.CancerMode, p.MaxReplicas = true, 2 })
	startAgent(t, ca)
	testenv.Eventually(t, wait, "the Deployment to be scaled", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d)
		return *d.Spec.Replicas == 2, err
	})
	seen := time.Now()
	testenv.Eventually(t, wait, "the agent to wait for the Deployment", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca)
		vs := ca.Status.AtProvider.Verdicts
		return len(vs) == 1 && vs[0].Verdict == chaosv1alpha1.VerdictRecovering, err
	})
	// The test is the Deployment controller: the new replica is available
	// after caused, not before.
	const caused = 3 * time.Second
	time.Sleep(time.Until(seen.Add(caused)))
	setDeploymentStatus(t, d, 2, 2)
	var v chaosv1alpha1.WorkloadVerdict
	testenv.Eventually(t, wait, "the recovery to be measured", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca)
		if vs := ca.Status.AtProvider.Verdicts; len(vs) == 1 {
			v = vs[0]
		}
		return v.Verdict == chaosv1alpha1.VerdictResilient, err
	})
	// Probes run every second for this agent; the slack covers them and a
	// busy machine.
	if v.Recovered != 1 || v.P50 == nil || v.P50.Duration < caused || v.P50.Duration > caused+5*time.Second || v.Max.Duration != v.P50.Duration {
		t.Errorf("verdict = %+v, want one recovery of %s to %s", v, caused, caused+5*time.Second)
	}
	if v.Kind != "Deployment" || v.Name != "web" || v.Namespace != ns {
		t.Errorf("verdict names %s %s/%s, want Deployment %s/web", v.Kind, v.Namespace, v.Name, ns)
	}
	if n := histogramCount(t, "clusterops_chaos_recovery_seconds", ns+"/timer", "web"); n != 1 {
		t.Errorf("clusterops_chaos_recovery_seconds count = %d, want 1", n)
	}
}

func TestChaosAgentReportsUnrecovered(t *testing.T) {
	ns := env.Namespace(t, "chaos-unrecovered", nil)
	d := wholeDeployment(t, ns, "stuck", 1)
	ca := chaosAgent(ns, "impatient", func(p *chaosv1alpha1.ChaosAgentParameters) {
		p.CancerMode, p.MaxReplicas = true, 2
		p.RecoveryTimeout = &metav1.Duration{Duration: 2 * time.Second}
	})
	startAgent(t, ca)
	// Nothing reports the new replica available: the Deployment never recovers.
	var v chaosv1alpha1.WorkloadVerdict
	testenv.Eventually(t, wait, "the action to count as unrecovered", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca)
		if vs := ca.Status.AtProvider.Verdicts; len(vs) == 1 {
			v = vs[0]
		}
		return v.Verdict == chaosv1alpha1.VerdictUnrecovered, err
	})
	if v.Unrecovered != 1 || v.Recovered != 0 || len(v.Pending) != 0 || v.LastUnrecoveredTime == nil {
		t.Errorf("verdict = %+v, want one unrecovered action", v)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %d (%v), want 2", *d.Spec.Replicas, err)
	}
	if n := counterValue(t, "clusterops_chaos_unrecovered_total", ns+"/impatient", "stuck"); n != 1 {
		t.Errorf("clusterops_chaos_unrecovered_total = %v, want 1", n)
	}
}

// series finds the series of a metric family by agent and workload.
func series(t *testing.T, family, agent, workload string) []*metricLabels {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []*metricLabels
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["agent"] == agent && l["workload"] == workload {
				out = append(out, &metricLabels{count: m.GetHistogram().GetSampleCount(), value: m.GetCounter().GetValue()})
			}
		}
	}
	return out
}

type metricLabels struct {
	count uint64
	value float64
}

func histogramCount(t *testing.T, family, agent, workload string) uint64 {
	t.Helper()
	s := series(t, family, agent, workload)
	if len(s) != 1 {
		t.Fatalf("%d series of %s for %s and %s, want 1", len(s), family, agent, workload)
	}
	return s[0].count
}

func counterValue(t *testing.T, family, agent, workload string) float64 {
	t.Helper()
	s := series(t, family, agent, workload)
	if len(s) != 1 {
		t.Fatalf("%d series of %s for %s and %s, want 1", len(s), family, agent, workload)
	}
	return s[0].value
}
