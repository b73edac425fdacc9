package process

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
)

// The replicas' leader election: a lease short enough for a quick takeover.
const (
	leaseDuration = 8 * time.Second
	renewDeadline = 6 * time.Second
	retryPeriod   = time.Second
)

// jitteredRetry is the longest a replica waits between two tries to acquire
// the lease: client-go jitters the retry period by up to
// leaderelection.JitterFactor (1.2) of itself.
var jitteredRetry = time.Duration((1 + leaderelection.JitterFactor) * float64(retryPeriod))

// takeover is the longest a campaigning replica takes to lead once the leader
// died without releasing its lease (docs/operations.md, "High availability"). A follower
// times the lease from when it last saw it renewed, at most one of its
// retries after the renewal, itself at most one retry period before the
// death; the lease runs out a lease duration later, and the follower takes it
// at its next retry: lease duration + 2 jittered retries = 12.4s. The test
// allows 1.6s more for the API server's answers and timers that fire late on
// a loaded machine (2 cores shared with other tests): 14s. A replica that
// starts campaigning after the death waits a full lease duration from then:
// the test starts that count once the replica campaigns.
var takeover = leaseDuration + 2*jitteredRetry + 1600*time.Millisecond

// react is how long the test waits for a leader to act; not a guarantee.
const react = 30 * time.Second

// startup is how long a first replica may take to start and lead a cluster
// without a leader; it is not a guarantee.
const startup = 30 * time.Second

// replica runs one of two provider replicas with leader election.
func (c *cluster) replica(t *testing.T, name string) *provider {
	t.Helper()
	return c.runProvider(t, name, replicaArgs()...)
}

func replicaArgs() []string {
	return []string{"--leader-election", "--poll=1h", "--max-reconcile-rate=20",
		"--leader-election-lease-duration=" + leaseDuration.String(),
		"--leader-election-renew-deadline=" + renewDeadline.String(),
		"--leader-election-retry-period=" + retryPeriod.String()}
}

// waitLeader waits until p leads, by its own metrics, at most within of
// since, and fails the test if it exits first.
func waitLeader(t *testing.T, p *provider, since time.Time, within time.Duration) {
	t.Helper()
	eventually(t, within-time.Since(since), fmt.Sprintf("replica %s to lead within %s", p.name, within), func(ctx context.Context) (bool, error) {
		if !p.Running() {
			t.Fatalf("replica %s exited: %v", p.name, p.ExitErr())
		}
		return p.leading(ctx)
	})
	t.Logf("replica %s leads after %s (bound %s)", p.name, time.Since(since).Round(time.Millisecond), within)
}

// waitCampaigning waits until p tries to acquire the lease.
func waitCampaigning(t *testing.T, p *provider) {
	t.Helper()
	eventually(t, startup, "replica "+p.name+" to campaign", func(ctx context.Context) (bool, error) {
		if !p.Running() {
			t.Fatalf("replica %s exited: %v", p.name, p.ExitErr())
		}
		return p.campaigning(ctx)
	})
}

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
}

// adopted checks that ConfigRollout ro follows the Deployments ds without
// having rolled or written to them: status lists exactly them, each at the
// rollout's current hash as its baseline, never rolled, counts no rollout,
// and the rollout is Ready; each Deployment is as its creator left it, at its
// first generation, with no hash in its pod template, no lock and no field
// owned by the rollout. It reads ro and ds.
func (c *cluster) adopted(ro *workloadv1alpha1.ConfigRollout, ds ...*appsv1.Deployment) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(ro), ro); err != nil {
			return false, err
		}
		o := ro.Status.AtProvider
		if o.Hash == "" || o.Rollouts != 0 || len(o.Workloads) != len(ds) || ro.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue {
			return false, errors.Errorf("%s: status %+v, Ready %s", ro.Name, o, ro.GetCondition(xpv2.TypeReady).Status)
		}
		for _, w := range o.Workloads {
			if w.Hash != o.Hash || !w.Baseline || w.LastRollout != nil {
				return false, errors.Errorf("%s: status of %s %s is %+v, want hash %q as its baseline, never rolled", ro.Name, w.Kind, w.Name, w, o.Hash)
			}
		}
		for _, d := range ds {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
				return false, err
			}
			if d.Annotations[configrollout.AnnotationLock] != "" || d.Spec.Template.Annotations[configrollout.AnnotationHash] != "" || d.Generation != 1 {
				return false, errors.Errorf("%s: generation %d, annotations %v, template annotations %v; want it untouched by %s", d.Name, d.Generation, d.Annotations, d.Spec.Template.Annotations, ro.Name)
			}
			for _, f := range d.ManagedFields {
				if strings.HasPrefix(f.Manager, "configrollout-") {
					return false, errors.Errorf("%s: field manager %s wrote to it: %s", d.Name, f.Manager, f.FieldsV1.GetRawString())
				}
			}
		}
		return true, nil
	}
}

