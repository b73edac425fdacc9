package copyrule

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
)

func TestFreshTurnsStaleOnlyPastStaleAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }
	failed := func(name string, since *metav1.Time) v1alpha1.CopyProblem {
		return v1alpha1.CopyProblem{Namespace: "team", Name: name, Reason: v1alpha1.ProblemWriteFailed, Message: "cannot update: denied", Since: since}
	}
	skipped := v1alpha1.CopyProblem{Namespace: "team", Name: "theirs", Reason: v1alpha1.ProblemConflict, Message: "in the way"}
	type want struct {
		Since    *metav1.Time
		Problems []v1alpha1.CopyProblem
		Status   corev1.ConditionStatus
		Reason   xpv2.ConditionReason
	}
	cases := map[string]struct {
		reason   string
		before   v1alpha1.CopyRuleObservation
		problems []v1alpha1.CopyProblem
		want     want
	}{
		"InSync": {
			reason: "No problem: fresh, nothing since.",
			want:   want{Problems: []v1alpha1.CopyProblem{}, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonInSync},
		},
		"OnPurpose": {
			reason:   "A copy left alone on purpose is no copy out of sync; its problem still gets a since.",
			problems: []v1alpha1.CopyProblem{skipped},
			want:     want{Problems: []v1alpha1.CopyProblem{{Namespace: "team", Name: "theirs", Reason: v1alpha1.ProblemConflict, Message: "in the way", Since: at(0)}}, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonInSync},
		},
		"NewlyOutOfSync": {
			reason:   "A write that fails now is out of sync since now, and catching up (CatchingUp).",
			problems: []v1alpha1.CopyProblem{failed("a", nil)},
			want:     want{Since: at(0), Problems: []v1alpha1.CopyProblem{failed("a", at(0))}, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonCatchingUp},
		},
		"StillCatchingUp": {
			reason:   "Out of sync for less than staleAfter: the since carried on.",
			before:   v1alpha1.CopyRuleObservation{Problems: []v1alpha1.CopyProblem{failed("a", at(time.Minute))}, OutOfSyncSince: at(time.Minute)},
			problems: []v1alpha1.CopyProblem{failed("a", nil)},
			want:     want{Since: at(time.Minute), Problems: []v1alpha1.CopyProblem{failed("a", at(time.Minute))}, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonCatchingUp},
		},
		"Stale": {
			reason:   "Out of sync for longer than staleAfter, though another copy fell out of sync since: stale, from the oldest.",
			before:   v1alpha1.CopyRuleObservation{Problems: []v1alpha1.CopyProblem{failed("a", at(time.Hour))}, OutOfSyncSince: at(time.Hour)},
			problems: []v1alpha1.CopyProblem{failed("a", nil), failed("b", nil)},
			want:     want{Since: at(time.Hour), Problems: []v1alpha1.CopyProblem{failed("a", at(time.Hour)), failed("b", at(0))}, Status: corev1.ConditionFalse, Reason: v1alpha1.ReasonStale},
		},
		"CaughtUp": {
			reason: "Every copy caught up: fresh again, nothing since.",
			before: v1alpha1.CopyRuleObservation{Problems: []v1alpha1.CopyProblem{failed("a", at(time.Hour))}, OutOfSyncSince: at(time.Hour)},
			want:   want{Problems: []v1alpha1.CopyProblem{}, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonInSync},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := Fresh(tc.before, tc.problems, now, 10*time.Minute)
			got := want{Since: f.Since, Problems: f.Problems, Status: f.Condition.Status, Reason: f.Condition.Reason}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nFresh(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestOutOfSyncRulesKeepTheOldestAndEachRulesStaleAt: the oldest gauge follows the
// oldest rule out of sync, each rule out of sync has one stale-at series (since plus
// its staleAfter) and none once in sync, and forgetAll, as the controller
// stops, leaves no series and an oldest of 0.
func TestOutOfSyncRulesKeepTheOldestAndEachRulesStaleAt(t *testing.T) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_oldest"})
	staleAt := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "test_stale_at"}, []string{"namespace", "name"})
	b := newOutOfSync(g, staleAt)
	t0 := metav1.NewTime(time.Unix(1000, 0))
	t1 := metav1.NewTime(time.Unix(2000, 0))
	a, c := types.NamespacedName{Namespace: "x", Name: "a"}, types.NamespacedName{Namespace: "x", Name: "c"}
	steps := []struct {
		rule  types.NamespacedName
		since *metav1.Time
		after time.Duration
		want  float64
		// staleAt are the series after the step, by rule name.
		staleAt map[string]float64
	}{
		{a, &t1, time.Minute, 2000, map[string]float64{"a": 2060}},
		{c, &t0, time.Hour, 1000, map[string]float64{"a": 2060, "c": 4600}},
		{a, &t1, 2 * time.Minute, 1000, map[string]float64{"a": 2120, "c": 4600}},
		{c, nil, 0, 2000, map[string]float64{"a": 2120}},
		{a, nil, 0, 0, map[string]float64{}},
		{a, nil, 0, 0, map[string]float64{}},
		{c, &t0, time.Minute, 1000, map[string]float64{"c": 1060}},
	}
	for i, s := range steps {
		b.set(s.rule, s.since, s.after)
		if got := testutil.ToFloat64(g); got != s.want {
			t.Errorf("step %d: oldest %v, want %v", i, got, s.want)
		}
		if n := testutil.CollectAndCount(staleAt); n != len(s.staleAt) {
			t.Errorf("step %d: %d stale-at series, want %d", i, n, len(s.staleAt))
		}
		for name, v := range s.staleAt {
			if got := testutil.ToFloat64(staleAt.WithLabelValues("x", name)); got != v {
				t.Errorf("step %d: rule %s stale at %v, want %v", i, name, got, v)
			}
		}
	}
	b.forgetAll()
	if n := testutil.CollectAndCount(staleAt); n != 0 || testutil.ToFloat64(g) != 0 || len(b.since) != 0 {
		t.Errorf("after forgetAll: %d stale-at series, oldest %v, %d rules remembered; want none", n, testutil.ToFloat64(g), len(b.since))
	}
}

