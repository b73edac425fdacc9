// Package immortalcontainer keeps exactly one pod of an image running, and
// creates it again whenever it ends or is deleted.
package immortalcontainer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/managedkind"
	"github.com/clusterops/provider-clusterops/internal/drift"
	"github.com/clusterops/provider-clusterops/internal/ownership"
	"github.com/clusterops/provider-clusterops/internal/plan"
	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/target"
)

const reasonStarted event.Reason = "StartedPod"

// Setup adds the ImmortalContainer controller to mgr.
func Setup(mgr ctrl.Manager, o managedkind.Options, r *target.Resolver) error {
	dr, err := drift.NewReporter(o.Metrics)
	if err != nil {
		return err
	}
	made := newCreatedPods()
	return managedkind.Setup(mgr, o, r, managedkind.Kind[*v1alpha1.ImmortalContainer]{
		GroupVersionKind: resource.ManagedKind(v1alpha1.ImmortalContainerGroupVersionKind),
		Object:           &v1alpha1.ImmortalContainer{},
		List:             &v1alpha1.ImmortalContainerList{},
		OwnNamespace:     true,
		NewClient: func(c *target.Cluster, rec event.Recorder, _ client.SubResourceWriter, _ *v1alpha1.ImmortalContainer) managed.TypedExternalClient[*v1alpha1.ImmortalContainer] {
			return &external{cluster: c, record: rec, drift: dr, created: made, now: time.Now}
		},
		// A pod that ends or goes away is replaced on the event, not at the
		// next poll; events that change nothing it acts on or reports are
		// dropped (podEvents).
		Watch: func(b *builder.Builder) *builder.Builder {
			return b.Watches(&corev1.Pod{}, managedkind.EnqueueOwner(o, LabelOwner, mgr.GetCache(), func() client.Object { return &v1alpha1.ImmortalContainer{} }), builder.WithPredicates(podEvents()))
		},
		// A backed-off restart happens when it is due, not at the next poll.
		PollHook: untilRestart(time.Now),
	})
}

// untilRestart brings the next reconcile forward to a pending restart.
func untilRestart(now func() time.Time) managed.PollIntervalHook {
	return managedkind.PollUntil(now, func(ic *v1alpha1.ImmortalContainer, _ time.Time) (time.Time, bool) {
		if t := ic.Status.AtProvider.NextRestartTime; t != nil {
			return t.Time, true
		}
		return time.Time{}, false
	})
}

type external struct {
	cluster *target.Cluster
	record  event.Recorder
	drift   *drift.Reporter
	// created are the pods made whose start status may not show yet.
	created *createdPods
	now     func() time.Time
	// observed is the pod as Observe read it, nil for none, until Create,
	// Update or Delete uses it (observedSet): the client lives for one reconcile, and
	// Observe writes nothing, so the write that follows decides from that
	// read instead of a second GET.
	observed    *corev1.Pod
	observedSet bool
	// deleted is the drift Observe found: the pod another writer deleted
	// while it ran, which Create reports once it made the next one.
	deleted *apisv1alpha1.Drift
}

// current returns the pod as Observe read it in this reconcile, once; a read
// after that goes to the API server again.
func (e *external) current(ctx context.Context, ic *v1alpha1.ImmortalContainer) (*corev1.Pod, error) {
	if e.observedSet {
		e.observedSet = false
		return e.observed, nil
	}
	return e.get(ctx, ic)
}

func backoffOf(ic *v1alpha1.ImmortalContainer) v1alpha1.RestartBackoff {
	if b := ic.Spec.ForProvider.RestartBackoff; b != nil {
		return *b
	}
	return defaultBackoff
}