// TestLeaderTakeoverDoesNotRepeatWork runs two replicas with leader election
// and kills the leader, twice: right after it rolled a ConfigRollout's
// change, and right as a change is made. Each time the other replica takes
// over within the lease duration and two jittered retry periods of the kill
// (takeover), and the change is rolled exactly once (the Deployment's generation
// moves once, status counts one rollout), and a ChaosAgent whose next round
// is an hour away runs no round on the takeover.
func TestLeaderTakeoverDoesNotRepeatWork(t *testing.T) {
	c := startCluster(t, false)
	ctx := context.Background()
	const ns, chaosNS = "team-leader", "team-leader-chaos"
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	web := deployment(ns, "web", 1)
	cfg := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"}, Data: map[string]string{"greeting": "hello"}}
	rollout := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "web-config"}},
			Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "web"}},
		}},
	}
	for _, o := range []client.Object{web, cfg, rollout} {
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The agent doubles its Deployment once an hour, in a namespace of its own
	// so that its scaling does not move web's generation.
	agent, agentState := c.hourlyAgentIn(t, chaosNS)

	// The first replica leads; the second waits.
	replicas := []*provider{c.replica(t, "a")}
	waitLeader(t, replicas[0], time.Now(), startup)
	replicas = append(replicas, c.replica(t, "b"))
	leader, follower := replicas[0], replicas[1]
	waitCampaigning(t, follower)

	// rolled waits until web carries the current hash in its template and the
	// rollout's lock, status no longer says it runs its baseline, and the
	// rollout has counted n rollouts in all, and returns web's generation.
	rolled := func(n int64) int64 {
		t.Helper()
		eventually(t, react, fmt.Sprintf("rollout %d of web", n), func(ctx context.Context) (bool, error) {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(rollout), rollout); err != nil {
				return false, err
			}
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(web), web); err != nil {
				return false, err
			}
			o := rollout.Status.AtProvider
			carried, lock := web.Spec.Template.Annotations[configrollout.AnnotationHash], web.Annotations[configrollout.AnnotationLock]
			if o.Rollouts != n || o.Hash == "" || carried != o.Hash || lock != rollout.Name || len(o.Workloads) != 1 || o.Workloads[0].Baseline {
				return false, errors.Errorf("status counts %d rollouts, hash %q, workloads %+v; web carries %q, lock %q", o.Rollouts, o.Hash, o.Workloads, carried, lock)
			}
			return true, nil
		})
		return web.Generation
	}
	// The leader follows web without rolling it: its creation rolls nothing
	// (rollOnAdoption is off); the changes below count from here.
	eventually(t, react, "the leader to follow web without rolling it", c.adopted(rollout, web))
	gen, r0 := web.Generation, rollout.Status.AtProvider.Rollouts
	var before string
	eventually(t, react, "the agent's first round", func(ctx context.Context) (bool, error) {
		var err error
		before, err = agentState(ctx)
		return err == nil && agent.Status.AtProvider.RoundsRun == 1, err
	})
	t.Logf("before the takeovers: web generation %d; agent %s", gen, before)

	// unchanged checks, for a while after a takeover, that web rolled exactly
	// once more and the agent ran no round, once the new leader has
	// reconciled both: what did not happen is what its reconciles did not do.
	chaosController := managed.ControllerName(chaosv1alpha1.ChaosAgentGroupKind)
	rolloutController := managed.ControllerName(workloadv1alpha1.ConfigRolloutGroupKind)
	unchanged := func(p *provider, n, gen int64) {
		t.Helper()
		for _, ctrl := range []string{chaosController, rolloutController} {
			eventually(t, react, "the new leader to reconcile with "+ctrl, func(ctx context.Context) (bool, error) {
				r, err := p.reconciles(ctx, ctrl)
				return r > 0, err
			})
		}
		stays(t, 5*time.Second, fmt.Sprintf("one rollout per change (%d in all, web generation %d) and no extra chaos round (%s)", n, gen, before), func(ctx context.Context) (bool, error) {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(rollout), rollout); err != nil {
				return false, err
			}
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(web), web); err != nil {
				return false, err
			}
			s, err := agentState(ctx)
			if err != nil {
				return false, err
			}
			if rollout.Status.AtProvider.Rollouts != n || web.Generation != gen || s != before {
				return false, errors.Errorf("%d rollouts, web generation %d, agent %s", rollout.Status.AtProvider.Rollouts, web.Generation, s)
			}
			return true, nil
		})
	}

	// 1. The leader is killed right after it rolls a change.
	c.Update(t, cfg, func() { cfg.Data["greeting"] = "bonjour" })
	eventually(t, react, "the leader to roll web", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(web), web)
		return web.Generation > gen, err
	})
	killed := time.Now()
	leader.Kill()
	t.Logf("killed leader %s right after it rolled web to generation %d", leader.name, web.Generation)
	waitLeader(t, follower, killed, takeover)
	if rolled(r0+1) != gen+1 {
		t.Fatalf("web generation %d after one change, want %d: rolled more than once", web.Generation, gen+1)
	}
	unchanged(follower, r0+1, gen+1)
	// The killed replica comes back, as its Deployment would start it again,
	// and waits for the lease.
	restarted := c.replica(t, "a2")
	waitCampaigning(t, restarted)

	// 2. The leader is killed as a change is made: whichever replica rolls it,
	// it is rolled once.
	leader, follower = follower, restarted
	c.Update(t, cfg, func() { cfg.Data["greeting"] = "hallo" })
	killed = time.Now()
	leader.Kill()
	t.Logf("killed leader %s as web's configuration changed", leader.name)
	waitLeader(t, follower, killed, takeover)
	if rolled(r0+2) != gen+2 {
		t.Fatalf("web generation %d after two changes, want %d: rolled more than once", web.Generation, gen+2)
	}
	unchanged(follower, r0+2, gen+2)
}
