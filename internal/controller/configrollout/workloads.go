package configrollout

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// Workload kinds.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
	KindDaemonSet   = "DaemonSet"
)

// A workload is a Deployment, StatefulSet or DaemonSet, seen through its pod
// template.
type workload struct {
	Kind     string
	Name     string
	Claim    string // the ConfigRollout it follows, from AnnotationClaim
	Template *corev1.PodTemplateSpec
}

// carried is the hash the workload's pod template carries.
func (w workload) carried() string { return w.Template.GetAnnotations()[AnnotationHash] }

func newObject(kind string) (client.Object, *corev1.PodTemplateSpec) {
	switch kind {
	case KindStatefulSet:
		o := &appsv1.StatefulSet{}
		return o, &o.Spec.Template
	case KindDaemonSet:
		o := &appsv1.DaemonSet{}
		return o, &o.Spec.Template
	default:
		o := &appsv1.Deployment{}
		return o, &o.Spec.Template
	}
}

// list lists the workloads of every kind in ns that match sel.
func list(ctx context.Context, c client.Reader, ns string, sel client.ListOption) ([]workload, error) {
	var out []workload
	deps, sts, dss := &appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &appsv1.DaemonSetList{}
	for _, l := range []client.ObjectList{deps, sts, dss} {
		if err := c.List(ctx, l, client.InNamespace(ns), sel); err != nil {
			return nil, errors.Wrap(err, "cannot list workloads")
		}
	}
	for i := range deps.Items {
		out = append(out, workload{Kind: KindDeployment, Name: deps.Items[i].Name, Claim: deps.Items[i].Annotations[AnnotationClaim], Template: &deps.Items[i].Spec.Template})
	}
	for i := range sts.Items {
		out = append(out, workload{Kind: KindStatefulSet, Name: sts.Items[i].Name, Claim: sts.Items[i].Annotations[AnnotationClaim], Template: &sts.Items[i].Spec.Template})
	}
	for i := range dss.Items {
		out = append(out, workload{Kind: KindDaemonSet, Name: dss.Items[i].Name, Claim: dss.Items[i].Annotations[AnnotationClaim], Template: &dss.Items[i].Spec.Template})
	}
	return out, nil
}

// selectWorkloads returns the workloads a ConfigRollout selects, and the
// explicitly named ones that do not exist.
func selectWorkloads(ctx context.Context, c client.Reader, cr *v1alpha1.ConfigRollout) ([]workload, []string, error) {
	p := cr.Spec.ForProvider
	ns := cr.GetNamespace()
	switch {
	case len(p.Workloads) > 0:
		var out []workload
		var missing []string
		for _, ref := range p.Workloads {
			o, tmpl := newObject(ref.Kind)
			err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, o)
			if kerrors.IsNotFound(err) {
				missing = append(missing, ref.Kind+" "+ref.Name)
				continue
			}
			if err != nil {
				return nil, nil, errors.Wrapf(err, "cannot get %s %q", ref.Kind, ref.Name)
			}
			out = append(out, workload{Kind: ref.Kind, Name: ref.Name, Claim: o.GetAnnotations()[AnnotationClaim], Template: tmpl})
		}
		return out, missing, nil
	case p.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(p.Selector)
		if err != nil {
			return nil, nil, errors.Wrap(err, "invalid spec.forProvider.selector")
		}
		ws, err := list(ctx, c, ns, client.MatchingLabelsSelector{Selector: sel})
		return ws, nil, err
	default:
		all, err := list(ctx, c, ns, client.MatchingLabels{})
		if err != nil {
			return nil, nil, err
		}
		cms, secrets := names(p.ConfigMaps), names(p.Secrets)
		var out []workload
		for _, w := range all {
			if UsesAny(&w.Template.Spec, cms, secrets) {
				out = append(out, w)
			}
		}
		return out, nil, nil
	}
}

func names(refs []v1alpha1.SourceRef) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.Name)
	}
	return out
}
