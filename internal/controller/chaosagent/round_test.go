package chaosagent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
)

// begun stands for the control plane's status writer in tests: it keeps the
// rounds recorded as under way, and fails with err when that is set.
type begun struct {
	client.SubResourceWriter
	rounds []v1alpha1.ChaosRound
	err    error
}

func (b *begun) Update(_ context.Context, o client.Object, _ ...client.SubResourceUpdateOption) error {
	if b.err != nil {
		return b.err
	}
	if ca, ok := o.(*v1alpha1.ChaosAgent); ok && ca.Status.AtProvider.RoundUnderWay != nil {
		b.rounds = append(b.rounds, *ca.Status.AtProvider.RoundUnderWay)
	}
	return nil
}

func TestCutShort(t *testing.T) {
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	cases := map[string]struct {
		reason   string
		o        v1alpha1.ChaosAgentObservation
		want     v1alpha1.ChaosAgentObservation
		wantCut  bool
		wantDue  time.Time
		interval time.Duration
	}{
		"NoneUnderWay": {
			reason:   "Without a round under way nothing changes, and the next round is due an interval after the last.",
			o:        v1alpha1.ChaosAgentObservation{RoundsRun: 3, LastRoundTime: at(-time.Minute), LastRoundSummary: "scaled"},
			want:     v1alpha1.ChaosAgentObservation{RoundsRun: 3, LastRoundTime: at(-time.Minute), LastRoundSummary: "scaled"},
			interval: time.Hour,
			wantDue:  now.Add(59 * time.Minute),
		},
		"NeverRan": {
			reason:   "An agent that never ran is due at once.",
			interval: time.Hour,
			wantDue:  now,
		},
		"UnderWay": {
			reason: "A round under way is closed as run at the time it began, never started again, and the next is due an interval after it began.",
			o: v1alpha1.ChaosAgentObservation{RoundsRun: 3, LastRoundTime: at(-2 * time.Hour), PodsKilled: 2,
				RoundUnderWay: &v1alpha1.ChaosRound{Number: 4, StartedAt: *at(-10 * time.Minute), Planned: 2}},
			want: v1alpha1.ChaosAgentObservation{RoundsRun: 4, LastRoundTime: at(-10 * time.Minute), PodsKilled: 2,
				LastRoundSummary: "round 4 was cut short: the provider stopped or handed the agent over after it began, before it was recorded; " +
					"of its 2 planned action(s), those taken stand and the rest are not taken"},
			wantCut:  true,
			interval: time.Hour,
			wantDue:  now.Add(50 * time.Minute),
		},
		"UnderWayLongAgo": {
			reason: "A round cut short long ago makes the next one due at once: that is a new round.",
			o: v1alpha1.ChaosAgentObservation{RoundsRun: 3,
				RoundUnderWay: &v1alpha1.ChaosRound{Number: 4, StartedAt: *at(-2 * time.Hour)}},
			want: v1alpha1.ChaosAgentObservation{RoundsRun: 4, LastRoundTime: at(-2 * time.Hour),
				LastRoundSummary: "round 4 was cut short: the provider stopped or handed the agent over after it began, before it was recorded; " +
					"of its 0 planned action(s), those taken stand and the rest are not taken"},
			wantCut:  true,
			interval: time.Hour,
			wantDue:  now.Add(-time.Hour),
		},
		"RecordedAlready": {
			reason:   "A marker of a round already counted is dropped; the round's record stands.",
			o:        v1alpha1.ChaosAgentObservation{RoundsRun: 4, LastRoundTime: at(-time.Minute), RoundUnderWay: &v1alpha1.ChaosRound{Number: 4, StartedAt: *at(-time.Minute)}},
			want:     v1alpha1.ChaosAgentObservation{RoundsRun: 4, LastRoundTime: at(-time.Minute)},
			interval: time.Hour,
			wantDue:  now.Add(59 * time.Minute),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := *tc.o.DeepCopy()
			if got := cutShort(&o); got != tc.wantCut {
				t.Errorf("\n%s\ncutShort(...) = %t, want %t", tc.reason, got, tc.wantCut)
			}
			if diff := cmp.Diff(tc.want, o); diff != "" {
				t.Errorf("\n%s\ncutShort(...): -want, +got:\n%s", tc.reason, diff)
			}
			if got := dueAt(o, tc.interval, now); !got.Equal(tc.wantDue) {
				t.Errorf("\n%s\ndueAt(...) = %s, want %s", tc.reason, got, tc.wantDue)
			}
		})
	}
}

