package configrollout

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

func TestLimitOf(t *testing.T) {
	cases := map[string]struct {
		reason string
		l      *v1alpha1.RolloutLimit
		want   Limit
	}{
		"Default": {
			reason: "Without rolloutLimit a workload rolls at most 5 times in 10 minutes.",
			want:   Limit{Rollouts: 5, Within: 10 * time.Minute},
		},
		"Set": {
			reason: "Both fields are read.",
			l:      &v1alpha1.RolloutLimit{Rollouts: 2, Within: &metav1.Duration{Duration: time.Hour}},
			want:   Limit{Rollouts: 2, Within: time.Hour},
		},
		"Partial": {
			reason: "A field left out takes its default.",
			l:      &v1alpha1.RolloutLimit{Rollouts: 3},
			want:   Limit{Rollouts: 3, Within: 10 * time.Minute},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, limitOf(v1alpha1.ConfigRolloutParameters{RolloutLimit: tc.l})); diff != "" {
				t.Errorf("%s\nlimitOf(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestHeldUntil(t *testing.T) {
	three := Limit{Rollouts: 3, Within: 10 * time.Minute}
	ago := func(ds ...time.Duration) []time.Time {
		var out []time.Time
		for _, d := range ds {
			out = append(out, t0.Add(-d))
		}
		return out
	}
	cases := map[string]struct {
		reason string
		rolled []time.Time
		l      Limit
		held   bool
		until  time.Time
	}{
		"Never": {
			reason: "A workload never rolled may roll.",
			l:      three,
		},
		"BelowLimit": {
			reason: "Fewer rollouts than the limit within the window: it may roll.",
			rolled: ago(time.Minute, 2*time.Minute),
			l:      three,
		},
		"AtLimit": {
			reason: "Rolled as often as the limit allows: held until the oldest of those leaves the window.",
			rolled: ago(time.Minute, 2*time.Minute, 3*time.Minute),
			l:      three,
			held:   true,
			until:  t0.Add(7 * time.Minute),
		},
		"Unordered": {
			reason: "The order of the recorded times does not matter.",
			rolled: ago(2*time.Minute, 3*time.Minute, time.Minute),
			l:      three,
			held:   true,
			until:  t0.Add(7 * time.Minute),
		},
		"OldOnesDoNotCount": {
			reason: "Rollouts that left the window no longer count.",
			rolled: ago(time.Minute, 2*time.Minute, 10*time.Minute, time.Hour),
			l:      three,
		},
		"AboveLimit": {
			reason: "More than the limit within the window (a smaller limit set since): held until enough have left it.",
			rolled: ago(time.Minute, 2*time.Minute, 3*time.Minute, 4*time.Minute),
			l:      three,
			held:   true,
			until:  t0.Add(7 * time.Minute),
		},
		"ClockBack": {
			reason: "A rollout recorded ahead of now counts as within the window.",
			rolled: []time.Time{t0.Add(time.Minute), t0, t0.Add(-time.Minute)},
			l:      three,
			held:   true,
			until:  t0.Add(9 * time.Minute),
		},
		"NoLimit": {
			reason: "A zero limit holds nothing back.",
			rolled: ago(0, 0, 0),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			until, held := HeldUntil(tc.rolled, tc.l, t0)
			if held != tc.held || !until.Equal(tc.until) {
				t.Errorf("%s\nHeldUntil() = %v, %v; want %v, %v", tc.reason, until, held, tc.until, tc.held)
			}
		})
	}
}

func TestRememberRecordsEachRollout(t *testing.T) {
	three := Limit{Rollouts: 3, Within: 10 * time.Minute}
	mt := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	cases := map[string]struct {
		reason string
		recent []metav1.Time
		want   []metav1.Time
	}{
		"First": {
			reason: "The first rollout is recorded.",
			want:   []metav1.Time{mt(0)},
		},
		"Appends": {
			reason: "A rollout is added after the earlier ones, oldest first.",
			recent: []metav1.Time{mt(-time.Minute), mt(-2 * time.Minute)},
			want:   []metav1.Time{mt(-2 * time.Minute), mt(-time.Minute), mt(0)},
		},
		"KeepsTheNewest": {
			reason: "At most the limit's count is kept: the newest.",
			recent: []metav1.Time{mt(-3 * time.Minute), mt(-2 * time.Minute), mt(-time.Minute)},
			want:   []metav1.Time{mt(-2 * time.Minute), mt(-time.Minute), mt(0)},
		},
		"DropsOld": {
			reason: "Rollouts outside the window are dropped.",
			recent: []metav1.Time{mt(-time.Hour), mt(-10 * time.Minute), mt(-time.Minute)},
			want:   []metav1.Time{mt(-time.Minute), mt(0)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, remember(tc.recent, mt(0), three)); diff != "" {
				t.Errorf("%s\nremember(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// FuzzRolloutLimit drives one workload through a stream of changes, rolling
// it whenever HeldUntil lets it and recording each rollout with remember, as
// the controller does: it never rolls more than the limit within any window,
// and a change is never held back longer than the window.
func FuzzRolloutLimit(f *testing.F) {
	f.Add(uint8(3), uint16(600), []byte{1, 1, 1, 1, 1, 1, 1, 1})
	f.Add(uint8(1), uint16(10), []byte{0, 5, 200, 3})
	f.Add(uint8(0), uint16(0), []byte{})
	f.Fuzz(func(t *testing.T, n uint8, within uint16, gaps []byte) {
		l := Limit{Rollouts: int(n%8) + 1, Within: time.Duration(within%3600+1) * time.Second}
		var recent []metav1.Time
		var rolls []time.Time
		now := t0
		for _, g := range gaps {
			// A change at now; the workload rolls at once or when released.
			now = now.Add(time.Duration(g) * time.Second)
			at := now
			if until, held := HeldUntil(times(recent), l, now); held {
				if until.Sub(now) > l.Within {
					t.Fatalf("held for %s, longer than the window %s", until.Sub(now), l.Within)
				}
				at = until
				if _, still := HeldUntil(times(recent), l, at); still {
					t.Fatalf("still held at %s, the time HeldUntil gave", at)
				}
			}
			recent = remember(recent, metav1.NewTime(at), l)
			if len(recent) > l.Rollouts {
				t.Fatalf("remember kept %d times, more than the limit %d", len(recent), l.Rollouts)
			}
			rolls = append(rolls, at)
			now = at
		}
		for i := range rolls {
			in := 0
			for _, r := range rolls[i:] {
				if r.Sub(rolls[i]) < l.Within {
					in++
				}
			}
			if in > l.Rollouts {
				t.Fatalf("%d rollouts within %s from %s; the limit is %d", in, l.Within, rolls[i], l.Rollouts)
			}
		}
	})
}