// get reads the ImmortalContainer's pod; nil when there is none of its own. A
// pod of that name it did not create is an error while it wants the name, and
// is left alone, as if absent, once it is being deleted.
func (e *external) get(ctx context.Context, ic *v1alpha1.ImmortalContainer) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := e.cluster.Client.Get(ctx, types.NamespacedName{Namespace: ic.GetNamespace(), Name: PodName(ic)}, pod)
	if kerrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, errors.Wrapf(err, "cannot get pod %q", PodName(ic))
	}
	switch ownership.Decide(ownership.Facts{Exists: true, Marked: podMark.On(pod, ic), Wanted: true, Deleting: meta.WasDeleted(ic)}) {
	case ownership.Mine:
		return pod, nil
	case ownership.InTheWay:
		return nil, errors.Errorf("pod %q exists but was not created by this ImmortalContainer; delete or rename it", pod.GetName())
	default:
		return nil, nil
	}
}

func (e *external) Observe(ctx context.Context, ic *v1alpha1.ImmortalContainer) (managed.ExternalObservation, error) {
	pod, err := e.get(ctx, ic)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	e.observed, e.observedSet = pod, true
	var current types.UID
	if pod != nil {
		current = pod.GetUID()
	}
	if meta.WasDeleted(ic) {
		e.created.forget(ic.GetUID())
	}
	e.created.count(ic.GetUID(), &ic.Status.AtProvider, current)
	details := connectionDetails(ic, pod)
	ic.Status.AtProvider.Plan = nil
	if !meta.WasDeleted(ic) && plan.Only(ic) {
		return e.plan(ic, pod, details), nil
	}
	if pod == nil {
		o := &ic.Status.AtProvider
		// A pod the provider neither saw end nor replaced was deleted while
		// it ran by another writer.
		if !meta.WasDeleted(ic) && drift.Synced(ic) && o.PodUID != "" && o.PodUID != o.EndedPodUID {
			d := drift.Deleted(podKind, ic.GetNamespace(), PodName(ic))
			e.deleted = &d
		}
		o.CurrentPod = ""
		return managed.ExternalObservation{ResourceExists: false, ConnectionDetails: details}, nil
	}
	seen(&ic.Status.AtProvider, pod)
	switch {
	case terminating(pod):
		// It is going away; its deletion event brings us back to create the next one.
		ic.SetConditions(xpv2.Unavailable().WithMessage("pod is terminating"))
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true, ConnectionDetails: details}, nil
	case ended(pod):
		o := &ic.Status.AtProvider
		// Report the pod as still there the first time its end is seen, so the
		// end, which the backoff depends on, is in status before Create
		// replaces the pod (docs/architecture.md, "Write order").
		if recordEnd(o, pod, backoffOf(ic), e.now()) || e.now().Before(o.NextRestartTime.Time) {
			msg := "pod ended: " + o.LastExitReason
			if o.QuickEnds > 1 {
				msg += fmt.Sprintf("; %d quick ends in a row, restarting at %s", o.QuickEnds, o.NextRestartTime.UTC().Format(time.RFC3339))
			}
			ic.SetConditions(xpv2.Unavailable().WithMessage(msg))
			return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true, ConnectionDetails: details}, nil
		}
		// An ended pod never runs again: report it as gone so Create replaces it.
		return managed.ExternalObservation{ResourceExists: false, ConnectionDetails: details}, nil
	case running(pod):
		ic.SetConditions(xpv2.Available())
	default:
		ic.SetConditions(xpv2.Unavailable().WithMessage(fmt.Sprintf("pod is %s", pod.Status.Phase)))
	}
	upToDate := sameSpec(ic, pod) && shardLabelled(ic, pod)
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: upToDate, ConnectionDetails: details}, nil
}

