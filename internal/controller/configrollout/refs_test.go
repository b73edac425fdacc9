package configrollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

func TestReferencesFindsEveryConfigurationAPodUses(t *testing.T) {
	cmRef := func(n string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: n} }
	cases := map[string]struct {
		reason string
		spec   corev1.PodSpec
		want   Refs
	}{
		"Nothing": {
			reason: "A pod that uses no configuration references nothing.",
			spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
			want:   Refs{ConfigMaps: sets.New[string](), Secrets: sets.New[string]()},
		},
		"Volumes": {
			reason: "ConfigMap and Secret volumes are references.",
			spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: cmRef("nginx-conf")}}},
				{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls"}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			}},
			want: Refs{ConfigMaps: sets.New("nginx-conf"), Secrets: sets.New("tls")},
		},
		"Projected": {
			reason: "Sources of projected volumes are references.",
			spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: cmRef("settings")}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: cmRef("creds")}},
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			}}}}}},
			want: Refs{ConfigMaps: sets.New("settings"), Secrets: sets.New("creds")},
		},
		"EnvFrom": {
			reason: "envFrom of any container, init containers included, is a reference.",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "i", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: cmRef("init-secret")}}}}},
				Containers:     []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: cmRef("env")}}}}},
			},
			want: Refs{ConfigMaps: sets.New("env"), Secrets: sets.New("init-secret")},
		},
		"EnvValueFrom": {
			reason: "Single keys through env valueFrom are references; field refs are not.",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{
				{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: cmRef("one"), Key: "k"}}},
				{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: cmRef("two"), Key: "k"}}},
				{Name: "C", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "D", Value: "plain"},
			}}}},
			want: Refs{ConfigMaps: sets.New("one"), Secrets: sets.New("two")},
		},
		"ImagePullSecretsDoNotCount": {
			reason: "An image pull secret is not content the workload reads.",
			spec:   corev1.PodSpec{ImagePullSecrets: []corev1.LocalObjectReference{cmRef("registry")}},
			want:   Refs{ConfigMaps: sets.New[string](), Secrets: sets.New[string]()},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, References(&tc.spec)); diff != "" {
				t.Errorf("\n%s\nReferences(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	spec := cases["Volumes"].spec
	if !UsesAny(&spec, []string{"other", "nginx-conf"}, nil) || UsesAny(&spec, []string{"tls"}, []string{"nginx-conf"}) {
		t.Errorf("UsesAny must match names by kind")
	}
}
