package configrollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The manager caches every workload of the cluster as metadata, and keeps of
// each only what a ConfigRollout decides on: a large annotation, such as the
// one a client-side apply leaves, is not held.
func TestSlimWorkload(t *testing.T) {
	now := metav1.Now()
	typeMeta := metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	meta := func(m metav1.ObjectMeta) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: typeMeta, ObjectMeta: m}
	}
	full := metav1.ObjectMeta{
		Name: "web", Namespace: "team", UID: "u", ResourceVersion: "7", Generation: 3,
		Labels:            map[string]string{"app": "web"},
		DeletionTimestamp: &now,
		Annotations: map[string]string{
			AnnotationLock: "conf",
			"kubectl.kubernetes.io/last-applied-configuration": `{"the":"whole object"}`,
			"deployment.kubernetes.io/revision":                "4",
		},
		OwnerReferences:   []metav1.OwnerReference{{Name: "owner"}},
		Finalizers:        []string{"f"},
		CreationTimestamp: now,
		ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}
	unlocked := full.DeepCopy()
	delete(unlocked.Annotations, AnnotationLock)
	cases := map[string]struct {
		in   any
		want any
	}{
		"KeepsWhatARolloutReads": {
			in: meta(full),
			want: meta(metav1.ObjectMeta{
				Name: "web", Namespace: "team", UID: "u", ResourceVersion: "7", Generation: 3,
				Labels: map[string]string{"app": "web"}, DeletionTimestamp: &now,
				Annotations: map[string]string{AnnotationLock: "conf"},
			}),
		},
		"NoLockNoAnnotations": {
			in: meta(*unlocked),
			want: meta(metav1.ObjectMeta{
				Name: "web", Namespace: "team", UID: "u", ResourceVersion: "7", Generation: 3,
				Labels: map[string]string{"app": "web"}, DeletionTimestamp: &now,
			}),
		},
		"ATypedObjectLosesOnlyItsManagedFields": {
			in:   &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}},
			want: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"a": "b"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := SlimWorkload(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("-want, +got:\n%s", diff)
			}
		})
	}
}
