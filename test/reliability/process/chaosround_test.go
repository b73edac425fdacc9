package process

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

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
)

// cutRoundSize is how many Deployments the agent doubles in one round: enough
// writes that a SIGKILL sent when the first lands finds the round under way.
const cutRoundSize = 100

// TestChaosRoundCutByKillIsNotRepeated runs two replicas with leader election
// and SIGKILLs the leader as soon as the first Deployment of a ChaosAgent's
// round is doubled, while the round's other actions are still being taken.
// The replica that takes over does not run the round again: no Deployment is
// doubled twice, and the agent counts the one round, cut short or recorded,
// and runs no other (its next is an hour away).
func TestChaosRoundCutByKillIsNotRepeated(t *testing.T) {
	c := startCluster(t, false)
	ctx := context.Background()
	const ns = "team-chaos-cut"
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for i := range cutRoundSize {
		if err := c.Client.Create(ctx, deployment(ns, fmt.Sprintf("d-%02d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.replica(t, "a")
	waitLeader(t, leader, time.Now(), startup)
	follower := c.replica(t, "b")
	waitCampaigning(t, follower)

	agent := &chaosv1alpha1.ChaosAgent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cut"},
		Spec: chaosv1alpha1.ChaosAgentSpec{ForProvider: chaosv1alpha1.ChaosAgentParameters{
			CancerMode: true, MaxReplicas: 64, Eagerness: 100, MaxActionsPerRound: cutRoundSize,
			Interval: metav1.Duration{Duration: time.Hour}, Seed: ptr.To[int64](1605),
		}},
	}
	if err := c.Client.Create(ctx, agent); err != nil {
		t.Fatal(err)
	}
	killWhenScaled(t, c, ns, leader)
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(agent), agent); err != nil {
		t.Fatal(err)
	}
	t.Logf("leader killed; the agent's status then: roundsRun %d, roundUnderWay %+v", agent.Status.AtProvider.RoundsRun, agent.Status.AtProvider.RoundUnderWay)
	if agent.Status.AtProvider.RoundUnderWay == nil {
		t.Errorf("the leader was killed when no round was recorded as under way: the kill did not cut a round")
	}
	killed := time.Now()
	waitLeader(t, follower, killed, takeover)

	eventually(t, react, "the survivor to close the round", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(agent), agent)
		o := agent.Status.AtProvider
		return o.RoundsRun == 1 && o.RoundUnderWay == nil, err
	})
	t.Logf("round 1 as the survivor left it: %s", agent.Status.AtProvider.LastRoundSummary)
	stays(t, 10*time.Second, "one round, no Deployment doubled twice", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(agent), agent); err != nil {
			return false, err
		}
		if n := agent.Status.AtProvider.RoundsRun; n != 1 {
			return false, errors.Errorf("roundsRun = %d, want 1", n)
		}
		scaled, err := doubled(ctx, c, ns)
		if err != nil || scaled == 0 {
			return false, errors.Errorf("%d Deployments doubled (%v), want at least the first", scaled, err)
		}
		return true, nil
	})
}

// killWhenScaled SIGKILLs p as soon as a Deployment in ns has 2 replicas.
func killWhenScaled(t *testing.T, c *cluster, ns string, p *provider) {
	t.Helper()
	deadline := time.Now().Add(react)
	for time.Now().Before(deadline) {
		n, err := doubled(context.Background(), c, ns)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			p.Kill()
			t.Logf("leader %s killed with %d of %d Deployments doubled", p.name, n, cutRoundSize)
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("no Deployment in %s was doubled within %s", ns, react)
}

// doubled counts the Deployments in ns at 2 replicas, and fails on one the
// agent doubled more than once.
func doubled(ctx context.Context, c *cluster, ns string) (int, error) {
	l := &appsv1.DeploymentList{}
	if err := c.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	for _, d := range l.Items {
		switch r := ptr.Deref(d.Spec.Replicas, 1); r {
		case 1:
		case 2:
			n++
		default:
			return n, errors.Errorf("Deployment %s has %d replicas: doubled more than once", d.Name, r)
		}
	}
	return n, nil
}
