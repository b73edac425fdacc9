package immortalcontainer

import (
	corev1 "k8s.io/api/core/v1"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// These decide which events of a pod reconcile its ImmortalContainer. A pod
// coming up is created, bound to a node, then reported running and ready:
// reconciling on each cost a fleet 3.6 to 4.2 reconciles per
// ImmortalContainer. Only what the ImmortalContainer acts on or reports as
// its readiness or connection details passes; what it merely shows (the
// phase in a message) is refreshed whenever it is reconciled.

// podEvents passes a pod's deletion, the creation of a pod that already needs
// acting on, and the updates podChanged says concern its ImmortalContainer.
func podEvents() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e ctrlevent.CreateEvent) bool {
			p, ok := e.Object.(*corev1.Pod)
			return !ok || podCreated(p)
		},
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
			o, okOld := e.ObjectOld.(*corev1.Pod)
			n, okNew := e.ObjectNew.(*corev1.Pod)
			return !okOld || !okNew || podChanged(o, n)
		},
		DeleteFunc:  func(ctrlevent.DeleteEvent) bool { return true },
		GenericFunc: func(ctrlevent.GenericEvent) bool { return true },
	}
}

// podCreated is whether a pod's creation event concerns its ImmortalContainer.
// A new pod is the provider's own create, whose running or end reconciles the
// ImmortalContainer (managedkind.ReadinessFollows); at a restart, or when a
// watch lists again, every ImmortalContainer is reconciled from its own list.
// Only a pod that has already ended or is being deleted needs acting on at
// once.
func podCreated(p *corev1.Pod) bool {
	return ended(p) || terminating(p)
}

// podChanged is whether an update of a pod from old to cur concerns its
// ImmortalContainer: its readiness (Ready), its end (restart it), its
// deletion (it is going away, its IP with it), its IP (a connection detail),
// the label that says whose it is, or the parameters it was made from.
// Binding to a node and phase changes that leave readiness as it was do not.
func podChanged(old, cur *corev1.Pod) bool {
	return running(old) != running(cur) ||
		ended(old) != ended(cur) ||
		terminating(old) != terminating(cur) ||
		old.Status.PodIP != cur.Status.PodIP ||
		old.Labels[LabelOwner] != cur.Labels[LabelOwner] ||
		old.Annotations[annotationSpecHash] != cur.Annotations[annotationSpecHash]
}