// TestRoundUnderWayIsNotRepeated: a replica that finds a round recorded as
// under way, as a holder that stopped mid-round left it, does not act for it;
// it runs the next round when that is due, as a round of its own.
func TestRoundUnderWayIsNotRepeated(t *testing.T) {
	underWay := func(started time.Duration) func(*v1alpha1.ChaosAgent) {
		return func(ca *v1alpha1.ChaosAgent) {
			ca.Spec.ForProvider.CancerMode = true
			ca.Status.AtProvider.RoundsRun = 6
			ca.Status.AtProvider.LastRoundTime = &metav1.Time{Time: now.Add(-time.Hour)}
			ca.Status.AtProvider.RoundUnderWay = &v1alpha1.ChaosRound{Number: 7, StartedAt: metav1.NewTime(now.Add(started)), Planned: 1}
		}
	}
	cases := map[string]struct {
		reason     string
		agent      *v1alpha1.ChaosAgent
		wantRounds []v1alpha1.ChaosRound
		wantRun    int64
		wantScaled int32
	}{
		"CutShortJustNow": {
			reason:     "Round 7 began 10s ago: it is closed, nothing is scaled, and round 8 waits its interval.",
			agent:      agent(underWay(-10 * time.Second)),
			wantRun:    7,
			wantScaled: 2,
		},
		"CutShortAnIntervalAgo": {
			reason:     "Round 7 began two minutes ago: it is closed, and round 8, due since, runs once.",
			agent:      agent(underWay(-2 * time.Minute)),
			wantRounds: []v1alpha1.ChaosRound{{Number: 8, StartedAt: metav1.NewTime(now), Planned: 1}},
			wantRun:    8,
			wantScaled: 4,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, c := newExternal(t, deployment("apps", "web", 2))
			b := &begun{}
			e.status = b
			// A reconcile: Observe, then Update when Observe found a round due.
			obs, err := e.Observe(context.Background(), tc.agent)
			if err != nil {
				t.Fatal(err)
			}
			if !obs.ResourceUpToDate {
				if _, err := e.Update(context.Background(), tc.agent); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.wantRounds, b.rounds); diff != "" {
				t.Errorf("\n%s\nrounds begun: -want, +got:\n%s", tc.reason, diff)
			}
			o := tc.agent.Status.AtProvider
			if o.RoundsRun != tc.wantRun || o.RoundUnderWay != nil {
				t.Errorf("\n%s\nroundsRun = %d, roundUnderWay %+v; want %d and none", tc.reason, o.RoundsRun, o.RoundUnderWay, tc.wantRun)
			}
			if got := read(t, c).Replicas["apps/web"]; got != tc.wantScaled {
				t.Errorf("\n%s\nreplicas of apps/web = %d, want %d", tc.reason, got, tc.wantScaled)
			}
		})
	}
}

