package chaosagent

import (
	"context"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
)

// Kinds of workloads verdicts are kept for.
const (
	kindDeploymentName  = "Deployment"
	kindStatefulSetName = "StatefulSet"
)

// Bounds of status.atProvider.verdicts, so status never grows with time.
const (
	maxVerdicts   = 20
	maxRecoveries = 10
	maxPending    = 10
)

// Probes of pending recoveries happen every tenth of the agent's interval,
// within these bounds: a recovery is measured at most that late.
const (
	minProbe = time.Second
	maxProbe = 10 * time.Second
)

// minRecoveryAge is how old an action must be before a whole workload counts as
// recovered from it: a workload's status lags its pods by a moment, and a
// look right after a kill could still see the status from before it.
const minRecoveryAge = time.Second

// ProbeEvery is how often the agent looks at workloads it is waiting for.
func ProbeEvery(interval time.Duration) time.Duration {
	return min(max(interval/10, minProbe), maxProbe)
}

// A WorkloadRef names a workload.
type WorkloadRef struct {
	Kind, Namespace, Name string
}

// A WorkloadStatus is what Whole needs to know of a workload.
type WorkloadStatus struct {
	Kind                           string
	Generation, ObservedGeneration int64
	// Desired is spec.replicas; the others are from status.
	Desired, Replicas, Updated, Available int32
}

// Whole reports whether a workload is whole: its controller has seen its
// latest spec, and it runs exactly its desired replicas, all available (and,
// for a Deployment, all of the latest template). A StatefulSet's updated
// replicas are not looked at: with the OnDelete strategy they lag forever.
func Whole(s WorkloadStatus) bool {
	if s.ObservedGeneration < s.Generation || s.Replicas != s.Desired || s.Available < s.Desired {
		return false
	}
	return s.Kind != kindDeploymentName || s.Updated >= s.Desired
}

// DeploymentOf names the Deployment a pod's ReplicaSet belongs to, by the
// naming the Deployment controller uses (<deployment>-<pod-template-hash>),
// or "" when the pod is not a Deployment's. The caller confirms the
// Deployment selects the pod.
func DeploymentOf(owners []metav1.OwnerReference, podLabels map[string]string) string {
	ref := controllerOf(owners)
	if ref == nil || ref.Kind != "ReplicaSet" || !strings.HasPrefix(ref.APIVersion, "apps/") {
		return ""
	}
	hash := podLabels[appsv1.DefaultDeploymentUniqueLabelKey]
	name, ok := strings.CutSuffix(ref.Name, "-"+hash)
	if hash == "" || !ok || name == "" {
		return ""
	}
	return name
}

// StatefulSetOf names the StatefulSet that controls a pod, or "".
func StatefulSetOf(owners []metav1.OwnerReference) string {
	if ref := controllerOf(owners); ref != nil && ref.Kind == kindStatefulSetName && strings.HasPrefix(ref.APIVersion, "apps/") {
		return ref.Name
	}
	return ""
}

func controllerOf(owners []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range owners {
		if ptr.Deref(owners[i].Controller, false) {
			return &owners[i]
		}
	}
	return nil
}

// Disturbed records an action on a workload at t, in a list of verdicts that
// never holds more than maxVerdicts: a new workload displaces the one
// disturbed longest ago, preferring one that is not waited for. An action
// while maxPending are already waited for is counted but not measured.
func Disturbed(vs []v1alpha1.WorkloadVerdict, w WorkloadRef, t time.Time) []v1alpha1.WorkloadVerdict {
	i := slices.IndexFunc(vs, func(v v1alpha1.WorkloadVerdict) bool {
		return v.Kind == w.Kind && v.Namespace == w.Namespace && v.Name == w.Name
	})
	if i < 0 {
		if len(vs) >= maxVerdicts {
			j := oldest(vs)
			vs = slices.Delete(vs, j, j+1)
		}
		vs = append(vs, v1alpha1.WorkloadVerdict{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name})
		i = len(vs) - 1
	}
	v := &vs[i]
	v.Disruptions++
	v.LastDisruptionTime = metav1.NewTime(t)
	if len(v.Pending) < maxPending {
		v.Pending = append(v.Pending, metav1.NewMicroTime(t))
	}
	v.Verdict = verdictOf(*v)
	return vs
}

// oldest is the index of the verdict a new one displaces: one not waited for
// before one that is, then the one disturbed longest ago.
func oldest(vs []v1alpha1.WorkloadVerdict) int {
	best := 0
	for i := 1; i < len(vs); i++ {
		a, b := vs[i], vs[best]
		if aw, bw := len(a.Pending) > 0, len(b.Pending) > 0; aw != bw {
			if !aw {
				best = i
			}
			continue
		}
		if a.LastDisruptionTime.Before(&b.LastDisruptionTime) {
			best = i
		}
	}
	return best
}

// Tally brings a verdict up to date with a look at its workload at now:
// every action waited for is recovered from if the workload is whole (and
// recoveryTimeout has not passed, and the action is at least minRecoveryAge old),
// and unrecovered once recoveryTimeout has passed. It returns the times to recover it measured and how many actions
// it gave up on.
func Tally(v *v1alpha1.WorkloadVerdict, whole bool, now time.Time, timeout time.Duration) ([]time.Duration, int) {
	var recovered []time.Duration
	lost := 0
	var still []metav1.MicroTime
	for _, p := range v.Pending {
		took := max(now.Sub(p.Time), 0)
		switch {
		case took > timeout:
			lost++
		case whole && took >= minRecoveryAge:
			recovered = append(recovered, took)
		default:
			still = append(still, p)
		}
	}
	v.Pending = still
	v.Recovered += int64(len(recovered))
	v.Unrecovered += int64(lost)
	t := metav1.NewTime(now)
	if lost > 0 {
		v.LastUnrecoveredTime = &t
	}
	if len(recovered) > 0 {
		v.LastRecoveryTime = &t
		for _, d := range recovered {
			v.RecentRecoveries = append(v.RecentRecoveries, metav1.Duration{Duration: d.Round(time.Millisecond)})
		}
		if n := len(v.RecentRecoveries); n > maxRecoveries {
			v.RecentRecoveries = slices.Clone(v.RecentRecoveries[n-maxRecoveries:])
		}
		p50, longest := Percentiles(v.RecentRecoveries)
		v.P50, v.Max = &metav1.Duration{Duration: p50}, &metav1.Duration{Duration: longest}
	}
	v.Verdict = verdictOf(*v)
	return recovered, lost
}

