package configrollout

import (
	"context"
	"sync"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// autoSource is the indexWorkloads value of an auto rollout for one of its
// sources: a workload event reaches the auto rollouts whose sources the
// workload reads, not every auto rollout of its namespace.
func autoSource(kind, name string) string { return autoMarker + "/" + kind + "/" + name }

// autoSources are the indexWorkloads values of an auto rollout's sources.
func autoSources(p v1alpha1.ConfigRolloutParameters) []string {
	out := make([]string, 0, len(p.ConfigMaps)+len(p.Secrets))
	for _, s := range p.ConfigMaps {
		out = append(out, autoSource(KindConfigMap, s.Name))
	}
	for _, s := range p.Secrets {
		out = append(out, autoSource(KindSecret, s.Name))
	}
	return out
}

// readSources are the autoSource values of the sources a pod template reads.
func readSources(r Refs) []string {
	out := make([]string, 0, r.ConfigMaps.Len()+r.Secrets.Len())
	for n := range r.ConfigMaps {
		out = append(out, autoSource(KindConfigMap, n))
	}
	for n := range r.Secrets {
		out = append(out, autoSource(KindSecret, n))
	}
	return out
}

// readers remembers which sources each workload's pod template reads, for a
// namespace with more than one auto rollout: the metadata watch does not
// carry templates, so without it every event of a workload there reconciles
// every auto rollout of the namespace, each of which lists the namespace's
// workloads (O(N²) as N auto rollouts converge). A workload not known at its
// current generation is read once from the API server, however many
// reconciles and events ask at once (many such in a namespace are listed at
// once instead); a rollout's own write and its response
// teach it the new generation without a read; an entry goes with its
// workload's deletion.
type readers struct {
	api    client.Reader
	flight singleflight.Group
	mu     sync.Mutex
	by     map[types.NamespacedName]readAt // namespace, "Kind/name"
}

type readAt struct {
	generation int64
	sources    []string
}

func newReaders(api client.Reader) *readers {
	return &readers{api: api, by: map[types.NamespacedName]readAt{}}
}

// sources returns the autoSource values workload o of kind reads at o's
// generation, reading it from the API server when they are not known. A
// workload that no longer exists reads nothing. read is the workload as this
// call read it, nil when it read nothing of its own (known, or read by a
// call it joined): the caller may use it instead of reading it again.
func (r *readers) sources(ctx context.Context, kind string, o client.Object) (srcs []string, read client.Object, err error) {
	k := ownKey(o.GetNamespace(), kind, o.GetName())
	if at, ok := r.known(k, o.GetGeneration()); ok {
		return at.sources, nil, nil
	}
	// A read this call joined may have started before the generation it
	// asks for was written: it then reads once more. A read it started itself
	// is taken as it is, whatever its generation (a workload deleted and made
	// anew starts at 1).
	for try := 0; ; try++ {
		v, err, shared := r.flight.Do(k.String(), func() (any, error) {
			obj, tmpl := newObject(kind)
			err := r.api.Get(ctx, types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}, obj)
			if kerrors.IsNotFound(err) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return fetched{obj: obj, at: r.learn(kind, obj, tmpl)}, nil
		})
		if err != nil || v == nil {
			return nil, nil, err
		}
		f := v.(fetched) //nolint:forcetypeassert // Only fetched is returned above.
		if shared && f.at.generation < o.GetGeneration() && try == 0 {
			continue
		}
		if shared {
			// Another caller has it too; neither may change it.
			return f.at.sources, nil, nil
		}
		return f.at.sources, f.obj, nil
	}
}

// listFrom is how many workloads of a kind in a namespace, not known at
// their generation, learnAll lists rather than read each: a fleet of auto
// rollouts made together would otherwise read every workload of its
// namespace one by one in its first reconciles.
const listFrom = 8

// unknown counts the workloads of kind in items not known at their
// generation.
func (r *readers) unknown(kind string, items []metav1.PartialObjectMetadata) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for i := range items {
		at, ok := r.by[ownKey(items[i].Namespace, kind, items[i].Name)]
		if !ok || at.generation < items[i].Generation {
			n++
		}
	}
	return n
}

// learnAll lists the workloads of kind in ns from the API server, in pages,
// and records what each reads: one list, shared by every reconcile that asks
// at once, instead of a read of each.
func (r *readers) learnAll(ctx context.Context, kind, ns string) error {
	_, err, _ := r.flight.Do("list:"+ns+"/"+kind, func() (any, error) {
		l := newList(kind)
		opts := []client.ListOption{client.InNamespace(ns), client.Limit(500)}
		for {
			if err := r.api.List(ctx, l, opts...); err != nil {
				return nil, err
			}
			err := apimeta.EachListItem(l, func(o runtime.Object) error {
				if w, ok := o.(client.Object); ok {
					r.learn(kind, w, template(w))
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			if l.GetContinue() == "" {
				return nil, nil
			}
			opts = []client.ListOption{client.InNamespace(ns), client.Limit(500), client.Continue(l.GetContinue())}
		}
	})
	return errors.Wrapf(err, "cannot list %ss", kind)
}

// known returns what is known of workload k at generation or later.
func (r *readers) known(k types.NamespacedName, generation int64) (readAt, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.by[k]
	return at, ok && at.generation >= generation
}

// fetched is a workload read from the API server, and what it reads.
type fetched struct {
	obj client.Object
	at  readAt
}

// learn records what workload o of kind, whose pod template is tmpl, reads
// at o's generation, unless a later generation is known, and returns it.
func (r *readers) learn(kind string, o client.Object, tmpl *corev1.PodTemplateSpec) readAt {
	k := ownKey(o.GetNamespace(), kind, o.GetName())
	at := readAt{generation: o.GetGeneration(), sources: readSources(References(&tmpl.Spec))}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.by[k]; !ok || cur.generation <= at.generation {
		r.by[k] = at
	}
	return at
}

// forget drops what is known of a deleted workload and returns it.
func (r *readers) forget(kind string, o client.Object) ([]string, bool) {
	k := ownKey(o.GetNamespace(), kind, o.GetName())
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.by[k]
	delete(r.by, k)
	return at.sources, ok
}
