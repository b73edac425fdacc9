package configrollout

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

// The sources of a rollout: reading and hashing them, and the narrow watches
// that bring their changes.

// watchSources keeps a narrow watch on each source the ConfigRollout names.
func (e *external) watchSources(cr *v1alpha1.ConfigRollout) error {
	if e.watches == nil {
		// Unit tests of the external client, which have no API server to watch.
		return nil
	}
	return errors.Wrap(e.watches.Ensure(types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}, e.cluster, sourceWatches(cr)...), "cannot watch the sources")
}

// read records that the rollout read source o of resource: its watch's
// event of that version, the initial list of a new watch included, has
// nothing to tell it.
func (e *external) read(cr *v1alpha1.ConfigRollout, resource string, o metav1.Object) {
	if e.watches == nil {
		return
	}
	e.watches.Read(types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}, e.cluster,
		corev1.SchemeGroupVersion.WithResource(resource), o.GetNamespace(), o.GetName(), o.GetResourceVersion())
}

// sourceWatches are one watch per source, by name: a missing source is
// watched too, so its creation is seen.
func sourceWatches(cr *v1alpha1.ConfigRollout) []watchset.Watch {
	var ws []watchset.Watch
	add := func(resource, name string) {
		ws = append(ws, watchset.Watch{Resource: corev1.SchemeGroupVersion.WithResource(resource), Namespace: cr.GetNamespace(), Fields: "metadata.name=" + name})
	}
	for _, s := range cr.Spec.ForProvider.ConfigMaps {
		add("configmaps", s.Name)
	}
	for _, s := range cr.Spec.ForProvider.Secrets {
		add("secrets", s.Name)
	}
	return ws
}

// readSources hashes every source, and names the ones that do not exist. It
// keeps their content in e.contents for the per-workload hashes of auto mode.
func (e *external) readSources(ctx context.Context, cr *v1alpha1.ConfigRollout) ([]v1alpha1.SourceHash, []string, error) {
	var out []v1alpha1.SourceHash
	e.contents = nil
	var missing []string
	ns := cr.GetNamespace()
	for _, s := range cr.Spec.ForProvider.ConfigMaps {
		cm := &corev1.ConfigMap{}
		c := Content{Kind: KindConfigMap, Name: s.Name, Missing: true}
		err := e.cluster.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: s.Name}, cm)
		if resource.IgnoreNotFound(err) != nil {
			return nil, nil, errors.Wrapf(err, "cannot get ConfigMap %q", s.Name)
		}
		if err == nil {
			c = ConfigMapContent(cm, s.Keys)
			e.read(cr, "configmaps", cm)
		}
		out = append(out, v1alpha1.SourceHash{Kind: KindConfigMap, Name: s.Name, Hash: Hash(c), Missing: c.Missing})
		e.contents = append(e.contents, c)
	}
	for _, s := range cr.Spec.ForProvider.Secrets {
		sec := &corev1.Secret{}
		c := Content{Kind: KindSecret, Name: s.Name, Missing: true}
		err := e.cluster.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: s.Name}, sec)
		if resource.IgnoreNotFound(err) != nil {
			// Errors name the Secret, never its data.
			return nil, nil, errors.Wrapf(err, "cannot get Secret %q", s.Name)
		}
		if err == nil {
			c = SecretContent(sec, s.Keys)
			e.read(cr, "secrets", sec)
		}
		out = append(out, v1alpha1.SourceHash{Kind: KindSecret, Name: s.Name, Hash: Hash(c), Missing: c.Missing})
		e.contents = append(e.contents, c)
	}
	for _, s := range out {
		if s.Missing {
			missing = append(missing, fmt.Sprintf("%s %q", s.Kind, s.Name))
		}
	}
	return out, missing, nil
}
