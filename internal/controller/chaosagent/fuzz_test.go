package chaosagent

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
)

// FuzzCompile feeds the numbers and durations users write: compiling never
// panics, and a spec that compiles stays within the bounds the agent relies
// on (eagerness a percentage, at least a second between rounds, at least one
// action per round, a positive replica cap that doubling never passes).
func FuzzCompile(f *testing.F) {
	f.Add(int32(0), int32(0), int32(0), int32(0), int64(0), int64(0), int32(3))
	f.Add(int32(-1), int32(128), int32(101), int32(-4), int64(time.Millisecond), int64(-1), int32(1<<30))
	f.Add(int32(2), int32(1), int32(100), int32(100), int64(time.Second), int64(time.Hour), int32(-7))
	f.Fuzz(func(t *testing.T, tolerance, maxReplicas, eagerness, maxActions int32, interval, minAge int64, replicas int32) {
		s, err := Compile(v1alpha1.ChaosAgentParameters{
			CancerMode:         true,
			PodTolerance:       tolerance,
			MaxReplicas:        maxReplicas,
			Eagerness:          eagerness,
			MaxActionsPerRound: maxActions,
			Interval:           metav1.Duration{Duration: time.Duration(interval)},
			MinPodAge:          &metav1.Duration{Duration: time.Duration(minAge)},
		})
		if err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("Compile failed without saying why")
			}
			return
		}
		switch {
		case s.Eagerness < 1 || s.Eagerness > 100:
			t.Fatalf("eagerness %d is no percentage", s.Eagerness)
		case s.Interval < minInterval:
			t.Fatalf("interval %s is shorter than %s", s.Interval, minInterval)
		case s.MaxActions < 1:
			t.Fatalf("maxActions %d", s.MaxActions)
		case s.MaxReplicas < 1:
			t.Fatalf("maxReplicas %d", s.MaxReplicas)
		case s.PodTolerance < 0:
			t.Fatalf("podTolerance %d", s.PodTolerance)
		}
		if replicas >= 0 && replicas <= s.MaxReplicas {
			if d := Doubled(replicas, s.MaxReplicas); d < replicas || d > s.MaxReplicas {
				t.Fatalf("Doubled(%d, %d) = %d, want within [%d, %d]", replicas, s.MaxReplicas, d, replicas, s.MaxReplicas)
			}
		}
	})
}

