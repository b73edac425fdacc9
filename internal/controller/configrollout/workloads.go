package configrollout

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	KindCronJob     = "CronJob"
)

// Kinds are the workload kinds a ConfigRollout rolls.
var Kinds = []string{KindDeployment, KindStatefulSet, KindDaemonSet, KindCronJob}

// GroupVersionKind is the API type of a workload kind.
func GroupVersionKind(kind string) schema.GroupVersionKind {
	if kind == KindCronJob {
		return batchv1.SchemeGroupVersion.WithKind(kind)
	}
	return appsv1.SchemeGroupVersion.WithKind(kind)
}

// templatePath is where a workload kind keeps the pod template its pods are
// made from. A CronJob's is its job template's: the next Job it starts uses
// the new configuration, and the Jobs already running are left alone (their
// own templates are not the CronJob's).
func templatePath(kind string) []string {
	if kind == KindCronJob {
		return []string{"spec", "jobTemplate", "spec", "template"}
	}
	return []string{"spec", "template"}
}

// A workload is a Deployment, StatefulSet, DaemonSet or CronJob, seen through
// its pod template.
type workload struct {
	Kind     string
	Name     string
	Lock     string // the ConfigRollout it follows, from AnnotationLock
	Template *corev1.PodTemplateSpec
	// Object is the whole workload, whose status says whether its rollout
	// has rolled out (strategy.go).
	Object client.Object
}

// templateHash is the hash the workload's pod template carries.
func (w workload) templateHash() string { return w.Template.GetAnnotations()[AnnotationHash] }

func newObject(kind string) (client.Object, *corev1.PodTemplateSpec) {
	var o client.Object
	switch kind {
	case KindStatefulSet:
		o = &appsv1.StatefulSet{}
	case KindDaemonSet:
		o = &appsv1.DaemonSet{}
	case KindCronJob:
		o = &batchv1.CronJob{}
	default:
		o = &appsv1.Deployment{}
	}
	return o, template(o)
}

// newList makes a list of workloads of kind.
func newList(kind string) client.ObjectList {
	switch kind {
	case KindStatefulSet:
		return &appsv1.StatefulSetList{}
	case KindDaemonSet:
		return &appsv1.DaemonSetList{}
	case KindCronJob:
		return &batchv1.CronJobList{}
	default:
		return &appsv1.DeploymentList{}
	}
}

// list lists the workloads of every kind in ns that match sel.
func list(ctx context.Context, c client.Reader, ns string, sel client.ListOption) ([]workload, error) {
	var out []workload
	deps, sts, dss, cjs := &appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &appsv1.DaemonSetList{}, &batchv1.CronJobList{}
	for _, l := range []client.ObjectList{deps, sts, dss, cjs} {
		if err := c.List(ctx, l, client.InNamespace(ns), sel); err != nil {
			return nil, errors.Wrap(err, "cannot list workloads")
		}
	}
	for i := range deps.Items {
		out = append(out, asWorkload(KindDeployment, &deps.Items[i]))
	}
	for i := range sts.Items {
		out = append(out, asWorkload(KindStatefulSet, &sts.Items[i]))
	}
	for i := range dss.Items {
		out = append(out, asWorkload(KindDaemonSet, &dss.Items[i]))
	}
	for i := range cjs.Items {
		out = append(out, asWorkload(KindCronJob, &cjs.Items[i]))
	}
	return out, nil
}

// indexLock indexes the workloads in the manager's metadata cache by the
// ConfigRollout whose lock they carry.
const indexLock = "configrollout.lock"

// metadataList is a list of workloads of kind as the manager's cache holds
// them: metadata only.
func metadataList(kind string) *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	gvk := GroupVersionKind(kind)
	gvk.Kind += "List"
	l.SetGroupVersionKind(gvk)
	return l
}

