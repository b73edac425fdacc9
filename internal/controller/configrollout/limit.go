package configrollout

import (
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// The rollout limit without spec.forProvider.rolloutLimit: a source rewritten
// every second rolls each of its workloads 5 times in 10 minutes, not 600.
const (
	defaultLimitRollouts = 5
	defaultLimitWithin   = 10 * time.Minute
)

// A Limit is a parsed spec.forProvider.rolloutLimit: at most Rollouts rollouts
// of one workload within any window of length Within.
type Limit struct {
	Rollouts int
	Within   time.Duration
}

// limitOf is the ConfigRollout's limit, its defaults filled in.
func limitOf(p v1alpha1.ConfigRolloutParameters) Limit {
	l := Limit{Rollouts: defaultLimitRollouts, Within: defaultLimitWithin}
	if p.RolloutLimit == nil {
		return l
	}
	if p.RolloutLimit.Rollouts > 0 {
		l.Rollouts = int(p.RolloutLimit.Rollouts)
	}
	if w := p.RolloutLimit.Within; w != nil && w.Duration > 0 {
		l.Within = w.Duration
	}
	return l
}

// HeldUntil reports whether one more rollout of a workload now would exceed
// the limit, given the times it was rolled, and if so when it may roll next:
// when the oldest of the last Rollouts rollouts leaves the window.
func HeldUntil(rolled []time.Time, l Limit, now time.Time) (time.Time, bool) {
	if l.Rollouts <= 0 || l.Within <= 0 {
		return time.Time{}, false
	}
	var in []time.Time
	for _, t := range rolled {
		// A time ahead of now (a clock stepped back) counts as now.
		if now.Sub(t) < l.Within {
			in = append(in, t)
		}
	}
	if len(in) < l.Rollouts {
		return time.Time{}, false
	}
	sort.Slice(in, func(i, j int) bool { return in[i].Before(in[j]) })
	return in[len(in)-l.Rollouts].Add(l.Within), true
}

// remember adds a rollout at now to the recent ones and keeps only what the
// limit needs: those within its window, at most Rollouts, oldest first. It
// runs only when a workload rolls, so status does not change just because
// time passed.
func remember(recent []metav1.Time, now metav1.Time, l Limit) []metav1.Time {
	out := make([]metav1.Time, 0, min(len(recent)+1, max(l.Rollouts, 1)))
	for _, t := range recent {
		if now.Sub(t.Time) < l.Within {
			out = append(out, t)
		}
	}
	out = append(out, now)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Before(&out[j]) })
	if n := max(l.Rollouts, 1); len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// times are the recorded rollouts of a workload as times.
func times(ts []metav1.Time) []time.Time {
	out := make([]time.Time, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Time)
	}
	return out
}
