package configrollout

import (
	"context"
	"sync"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
// current generation is read once from the API server; an entry goes with
// its workload's deletion.
type readers struct {
	api client.Reader
	mu  sync.Mutex
	by  map[types.NamespacedName]readAt // namespace, "Kind/name"
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
// workload that no longer exists reads nothing.
func (r *readers) sources(ctx context.Context, kind string, o client.Object) ([]string, error) {
	k := ownKey(o.GetNamespace(), kind, o.GetName())
	r.mu.Lock()
	at, ok := r.by[k]
	r.mu.Unlock()
	if ok && at.generation >= o.GetGeneration() {
		return at.sources, nil
	}
	obj, tmpl := newObject(kind)
	err := r.api.Get(ctx, types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}, obj)
	if kerrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	at = readAt{generation: obj.GetGeneration(), sources: readSources(References(&tmpl.Spec))}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.by[k]; !ok || cur.generation <= at.generation {
		r.by[k] = at
	}
	return at.sources, nil
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
