package copyrule

import (
	"container/heap"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/apimetrics"
)

// reasonStale is the Warning event of a rule whose copies went stale.
const reasonStale = "CopiesStale"

// defaultStaleAfter is staleAfter's default, for a rule stored without it.
const defaultStaleAfter = 10 * time.Minute

// outOfSync reports whether a problem of this reason leaves a copy out of
// sync with its source: a write that failed, a source refused, a name two
// sources claim. Copies left alone on purpose (conflicts under Skip or
// Adopt, namespaces out of reach or missing, prunes withheld) are not out of
// sync: nothing is meant to be written to them.
func outOfSync(reason string) bool {
	switch reason {
	case v1alpha1.ProblemWriteFailed, v1alpha1.ProblemRefused, v1alpha1.ProblemSourceConflict:
		return true
	}
	return false
}

// A Freshness is what a rule reports of how long its copies have been out of
// sync. A copy is in sync with its source or out of sync; a rule whose
// copies are out of sync is stale once that lasts longer than staleAfter,
// and until then catching up (the Fresh condition's reasons).
type Freshness struct {
	// Problems are those given, each with its Since.
	Problems []v1alpha1.CopyProblem
	// Since is when copies fell out of sync and stayed so; nil when none is.
	Since *metav1.Time
	// Condition is the Fresh condition.
	Condition xpv2.Condition
}

// Fresh decides the freshness of a rule's copies from its problems now and
// the status it had when the reconcile began (before): each problem keeps the
// Since it had, a new one is since now, and copies out of sync for longer
// than staleAfter are Stale.
func Fresh(before v1alpha1.CopyRuleObservation, problems []v1alpha1.CopyProblem, now time.Time, staleAfter time.Duration) Freshness {
	type key struct{ ns, name, reason string }
	since := make(map[key]*metav1.Time, len(before.Problems))
	for _, p := range before.Problems {
		since[key{p.Namespace, p.Name, p.Reason}] = p.Since
	}
	t := metav1.NewTime(now)
	f := Freshness{Problems: make([]v1alpha1.CopyProblem, len(problems))}
	var outOfSyncProblems []v1alpha1.CopyProblem
	for i, p := range problems {
		p.Since = &t
		if s := since[key{p.Namespace, p.Name, p.Reason}]; s != nil {
			p.Since = s
		}
		f.Problems[i] = p
		if outOfSync(p.Reason) {
			outOfSyncProblems = append(outOfSyncProblems, p)
		}
	}
	if len(outOfSyncProblems) == 0 {
		f.Condition = xpv2.Condition{Type: v1alpha1.TypeFresh, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonInSync, LastTransitionTime: t}
		return f
	}
	f.Since = &t
	if before.OutOfSyncSince != nil {
		f.Since = before.OutOfSyncSince
	}
	first := outOfSyncProblems[0]
	msg := fmt.Sprintf("%d copies out of sync since %s; first: %s/%s: %s", len(outOfSyncProblems), f.Since.UTC().Format(time.RFC3339), first.Namespace, first.Name, first.Reason)
	if now.Sub(f.Since.Time) < staleAfter {
		f.Condition = xpv2.Condition{Type: v1alpha1.TypeFresh, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonCatchingUp, Message: msg, LastTransitionTime: t}
		return f
	}
	f.Condition = xpv2.Condition{Type: v1alpha1.TypeFresh, Status: corev1.ConditionFalse, Reason: v1alpha1.ReasonStale,
		Message: fmt.Sprintf("stale for more than %s: %s", staleAfter, msg), LastTransitionTime: t}
	return f
}

// staleAfter is the rule's bound on how long a copy may stay out of sync.
func staleAfter(cr *v1alpha1.CopyRule) time.Duration {
	if d := cr.Spec.ForProvider.StaleAfter; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return defaultStaleAfter
}

// newOldestUnsynced returns the gauge of the time since which the oldest
// copy out of sync has been so, across the provider's rules (what a platform
// team alerts on, as time() minus it), registered with reg or the one
// already registered there.
func newOldestUnsynced(reg prometheus.Registerer) (prometheus.Gauge, error) {
	g, err := apimetrics.Existing(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clusterops_copy_oldest_unsynced_timestamp_seconds",
		Help: "When the copy that has been out of sync with its source the longest, across all CopyRules, fell behind, as a Unix time; 0 while every copy that can be written matches. Its age is time() minus it.",
	}))
	return g, errors.Wrap(err, "cannot register the CopyRule metrics")
}

