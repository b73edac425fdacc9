package appbundle

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

func TestDesiredObjects(t *testing.T) {
	type want struct {
		strategy      appsv1.DeploymentStrategyType
		mountPath     string
		service       bool
		pvcOwned      bool
		deploymentRef bool
	}
	cases := map[string]struct {
		reason string
		ab     *v1alpha1.AppBundle
		local  bool
		want   want
	}{
		"Defaults": {
			reason: "A bare AppBundle: RWO claim at /data, Recreate, no Service, claim not owned (Retain).",
			ab:     ab(), local: true,
			want: want{strategy: appsv1.RecreateDeploymentStrategyType, mountPath: "/data", deploymentRef: true},
		},
		"ReadWriteMany": {
			reason: "A claim many pods can mount allows rolling updates.",
			ab: ab(func(a *v1alpha1.AppBundle) {
				a.Spec.ForProvider.Storage.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
				a.Spec.ForProvider.Storage.MountPath = "/var/lib/app"
			}), local: true,
			want: want{mountPath: "/var/lib/app", deploymentRef: true},
		},
		"ServiceWithPort": {
			reason: "A Service is made when asked for with a port.",
			ab: ab(func(a *v1alpha1.AppBundle) {
				a.Spec.ForProvider.Port = ptr.To[int32](8080)
				a.Spec.ForProvider.Service = v1alpha1.ServiceNodePort
			}), local: true,
			want: want{strategy: appsv1.RecreateDeploymentStrategyType, mountPath: "/data", service: true, deploymentRef: true},
		},
		"ServiceNone": {
			reason: "service: None makes no Service, port or not.",
			ab: ab(func(a *v1alpha1.AppBundle) {
				a.Spec.ForProvider.Port = ptr.To[int32](8080)
				a.Spec.ForProvider.Service = v1alpha1.ServiceNone
			}), local: true,
			want: want{strategy: appsv1.RecreateDeploymentStrategyType, mountPath: "/data", deploymentRef: true},
		},
		"DeletePolicyOwnsClaim": {
			reason: "Under the Delete policy the claim is owned, so it goes with the AppBundle.",
			ab:     ab(func(a *v1alpha1.AppBundle) { a.Spec.ForProvider.PVCDeletionPolicy = v1alpha1.PVCDelete }), local: true,
			want: want{strategy: appsv1.RecreateDeploymentStrategyType, mountPath: "/data", pvcOwned: true, deploymentRef: true},
		},
		"RemoteCluster": {
			reason: "Objects in another cluster get no owner references to an object they cannot see.",
			ab:     ab(func(a *v1alpha1.AppBundle) { a.Spec.ForProvider.PVCDeletionPolicy = v1alpha1.PVCDelete }), local: false,
			want: want{strategy: appsv1.RecreateDeploymentStrategyType, mountPath: "/data"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, p, s := typedDeployment(t, tc.ab, tc.local), typed[corev1.PersistentVolumeClaim](t, desiredPVC(tc.ab, tc.local)), (*corev1.Service)(nil)
			if ac := desiredService(tc.ab, tc.local); ac != nil {
				s = typed[corev1.Service](t, ac)
			}
			got := want{
				strategy:      d.Spec.Strategy.Type,
				mountPath:     d.Spec.Template.Spec.Containers[0].VolumeMounts[0].MountPath,
				service:       s != nil,
				pvcOwned:      len(p.OwnerReferences) > 0,
				deploymentRef: len(d.OwnerReferences) > 0,
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\ndesired objects: -want, +got:\n%s", tc.reason, diff)
			}
			if d.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != p.Name || p.Name != "web-data" {
				t.Errorf("the Deployment does not mount the claim %q", p.Name)
			}
			if !cmp.Equal(d.Spec.Selector.MatchLabels, map[string]string{LabelOwner: "web"}) {
				t.Errorf("selector = %v: it must stay {%s: web}, as a Deployment's selector is immutable", d.Spec.Selector.MatchLabels, LabelOwner)
			}
			if s != nil && (s.Spec.Ports[0].Port != 8080 || s.Spec.Type != corev1.ServiceTypeNodePort || !cmp.Equal(s.Spec.Selector, d.Spec.Selector.MatchLabels)) {
				t.Errorf("Service = %+v, want NodePort 8080 selecting the Deployment's pods", s.Spec)
			}
		})
	}
}

// typed reads an apply configuration as the API type it configures.
func typed[T any](t *testing.T, ac any) *T {
	t.Helper()
	out := new(T)
	if err := convert(ac, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func typedDeployment(t *testing.T, ab *v1alpha1.AppBundle, local bool) *appsv1.Deployment {
	t.Helper()
	ac, err := desiredDeployment(ab, local)
	if err != nil {
		t.Fatal(err)
	}
	return typed[appsv1.Deployment](t, ac)
}

// TestShardLabelOnObjectsOnly: on a sharded provider an AppBundle's objects
// carry its shard, so that the replica acting on it watches them; its pod
// template does not, so that a move to another shard restarts nothing.
func TestShardLabelOnObjectsOnly(t *testing.T) {
	a := ab(func(a *v1alpha1.AppBundle) {
		a.SetLabels(map[string]string{shard.Label: "5"})
		a.Spec.ForProvider.Port = ptr.To[int32](8080)
		a.Spec.ForProvider.Service = v1alpha1.ServiceClusterIP
	})
	d, err := desiredDeployment(a, true)
	if err != nil {
		t.Fatal(err)
	}
	for what, l := range map[string]map[string]string{
		"Deployment": d.Labels,
		"claim":      desiredPVC(a, true).Labels,
		"Service":    desiredService(a, true).Labels,
	} {
		if l[shard.Label] != "5" {
			t.Errorf("%s labels %v, want shard 5", what, l)
		}
	}
	if _, ok := d.Spec.Template.Labels[shard.Label]; ok {
		t.Errorf("pod template labels %v carry the shard: a move would restart the pods", d.Spec.Template.Labels)
	}
	unsharded, err := desiredDeployment(ab(), true)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := unsharded.Labels[shard.Label]; ok {
		t.Errorf("an AppBundle without a shard label made a Deployment labelled %v", unsharded.Labels)
	}
}
