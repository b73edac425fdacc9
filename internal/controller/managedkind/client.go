package managedkind

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// conflictRetry is how soon a managed resource is reconciled again after a
// write of it met a newer version: the cache holds that version within
// milliseconds, so the next attempt will read it.
const conflictRetry = 50 * time.Millisecond

// noOpSkippingManager hands the managed reconciler a client (noOpSkippingClient) that
//   - does not send status updates that would change nothing. The reconciler
//     writes a managed resource's status after every reconcile, changed or
//     not; the API server stores nothing for an unchanged one, but each is a
//     request, and every safety-net poll of every converged resource sent one.
//   - notes the managed resources whose writes met a conflict. The reconciler
//     requeues those through the controller's rate limiter, which backs off
//     from a second to a minute: made for failures, not for a cache that is a
//     few milliseconds behind. retryConflicts requeues them quickly instead.
//   - reads a managed resource from the API server when the cache holds a
//     version of it that the reconciler itself has written over (writtenOver).
//   - reads Secrets from the API server. The only ones the reconciler reads
//     are connection secrets, before it writes them; through the cache the
//     first would start a watch of every Secret in the cluster, which the
//     provider never holds.
type noOpSkippingManager struct {
	ctrl.Manager
	conflicts *conflicts
	written   *writtenOver
}

// SkipNoOpWrites returns mgr with a client that does not send updates or status
// updates that would change nothing, for crossplane-runtime's other
// reconcilers: the ProviderConfig one updates its config and the config's
// status on every reconcile, changed or not, and a restarted provider would
// write both at once.
func SkipNoOpWrites(mgr ctrl.Manager) ctrl.Manager { return noOpSkippingManager{Manager: mgr} }

func (m noOpSkippingManager) GetClient() client.Client {
	return noOpSkippingClient{Client: m.Manager.GetClient(), apiReader: m.GetAPIReader(), conflicts: m.conflicts, written: m.written}
}

// conflicts are the managed resources whose writes met a conflict during
// their current reconcile. A key is reconciled by one worker at a time.
type conflicts struct{ m sync.Map }

func (c *conflicts) note(obj client.Object, err error) error {
	if c != nil && kerrors.IsConflict(err) {
		c.m.Store(client.ObjectKeyFromObject(obj), true)
	}
	return err
}

func (c *conflicts) take(k types.NamespacedName) bool {
	_, ok := c.m.LoadAndDelete(k)
	return ok
}

type noOpSkippingClient struct {
	client.Client
	apiReader client.Reader
	conflicts *conflicts
	written   *writtenOver
}

func (c noOpSkippingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		return c.apiReader.Get(ctx, key, obj, opts...)
	}
	err := c.Client.Get(ctx, key, obj, opts...)
	switch {
	case kerrors.IsNotFound(err):
		c.written.forget(obj, key)
	case err == nil && c.written.stale(obj):
		return c.apiReader.Get(ctx, key, obj, opts...)
	}
	return err
}

// Update sends obj unless the cache holds it unchanged at the same
// resourceVersion (status aside, which an update does not write). The status
// obj carries survives the update: the API server answers with the status it
// stores, and the managed reconciler adds its finalizer after Observe, so the
// conditions Observe set would otherwise be lost on a new resource's first
// reconcile, the only one it may get.
//
// An update that changes only metadata (the reconciler's finalizer and
// annotations) goes as a merge patch of what changed, at the cached
// resourceVersion: a whole-object update would write the spec back in the
// provider's own encoding ("5m" as "5m0s"), which changes the user's manifest
// under a GitOps tool, bumps the generation and reconciles the resource again.
func (c noOpSkippingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	var onlyMeta client.Object
	if len(opts) == 0 {
		cached, d := compareCached(ctx, c.Client, obj)
		if d == unknown && c.apiReader != nil {
			// The cache has not caught up with the reconciler's own last
			// write: a create's annotations follow its finalizer within
			// milliseconds. The API server holds the version obj was
			// written at; sent whole instead, the update would write the
			// spec back in the provider's encoding, one time in four.
			cached, d = compareCached(ctx, c.apiReader, obj)
		}
		switch d {
		case sameExceptStatus:
			return nil
		case metadataOnly:
			onlyMeta = cached
		}
	}
	restore := keepStatus(obj)
	base := obj.GetResourceVersion()
	write := func() error { return c.Client.Update(ctx, obj, opts...) }

	if onlyMeta != nil {
		write = func() error {
			return c.Client.Patch(ctx, obj, client.MergeFromWithOptions(onlyMeta, client.MergeFromWithOptimisticLock{}))
		}
	}
	if err := c.conflicts.note(obj, write()); err != nil {
		return err
	}
	c.written.wrote(obj, base)
	restore()
	return nil
}