// inCache returns the workloads of every kind in ns that the options select,
// as references, from r: the manager's metadata cache, which holds every
// workload of the provider's own cluster for the ConfigRollout watches. No
// request goes to the API server, and no pod template is read.
func inCache(ctx context.Context, r client.Reader, ns string, opts ...client.ListOption) ([]v1alpha1.WorkloadRef, error) {
	var out []v1alpha1.WorkloadRef
	for _, kind := range Kinds {
		l := metadataList(kind)
		if err := r.List(ctx, l, append([]client.ListOption{client.InNamespace(ns)}, opts...)...); err != nil {
			return nil, errors.Wrap(err, "cannot list workloads")
		}
		for _, m := range l.Items {
			out = append(out, v1alpha1.WorkloadRef{Kind: kind, Name: m.Name})
		}
	}
	return out, nil
}

// lockedBy returns the workloads in ns that carry the lock of ConfigRollout
// name: from the lock index of the metadata cache when there is one (the
// provider's own cluster), else from a list of the namespace's workloads.
func lockedBy(ctx context.Context, c, cache client.Reader, ns, name string) ([]v1alpha1.WorkloadRef, error) {
	if cache != nil {
		return inCache(ctx, cache, ns, client.MatchingFields{indexLock: name})
	}
	all, err := list(ctx, c, ns, client.MatchingLabels{})
	if err != nil {
		return nil, err
	}
	var out []v1alpha1.WorkloadRef
	for _, w := range all {
		if w.Lock == name {
			out = append(out, v1alpha1.WorkloadRef{Kind: w.Kind, Name: w.Name})
		}
	}
	return out, nil
}

// get reads the workloads refs name in ns, and returns the ones that do not
// exist apart. read are workloads already read, by workloadKey, which are
// not read again.
func get(ctx context.Context, c client.Reader, ns string, refs []v1alpha1.WorkloadRef, read map[string]client.Object) ([]workload, []string, error) {
	var out []workload
	var missing []string
	for _, ref := range refs {
		if o, ok := read[workloadKey(ref.Kind, ref.Name)]; ok {
			out = append(out, asWorkload(ref.Kind, o))
			continue
		}
		o, _ := newObject(ref.Kind)
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, o)
		if kerrors.IsNotFound(err) {
			missing = append(missing, ref.Kind+" "+ref.Name)
			continue
		}
		if err != nil {
			return nil, nil, errors.Wrapf(err, "cannot get %s %q", ref.Kind, ref.Name)
		}
		out = append(out, asWorkload(ref.Kind, o))
	}
	return out, missing, nil
}

// asWorkload is workload o of kind, which newObject made.
func asWorkload(kind string, o client.Object) workload {
	return workload{Kind: kind, Name: o.GetName(), Lock: o.GetAnnotations()[AnnotationLock], Template: template(o), Object: o}
}

// template is the pod template of a workload object newObject made.
func template(o client.Object) *corev1.PodTemplateSpec {
	switch w := o.(type) {
	case *appsv1.StatefulSet:
		return &w.Spec.Template
	case *appsv1.DaemonSet:
		return &w.Spec.Template
	case *batchv1.CronJob:
		return &w.Spec.JobTemplate.Spec.Template
	case *appsv1.Deployment:
		return &w.Spec.Template
	}
	// Not a workload: its template is empty and reads nothing.
	return &corev1.PodTemplateSpec{}
}

