package appbundle

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// deployment is a Deployment of AppBundle web at generation gen, as its
// controller last saw it (observed) and with the Available condition avail
// ("" for none).
func deployment(gen, observed int64, avail corev1.ConditionStatus, mut ...func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: gen, ResourceVersion: "1",
			Labels: map[string]string{LabelOwner: "web", labelManagedBy: "provider-clusterops"}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: observed},
	}
	if avail != "" {
		d.Status.Conditions = []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue},
			{Type: appsv1.DeploymentAvailable, Status: avail},
		}
	}
	for _, m := range mut {
		m(d)
	}
	return d
}

func TestDeploymentReady(t *testing.T) {
	cases := map[string]struct {
		reason string
		d      *appsv1.Deployment
		want   bool
	}{
		"Available": {
			reason: "Available as of its current spec is ready.",
			d:      deployment(2, 2, corev1.ConditionTrue),
			want:   true,
		},
		"NotAvailable": {
			reason: "Available=False is not ready.",
			d:      deployment(1, 1, corev1.ConditionFalse),
		},
		"NoConditions": {
			reason: "A Deployment its controller has not written conditions for is not ready.",
			d:      deployment(1, 1, ""),
		},
		"NewSpecNotSeen": {
			reason: "Available speaks of an older spec until the controller sees the new one.",
			d:      deployment(3, 2, corev1.ConditionTrue),
		},
		"JustCreated": {
			reason: "A new Deployment (observedGeneration 0) is not ready.",
			d:      deployment(1, 0, ""),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := deploymentReady(tc.d); got != tc.want {
				t.Errorf("%s\ndeploymentReady(...) = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

func TestDeploymentChanged(t *testing.T) {
	cases := map[string]struct {
		reason   string
		old, new *appsv1.Deployment
		want     bool
	}{
		"StatusChurn": {
			reason: "Replica counts moving while the Deployment comes up are no event.",
			old:    deployment(1, 1, corev1.ConditionFalse),
			new: deployment(1, 1, corev1.ConditionFalse, func(d *appsv1.Deployment) {
				d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.UnavailableReplicas = 1, 1, 1
			}),
		},
		"ObservedWithoutAvailability": {
			reason: "The controller catching up with a spec it cannot yet make available changes no readiness.",
			old:    deployment(1, 0, ""),
			new:    deployment(1, 1, corev1.ConditionFalse),
		},
		"BecomesReady": {
			reason: "Becoming Available is the event the bundle's Ready waits for.",
			old:    deployment(1, 1, corev1.ConditionFalse),
			new: deployment(1, 1, corev1.ConditionTrue, func(d *appsv1.Deployment) {
				d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, 1
			}),
			want: true,
		},
		"StopsBeingReady": {
			reason: "Losing availability is an event.",
			old:    deployment(1, 1, corev1.ConditionTrue),
			new:    deployment(1, 1, corev1.ConditionFalse),
			want:   true,
		},
		"CatchesUpAvailable": {
			reason: "The controller catching up with a new spec it keeps available makes the bundle ready again.",
			old:    deployment(2, 1, corev1.ConditionTrue),
			new:    deployment(2, 2, corev1.ConditionTrue),
			want:   true,
		},
		"SpecEdited": {
			reason: "An edit of the spec (a new generation) may be drift to repair.",
			old:    deployment(1, 0, ""),
			new:    deployment(2, 0, ""),
			want:   true,
		},
		"OwnerLabelRemoved": {
			reason: "A removed owner label changes whose the Deployment is.",
			old:    deployment(1, 1, ""),
			new:    deployment(1, 1, "", func(d *appsv1.Deployment) { delete(d.Labels, LabelOwner) }),
			want:   true,
		},
		"ManagedByChanged": {
			reason: "The bundle sets app.kubernetes.io/managed-by and restores it.",
			old:    deployment(1, 1, ""),
			new:    deployment(1, 1, "", func(d *appsv1.Deployment) { d.Labels[labelManagedBy] = "someone" }),
			want:   true,
		},
		"OtherLabelAdded": {
			reason: "Labels others add are theirs.",
			old:    deployment(1, 1, ""),
			new:    deployment(1, 1, "", func(d *appsv1.Deployment) { d.Labels["team"] = "a" }),
		},
		"AnnotationAdded": {
			reason: "The bundle sets no annotation on its Deployment.",
			old:    deployment(1, 1, ""),
			new: deployment(1, 1, "", func(d *appsv1.Deployment) {
				d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "2"}
			}),
		},
		"Deleting": {
			reason: "A Deployment being deleted is an event.",
			old:    deployment(1, 1, corev1.ConditionTrue),
			new: deployment(1, 1, corev1.ConditionTrue, func(d *appsv1.Deployment) {
				d.DeletionTimestamp = ptr.To(metav1.Now())
			}),
			want: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := deploymentChanged(tc.old, tc.new); got != tc.want {
				t.Errorf("%s\ndeploymentChanged(...) = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

// claim is the data claim of AppBundle web in phase, requesting 1Gi.
func claim(phase corev1.PersistentVolumeClaimPhase, mut ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	p := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "web-data", Namespace: "ns", Labels: map[string]string{LabelOwner: "web", labelManagedBy: "provider-clusterops"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: phase},
	}
	if phase == corev1.ClaimBound {
		p.Spec.VolumeName = "pv-1"
		p.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	}
	for _, m := range mut {
		m(p)
	}
	return p
}

func TestClaimChanged(t *testing.T) {
	cases := map[string]struct {
		reason   string
		old, new *corev1.PersistentVolumeClaim
		want     bool
	}{
		"Binds": {
			reason: "Binding (volume name, phase, capacity) is no event: the Deployment's readiness brings the next reconcile.",
			old:    claim(corev1.ClaimPending),
			new:    claim(corev1.ClaimBound),
		},
		"BindAnnotations": {
			reason: "The binder's annotations are no event.",
			old:    claim(corev1.ClaimPending),
			new: claim(corev1.ClaimPending, func(p *corev1.PersistentVolumeClaim) {
				p.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
			}),
		},
		"Lost": {
			reason: "A lost volume is an event.",
			old:    claim(corev1.ClaimBound),
			new:    claim(corev1.ClaimLost),
			want:   true,
		},
		"Resized": {
			reason: "A bound claim's new capacity (a resize done) is an event.",
			old:    claim(corev1.ClaimBound),
			new: claim(corev1.ClaimBound, func(p *corev1.PersistentVolumeClaim) {
				p.Status.Capacity[corev1.ResourceStorage] = resource.MustParse("2Gi")
			}),
			want: true,
		},
		"RequestEdited": {
			reason: "An edit of the requested size may be a change to refuse or repair.",
			old:    claim(corev1.ClaimBound),
			new: claim(corev1.ClaimBound, func(p *corev1.PersistentVolumeClaim) {
				p.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("5Gi")
			}),
			want: true,
		},
		"OwnerReferenceRemoved": {
			reason: "The owner reference follows the deletion policy.",
			old: claim(corev1.ClaimBound, func(p *corev1.PersistentVolumeClaim) {
				p.OwnerReferences = []metav1.OwnerReference{{Name: "web"}}
			}),
			new:  claim(corev1.ClaimBound),
			want: true,
		},
		"Deleting": {
			reason: "A claim being deleted is an event.",
			old:    claim(corev1.ClaimBound),
			new: claim(corev1.ClaimBound, func(p *corev1.PersistentVolumeClaim) {
				p.DeletionTimestamp = ptr.To(metav1.Now())
			}),
			want: true,
		},
		"Relabelled": {
			reason: "A removed owner label is an event.",
			old:    claim(corev1.ClaimBound),
			new:    claim(corev1.ClaimBound, func(p *corev1.PersistentVolumeClaim) { p.Labels = nil }),
			want:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := claimChanged(tc.old, tc.new); got != tc.want {
				t.Errorf("%s\nclaimChanged(...) = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

func service(mut ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Labels: map[string]string{LabelOwner: "web", labelManagedBy: "provider-clusterops"}},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.0.0.1", Selector: map[string]string{LabelOwner: "web"},
			Ports: []corev1.ServicePort{{Name: "app", Port: 80}},
		},
	}
	for _, m := range mut {
		m(s)
	}
	return s
}

func TestServiceChanged(t *testing.T) {
	cases := map[string]struct {
		reason   string
		old, new *corev1.Service
		want     bool
	}{
		"Status": {
			reason: "A load balancer's status is no event.",
			old:    service(),
			new: service(func(s *corev1.Service) {
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}
			}),
		},
		"PortEdited": {
			reason: "An edited port is drift to repair.",
			old:    service(),
			new:    service(func(s *corev1.Service) { s.Spec.Ports[0].Port = 81 }),
			want:   true,
		},
		"Relabelled": {
			reason: "A removed owner label is an event.",
			old:    service(),
			new:    service(func(s *corev1.Service) { delete(s.Labels, LabelOwner) }),
			want:   true,
		},
		"Deleting": {
			reason: "A Service being deleted is an event.",
			old:    service(),
			new:    service(func(s *corev1.Service) { s.DeletionTimestamp = ptr.To(metav1.Now()) }),
			want:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := serviceChanged(tc.old, tc.new); got != tc.want {
				t.Errorf("%s\nserviceChanged(...) = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

var conditionStatuses = []corev1.ConditionStatus{"", corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}

// fuzzDeployment builds a Deployment from fuzzed fields.
func fuzzDeployment(gen, observed int64, avail uint8, replicas, ready int32, owner string, deleting bool) *appsv1.Deployment {
	return deployment(gen, observed, conditionStatuses[int(avail)%len(conditionStatuses)], func(d *appsv1.Deployment) {
		d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = replicas, ready, ready
		d.Labels[LabelOwner] = owner
		if deleting {
			d.DeletionTimestamp = ptr.To(metav1.Now())
		}
	})
}

// FuzzDeploymentChanged checks the Deployment event filter's promises on any
// pair of Deployments: an update that changes nothing is no event, the filter
// does not depend on the order of the two, a change of readiness or
// generation always is one, and replica counts alone never are.
func FuzzDeploymentChanged(f *testing.F) {
	f.Add(int64(1), int64(0), uint8(0), int32(0), int32(0), "web", false, int64(1), int64(1), uint8(1), int32(1), int32(1), "web", false)
	f.Add(int64(2), int64(1), uint8(1), int32(3), int32(3), "web", false, int64(2), int64(2), uint8(1), int32(3), int32(3), "web", false)
	f.Add(int64(1), int64(1), uint8(1), int32(1), int32(1), "web", false, int64(1), int64(1), uint8(1), int32(1), int32(1), "api", true)
	f.Fuzz(func(t *testing.T, gen1, obs1 int64, av1 uint8, rep1, rdy1 int32, own1 string, del1 bool, gen2, obs2 int64, av2 uint8, rep2, rdy2 int32, own2 string, del2 bool) {
		a := fuzzDeployment(gen1, obs1, av1, rep1, rdy1, own1, del1)
		b := fuzzDeployment(gen2, obs2, av2, rep2, rdy2, own2, del2)
		if deploymentChanged(a, a.DeepCopy()) {
			t.Errorf("an update that changes nothing is an event: %+v", a)
		}
		if deploymentChanged(a, b) != deploymentChanged(b, a) {
			t.Errorf("deploymentChanged depends on the order of %+v and %+v", a, b)
		}
		if (deploymentReady(a) != deploymentReady(b) || gen1 != gen2) && !deploymentChanged(a, b) {
			t.Errorf("a change of readiness or generation is no event: %+v -> %+v", a, b)
		}
		counts := a.DeepCopy()
		counts.Status.Replicas, counts.Status.ReadyReplicas, counts.Status.AvailableReplicas = rep2, rdy2, rdy2
		if deploymentChanged(a, counts) {
			t.Errorf("replica counts alone are an event: %+v -> %+v", a.Status, counts.Status)
		}
	})
}

// FuzzClaimChanged checks the claim event filter: no change is no event, the
// order does not matter, and binding (volume, phase, capacity) never is one.
func FuzzClaimChanged(f *testing.F) {
	f.Add("1Gi", "2Gi", "Pending", "Bound", "web", "web")
	f.Add("1Gi", "1Gi", "Bound", "Lost", "web", "web")
	f.Fuzz(func(t *testing.T, size1, size2, phase1, phase2, owner1, owner2 string) {
		q1, err1 := resource.ParseQuantity(size1)
		q2, err2 := resource.ParseQuantity(size2)
		if err1 != nil || err2 != nil {
			return
		}
		mk := func(q resource.Quantity, phase, owner string) *corev1.PersistentVolumeClaim {
			return claim(corev1.PersistentVolumeClaimPhase(phase), func(p *corev1.PersistentVolumeClaim) {
				p.Spec.Resources.Requests[corev1.ResourceStorage] = q
				p.Labels[LabelOwner] = owner
			})
		}
		a, b := mk(q1, phase1, owner1), mk(q2, phase2, owner2)
		if claimChanged(a, a.DeepCopy()) {
			t.Errorf("an update that changes nothing is an event: %+v", a)
		}
		if claimChanged(a, b) != claimChanged(b, a) {
			t.Errorf("claimChanged depends on the order of %+v and %+v", a, b)
		}
		pending := mk(q1, string(corev1.ClaimPending), owner1)
		bound := pending.DeepCopy()
		bound.Spec.VolumeName, bound.Status.Phase = "pv", corev1.ClaimBound
		bound.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: q2}
		if claimChanged(pending, bound) {
			t.Errorf("binding is an event: %+v -> %+v", pending, bound)
		}
	})
}