// FuzzExcluded matches user glob patterns of excludedNamespaces: matching
// never panics, a pattern without glob characters excludes exactly the
// namespace of that name, and "*" excludes every namespace.
func FuzzExcluded(f *testing.F) {
	f.Add("prod-*", "prod-a")
	f.Add("team-?", "team-ab")
	f.Add("[", "[")
	f.Add("a\\", "a")
	f.Fuzz(func(t *testing.T, pattern, ns string) {
		got := excluded([]string{pattern}, ns)
		if !strings.ContainsAny(pattern, `*?[\`) && got != (pattern == ns) {
			t.Fatalf("excluded([%q], %q) = %t, want %t", pattern, ns, got, pattern == ns)
		}
		if !strings.Contains(ns, "/") && !excluded([]string{"*"}, ns) {
			t.Fatalf(`excluded(["*"], %q) = false`, ns)
		}
		if excluded(nil, ns) {
			t.Fatalf("excluded(nil, %q) = true", ns)
		}
	})
}

// FuzzGuard checks availability the way users write it: the guard never
// panics, and it fails exactly when a workload has fewer replicas available
// than the percent of its desired ones, rounded up.
func FuzzGuard(f *testing.F) {
	f.Add(int32(3), int32(2), 80)
	f.Add(int32(0), int32(0), 100)
	f.Add(int32(1<<31-1), int32(-5), 1)
	f.Add(int32(-1), int32(7), 250)
	f.Fuzz(func(t *testing.T, desired, available int32, percent int) {
		st := &Steady{MinAvailablePercent: percent}
		got := Guard(st, []WorkloadHealth{{Kind: kindDeploymentName, Namespace: "a", Name: "w", Desired: desired, Available: available}}, nil)
		need := Needed(desired, percent)
		if need < 0 || need > max(desired, 0) {
			t.Fatalf("Needed(%d, %d) = %d, outside 0..desired", desired, percent, need)
		}
		if percent >= 100 && desired > 0 && need != desired {
			t.Fatalf("Needed(%d, %d) = %d, want all", desired, percent, need)
		}
		if fails := percent > 0 && max(available, 0) < need; fails != (len(got) > 0) {
			t.Fatalf("Guard(%d of %d at %d%%) = %q, want failing %t", available, desired, percent, got, fails)
		}
	})
}

// FuzzVerdicts drives verdicts with a random sequence of actions and probes:
// status stays bounded, the counts add up, p50 never exceeds max, and every
// time to recover lies within recoveryTimeout.
func FuzzVerdicts(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, int64(time.Minute))
	f.Add([]byte{255, 0, 128, 64, 32}, int64(time.Second))
	f.Fuzz(func(t *testing.T, ops []byte, timeout int64) {
		timeout = min(max(timeout, int64(time.Second)), int64(24*time.Hour))
		var vs []v1alpha1.WorkloadVerdict
		clock := now
		for _, op := range ops {
			clock = clock.Add(time.Duration(op%16) * time.Second)
			w := WorkloadRef{Kind: kindDeploymentName, Namespace: "apps", Name: string(rune('a' + op%32))}
			if op&0x80 == 0 {
				vs = Disturbed(vs, w, clock)
				continue
			}
			for i := range vs {
				recovered, _ := Tally(&vs[i], op&0x40 != 0, clock, time.Duration(timeout))
				for _, d := range recovered {
					if d < 0 || d > time.Duration(timeout) {
						t.Fatalf("time to recover %s outside 0..%s", d, time.Duration(timeout))
					}
				}
			}
		}
		if len(vs) > maxVerdicts {
			t.Fatalf("%d verdicts, want at most %d", len(vs), maxVerdicts)
		}
		for _, v := range vs {
			if len(v.Pending) > maxPending || len(v.RecentRecoveries) > maxRecoveries {
				t.Fatalf("verdict %+v outgrew its bounds", v)
			}
			if v.Recovered+v.Unrecovered+int64(len(v.Pending)) > v.Disruptions {
				t.Fatalf("verdict %+v settles more actions than it had", v)
			}
			if v.P50 != nil && v.Max != nil && v.P50.Duration > v.Max.Duration {
				t.Fatalf("p50 %s above max %s", v.P50.Duration, v.Max.Duration)
			}
			if (len(v.Pending) > 0) != (v.Verdict == v1alpha1.VerdictRecovering) {
				t.Fatalf("verdict %q with %d pending", v.Verdict, len(v.Pending))
			}
		}
	})
}

// FuzzStopReason reads kill-switch values people type under pressure: it never
// panics, a value stops unless it is "false", and the reason status quotes is
// one line of valid UTF-8 within its bound.
func FuzzStopReason(f *testing.F) {
	f.Add("INC-4711")
	f.Add("")
	f.Add("FALSE")
	f.Add("\xff\xfe" + strings.Repeat("ü", 200))
	f.Fuzz(func(t *testing.T, v string) {
		why, stop := StopReason(map[string]string{v1alpha1.AnnotationStop: v})
		if stop == strings.EqualFold(strings.TrimSpace(v), "false") {
			t.Fatalf("StopReason(%q) stop = %t", v, stop)
		}
		if len(why) > maxStopReason+len("…") || strings.ContainsAny(why, "\n\r\t") {
			t.Fatalf("StopReason(%q) = %q: not one bounded line", v, why)
		}
		if utf8.ValidString(v) && !utf8.ValidString(why) {
			t.Fatalf("StopReason(%q) = %q: cut inside a rune", v, why)
		}
		if _, stop := StopReason(nil); stop {
			t.Fatal("StopReason(nil) stops")
		}
	})
}
