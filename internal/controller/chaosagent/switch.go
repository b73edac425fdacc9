package chaosagent

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	pcv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
)

// maxStopReason bounds how much of a kill switch's value status quotes.
const maxStopReason = 128

// maxStoppedNamespaces bounds status.atProvider.stoppedNamespaces.
const maxStoppedNamespaces = 64

// Events of the Acting condition's changes.
const (
	reasonStopped event.Reason = "Stopped"
	reasonPaused  event.Reason = "Paused"
	reasonResumed event.Reason = "Resumed"
	reasonQuiet   event.Reason = "QuietWindow"
)

// StopReason reports whether annotations carry the kill switch, and the reason
// its value gives. Any value but "false" stops: an empty one too, so that a
// hurried `kubectl annotate ... chaos.clusterops.io/stop=` works. The reason is
// one line of at most maxStopReason bytes, cut at a rune boundary.
func StopReason(annotations map[string]string) (string, bool) {
	v, ok := annotations[v1alpha1.AnnotationStop]
	if !ok || strings.EqualFold(strings.TrimSpace(v), "false") {
		return "", false
	}
	v = strings.Join(strings.Fields(v), " ")
	if len(v) > maxStopReason {
		cut := maxStopReason
		for cut > 0 && !utf8RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut] + "…"
	}
	return v, true
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// A stop says which kill switch stops an agent, if any.
type stop struct {
	reason xpv2.ConditionReason
	// by names the object that carries the switch, e.g. ClusterProviderConfig "default".
	by string
	// why is the switch's value.
	why string
}

func (s *stop) String() string {
	msg := "stopped by the " + v1alpha1.AnnotationStop + " annotation on " + s.by
	if s.why != "" {
		msg += ": " + s.why
	}
	return msg
}

// configStop reads the kill switch of the config the agent uses, from the
// manager's cache (the informer the resolver reads configs through).
func (e *external) configStop(ctx context.Context, ca *v1alpha1.ChaosAgent) (*stop, error) {
	if e.kube == nil {
		return nil, nil
	}
	ref := ca.GetProviderConfigReference()
	if ref == nil || ref.Name == "" {
		return nil, nil
	}
	var o client.Object
	var by string
	switch ref.Kind {
	case pcv1alpha1.ProviderConfigKind:
		o = &pcv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ca.GetNamespace(), Name: ref.Name}}
		by = fmt.Sprintf("ProviderConfig %q", ref.Name)
	case pcv1alpha1.ClusterProviderConfigKind:
		o = &pcv1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: ref.Name}}
		by = fmt.Sprintf("ClusterProviderConfig %q", ref.Name)
	default:
		return nil, nil
	}
	if err := e.kube.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		// The resolver already said what is wrong with a missing config.
		return nil, errors.Wrapf(client.IgnoreNotFound(err), "cannot read the kill switch of %s", by)
	}
	if why, ok := StopReason(o.GetAnnotations()); ok {
		return &stop{reason: v1alpha1.ReasonStoppedByConfig, by: by, why: why}, nil
	}
	return nil, nil
}

// namespaceStop reads the kill switch of a namespace: from the manager's
// cache, one metadata-only informer of namespaces shared by every agent, when
// the agent acts on the provider's own cluster; from the target cluster's API
// server otherwise.
func (e *external) namespaceStop(ctx context.Context, ns string) (*stop, error) {
	var annotations map[string]string
	if e.kube != nil && e.cluster.Local {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		if err := e.kube.Get(ctx, types.NamespacedName{Name: ns}, m); err != nil {
			if kerrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, errors.Wrapf(err, "cannot read the kill switch of namespace %q", ns)
		}
		annotations = m.GetAnnotations()
	} else {
		n := &corev1.Namespace{}
		if err := e.cluster.Client.Get(ctx, types.NamespacedName{Name: ns}, n); err != nil {
			if kerrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, errors.Wrapf(err, "cannot read the kill switch of namespace %q", ns)
		}
		annotations = n.GetAnnotations()
	}
	if why, ok := StopReason(annotations); ok {
		return &stop{reason: v1alpha1.ReasonStoppedByNamespace, by: fmt.Sprintf("namespace %q", ns), why: why}, nil
	}
	return nil, nil
}

// mayAct is checked before every action: the config's kill switch first, then
// the namespace's.
func (e *external) mayAct(ctx context.Context, ca *v1alpha1.ChaosAgent, ns string) (*stop, error) {
	if st, err := e.configStop(ctx, ca); st != nil || err != nil {
		return st, err
	}
	return e.namespaceStop(ctx, ns)
}

// acting sets the Acting condition, and records an event when the agent stops,
// pauses or resumes.
func (e *external) acting(ca *v1alpha1.ChaosAgent, reason xpv2.ConditionReason, msg string) {
	was := ca.GetCondition(v1alpha1.TypeActing)
	c := xpv2.Condition{Type: v1alpha1.TypeActing, Status: corev1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(e.now())}
	if reason == v1alpha1.ReasonActing {
		c.Status = corev1.ConditionTrue
	}
	e.metrics.setActing(ca.GetNamespace()+"/"+ca.GetName(), reason, map[bool]float64{true: 1, false: 0}[c.Status == corev1.ConditionTrue])
	if was.Status == c.Status && was.Reason == c.Reason && was.Message == c.Message {
		return
	}
	ca.SetConditions(c)
	if ev, ok := actingEvent(was.Reason, reason, msg); ok {
		e.record.Event(ca, ev)
	}
}

// actingEvent is the event that tells of the Acting condition's reason
// changing from was to now, if that change is told. The condition in status
// is the record of what was told: a reconcile that finds the reason unchanged
// tells nothing, whatever the message says now.
func actingEvent(was, now xpv2.ConditionReason, msg string) (event.Event, bool) {
	if was == now {
		return event.Event{}, false
	}
	switch now {
	case v1alpha1.ReasonActing:
		// Neither the first round nor the end of a quiet window is news.
		if was != "" && was != v1alpha1.ReasonQuietWindow {
			return event.Normal(reasonResumed, "Acting again: "+msg), true
		}
	case v1alpha1.ReasonQuietWindow:
		return event.Normal(reasonQuiet, "Nothing happens: "+msg), true
	case v1alpha1.ReasonStoppedByConfig, v1alpha1.ReasonStoppedByNamespace:
		return event.Warning(reasonStopped, errors.New(upperFirst(msg))), true
	case v1alpha1.ReasonSteadyStateViolated:
		return event.Warning(reasonPaused, errors.New(upperFirst(msg))), true
	}
	return event.Event{}, false
}