// selectWorkloads returns the workloads a ConfigRollout selects, and the
// explicitly named ones that do not exist. cache, when not nil, is the
// manager's metadata cache of the workloads: a selector is matched there, and
// only the selected workloads are read, not every one of the namespace.
func selectWorkloads(ctx context.Context, c, cache client.Reader, rd *readers, cr *v1alpha1.ConfigRollout) ([]workload, []string, error) {
	p := cr.Spec.ForProvider
	ns := cr.GetNamespace()
	switch {
	case len(p.Workloads) > 0:
		return get(ctx, c, ns, p.Workloads, nil)
	case p.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(p.Selector)
		if err != nil {
			return nil, nil, errors.Wrap(err, "invalid spec.forProvider.selector")
		}
		if cache != nil {
			refs, err := inCache(ctx, cache, ns, client.MatchingLabelsSelector{Selector: sel})
			if err != nil {
				return nil, nil, err
			}
			// One deleted since the cache saw it is simply not selected.
			ws, _, err := get(ctx, c, ns, refs, nil)
			return ws, nil, err
		}
		ws, err := list(ctx, c, ns, client.MatchingLabelsSelector{Selector: sel})
		return ws, nil, err
	case cache != nil && rd != nil:
		// Auto on the provider's own cluster: what each workload of the
		// namespace reads comes from rd (a read per workload and generation,
		// shared by every rollout, or a list of the namespace when many are
		// new), and only the readers of this rollout's sources from the API
		// server. rd hears of every workload event, so a reconcile learns only
		// what changed and looks up its sources: N auto rollouts in a
		// namespace of N workloads cost O(N) reads and O(N) work, not N lists
		// or scans of N.
		if err := rd.track(ctx, cache, ns); err != nil {
			return nil, nil, err
		}
		read := map[string]client.Object{}
		for _, kind := range Kinds {
			unread, many := rd.unread(ns, kind, listFrom)
			if many {
				if err := rd.learnAll(ctx, kind, ns); err != nil {
					return nil, nil, err
				}
				continue
			}
			for i := range unread {
				_, o, err := rd.sources(ctx, kind, &unread[i])
				if err != nil {
					return nil, nil, errors.Wrapf(err, "cannot get %s %q", kind, unread[i].Name)
				}
				if o != nil {
					read[workloadKey(kind, o.GetName())] = o
				}
			}
		}
		picked := rd.readersOf(ns, autoSources(p))
		// Those rd read just now are not read again.
		ws, _, err := get(ctx, c, ns, picked, read)
		if err != nil {
			return nil, nil, err
		}
		// Its template may have changed since rd read it.
		cms, secrets := names(p.ConfigMaps), names(p.Secrets)
		out := ws[:0]
		for _, w := range ws {
			if UsesAny(&w.Template.Spec, cms, secrets) {
				out = append(out, w)
			}
		}
		return out, nil, nil
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

// rollPatch is the server-side apply patch that rolls a workload: the hash
// annotation in its pod template, and the lock on its metadata, nothing else.
func rollPatch(cr *v1alpha1.ConfigRollout, kind, name, hash string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GroupVersionKind(kind))
	u.SetNamespace(cr.GetNamespace())
	u.SetName(name)
	u.SetAnnotations(map[string]string{AnnotationLock: cr.GetName()})
	path := append(templatePath(kind), "metadata", "annotations", AnnotationHash)
	if err := unstructured.SetNestedField(u.Object, hash, path...); err != nil {
		return nil, errors.Wrap(err, "cannot build rollout patch")
	}
	return u, nil
}

// want works out, and remembers for Update, the hash workload w is to carry:
// in auto mode, the hash of just what its pods read of the sources
// (WorkloadHash: a workload that reads single keys rolls only when one of
// them changes); otherwise all, the hash of every source together, which a
// named or selected workload carries whatever it reads.
func (e *external) want(cr *v1alpha1.ConfigRollout, w workload, all string) string {
	h := all
	if cr.Spec.ForProvider.Auto && len(e.contents) > 0 {
		h = WorkloadHash(e.contents, KeysRead(&w.Template.Spec))
	}
	if e.wants == nil {
		e.wants = map[string]string{}
	}
	e.wants[workloadKey(w.Kind, w.Name)] = h
	return h
}

// wanted is the hash Observe worked out for a workload; all when it worked
// out none.
func (e *external) wanted(kind, name, all string) string {
	if h, ok := e.wants[workloadKey(kind, name)]; ok {
		return h
	}
	return all
}

// upToDate reports whether a workload that carries hash carried needs no
// rollout: it carries want, or all, the hash of every source's current
// content together. A workload that carries all was rolled after the last
// change of anything it reads, so it is current whatever it reads: such are
// the ones an earlier release rolled before keys were told apart, which an
// upgrade then does not roll.
func upToDate(carried, want, all string) bool {
	return carried != "" && (carried == want || carried == all)
}
