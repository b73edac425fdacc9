package configrollout

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var t0 = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time { t := t0.Add(d); return &t }

// candidateNames are the names of cs, for short wants.
func candidateNames(cs []Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestNextWave(t *testing.T) {
	two := &Stagger{MaxConcurrent: 2, Deadline: time.Minute}
	pending := func(n string) Candidate { return Candidate{Kind: KindDeployment, Name: n, Pending: true} }
	rolling := func(n string, ago time.Duration) Candidate {
		return Candidate{Kind: KindDeployment, Name: n, RolledAt: at(-ago)}
	}
	done := func(n string, ago time.Duration) Candidate {
		return Candidate{Kind: KindDeployment, Name: n, RolledAt: at(-ago), RolledOut: true}
	}
	held := func(n string, until time.Duration) Candidate {
		c := pending(n)
		c.HeldUntil = at(until)
		return c
	}
	type want struct {
		roll, inFlight, limited []string
		halted                  string
		pending                 int
		rolled                  int
	}
	cases := map[string]struct {
		reason string
		cs     []Candidate
		s      *Stagger
		open   bool
		want   want
	}{
		"NoStrategyRollsAll": {
			reason: "Without a strategy every pending workload rolls at once, as before.",
			cs:     []Candidate{pending("a"), done("b", 0), pending("c")},
			open:   true,
			want:   want{roll: []string{"a", "c"}, pending: 2, rolled: 1},
		},
		"NoStrategyNotRolledOutIsRolled": {
			reason: "Without a strategy nothing is in flight: nothing waits for availability.",
			cs:     []Candidate{rolling("a", time.Hour), pending("b")},
			open:   true,
			want:   want{roll: []string{"b"}, pending: 1, rolled: 1},
		},
		"FirstWave": {
			reason: "The first maxConcurrent pending workloads roll, in order.",
			cs:     []Candidate{pending("a"), pending("b"), pending("c"), pending("d")},
			s:      two, open: true,
			want: want{roll: []string{"a", "b"}, pending: 4},
		},
		"SlotsTaken": {
			reason: "While maxConcurrent workloads are in flight nothing more rolls.",
			cs:     []Candidate{rolling("a", time.Second), rolling("b", time.Second), pending("c")},
			s:      two, open: true,
			want: want{inFlight: []string{"a", "b"}, pending: 1},
		},
		"OneSlotFree": {
			reason: "A rolled-out workload frees its slot for the next pending one.",
			cs:     []Candidate{done("a", time.Second), rolling("b", time.Second), pending("c"), pending("d")},
			s:      two, open: true,
			want: want{roll: []string{"c"}, inFlight: []string{"b"}, pending: 2, rolled: 1},
		},
		"Halted": {
			reason: "A workload in flight for the deadline halts the rollout: nothing rolls, even into a free slot.",
			cs:     []Candidate{rolling("a", time.Minute), done("b", time.Second), pending("c")},
			s:      two, open: true,
			want: want{inFlight: []string{"a"}, halted: "a", pending: 1, rolled: 1},
		},
		"HaltedOldestFirst": {
			reason: "In-flight workloads are ordered by when they rolled; the first past the deadline is named.",
			cs:     []Candidate{rolling("a", 2*time.Minute), rolling("b", 3*time.Minute)},
			s:      two, open: true,
			want: want{inFlight: []string{"b", "a"}, halted: "b"},
		},
		"NotRolledByUs": {
			reason: "A workload that carries the hash without this rollout rolling it is not waited for.",
			cs:     []Candidate{{Kind: KindDeployment, Name: "a"}, pending("b")},
			s:      &Stagger{MaxConcurrent: 1, Deadline: time.Minute}, open: true,
			want: want{roll: []string{"b"}, pending: 1, rolled: 1},
		},
		"OutsideWindow": {
			reason: "Outside every window nothing rolls, strategy or not.",
			cs:     []Candidate{pending("a"), pending("b")},
			want:   want{pending: 2},
		},
		"ZeroMaxConcurrent": {
			reason: "A maxConcurrent below 1 (refused when applied) still rolls one at a time.",
			cs:     []Candidate{pending("a"), pending("b")},
			s:      &Stagger{Deadline: time.Minute}, open: true,
			want: want{roll: []string{"a"}, pending: 2},
		},
		"LimitedPassedOver": {
			reason: "A pending workload the rollout limit holds back does not roll; the next one rolls in its place.",
			cs:     []Candidate{held("a", time.Minute), pending("b"), pending("c")},
			s:      &Stagger{MaxConcurrent: 1, Deadline: time.Minute}, open: true,
			want: want{roll: []string{"b"}, pending: 3, limited: []string{"a"}},
		},
		"LimitedWithoutStrategy": {
			reason: "Without a strategy every pending workload but those held back rolls.",
			cs:     []Candidate{held("a", time.Minute), pending("b"), held("c", -time.Second)},
			open:   true,
			want:   want{roll: []string{"b", "c"}, pending: 3, limited: []string{"a"}},
		},
		"Complete": {
			reason: "Nothing pending and nothing in flight: complete.",
			cs:     []Candidate{done("a", time.Hour), done("b", time.Hour)},
			s:      two, open: true,
			want: want{rolled: 2},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := NextWave(tc.cs, tc.s, tc.open, t0)
			got := want{roll: candidateNames(w.Roll), inFlight: candidateNames(w.InFlight), limited: candidateNames(w.Limited), pending: len(w.Pending), rolled: w.Rolled}
			if w.Halted != nil {
				got.halted = w.Halted.Name
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nNextWave(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRolloutOrder(t *testing.T) {
	cs := []Candidate{{Kind: KindDaemonSet, Name: "a"}, {Kind: KindDeployment, Name: "z"}, {Kind: KindCronJob, Name: "b"}, {Kind: KindDeployment, Name: "m"}, {Kind: KindStatefulSet, Name: "c"}}
	rolloutOrder(cs)
	var got []string
	for _, c := range cs {
		got = append(got, c.Key())
	}
	want := []string{"Deployment/m", "Deployment/z", "StatefulSet/c", "DaemonSet/a", "CronJob/b"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rolloutOrder: -want, +got:\n%s", diff)
	}
}

func TestRolledOutWaitsForEveryReplicaUpdated(t *testing.T) {
	deploy := func(gen, observed int64, replicas, updated, total, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: observed, UpdatedReplicas: updated, Replicas: total, AvailableReplicas: available},
		}
	}
	cases := map[string]struct {
		reason string
		o      client.Object
		want   bool
	}{
		"DeploymentAvailable":   {reason: "Observed, all updated and available, no old pods.", o: deploy(2, 2, 3, 3, 3, 3), want: true},
		"DeploymentNotSeen":     {reason: "The controller has not observed the new template yet.", o: deploy(3, 2, 3, 3, 3, 3)},
		"DeploymentUpdating":    {reason: "Not every replica is updated.", o: deploy(2, 2, 3, 2, 4, 3)},
		"DeploymentOldPods":     {reason: "Old pods are still there.", o: deploy(2, 2, 3, 3, 4, 4)},
		"DeploymentUnavailable": {reason: "Updated pods are not available (a crash loop, no node).", o: deploy(2, 2, 3, 3, 3, 1)},
		"DeploymentDefaultOne":  {reason: "No replicas means one.", o: &appsv1.Deployment{Status: appsv1.DeploymentStatus{UpdatedReplicas: 1, Replicas: 1, AvailableReplicas: 1}}, want: true},
		"StatefulSetReady": {
			reason: "Every replica updated and ready.",
			o:      &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}, Status: appsv1.StatefulSetStatus{UpdatedReplicas: 2, ReadyReplicas: 2, Replicas: 2}},
			want:   true,
		},
		"StatefulSetUpdating": {
			reason: "A replica is not updated yet.",
			o:      &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}, Status: appsv1.StatefulSetStatus{UpdatedReplicas: 1, ReadyReplicas: 2, Replicas: 2}},
		},
		"StatefulSetPartitioned": {
			reason: "Replicas its partition holds back at the old revision do not keep it from having rolled out.",
			o: &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)},
			}}, Status: appsv1.StatefulSetStatus{UpdatedReplicas: 1, ReadyReplicas: 3, Replicas: 3}},
			want: true,
		},
		"StatefulSetPartitionedUpdating": {
			reason: "A replica above the partition is not updated yet.",
			o: &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1)},
			}}, Status: appsv1.StatefulSetStatus{UpdatedReplicas: 1, ReadyReplicas: 3, Replicas: 3}},
		},
		"StatefulSetOnDelete": {
			reason: "OnDelete pods change only when deleted: observed is enough.",
			o:      &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}}},
			want:   true,
		},
		"DaemonSetAvailable": {
			reason: "Every scheduled pod updated and available.",
			o:      &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: 3}},
			want:   true,
		},
		"DaemonSetUnavailable": {
			reason: "A pod is unavailable.",
			o:      &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: 2, NumberUnavailable: 1}},
		},
		"Other": {reason: "Anything else (a CronJob) has rolled out at once.", o: &metav1.PartialObjectMetadata{}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := RolledOut(tc.o); got != tc.want {
				t.Errorf("\n%s\nRolledOut(...) = %t; want %t", tc.reason, got, tc.want)
			}
		})
	}
}

