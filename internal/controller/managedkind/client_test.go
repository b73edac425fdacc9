package managedkind

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type reconcilerFunc func(context.Context, reconcile.Request) (reconcile.Result, error)

func (f reconcilerFunc) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return f(ctx, req)
}

func TestRetryConflicts(t *testing.T) {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "mr"}}
	mr := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mr"}}
	conflict := kerrors.NewConflict(schema.GroupResource{Resource: "things"}, "mr", errors.New("stale"))
	failed := errors.New("boom")
	cases := map[string]struct {
		reason   string
		conflict bool
		res      reconcile.Result
		err      error
		want     reconcile.Result
		wantErr  error
	}{
		"ConflictRequeuedSoon": {
			reason:   "A write that met a newer version is retried after a short fixed delay, not the rate limiter's backoff.",
			conflict: true, res: reconcile.Result{Requeue: true},
			want: reconcile.Result{RequeueAfter: conflictRetry},
		},
		"RequeueWithoutConflictKeepsBackoff": {
			reason: "A requeue after a failure (the error shown in status) keeps the rate limiter's backoff.",
			res:    reconcile.Result{Requeue: true},
			want:   reconcile.Result{Requeue: true},
		},
		"ErrorKeepsBackoff": {
			reason:   "A reconcile that returned an error keeps it, and its backoff, even if a write also conflicted.",
			conflict: true, res: reconcile.Result{Requeue: true}, err: failed,
			want: reconcile.Result{Requeue: true}, wantErr: failed,
		},
		"PollUnchanged": {
			reason:   "A reconcile that asked for its poll keeps it.",
			conflict: true, res: reconcile.Result{RequeueAfter: time.Hour},
			want: reconcile.Result{RequeueAfter: time.Hour},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cf := &conflicts{}
			// A conflict left from an earlier reconcile of the key does not count.
			_ = cf.note(mr, conflict)
			r := retryConflicts{conflicts: cf, Reconciler: reconcilerFunc(func(context.Context, reconcile.Request) (reconcile.Result, error) {
				if tc.conflict {
					_ = cf.note(mr, conflict)
				}
				return tc.res, tc.err
			})}
			got, err := r.Reconcile(context.Background(), req)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nReconcile(...): -want, +got:\n%s", tc.reason, diff)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("\n%s\nReconcile(...): want error %v, got %v", tc.reason, tc.wantErr, err)
			}
			if cf.take(req.NamespacedName) {
				t.Errorf("\n%s\nthe conflict outlived the reconcile", tc.reason)
			}
		})
	}
}

func TestSkipNoOpWrites(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"k": "v"}}
	cases := map[string]struct {
		reason  string
		write   func(ctx context.Context, c client.Client, cached *corev1.ConfigMap) error
		sent    int
		patched int
		// behind makes the cache hold an older version than the API server.
		behind bool
		// want is the data stored after the write; the original when nil.
		want map[string]string
	}{
		"UnchangedUpdateNotSent": {
			reason: "An update of the object as the cache holds it changes nothing; the ProviderConfig reconciler sends one on every reconcile.",
			write:  func(ctx context.Context, c client.Client, o *corev1.ConfigMap) error { return c.Update(ctx, o) },
		},
		"ChangedUpdateSent": {
			reason: "An update that changes more than metadata is sent whole.",
			write: func(ctx context.Context, c client.Client, o *corev1.ConfigMap) error {
				o.Finalizers = append(o.Finalizers, "in-use")
				o.Data["k"] = "w"
				return c.Update(ctx, o)
			},
			sent: 1,
			want: map[string]string{"k": "w"},
		},
		"MetadataOnlyUpdatePatched": {
			reason: "An update that changes only metadata (a finalizer) goes as a merge patch of it, so the rest is never written back in the provider's encoding.",
			write: func(ctx context.Context, c client.Client, o *corev1.ConfigMap) error {
				o.Finalizers = append(o.Finalizers, "in-use")
				return c.Update(ctx, o)
			},
			patched: 1,
		},
		"MetadataOnlyUpdatePatchedWhileCacheBehind": {
			reason: "An update of metadata only, of a version the cache does not hold yet (the reconciler's own last write), is compared with the API server's and patched: sent whole, it wrote the spec back in the provider's encoding and bumped the generation.",
			behind: true,
			write: func(ctx context.Context, c client.Client, o *corev1.ConfigMap) error {
				o.Finalizers = append(o.Finalizers, "in-use")
				return c.Update(ctx, o)
			},
			patched: 1,
		},
		"StaleUpdateSent": {
			reason: "An update of another version than the cache holds is sent, and the API server decides.",
			write: func(ctx context.Context, c client.Client, o *corev1.ConfigMap) error {
				o.ResourceVersion = "1"
				if err := c.Update(ctx, o); !kerrors.IsConflict(err) {
					return fmt.Errorf("want a conflict, got %w", err)
				}
				return nil
			},
			sent: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sent, patched := 0, 0
			s := runtime.NewScheme()
			_ = corev1.AddToScheme(s)
			fc := fake.NewClientBuilder().WithScheme(s).WithObjects(cm.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
				Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					sent++
					return c.Update(ctx, obj, opts...)
				},
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
					patched++
					return c.Patch(ctx, obj, p, opts...)
				},
			}).Build()
			c := noOpSkippingClient{Client: fc, apiReader: fc}
			if tc.behind {
				c.Client = lagging{fc}
			}
			o := &corev1.ConfigMap{}
			if err := fc.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "cm"}, o); err != nil {
				t.Fatal(err)
			}
			if err := tc.write(context.Background(), c, o); err != nil {
				t.Fatal(err)
			}
			if sent != tc.sent || patched != tc.patched {
				t.Errorf("\n%s\nupdates sent: want %d, got %d; patches: want %d, got %d", tc.reason, tc.sent, sent, tc.patched, patched)
			}
			stored := &corev1.ConfigMap{}
			if err := fc.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "cm"}, stored); err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == nil {
				want = cm.Data
			}
			if diff := cmp.Diff(want, stored.Data); diff != "" {
				t.Errorf("\n%s\nstored data: -want, +got:\n%s", tc.reason, diff)
			}
			if o.Finalizers != nil && !slices.Equal(o.Finalizers, stored.Finalizers) {
				t.Errorf("\n%s\nstored finalizers %v, want %v", tc.reason, stored.Finalizers, o.Finalizers)
			}
		})
	}
}