// TestOutOfSyncRulesKeepTheOldest sets many rules out of sync, in sync and out of sync again
// in a random order and checks the gauge against the oldest of them all.
func TestOutOfSyncRulesKeepTheOldest(t *testing.T) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_oldest"})
	b := newOutOfSync(g, nil)
	r := rand.New(rand.NewPCG(1, 2))
	want := map[types.NamespacedName]time.Time{}
	for i := range 5000 {
		rule := types.NamespacedName{Namespace: "x", Name: fmt.Sprint(r.IntN(200))}
		if r.IntN(3) == 0 {
			b.set(rule, nil, 0)
			delete(want, rule)
		} else {
			since := metav1.NewTime(time.Unix(int64(r.IntN(10000)), 0))
			b.set(rule, &since, time.Minute)
			want[rule] = since.Time
		}
		oldest := 0.0
		for _, s := range want {
			if v := float64(s.Unix()); oldest == 0 || v < oldest {
				oldest = v
			}
		}
		if got := testutil.ToFloat64(g); got != oldest {
			t.Fatalf("step %d: oldest %v, want %v", i, got, oldest)
		}
		if len(b.since) != len(want) || len(b.order) != len(want) {
			t.Fatalf("step %d: %d rules remembered, %d in order, want %d", i, len(b.since), len(b.order), len(want))
		}
	}
}

// FuzzFresh checks Fresh on any problems and earlier status: every problem
// has a since, the one it had if it had one; the rule is out of sync exactly when
// a copy is, since no later than now; and Stale exactly when out of sync for
// staleAfter or longer.
func FuzzFresh(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4}, uint16(60), uint16(600))
	f.Add([]byte{2, 2, 9}, uint16(0), uint16(1))
	reasons := []string{v1alpha1.ProblemWriteFailed, v1alpha1.ProblemConflict, v1alpha1.ProblemRefused, v1alpha1.ProblemOutOfReach, v1alpha1.ProblemSourceConflict, v1alpha1.ProblemNamespaceMissing}
	f.Fuzz(func(t *testing.T, b []byte, sinceSecs, staleSecs uint16) {
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		old := metav1.NewTime(now.Add(-time.Duration(sinceSecs) * time.Second))
		var before v1alpha1.CopyRuleObservation
		var problems []v1alpha1.CopyProblem
		for i, v := range b {
			p := v1alpha1.CopyProblem{Namespace: "n", Name: string(rune('a' + int(v>>4)%4)), Reason: reasons[int(v)%len(reasons)]}
			if i%2 == 0 {
				p.Since = &old
				before.Problems = append(before.Problems, p)
				before.OutOfSyncSince = &old
				continue
			}
			problems = append(problems, p)
		}
		staleAfter := time.Duration(staleSecs) * time.Second
		got := Fresh(before, problems, now, staleAfter)
		if len(got.Problems) != len(problems) {
			t.Fatalf("%d problems in, %d out", len(problems), len(got.Problems))
		}
		anyOutOfSync := false
		for i, p := range got.Problems {
			if p.Since == nil || p.Since.After(now) {
				t.Fatalf("problem %d since %v", i, p.Since)
			}
			for _, q := range before.Problems {
				if q.Namespace == p.Namespace && q.Name == p.Name && q.Reason == p.Reason && !p.Since.Equal(q.Since) {
					t.Fatalf("problem %v lost its since %v", p, q.Since)
				}
			}
			anyOutOfSync = anyOutOfSync || outOfSync(p.Reason)
		}
		if anyOutOfSync != (got.Since != nil) {
			t.Fatalf("out of sync %t but since %v", anyOutOfSync, got.Since)
		}
		stale := got.Since != nil && now.Sub(got.Since.Time) >= staleAfter
		if stale != (got.Condition.Reason == v1alpha1.ReasonStale) || stale != (got.Condition.Status == corev1.ConditionFalse) {
			t.Fatalf("stale %t, condition %s %s", stale, got.Condition.Status, got.Condition.Reason)
		}
	})
}

// The providers of one registry share its oldest-unsynced gauge, which keeps
// its name.
func TestOldestUnsyncedIsOneGaugePerRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := newOldestUnsynced(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newOldestUnsynced(reg)
	if err != nil {
		t.Fatalf("second provider on the same registry: %v", err)
	}
	if a != b {
		t.Error("two gauges of one registry, want the one registered")
	}
	if got := testutil.CollectAndCount(a, "clusterops_copy_oldest_unsynced_timestamp_seconds"); got != 1 {
		t.Errorf("series of clusterops_copy_oldest_unsynced_timestamp_seconds: %d, want 1", got)
	}
}
