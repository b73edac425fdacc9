package configrollout

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// FuzzReferences builds pod specs that use user-named sources in every way a
// pod can: References finds exactly the non-empty names used, never an image
// pull secret alone, and UsesAny agrees with it.
func FuzzReferences(f *testing.F) {
	f.Add("nginx-conf", "tls", "env", "creds", "projected", "pull", uint8(0xff))
	f.Add("", "", "", "", "", "", uint8(0))
	f.Add("same", "same", "same", "same", "same", "same", uint8(0x55))
	f.Fuzz(func(t *testing.T, cmVol, secVol, cmEnv, secEnv, projected, pull string, where uint8) {
		ref := func(n string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: n} }
		spec := corev1.PodSpec{
			ImagePullSecrets: []corev1.LocalObjectReference{ref(pull)},
			Volumes: []corev1.Volume{
				{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref(cmVol)}}},
				{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secVol}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref(projected)}},
					{Secret: &corev1.SecretProjection{LocalObjectReference: ref(projected)}},
				}}}},
			},
		}
		// Each bit of where puts the env references into one more kind of
		// container, or switches between envFrom and env valueFrom.
		c := corev1.Container{Name: "c"}
		if where&1 == 0 {
			c.EnvFrom = []corev1.EnvFromSource{
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref(cmEnv)}},
				{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref(secEnv)}},
			}
		} else {
			c.Env = []corev1.EnvVar{
				{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref(cmEnv), Key: "k"}}},
				{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: ref(secEnv), Key: "k"}}},
				{Name: "C", Value: pull},
			}
		}
		switch where >> 1 % 3 {
		case 0:
			spec.Containers = []corev1.Container{c}
		case 1:
			spec.InitContainers = []corev1.Container{c}
		default:
			spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon(c)}}
		}

		got := References(&spec)
		wantCM := sets.New(cmVol, cmEnv, projected)
		wantSec := sets.New(secVol, secEnv, projected)
		wantCM.Delete("")
		wantSec.Delete("")
		if !got.ConfigMaps.Equal(wantCM) || !got.Secrets.Equal(wantSec) {
			t.Fatalf("References(...) = %v, %v; want %v, %v", sets.List(got.ConfigMaps), sets.List(got.Secrets), sets.List(wantCM), sets.List(wantSec))
		}
		if pull != "" && !wantSec.Has(pull) && UsesAny(&spec, nil, []string{pull}) {
			t.Fatalf("image pull secret %q counts as a use", pull)
		}
		if cmVol != "" && !UsesAny(&spec, []string{cmVol}, nil) {
			t.Fatalf("UsesAny misses ConfigMap %q that References finds", cmVol)
		}
		if UsesAny(&spec, []string{""}, []string{""}) {
			t.Fatal("an empty name counts as a use")
		}
	})
}

// FuzzHashSeparates: contents that differ in kind, name, a key or a value
// hash differently (no two run together into the same bytes), a key filter
// sees only its keys, and Secrets and ConfigMaps with the same data differ.
func FuzzHashSeparates(f *testing.F) {
	f.Add("a", "bc", "ab", "c")
	f.Add("", "", "", "")
	f.Add("k", "\x00absent", "k", "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		one := Content{Kind: KindConfigMap, Name: "n", Data: map[string][]byte{k1: []byte(v1)}}
		two := Content{Kind: KindConfigMap, Name: "n", Data: map[string][]byte{k2: []byte(v2)}}
		if (k1 != k2 || v1 != v2) && Hash(one) == Hash(two) {
			t.Fatalf("{%q: %q} and {%q: %q} hash alike", k1, v1, k2, v2)
		}
		if (k1 == k2 && v1 == v2) && Hash(one) != Hash(two) {
			t.Fatal("equal contents hash differently")
		}
		sec := one
		sec.Kind = KindSecret
		if Hash(sec) == Hash(one) {
			t.Fatal("a Secret hashes like a ConfigMap with the same data")
		}
		named := one
		named.Name = k1 + v1
		if named.Name != one.Name && Hash(named) == Hash(one) {
			t.Fatal("names do not count")
		}
		// A key filter: only the listed key's value counts.
		both := Content{Kind: KindConfigMap, Name: "n", Keys: []string{k1}, Data: map[string][]byte{k1: []byte(v1), k1 + "x": []byte(v2)}}
		filtered := Content{Kind: KindConfigMap, Name: "n", Keys: []string{k1}, Data: map[string][]byte{k1: []byte(v1)}}
		if Hash(both) != Hash(filtered) {
			t.Fatal("a key outside the filter changed the hash")
		}
		// A listed key that is absent differs from one that is empty.
		absent := Content{Kind: KindConfigMap, Name: "n", Keys: []string{k1}, Data: map[string][]byte{}}
		empty := Content{Kind: KindConfigMap, Name: "n", Keys: []string{k1}, Data: map[string][]byte{k1: {}}}
		if Hash(absent) == Hash(empty) {
			t.Fatalf("absent key %q hashes like an empty one", k1)
		}
		missing := Content{Kind: KindConfigMap, Name: "n", Missing: true}
		if Hash(missing) == Hash(Content{Kind: KindConfigMap, Name: "n"}) {
			t.Fatal("a missing source hashes like an empty one")
		}
		if c := Combined([]string{Hash(one), Hash(two)}); c != Combined([]string{Hash(two), Hash(one)}) || len(c) != 32 {
			t.Fatalf("Combined depends on order or has length %d", len(c))
		}
	})
}
