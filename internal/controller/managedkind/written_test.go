package managedkind

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestWrittenOver: a managed resource the cache holds at a version the
// reconciler wrote over is read from the API server; once the cache holds
// anything else, or the resource is gone, its writes are forgotten.
func TestWrittenOver(t *testing.T) {
	type read struct {
		RV        string
		FromCache bool
	}
	at := func(rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mr", ResourceVersion: rv}}
	}
	cases := map[string]struct {
		reason  string
		written []string // versions the reconciler wrote over
		cached  string   // the version the cache holds; "" for none
		want    read
		wantLen int
	}{
		"NothingWritten": {
			reason: "A resource the reconciler has not written is read from the cache.",
			cached: "5", want: read{RV: "5", FromCache: true},
		},
		"CacheBehind": {
			reason:  "The cache holds a version the reconciler wrote over: the API server's is read.",
			written: []string{"3", "4"}, cached: "4", want: read{RV: "9"}, wantLen: 1,
		},
		"CacheFarBehind": {
			reason:  "Any version written over is stale, not only the last.",
			written: []string{"3", "4", "5"}, cached: "3", want: read{RV: "9"}, wantLen: 1,
		},
		"CaughtUp": {
			reason:  "The cache holds the version the last write made: it is read, and the writes are forgotten.",
			written: []string{"3", "4"}, cached: "6", want: read{RV: "6", FromCache: true},
		},
		"Gone": {
			reason:  "A resource gone from the cache is forgotten.",
			written: []string{"3"}, want: read{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var objs []client.Object
			if tc.cached != "" {
				objs = append(objs, at(tc.cached))
			}
			s := runtime.NewScheme()
			_ = corev1.AddToScheme(s)
			cache := fakeAt{Client: fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build(), rv: tc.cached}
			api := fakeAt{Client: fake.NewClientBuilder().WithScheme(s).WithObjects(at("9")).Build(), rv: "9"}
			w := newWrittenOver(&corev1.ConfigMap{})
			for _, rv := range tc.written {
				w.wrote(at(rv), rv)
			}
			c := noOpSkippingClient{Client: cache, apiReader: api, written: w}
			got := &corev1.ConfigMap{}
			_ = c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "mr"}, got)
			r := read{RV: got.ResourceVersion, FromCache: got.ResourceVersion != "" && got.ResourceVersion == tc.cached}
			if diff := cmp.Diff(tc.want, r); diff != "" {
				t.Errorf("%s\nGet: -want, +got:\n%s", tc.reason, diff)
			}
			if w.len() != tc.wantLen {
				t.Errorf("%s\n%d resources' writes remembered, want %d", tc.reason, w.len(), tc.wantLen)
			}
		})
	}
}

// fakeAt is a fake client whose reads say version rv: the fake client keeps
// versions of its own.
type fakeAt struct {
	client.Client
	rv string
}

func (f fakeAt) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := f.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	obj.SetResourceVersion(f.rv)
	return nil
}

// TestWrittenOverNotes: only the managed resource's own type is remembered,
// a bounded number of versions of each, and a write that replaced no known
// version notes nothing.
func TestWrittenOverNotes(t *testing.T) {
	w := newWrittenOver(&corev1.ConfigMap{})
	mr := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mr"}}
	w.wrote(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mr"}}, "1")
	w.wrote(mr, "")
	if w.len() != 0 {
		t.Fatalf("another type's write, or one with no version, was remembered")
	}
	for i := range 3 * maxWrittenOver {
		w.wrote(mr, string(rune('a'+i)))
	}
	if got := len(w.rv[writtenKey(client.ObjectKeyFromObject(mr))]); got != maxWrittenOver {
		t.Errorf("%d versions of one resource remembered, want at most %d", got, maxWrittenOver)
	}
	var nilW *writtenOver
	nilW.wrote(mr, "1")
	if nilW.stale(mr) {
		t.Errorf("a nil writtenOver finds a read stale")
	}
}
