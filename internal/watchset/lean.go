package watchset

// This file holds the informer a watch runs: a shared informer's list, watch
// and store, without its processor. A shared informer hands each event to a
// processor goroutine and through a listener's two more to the handler, three
// goroutines an informer to serve the one handler a watch has; here the
// handler runs as the store changes. So the store never holds a version whose
// event the handler has not had, which a switch of strategy reads (wide.go):
// an object an informer stopped with was told to its owners. A lean
// informer runs six goroutines (TestGoroutinesPerInformer), a shared one
// nine.

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// lean returns the store and controller of a metadata-only informer of w whose
// events go to h as its store takes them, and whose watch errors go to failed.
func lean(mc metadata.Interface, w Watch, indexers toolscache.Indexers, transform toolscache.TransformFunc, h toolscache.ResourceEventHandler, failed toolscache.WatchErrorHandlerWithContext) (toolscache.Indexer, toolscache.Controller) {
	rc := mc.Resource(w.Resource).Namespace(w.Namespace)
	tweak := func(o metav1.ListOptions) metav1.ListOptions {
		o.LabelSelector, o.FieldSelector = w.Labels, w.Fields
		return o
	}
	lw := toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return rc.List(ctx, tweak(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return rc.Watch(ctx, tweak(o))
		},
	}, mc)
	store := toolscache.NewIndexer(toolscache.DeletionHandlingMetaNamespaceKeyFunc, indexers)
	fifo := toolscache.NewRealFIFOWithOptions(toolscache.RealFIFOOptions{
		KeyFunction:  toolscache.MetaNamespaceKeyFunc,
		KnownObjects: store,
		Transformer:  transform,
	})
	return store, toolscache.New(&toolscache.Config{
		Queue:                        fifo,
		ListerWatcher:                lw,
		ObjectType:                   &metav1.PartialObjectMetadata{},
		Process:                      deliver(store, h),
		WatchErrorHandlerWithContext: failed,
	})
}

// deliver applies each delta to store and tells h of it, as a shared
// informer's does, without a processor between them.
func deliver(store toolscache.Indexer, h toolscache.ResourceEventHandler) toolscache.ProcessFunc {
	return func(obj any, initial bool) error {
		deltas, ok := obj.(toolscache.Deltas)
		if !ok {
			return errors.Errorf("cannot process %T: not deltas", obj)
		}
		for _, d := range deltas {
			switch d.Type {
			case toolscache.Deleted:
				if err := store.Delete(d.Object); err != nil {
					return err
				}
				h.OnDelete(d.Object)
			case toolscache.Sync, toolscache.Replaced, toolscache.Added, toolscache.Updated:
				old, exists, err := store.Get(d.Object)
				if err == nil && exists {
					if err := store.Update(d.Object); err != nil {
						return err
					}
					h.OnUpdate(old, d.Object)
					continue
				}
				if err := store.Add(d.Object); err != nil {
					return err
				}
				h.OnAdd(d.Object, initial)
			case toolscache.ReplacedAll, toolscache.SyncAll, toolscache.Bookmark:
				// Only atomic FIFOs emit these; this one is not.
			}
		}
		return nil
	}
}
