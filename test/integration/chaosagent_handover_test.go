package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestChaosAgentRoundCutShortIsNotRepeated: an agent whose status says round
// 7 began and was never recorded, as a holder SIGKILLed or handed over right
// after it began leaves it, is reconciled by a provider that never saw it.
// That provider does not run round 7 again (no pod is killed): it records the
// round as cut short, and runs round 8 an interval after round 7 began, not
// earlier.
func TestChaosAgentRoundCutShortIsNotRepeated(t *testing.T) {
	const interval = 40 * time.Second
	ns := env.Namespace(t, "chaos-handover", nil)
	pods := []*corev1.Pod{runningPod(t, ns, "a", nil), runningPod(t, ns, "b", nil), runningPod(t, ns, "c", nil)}
	ca := chaosAgent(ns, "baldrick", func(p *chaosv1alpha1.ChaosAgentParameters) {
		p.TantrumMode, p.RespectDisruptionBudgets, p.Interval = true, ptr.To(false), metav1.Duration{Duration: interval}
	})
	// Paused until its status is what the previous holder left.
	ca.SetAnnotations(map[string]string{meta.AnnotationKeyReconciliationPaused: "true"})
	startAgent(t, ca)
	testenv.Eventually(t, wait, "the provider to see the agent paused", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca)
		return ca.GetCondition(xpv2.TypeSynced).Reason == xpv2.ReasonReconcilePaused, err
	})
	started := metav1.NewTime(time.Now().Add(-interval / 2).Truncate(time.Second))
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(ca), ca); err != nil {
			return err
		}
		o := &ca.Status.AtProvider
		o.RoundsRun, o.LastRoundTime = 6, &metav1.Time{Time: started.Add(-time.Hour)}
		o.RoundUnderWay = &chaosv1alpha1.ChaosRound{Number: 7, StartedAt: started, Planned: 1}
		return env.Client.Status().Update(context.Background(), ca)
	})
	if err != nil {
		t.Fatal(err)
	}
	env.Update(t, ca, func() { meta.RemoveAnnotations(ca, meta.AnnotationKeyReconciliationPaused) })

	testenv.Eventually(t, wait, "round 7 to be recorded as cut short", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ca), ca)
		return ca.Status.AtProvider.RoundsRun >= 7 && ca.Status.AtProvider.RoundUnderWay == nil, err
	})
	o := ca.Status.AtProvider
	if o.RoundsRun != 7 {
		t.Fatalf("roundsRun = %d when round 7 was first seen closed, want 7; summary %q", o.RoundsRun, o.LastRoundSummary)
	}
	if !strings.Contains(o.LastRoundSummary, "round 7 was cut short") {
		t.Errorf("lastRoundSummary = %q, want it to say round 7 was cut short", o.LastRoundSummary)
	}
	if o.LastRoundTime == nil || !o.LastRoundTime.Equal(&started) {
		t.Errorf("lastRoundTime = %v, want %v: a round cut short counts from when it began", o.LastRoundTime, started)
	}
	if alive := living(t, pods); alive != len(pods) {
		t.Errorf("%d of %d pods alive after round 7 was found under way, want all: the round ran again", alive, len(pods))
	}
	eventFor(t, ns, ca.Name, "RoundCutShort")

	ca = rounds(t, ca, 8)
	o = ca.Status.AtProvider
	if o.LastRoundTime == nil || o.LastRoundTime.Before(ptr.To(metav1.NewTime(started.Add(interval)))) {
		t.Errorf("round 8 ran at %v, before %v: an interval after round 7 began", o.LastRoundTime, started.Add(interval))
	}
	if o.RoundUnderWay != nil {
		t.Errorf("roundUnderWay = %+v after round 8 was recorded, want none: the reconciler's status update clears it", o.RoundUnderWay)
	}
	if alive := living(t, pods); alive != len(pods)-1 || o.PodsKilled != 1 {
		t.Errorf("%d of %d pods alive, podsKilled %d after round 8; want one killed, by round 8 alone", alive, len(pods), o.PodsKilled)
	}
}

// living counts the pods that still exist as created (same UID).
func living(t *testing.T, pods []*corev1.Pod) int {
	t.Helper()
	n := 0
	for _, p := range pods {
		got := p.DeepCopy()
		if exists(t, got) && got.UID == p.UID && got.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}