// plan reports what the ImmortalContainer would do with its pod, while its
// management policies are only Observe, and does nothing. Its pod counts as
// there, so that the plan, not crossplane-runtime's "does not exist" error,
// is the answer.
func (e *external) plan(ic *v1alpha1.ImmortalContainer, pod *corev1.Pod, details managed.ConnectionDetails) managed.ExternalObservation {
	a := apisv1alpha1.PlannedAction{Kind: podKind, Namespace: ic.GetNamespace(), Name: PodName(ic)}
	switch {
	case pod == nil:
		a.Action = apisv1alpha1.ActionCreate
		ic.SetConditions(xpv2.Unavailable().WithMessage("no pod: the management policies are only Observe"))
	case terminating(pod):
		a.Action, a.Reason = apisv1alpha1.ActionCreate, "the pod is terminating"
	case ended(pod):
		a.Action, a.Reason = apisv1alpha1.ActionReplace, "the pod ended: "+exitReason(pod)
	case !sameSpec(ic, pod):
		a.Action, a.Reason = apisv1alpha1.ActionReplace, "the parameters changed, which a pod cannot take in place"
	case !shardLabelled(ic, pod):
		a.Action, a.Fields = apisv1alpha1.ActionUpdate, []string{"metadata.labels[" + shard.Label + "]"}
	}
	var actions []apisv1alpha1.PlannedAction
	if a.Action != "" {
		actions = append(actions, a)
	}
	ic.Status.AtProvider.Plan = plan.Of(actions)
	if pod != nil {
		seen(&ic.Status.AtProvider, pod)
		if running(pod) && !terminating(pod) {
			ic.SetConditions(xpv2.Available())
		}
	}
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: len(actions) == 0, ConnectionDetails: details}
}

// seen records pod in o: the current pod, and its start. Starts are counted
// from the pods themselves, once per pod UID (docs/architecture.md, "Write
// order"), so neither a repeated observation, nor a restarted provider
// (which reads the UID back from status), nor Create and the Observe after it
// count a pod twice.
func seen(o *v1alpha1.ImmortalContainerObservation, pod *corev1.Pod) {
	o.CurrentPod = pod.GetName()
	if !ended(pod) {
		// The replacement exists: no restart is pending.
		o.NextRestartTime = nil
	}
	if string(pod.GetUID()) != o.PodUID {
		o.PodUID = string(pod.GetUID())
		recordStart(o, pod.GetCreationTimestamp())
	}
}

// connectionDetails are the pod's name, which never changes, and the IP of the
// current pod (nil when there is none) from when it has one until it ends or
// is being deleted; empty otherwise, not left out: crossplane-runtime merges
// the details into the Secret, so a key left out would keep a dead pod's IP.
// Observe, Create and Update all return them, so the Secret is written only
// when the IP changes.
func connectionDetails(ic *v1alpha1.ImmortalContainer, pod *corev1.Pod) managed.ConnectionDetails {
	ip := ""
	if pod != nil && !ended(pod) && !terminating(pod) {
		ip = pod.Status.PodIP
	}
	return managed.ConnectionDetails{
		v1alpha1.ImmortalContainerPodNameKey: []byte(PodName(ic)),
		v1alpha1.ImmortalContainerPodIPKey:   []byte(ip),
	}
}

// podKind names pods in drift reports.
const podKind = "Pod"

func terminating(pod *corev1.Pod) bool { return pod.GetDeletionTimestamp() != nil }