// keepStatus saves a copy of obj's status and returns what puts it back:
// a typed object's Status field (its generated DeepCopy), or an unstructured
// object's status. Through the field, not a round trip of the whole object
// through unstructured content, which would cost an encode and a decode of
// the object per write (BenchmarkFleet's CPU seconds).
func keepStatus(obj client.Object) (restore func()) {
	if u, ok := obj.(runtime.Unstructured); ok {
		status, had := u.UnstructuredContent()["status"]
		status = runtime.DeepCopyJSONValue(status)
		return func() {
			if had {
				u.UnstructuredContent()["status"] = status
			}
		}
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return func() {}
	}
	field := v.Elem().FieldByName("Status")
	if !field.IsValid() || !field.CanSet() {
		return func() {}
	}
	var saved reflect.Value
	if dc := field.Addr().MethodByName("DeepCopy"); dc.IsValid() && dc.Type().NumIn() == 0 && dc.Type().NumOut() == 1 && dc.Type().Out(0) == field.Addr().Type() {
		saved = dc.Call(nil)[0].Elem()
	} else {
		// No generated DeepCopy: a copy of the struct. The update's decoder
		// zeroes obj before it decodes, so what it shares is not changed.
		saved = reflect.New(field.Type()).Elem()
		saved.Set(field)
	}
	return func() { field.Set(saved) }
}

func (c noOpSkippingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	base := obj.GetResourceVersion()
	err := c.conflicts.note(obj, c.Client.Patch(ctx, obj, patch, opts...))
	if err == nil {
		c.written.wrote(obj, base)
	}
	return err
}

func (c noOpSkippingClient) Status() client.SubResourceWriter {
	return statusWriter{SubResourceWriter: c.Client.Status(), reader: c.Client, conflicts: c.conflicts, written: c.written}
}

type statusWriter struct {
	client.SubResourceWriter
	reader    client.Reader
	conflicts *conflicts
	written   *writtenOver
}

// Update sends obj's status unless the cache holds obj at the same
// resourceVersion with the same status: the object the API server holds then,
// so the update would be a no-op. When the cache holds obj at that version
// with another status, the status goes as a JSON patch that replaces it at
// that version (the same precondition as the update's): the API server then
// decodes the status, not the whole object (BenchmarkFleet's API server CPU
// seconds).
// Anything else, a newer or older cached copy included, is sent whole and the
// API server decides.
func (w statusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	write := func() error { return w.SubResourceWriter.Update(ctx, obj, opts...) }
	if len(opts) == 0 {
		patch, same := statusPatch(ctx, w.reader, obj)
		if same {
			return nil
		}
		if patch != nil {
			write = func() error { return w.SubResourceWriter.Patch(ctx, obj, patch) }
		}
	}
	base := obj.GetResourceVersion()
	err := w.conflicts.note(obj, write())
	if err == nil {
		w.written.wrote(obj, base)
	}
	return err
}

func (w statusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	base := obj.GetResourceVersion()
	err := w.conflicts.note(obj, w.SubResourceWriter.Patch(ctx, obj, patch, opts...))
	if err == nil {
		w.written.wrote(obj, base)
	}
	return err
}

