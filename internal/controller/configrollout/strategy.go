package configrollout

import (
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// A Candidate is one selected workload, as a staggered rollout sees it.
type Candidate struct {
	Kind, Name string
	// Pending is true when it does not carry the hash it should yet.
	Pending bool
	// RolledAt is when the current rollout rolled it; nil when it did not
	// (it carried the hash already, or carries an older one).
	RolledAt *time.Time
	// RolledOut is true when its controller has rolled its pods out and they
	// are available (RolledOut).
	RolledOut bool
	// HeldUntil is when the rollout limit lets it roll again; nil when it
	// may roll now.
	HeldUntil *time.Time
}

// Key is the candidate's "Kind/name".
func (c Candidate) Key() string { return workloadKey(c.Kind, c.Name) }

// A Stagger is a parsed spec.forProvider.strategy.
type Stagger struct {
	MaxConcurrent int
	Deadline      time.Duration
}

// A Wave is what a rollout does now, and where it stands.
type Wave struct {
	// Roll are the workloads to roll now, in order.
	Roll []Candidate
	// InFlight were rolled and have not rolled out, oldest first.
	InFlight []Candidate
	// Halted is the first in-flight workload past the progress deadline.
	Halted *Candidate
	// Pending are the workloads still to roll, in order, Roll included.
	Pending []Candidate
	// Limited are the pending workloads the rollout limit holds back.
	Limited []Candidate
	// Rolled counts the workloads that carry the hash and are not in flight.
	Rolled int
}

// NextWave decides which workloads to roll now. Without a stagger, every
// pending workload rolls at once (while open). With one, a workload the
// rollout rolled that has not rolled out is in flight; while any of them has
// been in flight for the deadline or longer the rollout is halted and rolls
// nothing, and otherwise the first pending workloads roll, up to
// MaxConcurrent in flight. Nothing rolls while open is false (outside every
// rollout window). A pending workload the rollout limit holds back is
// passed over, and the next one rolls in its place. cs is in rollout order.
func NextWave(cs []Candidate, s *Stagger, open bool, now time.Time) Wave {
	var w Wave
	var rollable []Candidate
	for _, c := range cs {
		switch {
		case c.Pending:
			w.Pending = append(w.Pending, c)
			if c.HeldUntil != nil && c.HeldUntil.After(now) {
				w.Limited = append(w.Limited, c)
			} else {
				rollable = append(rollable, c)
			}
		case s != nil && c.RolledAt != nil && !c.RolledOut:
			w.InFlight = append(w.InFlight, c)
		default:
			w.Rolled++
		}
	}
	sort.SliceStable(w.InFlight, func(i, j int) bool { return w.InFlight[i].RolledAt.Before(*w.InFlight[j].RolledAt) })
	if s != nil {
		for i := range w.InFlight {
			if now.Sub(*w.InFlight[i].RolledAt) >= s.Deadline {
				w.Halted = &w.InFlight[i]
				break
			}
		}
	}
	switch {
	case !open || w.Halted != nil:
	case s == nil:
		w.Roll = rollable
	default:
		slots := max(s.MaxConcurrent, 1) - len(w.InFlight)
		if slots > 0 {
			w.Roll = rollable[:min(slots, len(rollable))]
		}
	}
	return w
}

// kindOrder is the order of the workload kinds in a rollout picked by
// selector or auto.
var kindOrder = map[string]int{KindDeployment: 0, KindStatefulSet: 1, KindDaemonSet: 2, KindCronJob: 3}

// rolloutOrder sorts candidates picked by selector or auto by kind, then
// name: the cache lists in no stable order, and waves must not change with it.
func rolloutOrder(cs []Candidate) {
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].Kind != cs[j].Kind {
			return kindOrder[cs[i].Kind] < kindOrder[cs[j].Kind]
		}
		return cs[i].Name < cs[j].Name
	})
}

// RolledOut reports whether a workload's controller has rolled out its current
// template and its pods are available: a Deployment whose controller observed
// its generation, with every replica updated and available and no old one
// left; a StatefulSet with every replica updated (but those its partition
// holds back) and ready; a DaemonSet with
// every scheduled pod updated and available. A StatefulSet or DaemonSet that
// updates OnDelete has rolled out once its controller observed the generation:
// its pods change only when someone deletes them. Anything else (a CronJob,
// whose next Job uses the new template) has rolled out at once.
func RolledOut(o client.Object) bool {
	switch w := o.(type) {
	case *appsv1.Deployment:
		want := int32(1)
		if w.Spec.Replicas != nil {
			want = *w.Spec.Replicas
		}
		st := w.Status
		return st.ObservedGeneration >= w.Generation && st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas >= want
	case *appsv1.StatefulSet:
		want := int32(1)
		if w.Spec.Replicas != nil {
			want = *w.Spec.Replicas
		}
		st := w.Status
		if st.ObservedGeneration < w.Generation {
			return false
		}
		if w.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
			return true
		}
		// A partition keeps the pods below it at the old revision, on purpose.
		updated := want
		if ru := w.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
			updated = max(0, want-*ru.Partition)
		}
		return st.UpdatedReplicas >= updated && st.ReadyReplicas >= want && st.Replicas == want
	case *appsv1.DaemonSet:
		st := w.Status
		if st.ObservedGeneration < w.Generation {
			return false
		}
		if w.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
			return true
		}
		return st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberAvailable >= st.DesiredNumberScheduled && st.NumberUnavailable == 0
	default:
		return true
	}
}

// stagger is the parsed strategy of a ConfigRollout, nil without one.
func stagger(p v1alpha1.ConfigRolloutParameters) *Stagger {
	if p.Strategy == nil {
		return nil
	}
	s := &Stagger{MaxConcurrent: int(p.Strategy.MaxConcurrent), Deadline: 10 * time.Minute}
	if d := p.Strategy.ProgressDeadline; d != nil && d.Duration > 0 {
		s.Deadline = d.Duration
	}
	return s
}
