package appbundle

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// These decide which changes of an AppBundle's objects reconcile it. A
// Deployment coming up writes its status several times (replicas, updated,
// ready, available, conditions), a claim binding twice (its volume, then its
// phase and capacity): reconciling on each cost a fleet of bundles 7 to 11
// reconciles per bundle. Only what the bundle acts on or reports as its
// readiness passes; what it merely shows in status.atProvider (replica
// counts, the claim's phase) is refreshed whenever it is reconciled.

// deploymentReady is whether d is ready as an AppBundle judges it: its
// controller has seen its current spec (so its status speaks of it) and
// reports it Available.
func deploymentReady(d *appsv1.Deployment) bool {
	if d.Status.ObservedGeneration < d.Generation {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// deploymentChanged is whether an update of a Deployment from old to cur
// concerns its AppBundle: its spec (generation), the labels the bundle sets,
// its deletion, or its readiness changed. Status churn that leaves readiness
// as it was does not.
func deploymentChanged(old, cur *appsv1.Deployment) bool {
	return old.Generation != cur.Generation ||
		ownLabelsChanged(old.Labels, cur.Labels) ||
		deleting(old) != deleting(cur) ||
		deploymentReady(old) != deploymentReady(cur)
}

// claimChanged is whether an update of a data claim from old to cur concerns
// its AppBundle: the labels the bundle sets, its owner references (the
// deletion policy), its deletion, the fields the bundle sets in its spec, its
// being lost or found again, or a new capacity of a bound claim (a resize
// done). Binding (the volume's name, then phase and capacity) does not: the
// Deployment cannot become Available before its claim is bound, so the
// reconcile of that readiness change shows the claim Bound.
func claimChanged(old, cur *corev1.PersistentVolumeClaim) bool {
	o, n := old.Spec, cur.Spec
	switch {
	case ownLabelsChanged(old.Labels, cur.Labels), deleting(old) != deleting(cur),
		len(old.OwnerReferences) != len(cur.OwnerReferences):
		return true
	case !equality.Semantic.DeepEqual(o.AccessModes, n.AccessModes),
		!equality.Semantic.DeepEqual(o.StorageClassName, n.StorageClassName),
		!equality.Semantic.DeepEqual(o.Resources.Requests[corev1.ResourceStorage], n.Resources.Requests[corev1.ResourceStorage]):
		return true
	case (old.Status.Phase == corev1.ClaimLost) != (cur.Status.Phase == corev1.ClaimLost):
		return true
	}
	bound := old.Status.Phase == corev1.ClaimBound && cur.Status.Phase == corev1.ClaimBound
	return bound && !equality.Semantic.DeepEqual(old.Status.Capacity[corev1.ResourceStorage], cur.Status.Capacity[corev1.ResourceStorage])
}

// serviceChanged is whether an update of a Service from old to cur concerns
// its AppBundle: its spec (what the bundle sets and the address it reports),
// the labels the bundle sets, or its deletion. A Service's status (a load
// balancer's) does not.
func serviceChanged(old, cur *corev1.Service) bool {
	return ownLabelsChanged(old.Labels, cur.Labels) ||
		deleting(old) != deleting(cur) ||
		!equality.Semantic.DeepEqual(old.Spec, cur.Spec)
}

// ownLabelsChanged is whether a label the AppBundle sets on its objects
// differs between old and cur. Labels others add are theirs.
func ownLabelsChanged(old, cur map[string]string) bool {
	for _, k := range []string{LabelOwner, labelManagedBy} {
		o, oks := old[k]
		n, nks := cur[k]
		if o != n || oks != nks {
			return true
		}
	}
	return false
}

func deleting(o metav1.Object) bool { return o.GetDeletionTimestamp() != nil }