// statusPatch compares obj's status with the cache's copy of obj. It returns
// whether they are the same, and when they differ and the cache holds obj at
// its resourceVersion, a JSON patch that replaces the status with obj's at
// that version; nil otherwise. The whole status, not a diff of it: the cache
// holds what was stored as the provider decodes it, and an earlier release's
// shape (ImmortalContainer's list of start times) decodes as the new one, so
// a diff would leave it stored. Nor anything else: metadata the cache leaves
// out (managed fields) must not look like a change.
func statusPatch(ctx context.Context, r client.Reader, obj client.Object) (client.Patch, bool) {
	cached, ok := obj.DeepCopyObject().(client.Object)
	if !ok || r.Get(ctx, client.ObjectKeyFromObject(obj), cached) != nil {
		return nil, false
	}
	if cached.GetResourceVersion() != obj.GetResourceVersion() {
		return nil, false
	}
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, false
	}
	have, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cached)
	if err != nil {
		return nil, false
	}
	if equality.Semantic.DeepEqual(want["status"], have["status"]) {
		return nil, true
	}
	if want["status"] == nil {
		return nil, false
	}
	// Setting the resourceVersion makes the write conditional, as an
	// update's is: another version is a conflict. "add" replaces a status
	// that exists and adds one that does not.
	patch, err := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/metadata/resourceVersion", "value": obj.GetResourceVersion()},
		{"op": "add", "path": "/status", "value": want["status"]},
	})
	if err != nil {
		return nil, false
	}
	return client.RawPatch(types.JSONPatchType, patch), false
}

// difference is how an object differs from the cache's copy of it.
type difference int

const (
	// unknown: the cache holds another version of it, or none.
	unknown difference = iota
	// sameExceptStatus: nothing an update writes differs.
	sameExceptStatus
	// metadataOnly: only metadata differs (the spec, and the rest but
	// status, are the same).
	metadataOnly
	// more: more than metadata differs.
	more
)

// compareCached returns the cache's copy of obj, at obj's resourceVersion, and
// how obj differs from it, status aside.
func compareCached(ctx context.Context, r client.Reader, obj client.Object) (client.Object, difference) {
	cached, ok := obj.DeepCopyObject().(client.Object)
	if !ok || r.Get(ctx, client.ObjectKeyFromObject(obj), cached) != nil || cached.GetResourceVersion() != obj.GetResourceVersion() {
		return nil, unknown
	}
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, unknown
	}
	have, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cached)
	if err != nil {
		return nil, unknown
	}
	// Nor does the type, which one reader fills in and another leaves out.
	for _, k := range []string{"status", "apiVersion", "kind"} {
		delete(want, k)
		delete(have, k)
	}
	if equality.Semantic.DeepEqual(want, have) {
		return cached, sameExceptStatus
	}
	wm, hm := want["metadata"], have["metadata"]
	delete(want, "metadata")
	delete(have, "metadata")
	if equality.Semantic.DeepEqual(want, have) && wm != nil && hm != nil {
		return cached, metadataOnly
	}
	return cached, more
}

// retryConflicts turns the managed reconciler's rate-limited requeue after a
// conflict into a short fixed delay. Requeues after failures keep their
// backoff: only a reconcile that met a conflict, and returned no error, is
// retried early.
type retryConflicts struct {
	reconcile.Reconciler
	conflicts *conflicts
}

func (r retryConflicts) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.conflicts.take(req.NamespacedName)
	res, err := r.Reconciler.Reconcile(ctx, req)
	if r.conflicts.take(req.NamespacedName) && err == nil && res.Requeue && res.RequeueAfter == 0 {
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	}
	return res, err
}

// UncopiedLists lists from the cache without deep copies, for readers that
// only count or read what they list: the provider configs' usage counts and
// the managed resource state metrics, which list every resource of a kind
// every few seconds: a deep copy on each list would allocate the whole fleet
// that often (TestUncopiedLists; BenchmarkFleet's heap).
type UncopiedLists struct{ client.Client }

// List lists as the client does, without copies of the cache's objects.
func (c UncopiedLists) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	return c.Client.List(ctx, l, append(opts, client.UnsafeDisableDeepCopy)...)
}
