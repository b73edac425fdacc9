package configrollout

import (
	"context"
	"strings"
	"sync"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
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

// readers remembers which sources each workload's pod template reads, for
// auto rollouts: the metadata watch does not carry templates, so without it
// every event of a workload in a namespace of several auto rollouts
// reconciles all of them, each of which lists the namespace's workloads
// (O(N²) as N auto rollouts converge). A workload not known at its
// current generation is read once from the API server, however many
// reconciles and events ask at once (many such in a namespace are listed at
// once instead); a rollout's own write and its response
// teach it the new generation without a read; an entry goes with its
// workload's deletion.
//
// It also keeps the reverse, the workloads known to read each source, and,
// in each namespace an auto rollout has looked in, the workloads whose
// events carried a generation not known: a reconcile learns those and looks
// up its sources, O(its workloads and what changed), instead of looking at
// every workload of its namespace: a reconcile's cost does not grow with the
// workloads there (BenchmarkAutoSelect).
type readers struct {
	api    client.Reader
	flight singleflight.Group
	mu     sync.Mutex
	by     map[types.NamespacedName]readAt // namespace, "Kind/name"
	// users are the workloads known to read a source: namespace, autoSource
	// → "Kind/name".
	users  map[types.NamespacedName]sets.Set[string]
	spaces map[string]*space
}

// space is what readers notes of a namespace an auto rollout has looked in.
type space struct {
	// noted says every workload the cache held when the namespace was first
	// looked in has been noted; events have been noted since before that.
	noted bool
	// unread are the workloads, "Kind/name", last seen at a generation
	// whose template has not been read, and that generation.
	unread map[string]int64
}

type readAt struct {
	generation int64
	sources    []string
}

func newReaders(api client.Reader) *readers {
	return &readers{api: api, by: map[types.NamespacedName]readAt{}, users: map[types.NamespacedName]sets.Set[string]{}, spaces: map[string]*space{}}
}

// sources returns the autoSource values workload o of kind reads at o's
// generation, reading it from the API server when they are not known. A
// workload that no longer exists reads nothing. read is the workload as this
// call read it, nil when it read nothing of its own (known, or read by a
// call it joined): the caller may use it instead of reading it again.
func (r *readers) sources(ctx context.Context, kind string, o client.Object) (srcs []string, read client.Object, err error) {
	k := readerKey(o.GetNamespace(), kind, o.GetName())
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
				// Its deletion event, which follows, forgets it.
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

// track makes sure the workloads of ns are noted: on the first look in ns
// every workload of the metadata cache there not known at its generation
// is noted as unread; from then on seen notes each event's. Events are noted
// from before the cache is looked at, so none falls between the two.
func (r *readers) track(ctx context.Context, cache client.Reader, ns string) error {
	r.mu.Lock()
	s, ok := r.spaces[ns]
	if !ok {
		s = &space{unread: map[string]int64{}}
		r.spaces[ns] = s
	}
	noted := s.noted
	r.mu.Unlock()
	if noted {
		return nil
	}
	_, err, _ := r.flight.Do("track:"+ns, func() (any, error) {
		for _, kind := range Kinds {
			l := metadataList(kind)
			if err := cache.List(ctx, l, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
				return nil, err
			}
			r.mu.Lock()
			for i := range l.Items {
				r.noteLocked(s, kind, &l.Items[i])
			}
			r.mu.Unlock()
		}
		r.mu.Lock()
		s.noted = true
		r.mu.Unlock()
		return nil, nil
	})
	return errors.Wrap(err, "cannot list workloads")
}

// seen notes an event of workload o of kind, in a namespace an auto rollout
// has looked in, at a generation not known.
func (r *readers) seen(kind string, o client.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.spaces[o.GetNamespace()]; ok {
		r.noteLocked(s, kind, o)
	}
}

func (r *readers) noteLocked(s *space, kind string, o client.Object) {
	k := readerKey(o.GetNamespace(), kind, o.GetName())
	if at, ok := r.by[k]; ok && at.generation >= o.GetGeneration() {
		return
	}
	if s.unread[k.Name] < o.GetGeneration() {
		s.unread[k.Name] = o.GetGeneration()
	}
}

// unread returns the workloads of kind in ns noted as unread, as metadata, or
// many when there are upTo or more: those are listed, not read one by one,
// and a fleet's first reconciles, which all find every workload of their
// namespace unread, need not copy them all.
func (r *readers) unread(ns, kind string, upTo int) (out []metav1.PartialObjectMetadata, many bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.spaces[ns]
	if !ok {
		return nil, false
	}
	for k, g := range s.unread {
		if name, ok := strings.CutPrefix(k, kind+"/"); ok {
			if len(out) == upTo-1 {
				return nil, true
			}
			out = append(out, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: g}})
		}
	}
	return out, false
}

// readersOf returns the workloads in ns known to read any of srcs
// (autoSource values), ordered by kind and name.
func (r *readers) readersOf(ns string, srcs []string) []v1alpha1.WorkloadRef {
	keys := sets.New[string]()
	r.mu.Lock()
	for _, src := range srcs {
		keys = keys.Union(r.users[types.NamespacedName{Namespace: ns, Name: src}])
	}
	r.mu.Unlock()
	out := make([]v1alpha1.WorkloadRef, 0, keys.Len())
	for _, k := range sets.List(keys) {
		kind, name, _ := strings.Cut(k, "/")
		out = append(out, v1alpha1.WorkloadRef{Kind: kind, Name: name})
	}
	return out
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
	k := readerKey(o.GetNamespace(), kind, o.GetName())
	at := readAt{generation: o.GetGeneration(), sources: readSources(References(&tmpl.Spec))}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.by[k]
	if !ok || cur.generation <= at.generation {
		r.unindexLocked(k, cur.sources)
		r.by[k] = at
		for _, src := range at.sources {
			u := types.NamespacedName{Namespace: k.Namespace, Name: src}
			if r.users[u] == nil {
				r.users[u] = sets.New[string]()
			}
			r.users[u].Insert(k.Name)
		}
		cur = at
	}
	if s, ok := r.spaces[k.Namespace]; ok && s.unread[k.Name] <= cur.generation {
		delete(s.unread, k.Name)
	}
	return at
}

func (r *readers) unindexLocked(k types.NamespacedName, srcs []string) {
	for _, src := range srcs {
		u := types.NamespacedName{Namespace: k.Namespace, Name: src}
		r.users[u].Delete(k.Name)
		if r.users[u].Len() == 0 {
			delete(r.users, u)
		}
	}
}

// forget drops what is known of a deleted workload and returns it.
func (r *readers) forget(kind string, o client.Object) ([]string, bool) {
	k := readerKey(o.GetNamespace(), kind, o.GetName())
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.by[k]
	r.unindexLocked(k, at.sources)
	delete(r.by, k)
	if s, ok := r.spaces[k.Namespace]; ok {
		delete(s.unread, k.Name)
	}
	return at.sources, ok
}
