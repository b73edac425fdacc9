package chaosagent

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// maxViolations bounds how many violations a guard's verdict names.
const maxViolations = 3

// A WorkloadHealth is what the steady-state guard knows of a Deployment or
// StatefulSet.
type WorkloadHealth struct {
	Kind, Namespace, Name string
	// Desired is spec.replicas, Available status.availableReplicas.
	Desired, Available int32
}

// A PodHealth is what the steady-state guard knows of a pod.
type PodHealth struct {
	Namespace, Name string
	// CrashLooping names a container waiting in CrashLoopBackOff; empty when
	// none is.
	CrashLooping string
}

// Needed is how many of desired replicas min percent asks to be available,
// rounded up; never more than desired, never negative.
func Needed(desired int32, percent int) int32 {
	if desired <= 0 || percent <= 0 {
		return 0
	}
	percent = min(percent, 100)
	return int32((int64(desired)*int64(percent) + 99) / 100) //nolint:gosec // At most desired.
}

// Guard checks a steady state against the workloads and pods of the target
// namespaces, which the caller has narrowed to the guard's selector. It
// returns what breaks it, at most maxViolations and a count of the rest, in a
// fixed order; nothing when it holds.
func Guard(st *Steady, workloads []WorkloadHealth, pods []PodHealth) []string {
	if st == nil {
		return nil
	}
	var out []string
	if st.MinAvailablePercent > 0 {
		ws := slices.Clone(workloads)
		slices.SortFunc(ws, func(a, b WorkloadHealth) int {
			return cmp.Compare(a.Namespace+"/"+a.Kind+"/"+a.Name, b.Namespace+"/"+b.Kind+"/"+b.Name)
		})
		for _, w := range ws {
			if need := Needed(w.Desired, st.MinAvailablePercent); max(w.Available, 0) < need {
				out = append(out, fmt.Sprintf("%s %s/%s has %d of %d replicas available, below minAvailablePercent %d%% (%d)",
					w.Kind, w.Namespace, w.Name, max(w.Available, 0), w.Desired, st.MinAvailablePercent, need))
			}
		}
	}
	if st.NoCrashLoops {
		ps := slices.Clone(pods)
		slices.SortFunc(ps, func(a, b PodHealth) int { return cmp.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
		for _, p := range ps {
			if p.CrashLooping != "" {
				out = append(out, fmt.Sprintf("container %s of pod %s/%s is in CrashLoopBackOff", p.CrashLooping, p.Namespace, p.Name))
			}
		}
	}
	if len(out) > maxViolations {
		out = append(out[:maxViolations], fmt.Sprintf("and %d more", len(out)-maxViolations))
	}
	return out
}

// crashLooping names the first container of a pod waiting in CrashLoopBackOff.
func crashLooping(p *corev1.Pod) string {
	for _, l := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, c := range l {
			if w := c.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
				return c.Name
			}
		}
	}
	return ""
}

// steady reads what the guard needs in the target namespaces and checks it:
// a list of Deployments and StatefulSets when availability is checked, and of
// pods when crash loops are, per namespace, narrowed by the guard's selector
// on the API server.
func (e *external) steady(ctx context.Context, st *Steady, namespaces []string) ([]string, error) {
	if st == nil {
		return nil, nil
	}
	var workloads []WorkloadHealth
	var pods []PodHealth
	for _, ns := range namespaces {
		opts := []client.ListOption{client.InNamespace(ns), client.MatchingLabelsSelector{Selector: st.Selector}}
		if st.MinAvailablePercent > 0 {
			ds := &appsv1.DeploymentList{}
			if err := e.cluster.Client.List(ctx, ds, opts...); err != nil {
				return nil, errors.Wrapf(err, "cannot list Deployments in namespace %q for the steady-state guard", ns)
			}
			for _, d := range ds.Items {
				workloads = append(workloads, WorkloadHealth{Kind: kindDeploymentName, Namespace: ns, Name: d.Name, Desired: ptr.Deref(d.Spec.Replicas, 1), Available: d.Status.AvailableReplicas})
			}
			ss := &appsv1.StatefulSetList{}
			if err := e.cluster.Client.List(ctx, ss, opts...); err != nil {
				return nil, errors.Wrapf(err, "cannot list StatefulSets in namespace %q for the steady-state guard", ns)
			}
			for _, s := range ss.Items {
				workloads = append(workloads, WorkloadHealth{Kind: kindStatefulSetName, Namespace: ns, Name: s.Name, Desired: ptr.Deref(s.Spec.Replicas, 1), Available: s.Status.AvailableReplicas})
			}
		}
		if st.NoCrashLoops {
			ps := &corev1.PodList{}
			if err := e.cluster.Client.List(ctx, ps, opts...); err != nil {
				return nil, errors.Wrapf(err, "cannot list pods in namespace %q for the steady-state guard", ns)
			}
			for i := range ps.Items {
				if c := crashLooping(&ps.Items[i]); c != "" {
					pods = append(pods, PodHealth{Namespace: ns, Name: ps.Items[i].Name, CrashLooping: c})
				}
			}
		}
	}
	return Guard(st, workloads, pods), nil
}
