package watchset

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

func TestSlimKeepsIdentityAndVersion(t *testing.T) {
	now := metav1.Now()
	cases := map[string]struct {
		reason     string
		in         any
		keepLabels bool
		want       any
	}{
		"Metadata": {
			reason: "Only identity and version are kept of watched metadata.",
			in: &metav1.PartialObjectMetadata{
				TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "ns", UID: "u", ResourceVersion: "7",
					Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
					ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
			},
			want: &Object{Name: "n", Namespace: "ns", UID: "u", ResourceVersion: "7"},
		},
		"KeepingLabels": {
			reason: "A watch that serves reads keeps labels and the deletion mark too, still no annotations or managed fields.",
			in: &metav1.PartialObjectMetadata{
				ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u", ResourceVersion: "7", DeletionTimestamp: &now,
					Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
					ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
			},
			keepLabels: true,
			want:       &Object{Name: "n", UID: "u", ResourceVersion: "7", Deleting: true, Labels: map[string]string{"a": "b"}},
		},
		"Other": {
			reason: "Anything else, such as a deletion marker, passes unchanged.",
			in:     "tombstone",
			want:   "tombstone",
		},
		"Slimmed": {
			reason: "An object slimmed already passes unchanged: the informer may transform an object twice.",
			in:     &Object{Name: "n", UID: "u", ResourceVersion: "7"},
			want:   &Object{Name: "n", UID: "u", ResourceVersion: "7"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			transform := slim
			if tc.keepLabels {
				transform = slimKeepingLabels
			}
			got, err := transform(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nslim(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSameLabelsAndDeletion(t *testing.T) {
	now := metav1.Now()
	ns := func(lbls map[string]string, deleted *metav1.Time, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: lbls, DeletionTimestamp: deleted, ResourceVersion: rv}}
	}
	cases := map[string]struct {
		reason  string
		was, is any
		want    bool
	}{
		"StatusOnly": {
			reason: "A new resourceVersion alone, such as a terminating namespace's status, is the same.",
			was:    ns(map[string]string{"a": "b"}, &now, "1"), is: ns(map[string]string{"a": "b"}, &now, "2"),
			want: true,
		},
		"Labels": {
			reason: "A label change matters: it can move the namespace into or out of a rule's selection.",
			was:    ns(map[string]string{"a": "b"}, nil, "1"), is: ns(map[string]string{"a": "c"}, nil, "2"),
		},
		"Deleted": {
			reason: "A namespace starting to terminate matters: rules stop copying into it.",
			was:    ns(nil, nil, "1"), is: ns(nil, &now, "2"),
		},
		"NotMetadata": {
			reason: "Anything the transform did not produce is treated as a change.",
			was:    "tombstone", is: ns(nil, nil, "2"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := sameLabelsAndDeletion(tc.was, tc.is); got != tc.want {
				t.Errorf("\n%s\nsameLabelsAndDeletion(...) = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

func TestSlimKeepingSharesLabels(t *testing.T) {
	transform := slimKeeping("rule")
	obj := func(name, rule string) any {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), ResourceVersion: "1",
			Labels: map[string]string{"rule": rule, "app": name}}}
	}
	labelsOf := func(o any) map[string]string {
		t.Helper()
		got, err := transform(o)
		if err != nil {
			t.Fatal(err)
		}
		return got.(*Object).Labels
	}
	a, b, c := labelsOf(obj("a", "r1")), labelsOf(obj("b", "r1")), labelsOf(obj("c", "r2"))
	if diff := cmp.Diff(map[string]string{"rule": "r1"}, a); diff != "" {
		t.Errorf("slimKeeping(...): only the label is kept: -want, +got:\n%s", diff)
	}
	if reflect.ValueOf(a).UnsafePointer() != reflect.ValueOf(b).UnsafePointer() {
		t.Errorf("slimKeeping(...): two objects of one value hold two labels maps, want one shared")
	}
	if diff := cmp.Diff(map[string]string{"rule": "r2"}, c); diff != "" {
		t.Errorf("slimKeeping(...): another value: -want, +got:\n%s", diff)
	}
	// Past the bound the table starts over; every object still keeps its own value.
	for i := range maxSharedLabels + 10 {
		v := fmt.Sprintf("v%d", i)
		if got := labelsOf(obj(v, v)); got["rule"] != v || len(got) != 1 {
			t.Fatalf("slimKeeping(...) of value %q: got labels %v", v, got)
		}
	}
	if got := labelsOf(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x"}}); got != nil {
		t.Errorf("slimKeeping(...) of an object without the label: got labels %v, want none", got)
	}
}

// TestObjectIsKeyed checks that an informer's store can key and index what
// slim keeps: its keys and namespace index read it as a metav1.Object.
func TestObjectIsKeyed(t *testing.T) {
	o := &Object{Name: "n", Namespace: "ns", Deleting: true}
	if k, err := toolscache.MetaNamespaceKeyFunc(o); err != nil || k != "ns/n" {
		t.Errorf("MetaNamespaceKeyFunc(...) = %q, %v; want \"ns/n\"", k, err)
	}
	if idx, err := toolscache.MetaNamespaceIndexFunc(o); err != nil || len(idx) != 1 || idx[0] != "ns" {
		t.Errorf("MetaNamespaceIndexFunc(...) = %v, %v; want [ns]", idx, err)
	}
	if o.GetDeletionTimestamp() == nil {
		t.Error("GetDeletionTimestamp() of a deleting object = nil, want a timestamp")
	}
}

func TestSameVersion(t *testing.T) {
	obj := func(rv string) *Object { return &Object{Name: "n", ResourceVersion: rv} }
	cases := map[string]struct {
		reason  string
		was, is any
		want    bool
	}{
		"Relist": {
			reason: "A relist delivers an object that did not change at the version held: no change.",
			was:    obj("7"), is: obj("7"), want: true,
		},
		"Changed": {
			reason: "A new version is a change.",
			was:    obj("7"), is: obj("8"),
		},
		"NoVersion": {
			reason: "Objects without a version are never taken as the same.",
			was:    obj(""), is: obj(""),
		},
		"NotMetadata": {
			reason: "Anything the transform did not produce is treated as a change.",
			was:    "tombstone", is: obj("7"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := sameVersion(tc.was, tc.is); got != tc.want {
				t.Errorf("\n%s\nsameVersion(...) = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