// Percentiles returns the median (the lower of the middle two of an even
// count) and the longest of some durations; zero for none.
func Percentiles(ds []metav1.Duration) (p50, longest time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := make([]time.Duration, len(ds))
	for i, d := range ds {
		s[i] = d.Duration
	}
	slices.Sort(s)
	return s[(len(s)-1)/2], s[len(s)-1]
}

func verdictOf(v v1alpha1.WorkloadVerdict) string {
	switch {
	case len(v.Pending) > 0:
		return v1alpha1.VerdictRecovering
	case v.LastUnrecoveredTime != nil && (v.LastRecoveryTime == nil || !v.LastUnrecoveredTime.Before(v.LastRecoveryTime)):
		return v1alpha1.VerdictUnrecovered
	}
	return v1alpha1.VerdictResilient
}

// pending reports whether any verdict waits for a recovery.
func pending(vs []v1alpha1.WorkloadVerdict) bool {
	return slices.ContainsFunc(vs, func(v v1alpha1.WorkloadVerdict) bool { return len(v.Pending) > 0 })
}

// probe looks at every workload a recovery is waited for, one read each, and
// settles its verdict. A workload that is gone, or in a namespace the agent
// may no longer act in (denied since it acted there), is no longer waited
// for: deny covers reads too.
func (e *external) probe(ctx context.Context, ca *v1alpha1.ChaosAgent, s Spec) error {
	o := &ca.Status.AtProvider
	now := e.now()
	agent := ca.GetNamespace() + "/" + ca.GetName()
	check := e.check(ctx)
	for i := range o.Verdicts {
		v := &o.Verdicts[i]
		if len(v.Pending) == 0 {
			continue
		}
		if mayActIn(check, e.cluster.Reach.ProviderNamespace, ca.GetNamespace(), v.Namespace) != nil {
			v.Pending = nil
			v.Verdict = verdictOf(*v)
			continue
		}
		st, err := e.workloadStatus(ctx, WorkloadRef{Kind: v.Kind, Namespace: v.Namespace, Name: v.Name})
		if kerrors.IsNotFound(err) {
			v.Pending = nil
			v.Verdict = verdictOf(*v)
			continue
		}
		if err != nil {
			return err
		}
		recovered, lost := Tally(v, Whole(st), now, s.RecoveryTimeout)
		e.metrics.recordRecoveries(agent, WorkloadRef{Kind: v.Kind, Namespace: v.Namespace, Name: v.Name}, recovered, lost)
	}
	return nil
}

func (e *external) workloadStatus(ctx context.Context, w WorkloadRef) (WorkloadStatus, error) {
	key := types.NamespacedName{Namespace: w.Namespace, Name: w.Name}
	switch w.Kind {
	case kindDeploymentName:
		d := &appsv1.Deployment{}
		if err := e.cluster.Client.Get(ctx, key, d); err != nil {
			return WorkloadStatus{}, errors.Wrapf(err, "cannot get Deployment %s to see whether it recovered", key)
		}
		return WorkloadStatus{
			Kind: w.Kind, Generation: d.Generation, ObservedGeneration: d.Status.ObservedGeneration, Desired: ptr.Deref(d.Spec.Replicas, 1),
			Replicas: d.Status.Replicas, Updated: d.Status.UpdatedReplicas, Available: d.Status.AvailableReplicas,
		}, nil
	case kindStatefulSetName:
		s := &appsv1.StatefulSet{}
		if err := e.cluster.Client.Get(ctx, key, s); err != nil {
			return WorkloadStatus{}, errors.Wrapf(err, "cannot get StatefulSet %s to see whether it recovered", key)
		}
		return WorkloadStatus{
			Kind: w.Kind, Generation: s.Generation, ObservedGeneration: s.Status.ObservedGeneration, Desired: ptr.Deref(s.Spec.Replicas, 1),
			Replicas: s.Status.Replicas, Updated: s.Status.UpdatedReplicas, Available: s.Status.AvailableReplicas,
		}, nil
	}
	return WorkloadStatus{}, kerrors.NewNotFound(appsv1.Resource(strings.ToLower(w.Kind)), w.Name)
}

// workloadOf names the Deployment or StatefulSet a pod belongs to, or nil. A
// Deployment is read to confirm that it selects the pod.
func (e *external) workloadOf(ctx context.Context, p *corev1.Pod) *WorkloadRef {
	if name := StatefulSetOf(p.OwnerReferences); name != "" {
		return &WorkloadRef{Kind: kindStatefulSetName, Namespace: p.Namespace, Name: name}
	}
	name := DeploymentOf(p.OwnerReferences, p.Labels)
	if name == "" {
		return nil
	}
	d := &appsv1.Deployment{}
	if err := e.cluster.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, d); err != nil || d.Spec.Selector == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
		return nil
	}
	return &WorkloadRef{Kind: kindDeploymentName, Namespace: p.Namespace, Name: name}
}