func (e *external) Create(ctx context.Context, ic *v1alpha1.ImmortalContainer) (managed.ExternalCreation, error) {
	pod, err := e.current(ctx, ic)
	if err != nil {
		return managed.ExternalCreation{}, err
	}
	if pod != nil {
		// An ended pod of ours still holds the name: remove it first. Its
		// deletion event brings us back to create the next one.
		return managed.ExternalCreation{ConnectionDetails: connectionDetails(ic, nil)}, e.deletePod(ctx, pod)
	}
	ic.SetConditions(xpv2.Creating())
	pod = desiredPod(ic, e.cluster.Local)
	err = e.cluster.Client.Create(ctx, pod)
	if kerrors.IsAlreadyExists(err) {
		// Someone made it between our read and our write; the next observation decides.
		return managed.ExternalCreation{ConnectionDetails: connectionDetails(ic, nil)}, nil
	}
	if err != nil {
		return managed.ExternalCreation{}, errors.Wrapf(err, "cannot create pod %q", PodName(ic))
	}
	msg := fmt.Sprintf("Started pod %q", PodName(ic))
	if r := ic.Status.AtProvider.LastExitReason; r != "" && ic.Status.AtProvider.StartTimes > 0 {
		msg += "; the previous one ended: " + r
	}
	e.record.Event(ic, event.Normal(reasonStarted, msg))
	if e.deleted != nil {
		e.drift.Repaired(e.record, ic, v1alpha1.ImmortalContainerKind, &ic.Status.AtProvider.RecentDrift, *e.deleted, e.now())
	}
	// Its running, or its end, reconciles the ImmortalContainer; until then
	// status shows the pod as created.
	seen(&ic.Status.AtProvider, pod)
	e.created.made(ic.GetUID(), pod.GetUID(), pod.GetCreationTimestamp(), &ic.Status.AtProvider)
	managedkind.ReadinessFollows(ctx, ic)
	// A new pod has no IP yet.
	return managed.ExternalCreation{ConnectionDetails: connectionDetails(ic, nil)}, nil
}

// Update replaces a pod whose parameters changed: most pod fields cannot change
// in place, and the replacement is created on the deletion event. A pod that
// runs the current parameters and only lacks its ImmortalContainer's shard
// label is labelled in place: moving to another shard restarts nothing.
func (e *external) Update(ctx context.Context, ic *v1alpha1.ImmortalContainer) (managed.ExternalUpdate, error) {
	pod, err := e.current(ctx, ic)
	if err != nil {
		return managed.ExternalUpdate{}, err
	}
	if pod != nil && sameSpec(ic, pod) {
		return managed.ExternalUpdate{ConnectionDetails: connectionDetails(ic, pod)}, e.relabel(ctx, ic, pod)
	}
	// The pod is going away: its IP with it.
	details := connectionDetails(ic, nil)
	if pod == nil {
		return managed.ExternalUpdate{ConnectionDetails: details}, nil
	}
	// Replaced, not ended: its end is no quick end, and its absence no drift.
	ic.Status.AtProvider.EndedPodUID = string(pod.GetUID())
	return managed.ExternalUpdate{ConnectionDetails: details}, e.deletePod(ctx, pod)
}

// relabel gives pod the shard label its ImmortalContainer carries, or takes
// it away when the ImmortalContainer carries none.
func (e *external) relabel(ctx context.Context, ic *v1alpha1.ImmortalContainer, pod *corev1.Pod) error {
	var v any // null: the label goes
	if s, ok := ic.GetLabels()[shard.Label]; ok {
		v = s
	}
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{shard.Label: v}}})
	if err != nil {
		return errors.Wrap(err, "cannot encode the shard label")
	}
	err = e.cluster.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, b))
	return errors.Wrapf(resource.IgnoreNotFound(err), "cannot give pod %q its shard label", pod.GetName())
}

func (e *external) Delete(ctx context.Context, ic *v1alpha1.ImmortalContainer) (managed.ExternalDelete, error) {
	ic.SetConditions(xpv2.Deleting())
	pod, err := e.current(ctx, ic)
	if err != nil || pod == nil {
		if pod == nil && err == nil {
			e.created.forget(ic.GetUID())
		}
		return managed.ExternalDelete{}, err
	}
	return managed.ExternalDelete{}, e.deletePod(ctx, pod)
}

func (e *external) deletePod(ctx context.Context, pod *corev1.Pod) error {
	// The UID precondition makes sure we delete the pod we looked at, not a successor.
	err := e.cluster.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
	return errors.Wrapf(resource.IgnoreNotFound(err), "cannot delete pod %q", pod.GetName())
}

func (e *external) Disconnect(context.Context) error { return nil }