// lagging is a client whose reads return a version older than the one stored:
// a cache behind the API server.
type lagging struct{ client.WithWatch }

func (l lagging) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := l.WithWatch.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	obj.SetResourceVersion("1")
	return nil
}

func TestStatusWrites(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
		Status:     corev1.PodStatus{Message: "old", Reason: "Waiting"},
	}
	cases := map[string]struct {
		reason  string
		write   func(ctx context.Context, c client.Client, o *corev1.Pod) error
		sent    int
		patched int
		// want is the status stored after the write; the original when nil.
		want *corev1.PodStatus
	}{
		"UnchangedNotSent": {
			reason: "A status the cache holds at the same version is not sent: the reconciler writes it after every reconcile.",
			write:  func(ctx context.Context, c client.Client, o *corev1.Pod) error { return c.Status().Update(ctx, o) },
		},
		"ChangedPatched": {
			reason: "A changed status of the version the cache holds goes as a patch of the status alone, the whole of it (what the cache holds is decoded, and an earlier release's shape decodes as the new one): a field set, a field cleared. Metadata the cache leaves out (managed fields) is not a change.",
			write: func(ctx context.Context, c client.Client, o *corev1.Pod) error {
				o.Status.Message, o.Status.Reason = "new", ""
				o.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "someone", Operation: metav1.ManagedFieldsOperationUpdate}}
				o.Labels = map[string]string{"not": "a status"}
				return c.Status().Update(ctx, o)
			},
			patched: 1,
			want:    &corev1.PodStatus{Message: "new"},
		},
		"StaleSentWhole": {
			reason: "A status of another version than the cache holds is sent whole, and the API server decides.",
			write: func(ctx context.Context, c client.Client, o *corev1.Pod) error {
				o.ResourceVersion = "1"
				o.Status.Message = "new"
				if err := c.Status().Update(ctx, o); !kerrors.IsConflict(err) {
					return fmt.Errorf("want a conflict, got %w", err)
				}
				return nil
			},
			sent: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sent, patched := 0, 0
			var patch string
			s := runtime.NewScheme()
			_ = corev1.AddToScheme(s)
			fc := fake.NewClientBuilder().WithScheme(s).WithObjects(pod.DeepCopy()).WithStatusSubresource(&corev1.Pod{}).WithInterceptorFuncs(interceptor.Funcs{
				SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					sent++
					return c.SubResource(sub).Update(ctx, obj, opts...)
				},
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
					patched++
					b, _ := p.Data(obj)
					patch = string(b)
					return c.SubResource(sub).Patch(ctx, obj, p, opts...)
				},
			}).Build()
			c := noOpSkippingClient{Client: fc, apiReader: fc}
			o := &corev1.Pod{}
			if err := fc.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "pod"}, o); err != nil {
				t.Fatal(err)
			}
			rv := o.ResourceVersion
			if err := tc.write(context.Background(), c, o); err != nil {
				t.Fatal(err)
			}
			if sent != tc.sent || patched != tc.patched {
				t.Errorf("\n%s\nstatus updates sent: want %d, got %d; patches: want %d, got %d", tc.reason, tc.sent, sent, tc.patched, patched)
			}
			if patched > 0 {
				want := `[{"op":"replace","path":"/metadata/resourceVersion","value":"` + rv + `"},{"op":"add","path":"/status","value":{"message":"new"}}]`
				if diff := cmp.Diff(want, patch); diff != "" {
					t.Errorf("\n%s\npatch: -want, +got:\n%s", tc.reason, diff)
				}
			}
			stored := &corev1.Pod{}
			if err := fc.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "pod"}, stored); err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == nil {
				want = &pod.Status
			}
			if diff := cmp.Diff(*want, stored.Status); diff != "" {
				t.Errorf("\n%s\nstored status: -want, +got:\n%s", tc.reason, diff)
			}
			if stored.Labels != nil {
				t.Errorf("\n%s\na status write changed labels: %v", tc.reason, stored.Labels)
			}
		})
	}
}

