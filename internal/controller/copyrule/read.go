package copyrule

import (
	"context"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
)

// list lists the objects of kind that opts select.
func list(ctx context.Context, c client.Reader, kind Mapping, opts ...client.ListOption) ([]Object, error) {
	var l client.ObjectList
	switch {
	case !kind.typed():
		u := &unstructured.UnstructuredList{}
		u.SetGroupVersionKind(kind.GroupVersion().WithKind(kind.Kind + "List"))
		l = u
	case kind.Kind == v1alpha1.KindSecret:
		l = &corev1.SecretList{}
	default:
		l = &corev1.ConfigMapList{}
	}
	if err := c.List(ctx, l, opts...); err != nil {
		return nil, forbidden(err, kind)
	}
	var out []Object
	err := meta.EachListItem(l, func(o runtime.Object) error {
		if obj, ok := fromAPI(o); ok {
			out = append(out, obj)
		}
		return nil
	})
	return out, err
}

// get reads one object of kind; found is false when it does not exist.
func get(ctx context.Context, c client.Reader, kind Mapping, ref Ref) (Object, bool, error) {
	o := Object{}.ToAPI(kind)
	err := c.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, o)
	switch {
	case kerrors.IsNotFound(err):
		return Object{}, false, nil
	case err != nil:
		return Object{}, false, forbidden(err, kind)
	}
	out, ok := fromAPI(o)
	return out, ok, nil
}

// fromAPI turns a ConfigMap, a Secret or an unstructured object into an
// Object; false for any other.
func fromAPI(o runtime.Object) (Object, bool) {
	switch t := o.(type) {
	case *corev1.Secret:
		return FromSecret(t), true
	case *corev1.ConfigMap:
		return FromConfigMap(t), true
	case *unstructured.Unstructured:
		return fromUnstructured(t), true
	}
	return Object{}, false
}

// held returns the names of the objects the rule's selector watch holds in
// namespace ns; false when that watch has not synced, and the namespace is
// listed instead.
type held func(ns string) ([]string, bool)

// readSources returns the objects the rule selects in each of namespaces
// nss, and the ones it refuses to copy with why. Any failed read fails it
// all: a source namespace that could not be read must never look empty, or
// its copies would be pruned.
func readSources(ctx context.Context, c client.Reader, p v1alpha1.CopyRuleParameters, kind Mapping, nss []string, h held) ([]Object, map[Ref]string, error) {
	var out []Object
	refused := map[Ref]string{}
	for _, ns := range nss {
		objs, ref, err := readSourcesIn(ctx, c, p, kind, ns, h)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, objs...)
		for n, why := range ref {
			refused[Ref{ns, n}] = why
		}
	}
	return out, refused, nil
}

// readSourcesIn returns the objects the rule selects in namespace ns, and the
// ones it refuses to copy with why. Copies made by any rule are never
// sources: a namespace that is both a target and a source must not echo.
func readSourcesIn(ctx context.Context, c client.Reader, p v1alpha1.CopyRuleParameters, kind Mapping, ns string, h held) ([]Object, map[string]string, error) {
	byName := map[string]Object{}
	if p.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(p.Selector)
		if err != nil {
			return nil, nil, errors.Wrap(err, "spec.forProvider.selector is not a valid label selector")
		}
		objs, err := selected(ctx, c, kind, ns, s, h)
		if err != nil {
			return nil, nil, err
		}
		for _, o := range objs {
			byName[o.Name] = o
		}
	}
	for _, n := range p.Names {
		if _, ok := byName[n]; ok {
			continue
		}
		o, found, err := get(ctx, c, kind, Ref{ns, n})
		if err != nil {
			return nil, nil, errors.Wrapf(err, "cannot get %s %q to copy from namespace %q", kind, n, ns)
		}
		if found {
			byName[n] = o
		}
	}
	var out []Object
	refused := map[string]string{}
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		o := byName[n]
		switch {
		case isCopy(o):
			continue
		case o.Type == corev1.SecretTypeServiceAccountToken:
			refused[n] = "service account token Secrets are bound to their namespace's service account and are never copied"
			continue
		}
		out = append(out, o)
	}
	return out, refused, nil
}

// selected returns the objects of kind that selector s picks in namespace ns:
// those the selector's watch holds, read one by one when few, and listed
// when many or before the watch has synced. The API server answers a list by
// label by scanning every object of the kind in the namespace: a fleet of
// rules picking their sources out of one crowded namespace, each listing on
// every reconcile, would be O(N²). A get is a lookup.
func selected(ctx context.Context, c client.Reader, kind Mapping, ns string, s labels.Selector, h held) ([]Object, error) {
	var names []string
	ok := false
	if h != nil {
		names, ok = h(ns)
	}
	if !ok || len(names) > readEachUpTo {
		objs, err := list(ctx, c, kind, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: s})
		return objs, errors.Wrapf(err, "cannot list the %s objects to copy in namespace %q", kind, ns)
	}
	out := make([]Object, 0, len(names))
	for _, n := range names {
		o, found, err := get(ctx, c, kind, Ref{ns, n})
		if err != nil {
			return nil, errors.Wrapf(err, "cannot get %s %q to copy from namespace %q", kind, n, ns)
		}
		// The watch may not have told of a change of labels yet: its event
		// reconciles the rule again.
		if found && s.Matches(labels.Set(o.Labels)) {
			out = append(out, o)
		}
	}
	return out, nil
}

// readNamespaces returns the cluster's namespaces.
func readNamespaces(ctx context.Context, c client.Reader) ([]Namespace, error) {
	l := &corev1.NamespaceList{}
	if err := c.List(ctx, l); err != nil {
		return nil, errors.Wrap(err, "cannot list namespaces")
	}
	out := make([]Namespace, 0, len(l.Items))
	for _, n := range l.Items {
		out = append(out, Namespace{Name: n.Name, Labels: n.Labels, Terminating: n.Status.Phase == corev1.NamespaceTerminating || n.DeletionTimestamp != nil})
	}
	return out, nil
}

// readCopies returns the objects marked as copies of rule cr.
func readCopies(ctx context.Context, c client.Reader, kind Mapping, cr metav1.Object) ([]Object, error) {
	objs, err := list(ctx, c, kind, client.MatchingLabelsSelector{Selector: copyMark.Selector(cr)})
	return objs, errors.Wrapf(err, "cannot list the rule's %s copies", kind)
}
