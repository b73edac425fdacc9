package appbundle

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	size := func(s string) func(*v1alpha1.AppBundle) {
		return func(a *v1alpha1.AppBundle) { q := resource.MustParse(s); a.Spec.ForProvider.Storage.Size = &q }
	}
	existing := desiredPVC(ab(), true)
	cases := map[string]struct {
		reason     string
		want       *v1alpha1.AppBundle
		got        *corev1.PersistentVolumeClaim
		expandable bool
		result     pvcChange
	}{
		"UpToDate": {
			reason: "A claim as wanted needs no write.",
			want:   ab(), got: existing,
			result: pvcChange{},
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
			want:   ab(size("2Gi")), got: existing, expandable: true,
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
		"LabelsDrifted": {
			reason: "Lost ownership labels are written back.",
			want:   ab(),
			got:    func() *corev1.PersistentVolumeClaim { p := existing.DeepCopy(); p.Labels = nil; return p }(),
			result: pvcChange{Apply: true},
		},
		"PolicyChangedToDelete": {
			reason: "Switching to the Delete policy adds the owner reference.",
			want:   ab(func(a *v1alpha1.AppBundle) { a.Spec.ForProvider.PVCDeletionPolicy = v1alpha1.PVCDelete }), got: existing,
			result: pvcChange{Apply: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := pvcDiff(desiredPVC(tc.want, true), tc.got, tc.expandable)
			if diff := cmp.Diff(tc.result, got); diff != "" {
				t.Errorf("\n%s\npvcDiff(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDeploymentDrifted(t *testing.T) {
	want := desiredDeployment(ab(func(a *v1alpha1.AppBundle) { a.Spec.ForProvider.Port = ptr.To[int32](80) }), true)
	live := func(mutate func(d *appsv1.Deployment)) *appsv1.Deployment {
		d := want.DeepCopy()
		// What the API server and others add must not count as drift.
		d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
		d.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
		d.Spec.Template.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
		d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "3"}
		d.Spec.Replicas = ptr.To[int32](4)
		if mutate != nil {
			mutate(d)
		}
		return d
	}
	cases := map[string]struct {
		reason string
		got    *appsv1.Deployment
		want   bool
	}{
		"Defaulted": {reason: "Defaults, annotations and replicas set by others are not drift.", got: live(nil), want: false},
		"Image":     {reason: "Another image is drift.", got: live(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "x" }), want: true},
		"EnvAddedByOthers": {reason: "An env var others added is theirs: apply leaves it, so it is not drift.", got: live(func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A"}}
		}), want: false},
		"EnvNoLongerWanted": {reason: "An env var the provider applied and no longer wants is drift.", got: live(func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "OLD", Value: "1"}}
			d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: &metav1.FieldsV1{
				Raw: []byte(`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:env":{"k:{\"name\":\"OLD\"}":{".":{},"f:name":{},"f:value":{}}}}}}}}}`),
			}}}
		}), want: true},
		"Port":          {reason: "A changed port is drift.", got: live(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort = 81 }), want: true},
		"Mount":         {reason: "A moved mount is drift.", got: live(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].VolumeMounts[0].MountPath = "/x" }), want: true},
		"Volume":        {reason: "Another claim is drift.", got: live(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "x" }), want: true},
		"LabelRemoved":  {reason: "A removed ownership label is drift.", got: live(func(d *appsv1.Deployment) { d.Labels = nil }), want: true},
		"Strategy":      {reason: "A changed strategy is drift.", got: live(func(d *appsv1.Deployment) { d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType }), want: true},
		"ContainerGone": {reason: "A renamed container is drift.", got: live(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Name = "x" }), want: true},
		"ExtraContainer": {reason: "A sidecar added by others is not drift.", got: live(func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar"})
		}), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, deploymentDrifted(want, tc.got)); diff != "" {
				t.Errorf("\n%s\ndeploymentDrifted(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}

	// Replicas, when the AppBundle sets them, are its own.
	fixed := desiredDeployment(ab(func(a *v1alpha1.AppBundle) { a.Spec.ForProvider.Replicas = ptr.To[int32](2) }), true)
	if !deploymentDrifted(fixed, live(nil)) {
		t.Errorf("replicas 4 where the AppBundle wants 2 is not reported as drift")
	}

	// The variables the AppBundle sets are its own, whatever others add.
	withEnv := desiredDeployment(ab(func(a *v1alpha1.AppBundle) {
		a.Spec.ForProvider.Port = ptr.To[int32](80)
		a.Spec.ForProvider.Env = []corev1.EnvVar{{Name: "MODE", Value: "prod"}}
	}), true)
	envCases := map[string]struct {
		reason string
		env    []corev1.EnvVar
		want   bool
	}{
		"Same":      {reason: "The wanted variable is not drift.", env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}}, want: false},
		"OthersToo": {reason: "Another manager's variable next to it is not drift.", env: []corev1.EnvVar{{Name: "X", Value: "1"}, {Name: "MODE", Value: "prod"}}, want: false},
		"Changed":   {reason: "Another value is drift.", env: []corev1.EnvVar{{Name: "MODE", Value: "dev"}}, want: true},
		"Missing":   {reason: "A missing variable is drift.", env: []corev1.EnvVar{{Name: "X", Value: "1"}}, want: true},
		"NoneAtAll": {reason: "No variables at all is drift.", env: nil, want: true},
	}
	// The API server fills in a fieldRef's apiVersion: not drift.
	byRef := desiredDeployment(ab(func(a *v1alpha1.AppBundle) {
		a.Spec.ForProvider.Port = ptr.To[int32](80)
		a.Spec.ForProvider.Env = []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	}), true)
	stored := live(func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}}
	})
	if deploymentDrifted(byRef, stored) {
		t.Errorf("a fieldRef whose apiVersion the API server defaulted is reported as drift")
	}
	if byRef.Spec.Template.Spec.Containers[0].Env[0].ValueFrom.FieldRef.APIVersion != "" {
		t.Errorf("deploymentDrifted changed the desired Deployment")
	}
	for name, tc := range envCases {
		t.Run("Env"+name, func(t *testing.T) {
			got := live(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Env = tc.env })
			if diff := cmp.Diff(tc.want, deploymentDrifted(withEnv, got)); diff != "" {
				t.Errorf("\n%s\ndeploymentDrifted(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
