package chaosagent

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
)

func TestNeededRoundsThePercentUp(t *testing.T) {
	cases := map[string]struct {
		desired int32
		percent int
		want    int32
	}{
		"RoundsUp":       {desired: 3, percent: 50, want: 2},
		"Exact":          {desired: 4, percent: 50, want: 2},
		"All":            {desired: 7, percent: 100, want: 7},
		"AtLeastOne":     {desired: 10, percent: 1, want: 1},
		"ScaledToZero":   {desired: 0, percent: 100, want: 0},
		"NegativeIsZero": {desired: -3, percent: 80, want: 0},
		"Huge":           {desired: 1<<31 - 1, percent: 100, want: 1<<31 - 1},
		"OverHundred":    {desired: 5, percent: 250, want: 5},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Needed(tc.desired, tc.percent); got != tc.want {
				t.Errorf("Needed(%d, %d) = %d, want %d", tc.desired, tc.percent, got, tc.want)
			}
		})
	}
}

func TestGuardHoldsOnlyAStateAboveItsBounds(t *testing.T) {
	avail := &Steady{MinAvailablePercent: 80, Selector: labels.Everything()}
	loops := &Steady{NoCrashLoops: true, Selector: labels.Everything()}
	cases := map[string]struct {
		reason    string
		steady    *Steady
		workloads []WorkloadHealth
		pods      []PodHealth
		want      []string
	}{
		"NoGuard": {
			reason:    "Without a steady state everything holds.",
			workloads: []WorkloadHealth{{Kind: "Deployment", Namespace: "a", Name: "web", Desired: 3}},
		},
		"Holds": {
			reason:    "Every workload at or above the percent holds.",
			steady:    avail,
			workloads: []WorkloadHealth{{Kind: "Deployment", Namespace: "a", Name: "web", Desired: 5, Available: 4}, {Kind: "StatefulSet", Namespace: "a", Name: "db", Desired: 0}},
		},
		"BelowPercent": {
			reason:    "A workload below the percent breaks the steady state, and the verdict says which and by how much.",
			steady:    avail,
			workloads: []WorkloadHealth{{Kind: "StatefulSet", Namespace: "a", Name: "db", Desired: 3, Available: 2}},
			want:      []string{"StatefulSet a/db has 2 of 3 replicas available, below minAvailablePercent 80% (3)"},
		},
		"CrashLoopIgnoredUnlessAsked": {
			reason: "Crash loops do not count when noCrashLoops is off.",
			steady: avail,
			pods:   []PodHealth{{Namespace: "a", Name: "p", CrashLooping: "c"}},
		},
		"CrashLoop": {
			reason: "A crash-looping pod breaks noCrashLoops.",
			steady: loops,
			pods:   []PodHealth{{Namespace: "a", Name: "ok"}, {Namespace: "a", Name: "p", CrashLooping: "app"}},
			want:   []string{"container app of pod a/p is in CrashLoopBackOff"},
		},
		"Bounded": {
			reason: "At most three violations are named, in a fixed order, and the rest counted.",
			steady: loops,
			pods: []PodHealth{
				{Namespace: "b", Name: "e", CrashLooping: "c"}, {Namespace: "a", Name: "d", CrashLooping: "c"}, {Namespace: "a", Name: "c", CrashLooping: "c"},
				{Namespace: "a", Name: "b", CrashLooping: "c"}, {Namespace: "a", Name: "a", CrashLooping: "c"},
			},
			want: []string{
				"container c of pod a/a is in CrashLoopBackOff", "container c of pod a/b is in CrashLoopBackOff",
				"container c of pod a/c is in CrashLoopBackOff", "and 2 more",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Guard(tc.steady, tc.workloads, tc.pods)); diff != "" {
				t.Errorf("\n%s\nGuard(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCrashLooping(t *testing.T) {
	waiting := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	}
	p := &corev1.Pod{Status: corev1.PodStatus{
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", State: waiting("PodInitializing")}},
		ContainerStatuses:     []corev1.ContainerStatus{{Name: "ok", State: waiting("ContainerCreating")}, {Name: "bad", State: waiting("CrashLoopBackOff")}},
	}}
	if got := crashLooping(p); got != "bad" {
		t.Errorf("crashLooping(...) = %q, want bad", got)
	}
	if got := crashLooping(&corev1.Pod{}); got != "" {
		t.Errorf("crashLooping(empty pod) = %q, want none", got)
	}
}

// TestGuardPausesRound: while the steady state does not hold a round takes no
// action and says why; once it holds again the agent acts.
func TestGuardPausesRound(t *testing.T) {
	ctx := context.Background()
	ca := agent(func(ca *v1alpha1.ChaosAgent) {
		ca.Spec.ForProvider.CancerMode = true
		ca.Spec.ForProvider.SteadyState = &v1alpha1.SteadyState{MinAvailablePercent: ptrInt32(100)}
	})
	d := deployment("apps", "web", 2)
	d.Status = appsv1.DeploymentStatus{AvailableReplicas: 1}
	e, c := newExternal(t, d)
	if _, err := e.Update(ctx, ca); err != nil {
		t.Fatal(err)
	}
	assertReplicas(t, c, "web", 2)
	cond := ca.GetCondition(v1alpha1.TypeActing)
	if cond.Status != corev1.ConditionFalse || cond.Reason != v1alpha1.ReasonSteadyStateViolated || !strings.Contains(cond.Message, "Deployment apps/web has 1 of 2 replicas available") {
		t.Errorf("Acting = %+v, want False, SteadyStateViolated, naming the Deployment", cond)
	}
	if s := ca.Status.AtProvider.LastRoundSummary; !strings.HasPrefix(s, "nothing happened: paused: steady state does not hold") {
		t.Errorf("lastRoundSummary = %q, want it to say the agent paused", s)
	}

	if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	d.Status.AvailableReplicas = 2
	if err := c.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Update(ctx, ca); err != nil {
		t.Fatal(err)
	}
	assertReplicas(t, c, "web", 4)
	if cond := ca.GetCondition(v1alpha1.TypeActing); cond.Status != corev1.ConditionTrue {
		t.Errorf("Acting = %+v, want True once the steady state holds", cond)
	}
}

func ptrInt32(n int32) *int32 { return &n }
