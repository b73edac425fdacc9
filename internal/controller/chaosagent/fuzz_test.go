package chaosagent

import (
	"strings"
	"testing"
	"time"

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