type listOptions struct {
	client.Client
	got *client.ListOptions
}

func (c listOptions) List(_ context.Context, _ client.ObjectList, opts ...client.ListOption) error {
	c.got.ApplyOptions(opts)
	return nil
}

func TestUncopiedLists(t *testing.T) {
	got := &client.ListOptions{}
	c := UncopiedLists{Client: listOptions{got: got}}
	if err := c.List(context.Background(), &corev1.ConfigMapList{}, client.MatchingLabels{"a": "b"}); err != nil {
		t.Fatal(err)
	}
	if got.UnsafeDisableDeepCopy == nil || !*got.UnsafeDisableDeepCopy || got.LabelSelector == nil {
		t.Errorf("list options %+v: want the caller's selector, and no deep copies", got)
	}
}

func TestUpdateKeepsStatus(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Status:     corev1.PodStatus{Message: "stored", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}},
	}
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	cases := map[string]struct {
		reason string
		obj    func() client.Object
		status func(client.Object) any
		mine   any
	}{
		"Typed": {
			reason: "A typed object's status survives an update: the reconciler's conditions of a first reconcile are written after its finalizer.",
			obj: func() client.Object {
				o := pod.DeepCopy()
				o.Status = corev1.PodStatus{Message: "mine", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
				return o
			},
			status: func(o client.Object) any { return o.(*corev1.Pod).Status },
			mine:   corev1.PodStatus{Message: "mine", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		},
		"Unstructured": {
			reason: "An unstructured object's status survives an update too.",
			obj: func() client.Object {
				u := &unstructured.Unstructured{}
				u.SetAPIVersion("v1")
				u.SetKind("Pod")
				u.SetNamespace("ns")
				u.SetName("p")
				u.Object["status"] = map[string]any{"message": "mine"}
				return u
			},
			status: func(o client.Object) any { return o.(*unstructured.Unstructured).Object["status"] },
			mine:   map[string]any{"message": "mine"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fc := fake.NewClientBuilder().WithScheme(s).WithObjects(pod.DeepCopy()).WithStatusSubresource(&corev1.Pod{}).Build()
			c := noOpSkippingClient{Client: fc, apiReader: fc}
			o := tc.obj()
			o.SetFinalizers([]string{"mine"})
			if err := c.Update(context.Background(), o); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.mine, tc.status(o)); diff != "" {
				t.Errorf("\n%s\nstatus after the update: -want, +got:\n%s", tc.reason, diff)
			}
			stored := &corev1.Pod{}
			if err := fc.Get(context.Background(), client.ObjectKeyFromObject(pod), stored); err != nil {
				t.Fatal(err)
			}
			if stored.Status.Message != "stored" || len(stored.Finalizers) != 1 {
				t.Errorf("\n%s\nstored: status %q and finalizers %v; want the status as it was and the finalizer added", tc.reason, stored.Status.Message, stored.Finalizers)
			}
		})
	}
}

func TestKeepStatusCopies(t *testing.T) {
	o := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}}}
	restore := keepStatus(o)
	// A decoder that reused the slice would change what was saved: the saved
	// status is a copy.
	o.Status.Conditions[0].Type = corev1.PodScheduled
	restore()
	if o.Status.Conditions[0].Type != corev1.PodReady {
		t.Errorf("restored condition %q, want %q", o.Status.Conditions[0].Type, corev1.PodReady)
	}
}
