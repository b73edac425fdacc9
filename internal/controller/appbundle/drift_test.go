package appbundle

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

func ab(mutate ...func(*v1alpha1.AppBundle)) *v1alpha1.AppBundle {
	a := &v1alpha1.AppBundle{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps"},
		Spec:       v1alpha1.AppBundleSpec{ForProvider: v1alpha1.AppBundleParameters{Image: "nginx:1.21"}},
	}
	for _, m := range mutate {
		m(a)
	}
	return a
}

func TestPVCDiff(t *testing.T) {
	existing := typed[corev1.PersistentVolumeClaim](t, desiredPVC(ab(), true))
	cases := map[string]struct {
		reason     string
		want       *v1alpha1.AppBundle
		got        *corev1.PersistentVolumeClaim
		drifted    bool
		expandable bool
		result     pvcChange
	}{
		"UpToDate": {
			reason: "A claim as wanted needs no write.",
			want:   ab(), got: existing,
			result: pvcChange{},
		},
		"Drifted": {
			reason: "A claim whose fields the provider owns drifted is written.",
			want:   ab(), got: existing, drifted: true,
			result: pvcChange{Apply: true},
		},
		"DriftedButRefused": {
			reason: "A refused change is never written, whatever else drifted.",
			want:   ab(size("500Mi")), got: existing, drifted: true,
			result: pvcChange{Refused: `PersistentVolumeClaim "web-data" cannot shrink from 1Gi to 500Mi`},
		},
		"Shrink": {
			reason: "A claim never shrinks.",
			want:   ab(size("500Mi")), got: existing,
			result: pvcChange{Refused: `PersistentVolumeClaim "web-data" cannot shrink from 1Gi to 500Mi`},
		},
		"GrowNotExpandable": {
			reason: "A claim grows only where its class allows expansion.",
			want:   ab(size("2Gi")), got: existing,
			result: pvcChange{Refused: `PersistentVolumeClaim "web-data" cannot grow from 1Gi to 2Gi: its storage class does not allow volume expansion`},
		},
		"GrowExpandable": {
			reason: "An expandable claim is grown.",
			want:   ab(size("2Gi")), got: existing, drifted: true, expandable: true,
			result: pvcChange{Apply: true},
		},
		"AccessModes": {
			reason: "Access modes are immutable.",
			want: ab(func(a *v1alpha1.AppBundle) {
				a.Spec.ForProvider.Storage.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
			}), got: existing,
			result: pvcChange{Refused: `accessModes of PersistentVolumeClaim "web-data" cannot change from [ReadWriteOnce] to [ReadWriteMany] once it exists`},
		},
		"StorageClass": {
			reason: "The storage class is immutable.",
			want:   ab(func(a *v1alpha1.AppBundle) { a.Spec.ForProvider.Storage.StorageClassName = ptr.To("fast") }), got: existing,
			result: pvcChange{Refused: `storageClassName of PersistentVolumeClaim "web-data" cannot change once it exists`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := pvcDiff(desiredPVC(tc.want, true), tc.got, tc.drifted, tc.expandable)
			if diff := cmp.Diff(tc.result, got); diff != "" {
				t.Errorf("\n%s\npvcDiff(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDifferReportsOnlyFieldsTheProviderOwns(t *testing.T) {
	deployment := func(mutate func(*appsv1ac.DeploymentApplyConfiguration)) *appsv1ac.DeploymentApplyConfiguration {
		d := appsv1ac.Deployment("web", "apps").WithSpec(appsv1ac.DeploymentSpec().WithTemplate(corev1ac.PodTemplateSpec().WithSpec(
			corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("app").WithImage("nginx:1.21").
				WithEnv(corev1ac.EnvVar().WithName("MODE").WithValue("prod")).
				WithResources(corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}))))))
		if mutate != nil {
			mutate(d)
		}
		return d
	}
	container := func(d *appsv1ac.DeploymentApplyConfiguration) *corev1ac.ContainerApplyConfiguration {
		return &d.Spec.Template.Spec.Containers[0]
	}
	cases := map[string]struct {
		reason string
		owned  *appsv1ac.DeploymentApplyConfiguration
		want   bool
	}{
		"Same": {
			reason: "What the provider owns as it wants it is no drift.",
			owned:  deployment(nil),
			want:   false,
		},
		"QuantityForm": {
			reason: "1024Mi is 1Gi: the API server may answer either.",
			owned: deployment(func(d *appsv1ac.DeploymentApplyConfiguration) {
				container(d).Resources.WithRequests(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1024Mi")})
			}),
			want: false,
		},
		"Image": {
			reason: "Another image is drift.",
			owned:  deployment(func(d *appsv1ac.DeploymentApplyConfiguration) { container(d).WithImage("evil") }),
			want:   true,
		},
		"Missing": {
			reason: "A field the provider no longer owns (another manager changed it) is drift.",
			owned:  deployment(func(d *appsv1ac.DeploymentApplyConfiguration) { container(d).Image = nil }),
			want:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fields, err := differ[appsv1.Deployment](deployment(nil), tc.owned)
			if err != nil {
				t.Fatal(err)
			}
			got := len(fields) > 0
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\ndiffer(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}

	// An empty value wanted, and none owned (the API server stores none), is no drift.
	want := deployment(func(d *appsv1ac.DeploymentApplyConfiguration) {
		container(d).WithEnv(corev1ac.EnvVar().WithName("EMPTY").WithValue(""))
	})
	owned := deployment(func(d *appsv1ac.DeploymentApplyConfiguration) {
		container(d).WithEnv(corev1ac.EnvVar().WithName("EMPTY"))
	})
	if d, err := differ[appsv1.Deployment](want, owned); err != nil || len(d) > 0 {
		t.Errorf("an empty value wanted and none owned differ at %q, %v", d, err)
	}
}
