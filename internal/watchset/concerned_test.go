package watchset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
)

// TestConcernedRanksChangesAboveLists checks how an event ranks each owner of its object: a change
// is urgent, an initial list routine, except where the list shows the object
// at another version than its owner read, which is a change the owner has
// not seen; an owner that read the object as it is hears nothing of it.
func TestConcernedRanksChangesAboveLists(t *testing.T) {
	configMapsGVR := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	k := key{cluster: "c", Watch: Watch{Resource: configMapsGVR, Namespace: "ns"}}
	cm := func(rv string) []any { return []any{&Object{Namespace: "ns", Name: "conf", ResourceVersion: rv}} }
	readV1 := types.NamespacedName{Namespace: "ns", Name: "read-v1"}
	unread := types.NamespacedName{Namespace: "ns", Name: "unread"}
	cases := map[string]struct {
		reason string
		h      Happening
		objs   []any
		// waiting: both owners wait for the delivering watch to sync.
		waiting bool
		want    []notice
	}{
		"ListedAsRead": {
			reason: "A list showing the object as its reader read it tells the reader nothing; the other owner's is routine.",
			h:      Listed, objs: cm("1"),
			want: []notice{{owner: unread, listed: true}},
		},
		"ListedChangedSinceRead": {
			reason: "A list showing the object changed since its reader read it is a change to the reader, urgent.",
			h:      Listed, objs: cm("2"),
			want: []notice{{owner: readV1}, {owner: unread, listed: true}},
		},
		"Changed": {
			reason: "A change is urgent for every owner that has not read it.",
			h:      Changed, objs: cm("2"),
			want: []notice{{owner: readV1}, {owner: unread}},
		},
		"ChangedAsRead": {
			reason: "A change its reader has read already tells the reader nothing.",
			h:      Changed, objs: cm("1"),
			want: []notice{{owner: unread}},
		},
		"ListedToOwnersWaitingForTheSync": {
			reason: "An owner enqueued once the watch synced decides from the whole list then: a list event is news only where it shows a change since the owner read the object, which stays urgent.",
			h:      Listed, objs: cm("2"), waiting: true,
			want: []notice{{owner: readV1}},
		},
		"ChangedToOwnersWaitingForTheSync": {
			reason: "A change while the watch lists is news to an owner waiting for it all the same.",
			h:      Changed, objs: cm("2"), waiting: true,
			want: []notice{{owner: readV1}, {owner: unread}},
		},
		"Gone": {
			reason: "A deletion concerns every owner, whatever it read.",
			h:      Gone, objs: cm("1"),
			want: []notice{{owner: readV1}, {owner: unread}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := New(logging.NewNopLogger())
			s.reads[readV1] = []read{{object: object{cluster: "c", resource: configMapsGVR, namespace: "ns", name: "conf"}, version: "1"}}
			owners := &ownerSet{}
			owners.add(readV1)
			owners.add(unread)
			from := &running{}
			if tc.waiting {
				from.waiting = map[types.NamespacedName]struct{}{readV1: {}, unread: {}}
			}
			got := s.concerned(from, owners, k, tc.h, tc.objs)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(notice{})); diff != "" {
				t.Errorf("\n%s\nconcerned(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