// TestBeginBeforeActing: a round that acts is stored as under way, at the
// resourceVersion the reconcile read, before its first action; a replica
// whose read is stale meets a conflict there and acts on nothing.
func TestBeginBeforeActing(t *testing.T) {
	cases := map[string]struct {
		reason string
		// stale changes the stored agent after the reconcile read it.
		stale      bool
		wantErr    string
		wantStored *v1alpha1.ChaosRound
		wantScaled int32
	}{
		"Begins": {
			reason:     "The round is stored as under way while the Deployment is untouched, then acts.",
			wantStored: &v1alpha1.ChaosRound{Number: 1, StartedAt: metav1.NewTime(now), Planned: 1},
			wantScaled: 4,
		},
		"StaleRead": {
			reason:     "Another writer got there first: the round is not begun, and nothing is scaled.",
			stale:      true,
			wantErr:    "cannot record round 1 as under way: not acting",
			wantScaled: 2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var c client.Client
			var scaledWhenBegun int32 = -1
			c = fake.NewClientBuilder().WithScheme(testScheme(t)).
				WithObjects(deployment("apps", "web", 2), agent(func(ca *v1alpha1.ChaosAgent) { ca.Spec.ForProvider.CancerMode = true })).
				WithStatusSubresource(&v1alpha1.ChaosAgent{}).
				WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, o client.Object, opts ...client.SubResourceUpdateOption) error {
					scaledWhenBegun = read(t, c).Replicas["apps/web"]
					return cl.SubResource(sub).Update(ctx, o, opts...)
				}}).Build()
			e, _ := newExternal(t)
			e.cluster.Client, e.kube, e.status = c, c, c.Status()
			ca := &v1alpha1.ChaosAgent{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "edmund"}, ca); err != nil {
				t.Fatal(err)
			}
			if tc.stale {
				other := ca.DeepCopy()
				other.Labels = map[string]string{"edited": "elsewhere"}
				if err := c.Update(ctx, other); err != nil {
					t.Fatal(err)
				}
			}
			_, err := e.Update(ctx, ca)
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("\n%s\nUpdate(...): error %v, want one containing %q", tc.reason, err, tc.wantErr)
			}
			if tc.stale && !kerrors.IsConflict(err) {
				t.Errorf("\n%s\nUpdate(...): error %v, want a conflict", tc.reason, err)
			}
			stored := &v1alpha1.ChaosAgent{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(ca), stored); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantStored, stored.Status.AtProvider.RoundUnderWay); diff != "" {
				t.Errorf("\n%s\nstored roundUnderWay: -want, +got:\n%s", tc.reason, diff)
			}
			if tc.wantStored != nil && scaledWhenBegun != 2 {
				t.Errorf("\n%s\nreplicas of apps/web when the round was stored = %d, want 2: begun before acting", tc.reason, scaledWhenBegun)
			}
			if got := read(t, c).Replicas["apps/web"]; got != tc.wantScaled {
				t.Errorf("\n%s\nreplicas of apps/web = %d, want %d", tc.reason, got, tc.wantScaled)
			}
			if ca.Status.AtProvider.RoundUnderWay != nil {
				t.Errorf("\n%s\nroundUnderWay = %+v after Update, want it cleared for the reconciler's status update", tc.reason, ca.Status.AtProvider.RoundUnderWay)
			}
		})
	}
}

// TestDryRoundsBeginNothing: a dry round, or one that plans nothing, costs
// no status write: there is nothing it could repeat.
func TestDryRoundsBeginNothing(t *testing.T) {
	for name, mod := range map[string]func(*v1alpha1.ChaosAgent){
		"DryRun":      func(ca *v1alpha1.ChaosAgent) { ca.Spec.ForProvider.DryRun = true },
		"NoCandidate": func(ca *v1alpha1.ChaosAgent) { ca.Spec.ForProvider.MaxReplicas = 2 },
	} {
		t.Run(name, func(t *testing.T) {
			e, _ := newExternal(t, deployment("apps", "web", 2))
			b := &begun{}
			e.status = b
			ca := agent(func(ca *v1alpha1.ChaosAgent) { ca.Spec.ForProvider.CancerMode = true; mod(ca) })
			if _, err := e.Update(context.Background(), ca); err != nil {
				t.Fatal(err)
			}
			if len(b.rounds) != 0 {
				t.Errorf("rounds begun = %+v, want none", b.rounds)
			}
		})
	}
}