// newStaleAt returns the gauge of when each rule's copies out of sync turn
// stale, registered with reg or the one already registered there. A series
// exists only while its rule has copies out of sync, so the gauge holds as many
// as there are rules out of sync, none while every copy matches: an alert on it
// names the rule and keeps the rule's own staleAfter.
func newStaleAt(reg prometheus.Registerer) (*prometheus.GaugeVec, error) {
	g, err := apimetrics.Existing(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "clusterops_copyrule_stale_at_timestamp_seconds",
		Help: "When a CopyRule's copies out of sync turn stale (when they fell behind, plus the rule's staleAfter), as a Unix time; a rule has a series only while some copy of it is behind. Stale once time() passes it.",
	}, []string{"namespace", "name"}))
	return g, errors.Wrap(err, "cannot register the CopyRule metrics")
}

// outOfSyncRules remembers, of each rule with copies out of sync, since when, and
// keeps the oldest-unsynced gauge at the oldest and each such rule's
// stale-at series. Rules in sync take no room. The rules out of sync are a heap
// by since: when a remote cluster goes, every rule of it falls out of sync, and
// each one's report costs log(rules), not a scan of all.
type outOfSyncRules struct {
	mu      sync.Mutex
	since   map[types.NamespacedName]*ruleOutOfSync
	order   oldestFirst
	gauge   prometheus.Gauge
	staleAt *prometheus.GaugeVec
}

// newOutOfSync returns the rules out of sync, which keep keeps oldest and, when set, staleAt.
func newOutOfSync(oldest prometheus.Gauge, staleAt *prometheus.GaugeVec) *outOfSyncRules {
	return &outOfSyncRules{since: map[types.NamespacedName]*ruleOutOfSync{}, gauge: oldest, staleAt: staleAt}
}

// set records that rule's copies are out of sync since since, and turn stale
// after after; or forgets the rule when since is nil. A nil outOfSyncRules (a client
// built without its controller) records nothing.
func (b *outOfSyncRules) set(rule types.NamespacedName, since *metav1.Time, after time.Duration) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	prev, had := b.since[rule]
	switch {
	case since == nil && !had, since != nil && had && prev.since.Equal(since.Time) && prev.after == after:
		return
	case since == nil:
		heap.Remove(&b.order, prev.index)
		delete(b.since, rule)
		b.forgetSeries(rule)
	case had:
		prev.since, prev.after = since.Time, after
		heap.Fix(&b.order, prev.index)
	default:
		l := &ruleOutOfSync{since: since.Time, after: after}
		heap.Push(&b.order, l)
		b.since[rule] = l
	}
	if since != nil && b.staleAt != nil {
		b.staleAt.WithLabelValues(rule.Namespace, rule.Name).Set(unix(since.Add(after)))
	}
	b.setOldest()
}

// forgetAll forgets every rule, with its series: the controller stopped,
// and the rules it held are another controller's, here or on another
// replica.
func (b *outOfSyncRules) forgetAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for rule := range b.since {
		b.forgetSeries(rule)
	}
	clear(b.since)
	b.order = nil
	b.setOldest()
}

func (b *outOfSyncRules) forgetSeries(rule types.NamespacedName) {
	if b.staleAt != nil {
		b.staleAt.DeleteLabelValues(rule.Namespace, rule.Name)
	}
}

// setOldest sets the oldest-unsynced gauge from the heap; b.mu is held.
func (b *outOfSyncRules) setOldest() {
	v := 0.0
	if len(b.order) > 0 {
		v = unix(b.order[0].since)
	}
	b.gauge.Set(v)
}

// unix is t as a Unix time in seconds, as the timestamp gauges give it.
func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// late is a rule out of sync since a time, turning stale after a while, at index
// in its heap.
type ruleOutOfSync struct {
	since time.Time
	after time.Duration
	index int
}

// oldestFirst orders rules out of sync by since, the oldest first (container/heap).
type oldestFirst []*ruleOutOfSync

func (h oldestFirst) Len() int           { return len(h) }
func (h oldestFirst) Less(i, j int) bool { return h[i].since.Before(h[j].since) }
func (h oldestFirst) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *oldestFirst) Push(x any) {
	l := x.(*ruleOutOfSync) //nolint:forcetypeassert // Only set pushes, and only *ruleOutOfSync.
	l.index = len(*h)
	*h = append(*h, l)
}

func (h *oldestFirst) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return l
}
