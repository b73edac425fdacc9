package managedkind

import (
	"math"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
)

func TestJitteredSpreadsOnlyThePollInterval(t *testing.T) {
	const poll = 10 * time.Minute
	soon := func(resource.Managed, time.Duration) time.Duration { return time.Second }
	unchanged := func(_ resource.Managed, p time.Duration) time.Duration { return p }
	cases := map[string]struct {
		reason string
		hook   func(resource.Managed, time.Duration) time.Duration
		jitter float64
		random float64
		want   time.Duration
	}{
		"NoHookLowest":   {reason: "Without a hook, the poll moves down by up to the jitter.", jitter: 0.1, random: 0, want: 9 * time.Minute},
		"NoHookHighest":  {reason: "And up by up to the jitter.", jitter: 0.1, random: 1, want: 11 * time.Minute},
		"NoHookMiddle":   {reason: "A draw in the middle keeps the interval.", jitter: 0.1, random: 0.5, want: poll},
		"NoJitter":       {reason: "Zero jitter keeps the interval.", jitter: 0, random: 0, want: poll},
		"HookDueSooner":  {reason: "A due time a kind brings forward is kept exactly.", hook: soon, jitter: 0.5, random: 0, want: time.Second},
		"HookKeepsPoll":  {reason: "A hook that leaves the interval gets it jittered.", hook: unchanged, jitter: 0.5, random: 1, want: 15 * time.Minute},
		"JitterCapped":   {reason: "More than 100% is taken as 100%: never a negative interval.", jitter: 3, random: 0, want: 0},
		"FullJitterHigh": {reason: "100% spreads up to twice the interval.", jitter: 1, random: 1, want: 2 * poll},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := jittered(tc.hook, tc.jitter, func() float64 { return tc.random })(nil, poll)
			if got != tc.want {
				t.Errorf("%s\njittered(...)(poll=%s) = %s, want %s", tc.reason, poll, got, tc.want)
			}
		})
	}
}

// FuzzJittered: whatever the jitter and the draw, the interval stays within
// the jitter's bounds (capped at 100%) and is never negative.
func FuzzJittered(f *testing.F) {
	f.Add(0.1, 0.3, int64(time.Minute))
	f.Add(2.0, 0.0, int64(time.Hour))
	f.Fuzz(func(t *testing.T, jitter, random float64, poll int64) {
		if poll <= 0 || poll > int64(24*time.Hour) || random < 0 || random >= 1 || math.IsNaN(jitter) {
			return
		}
		p := time.Duration(poll)
		got := jittered(nil, jitter, func() float64 { return random })(nil, p)
		spread := time.Duration(min(max(jitter, 0), 1)*float64(p)) + 1
		if got < 0 || got < p-spread || got > p+spread {
			t.Errorf("jittered(jitter=%v, random=%v)(poll=%s) = %s: outside ±%s", jitter, random, p, got, spread)
		}
	})
}
