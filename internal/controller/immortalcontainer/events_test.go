package immortalcontainer

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
)

// pod is ImmortalContainer web's pod in phase, Ready (ready) or not, as the
// provider made it; mut changes it further.
func pod(phase corev1.PodPhase, ready bool, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-immortalpod", Namespace: "ns", UID: "u1", ResourceVersion: "1",
			Labels:      map[string]string{LabelOwner: "web", "app.kubernetes.io/managed-by": "provider-clusterops"},
			Annotations: map[string]string{annotationSpecHash: "h1"}},
		Status: corev1.PodStatus{Phase: phase},
	}
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	for _, m := range mut {
		m(p)
	}
	return p
}

func withIP(ip string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Status.PodIP = ip } }

func deletingPod(p *corev1.Pod) {
	t := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p.DeletionTimestamp = &t
}

func TestPodChanged(t *testing.T) {
	cases := map[string]struct {
		reason   string
		old, new *corev1.Pod
		want     bool
	}{
		"Bound": {
			reason: "The scheduler binding a pending pod to a node is no event.",
			old:    pod(corev1.PodPending, false),
			new: pod(corev1.PodPending, false, func(p *corev1.Pod) {
				p.Spec.NodeName = "kwok-node"
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
			}),
		},
		"RunningNotReady": {
			reason: "A phase change that leaves the pod not ready is no event: the phase is only shown.",
			old:    pod(corev1.PodPending, false),
			new:    pod(corev1.PodRunning, false),
		},
		"BecameReady": {
			reason: "A pod turning Ready makes its ImmortalContainer Ready.",
			old:    pod(corev1.PodPending, false),
			new:    pod(corev1.PodRunning, true, withIP("10.0.0.1")),
			want:   true,
		},
		"NoLongerReady": {
			reason: "A running pod that stops being Ready makes its ImmortalContainer Unavailable.",
			old:    pod(corev1.PodRunning, true, withIP("10.0.0.1")),
			new:    pod(corev1.PodRunning, false, withIP("10.0.0.1")),
			want:   true,
		},
		"Ended": {
			reason: "A pod that ended is replaced.",
			old:    pod(corev1.PodRunning, true, withIP("10.0.0.1")),
			new:    pod(corev1.PodFailed, false, withIP("10.0.0.1")),
			want:   true,
		},
		"SucceededAfterFailed": {
			reason: "Both ends are ends: nothing more to act on.",
			old:    pod(corev1.PodFailed, false),
			new:    pod(corev1.PodSucceeded, false),
		},
		"Terminating": {
			reason: "A pod being deleted takes its IP with it and is replaced once gone.",
			old:    pod(corev1.PodRunning, true, withIP("10.0.0.1")),
			new:    pod(corev1.PodRunning, true, withIP("10.0.0.1"), deletingPod),
			want:   true,
		},
		"GotIP": {
			reason: "The pod's IP is a connection detail.",
			old:    pod(corev1.PodPending, false),
			new:    pod(corev1.PodPending, false, withIP("10.0.0.1")),
			want:   true,
		},
		"Relabelled": {
			reason: "The owner label says whose the pod is.",
			old:    pod(corev1.PodRunning, true),
			new:    pod(corev1.PodRunning, true, func(p *corev1.Pod) { p.Labels[LabelOwner] = "api" }),
			want:   true,
		},
		"SpecHashEdited": {
			reason: "The spec hash says whether the pod is up to date.",
			old:    pod(corev1.PodRunning, true),
			new:    pod(corev1.PodRunning, true, func(p *corev1.Pod) { p.Annotations[annotationSpecHash] = "h2" }),
			want:   true,
		},
		"OthersLabels": {
			reason: "Labels and annotations others add are theirs.",
			old:    pod(corev1.PodRunning, true),
			new: pod(corev1.PodRunning, true, func(p *corev1.Pod) {
				p.Labels["team"] = "a"
				p.Annotations["note"] = "b"
				p.ResourceVersion = "2"
			}),
		},
		"ContainerStatusChurn": {
			reason: "Container statuses and conditions other than Ready changing on a ready pod are no event.",
			old:    pod(corev1.PodRunning, true),
			new: pod(corev1.PodRunning, true, func(p *corev1.Pod) {
				p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue})
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Ready: true, RestartCount: 0}}
			}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := map[string]bool{"old→new": tc.want, "new→old": tc.want}
			got := map[string]bool{"old→new": podChanged(tc.old, tc.new), "new→old": podChanged(tc.new, tc.old)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\npodChanged(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPodEvents(t *testing.T) {
	p := podEvents()
	cases := map[string]struct {
		reason string
		passes func() bool
		want   bool
	}{
		"CreatedPending": {
			reason: "The creation of a new pod is the provider's own: the managed reconciler observes it after every create anyway.",
			passes: func() bool { return p.Create(ctrlevent.CreateEvent{Object: pod(corev1.PodPending, false)}) },
		},
		"ListedRunning": {
			reason: "A running pod listed at a restart: every ImmortalContainer is reconciled from its own list.",
			passes: func() bool { return p.Create(ctrlevent.CreateEvent{Object: pod(corev1.PodRunning, true)}) },
		},
		"ListedEnded": {
			reason: "An ended pod seen first in a list is replaced at once.",
			passes: func() bool { return p.Create(ctrlevent.CreateEvent{Object: pod(corev1.PodFailed, false)}) },
			want:   true,
		},
		"ListedTerminating": {
			reason: "A pod seen first while being deleted concerns its ImmortalContainer.",
			passes: func() bool { return p.Create(ctrlevent.CreateEvent{Object: pod(corev1.PodRunning, true, deletingPod)}) },
			want:   true,
		},
		"UpdateReady": {
			reason: "Updates pass as podChanged says.",
			passes: func() bool {
				return p.Update(ctrlevent.UpdateEvent{ObjectOld: pod(corev1.PodPending, false), ObjectNew: pod(corev1.PodRunning, true)})
			},
			want: true,
		},
		"UpdateBound": {
			reason: "Updates pass as podChanged says.",
			passes: func() bool {
				return p.Update(ctrlevent.UpdateEvent{ObjectOld: pod(corev1.PodPending, false), ObjectNew: pod(corev1.PodPending, false, func(p *corev1.Pod) { p.Spec.NodeName = "n" })})
			},
		},
		"Deleted": {
			reason: "A pod gone is replaced on its deletion event.",
			passes: func() bool { return p.Delete(ctrlevent.DeleteEvent{Object: pod(corev1.PodRunning, true)}) },
			want:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.passes(); got != tc.want {
				t.Errorf("%s\npasses = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

// FuzzPodChanged checks the pod event filter: an update that changes nothing
// is no event, the order of old and new does not matter, every change of
// readiness, end, deletion or IP is one, and binding to a node never is.
func FuzzPodChanged(f *testing.F) {
	f.Add("Pending", false, "", false, "web", "Running", true, "10.0.0.1", false, "web")
	f.Add("Running", true, "10.0.0.1", false, "web", "Failed", false, "10.0.0.1", false, "web")
	f.Add("Running", true, "10.0.0.1", false, "web", "Running", true, "10.0.0.1", true, "web")
	f.Fuzz(func(t *testing.T, phase1 string, ready1 bool, ip1 string, del1 bool, own1 string, phase2 string, ready2 bool, ip2 string, del2 bool, own2 string) {
		mk := func(phase string, ready bool, ip string, del bool, own string) *corev1.Pod {
			return pod(corev1.PodPhase(phase), ready, withIP(ip), func(p *corev1.Pod) {
				p.Labels[LabelOwner] = own
				if del {
					deletingPod(p)
				}
			})
		}
		a, b := mk(phase1, ready1, ip1, del1, own1), mk(phase2, ready2, ip2, del2, own2)
		if podChanged(a, a.DeepCopy()) {
			t.Errorf("an update that changes nothing is an event: %+v", a)
		}
		if podChanged(a, b) != podChanged(b, a) {
			t.Errorf("podChanged depends on the order of %+v and %+v", a, b)
		}
		if (running(a) != running(b) || ended(a) != ended(b) || del1 != del2 || ip1 != ip2) && !podChanged(a, b) {
			t.Errorf("a change of readiness, end, deletion or IP is no event: %+v -> %+v", a.Status, b.Status)
		}
		bound := a.DeepCopy()
		bound.Spec.NodeName = "kwok-node"
		bound.Status.Conditions = append(bound.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
		if podChanged(a, bound) {
			t.Errorf("binding is an event: %+v", a)
		}
	})
}
