package immortalcontainer

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/target"
)

var created = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// stamps are n creation times a minute apart, from the minute `from`.
func stamps(from, n int) []metav1.Time {
	s := make([]metav1.Time, 0, n)
	for i := range n {
		s = append(s, metav1.NewTime(created.Add(time.Duration(from+i)*time.Minute)))
	}
	return s
}

func runningPod(uid string, at metav1.Time) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "apps", Name: "web-immortalpod", UID: types.UID(uid), CreationTimestamp: at,
			Labels: map[string]string{LabelOwner: "web"},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func newExternal(t *testing.T, objs ...client.Object) *external {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	return &external{cluster: &target.Cluster{Client: c, Local: true}, record: event.NewNopRecorder(), now: func() time.Time { return created }}
}

// TestObserveCountsStarts checks that status.atProvider.startTimes counts every
// pod once, from what status already holds, beyond the bound of the
// timestamps.
func TestObserveCountsStarts(t *testing.T) {
	cases := map[string]struct {
		reason string
		before v1alpha1.ImmortalContainerObservation
		pod    *corev1.Pod
		want   v1alpha1.ImmortalContainerObservation
	}{
		"FirstPod": {
			reason: "The first pod is the first start.",
			pod:    runningPod("a", stamps(0, 1)[0]),
			want:   v1alpha1.ImmortalContainerObservation{CurrentPod: "web-immortalpod", PodUID: "a", StartTimes: 1, StartTimestamps: stamps(0, 1)},
		},
		"Recreated": {
			reason: "A pod with a new UID is the second start and the first restart.",
			before: v1alpha1.ImmortalContainerObservation{CurrentPod: "web-immortalpod", PodUID: "a", StartTimes: 1, StartTimestamps: stamps(0, 1)},
			pod:    runningPod("b", stamps(1, 1)[0]),
			want:   v1alpha1.ImmortalContainerObservation{CurrentPod: "web-immortalpod", PodUID: "b", StartTimes: 2, Restarts: 1, StartTimestamps: stamps(0, 2)},
		},
		"SamePodAfterProviderRestart": {
			reason: "A provider that starts again reads the pod's UID back from status and does not count the pod again.",
			before: v1alpha1.ImmortalContainerObservation{PodUID: "c", StartTimes: 100, Restarts: 99, StartTimestamps: stamps(90, 10)},
			pod:    runningPod("c", stamps(99, 1)[0]),
			want:   v1alpha1.ImmortalContainerObservation{CurrentPod: "web-immortalpod", PodUID: "c", StartTimes: 100, Restarts: 99, StartTimestamps: stamps(90, 10)},
		},
		"PastTheTimestampsBound": {
			reason: "The count goes on past the 10 timestamps kept, which drop the oldest.",
			before: v1alpha1.ImmortalContainerObservation{PodUID: "c", StartTimes: 100, Restarts: 99, StartTimestamps: stamps(90, 10)},
			pod:    runningPod("d", stamps(100, 1)[0]),
			want:   v1alpha1.ImmortalContainerObservation{CurrentPod: "web-immortalpod", PodUID: "d", StartTimes: 101, Restarts: 100, StartTimestamps: stamps(91, 10)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ic := &v1alpha1.ImmortalContainer{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}}
			ic.Status.AtProvider = tc.before
			if _, err := newExternal(t, tc.pod).Observe(context.Background(), ic); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ic.Status.AtProvider); diff != "" {
				t.Errorf("\n%s\nstatus.atProvider: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestRecordStartHundredTimes recreates the pod 99 times: the count says 100,
// the timestamps are the newest 10, newest last.
func TestRecordStartHundredTimes(t *testing.T) {
	o := v1alpha1.ImmortalContainerObservation{}
	for _, s := range stamps(0, 100) {
		recordStart(&o, s)
	}
	want := v1alpha1.ImmortalContainerObservation{StartTimes: 100, Restarts: 99, StartTimestamps: stamps(90, 10)}
	if diff := cmp.Diff(want, o); diff != "" {
		t.Errorf("after 100 starts: -want, +got:\n%s", diff)
	}
}

// TestObservationJSON reads status.atProvider as the API server returns it,
// including the shape earlier releases wrote, where startTimes was the list of
// start times.
func TestObservationJSON(t *testing.T) {
	ts := stamps(0, 3)
	b, err := json.Marshal(ts)
	if err != nil {
		t.Fatal(err)
	}
	list := string(b)
	tenStamps, _ := json.Marshal(stamps(10, 10))
	cases := map[string]struct {
		reason string
		json   string
		want   v1alpha1.ImmortalContainerObservation
	}{
		"Count": {
			reason: "The current shape: a count and a list of timestamps.",
			json:   `{"startTimes": 3, "restarts": 2, "startTimestamps": ` + list + `}`,
			want:   v1alpha1.ImmortalContainerObservation{StartTimes: 3, Restarts: 2, StartTimestamps: ts},
		},
		"Empty": {
			reason: "No starts yet.",
			json:   `{"currentPod": ""}`,
			want:   v1alpha1.ImmortalContainerObservation{},
		},
		"Null": {
			reason: "A null count is no count.",
			json:   `{"startTimes": null, "restarts": 0}`,
			want:   v1alpha1.ImmortalContainerObservation{},
		},
		"LegacyList": {
			reason: "A list in startTimes moves to startTimestamps, and the count is restarts + 1.",
			json:   `{"currentPod": "web-immortalpod", "podUID": "c", "startTimes": ` + list + `, "restarts": 2}`,
			want:   v1alpha1.ImmortalContainerObservation{CurrentPod: "web-immortalpod", PodUID: "c", StartTimes: 3, Restarts: 2, StartTimestamps: ts},
		},
		"LegacyListAtItsBound": {
			reason: "Restarts was never capped, so the count is right where the old list was full.",
			json:   `{"restarts": 19, "startTimes": ` + string(tenStamps) + `}`,
			want:   v1alpha1.ImmortalContainerObservation{StartTimes: 20, Restarts: 19, StartTimestamps: stamps(10, 10)},
		},
		"LegacyEmptyList": {
			reason: "An empty list is no start.",
			json:   `{"startTimes": []}`,
			want:   v1alpha1.ImmortalContainerObservation{StartTimestamps: []metav1.Time{}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := v1alpha1.ImmortalContainerObservation{}
			if err := json.Unmarshal([]byte(tc.json), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nUnmarshal(%s): -want, +got:\n%s", tc.reason, tc.json, diff)
			}
			// What the controller writes back is the current shape, read the same.
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			again := v1alpha1.ImmortalContainerObservation{}
			if err := json.Unmarshal(b, &again); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, again, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nround trip of %s: -want, +got:\n%s", tc.reason, b, diff)
			}
		})
	}

	// Read into an observation that held other timestamps (a client reading
	// into the object it read before), the earlier list is what it holds.
	reused := v1alpha1.ImmortalContainerObservation{StartTimes: 12, StartTimestamps: stamps(50, 10)}
	if err := json.Unmarshal([]byte(`{"startTimes": `+list+`, "restarts": 2}`), &reused); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(v1alpha1.ImmortalContainerObservation{StartTimes: 3, Restarts: 2, StartTimestamps: ts}, reused); diff != "" {
		t.Errorf("earlier list read into a used observation: -want, +got:\n%s", diff)
	}

	// A whole ImmortalContainer, as the API server returns one, decodes too.
	ic := &v1alpha1.ImmortalContainer{}
	if err := json.Unmarshal([]byte(`{"status": {"atProvider": {"startTimes": `+list+`, "restarts": 2}, "conditions": [{"type": "Ready", "status": "True"}]}}`), ic); err != nil {
		t.Fatal(err)
	}
	if ic.Status.AtProvider.StartTimes != 3 || len(ic.Status.AtProvider.StartTimestamps) != 3 || len(ic.Status.Conditions) != 1 {
		t.Errorf("decoded status = %+v, want 3 starts, 3 timestamps and the condition", ic.Status)
	}
}