// FuzzNextWave decides waves over arbitrary fleets: never more than
// maxConcurrent in flight after a wave, only pending workloads roll, in
// order, nothing rolls while halted or outside a window, and every workload
// is counted once.
func FuzzNextWave(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5}, 2, int64(60), true, true)
	f.Add([]byte{1, 1, 1, 2, 2, 0}, 1, int64(1), true, false)
	f.Add([]byte{}, 0, int64(0), false, true)
	f.Fuzz(func(t *testing.T, states []byte, maxConcurrent int, deadline int64, open, staggered bool) {
		var s *Stagger
		if staggered {
			s = &Stagger{MaxConcurrent: maxConcurrent % 100, Deadline: time.Duration(deadline%7200) * time.Second}
		}
		cs := make([]Candidate, 0, len(states))
		for i, b := range states {
			c := Candidate{Kind: KindDeployment, Name: string(rune('a' + i%26)), Pending: b%3 == 0, RolledOut: b%5 == 0}
			if b%2 == 1 {
				c.RolledAt = at(-time.Duration(b) * time.Second)
			}
			if b%7 == 0 {
				// Held back by the rollout limit until a little later, or
				// released a little earlier.
				c.HeldUntil = at(time.Duration(int(b)-128) * time.Second)
			}
			cs = append(cs, c)
		}
		w := NextWave(cs, s, open, t0)
		if got := w.Rolled + len(w.InFlight) + len(w.Pending); got != len(cs) {
			t.Fatalf("%d counted of %d", got, len(cs))
		}
		if len(w.Roll) > 0 && (!open || w.Halted != nil) {
			t.Fatalf("rolled %d while closed (%t) or halted (%v)", len(w.Roll), !open, w.Halted)
		}
		if s != nil && len(w.Roll) > 0 && len(w.Roll)+len(w.InFlight) > max(s.MaxConcurrent, 1) {
			t.Fatalf("%d rolling with maxConcurrent %d", len(w.Roll)+len(w.InFlight), s.MaxConcurrent)
		}
		var free []Candidate
		for _, c := range w.Pending {
			if c.HeldUntil == nil || !c.HeldUntil.After(t0) {
				free = append(free, c)
			}
		}
		if len(free)+len(w.Limited) != len(w.Pending) {
			t.Fatalf("%d free and %d limited of %d pending", len(free), len(w.Limited), len(w.Pending))
		}
		for i, c := range w.Roll {
			if !c.Pending || free[i] != c {
				t.Fatalf("rolled %+v, not the next pending workload the limit lets roll", c)
			}
		}
		if w.Halted != nil && t0.Sub(*w.Halted.RolledAt) < s.Deadline {
			t.Fatalf("halted on %+v before its deadline %s", w.Halted, s.Deadline)
		}
	})
}
