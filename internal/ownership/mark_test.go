package ownership

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const key = "example.clusterops.io/owner"

func obj(l map[string]string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Namespace: "apps", Name: "thing", Labels: l}
}

func TestMarkOn(t *testing.T) {
	mr := &metav1.ObjectMeta{Namespace: "apps", Name: "web", UID: "uid-1"}
	cases := map[string]struct {
		reason string
		mark   Mark
		obj    metav1.Object
		mr     metav1.Object
		want   bool
	}{
		"ByNameOwn":       {"an object labelled with the managed resource's name is its own", ByName(key), obj(map[string]string{key: "web"}), mr, true},
		"ByNameOther":     {"another managed resource's object is not", ByName(key), obj(map[string]string{key: "api"}), mr, false},
		"ByNameUnmarked":  {"an unlabelled object is no one's", ByName(key), obj(nil), mr, false},
		"ByNameOtherKey":  {"another kind's label of the same value proves nothing", ByName(key), obj(map[string]string{"other.clusterops.io/owner": "web"}), mr, false},
		"ByUIDOwn":        {"an object labelled with the managed resource's UID is its own", ByUID(key), obj(map[string]string{key: "uid-1"}), mr, true},
		"ByUIDNameAlike":  {"a managed resource made again under the same name has another UID", ByUID(key), obj(map[string]string{key: "uid-0"}), mr, false},
		"ByUIDNoUID":      {"a managed resource without a UID marks nothing, not every empty label", ByUID(key), obj(map[string]string{key: ""}), &metav1.ObjectMeta{Name: "web"}, false},
		"ByNameEmptyName": {"nor one without a name", ByName(key), obj(map[string]string{key: ""}), &metav1.ObjectMeta{}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.mark.On(tc.obj, tc.mr)); diff != "" {
				t.Errorf("%s\nOn(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMarkSetAndRemove(t *testing.T) {
	mr := &metav1.ObjectMeta{Namespace: "apps", Name: "web", UID: "uid-1"}
	cases := map[string]struct {
		reason     string
		mark       Mark
		labels     map[string]string
		wantSet    map[string]string
		wantRemove map[string]string
	}{
		"ByNameOnNothing": {
			reason:  "Set adds the label to an object without labels; Remove leaves an empty set.",
			mark:    ByName(key),
			wantSet: map[string]string{key: "web"}, wantRemove: map[string]string{},
		},
		"ByUIDKeepsOthers": {
			reason:     "Set and Remove touch only the mark: the labels others set stay.",
			mark:       ByUID(key),
			labels:     map[string]string{"app": "web", key: "stale"},
			wantSet:    map[string]string{"app": "web", key: "uid-1"},
			wantRemove: map[string]string{"app": "web"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := obj(tc.labels)
			tc.mark.Set(o, mr)
			if diff := cmp.Diff(tc.wantSet, o.GetLabels()); diff != "" {
				t.Errorf("%s\nSet(...): -want, +got:\n%s", tc.reason, diff)
			}
			if !tc.mark.On(o, mr) {
				t.Errorf("%s\nOn(...) = false after Set(...)", tc.reason)
			}
			tc.mark.Remove(o)
			if diff := cmp.Diff(tc.wantRemove, o.GetLabels()); diff != "" {
				t.Errorf("%s\nRemove(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMarkSelectors(t *testing.T) {
	mr := &metav1.ObjectMeta{Namespace: "apps", Name: "web", UID: "uid-1"}
	cases := map[string]struct {
		reason     string
		mark       Mark
		labels     map[string]string
		wantOwn    bool
		wantExists bool
		wantOf     string
	}{
		"Own":      {reason: "The managed resource's object is selected by both.", mark: ByName(key), labels: map[string]string{key: "web"}, wantOwn: true, wantExists: true, wantOf: "web"},
		"Sibling":  {reason: "Another managed resource's object of the kind is cached, not listed as this one's.", mark: ByName(key), labels: map[string]string{key: "api"}, wantExists: true, wantOf: "api"},
		"ByUID":    {reason: "A UID mark selects by UID.", mark: ByUID(key), labels: map[string]string{key: "uid-1"}, wantOwn: true, wantExists: true, wantOf: "uid-1"},
		"Unmarked": {reason: "An unmarked object is selected by neither.", mark: ByName(key), labels: map[string]string{"app": "web"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := []any{tc.mark.Selector(mr).Matches(labels.Set(tc.labels)), tc.mark.Exists().Matches(labels.Set(tc.labels))}
			if diff := cmp.Diff([]any{tc.wantOwn, tc.wantExists}, got); diff != "" {
				t.Errorf("%s\n[Selector, Exists] match: -want, +got:\n%s", tc.reason, diff)
			}
			of, _ := tc.mark.Of(obj(tc.labels))
			if diff := cmp.Diff(tc.wantOf, of); diff != "" {
				t.Errorf("%s\nOf(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMarkPanicsOnMalformedKey(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("ByName(\"not a key!\") did not panic")
		}
	}()
	ByName("not a key!")
}
