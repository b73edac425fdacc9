package configrollout

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// FuzzWorkloadHash builds a pod that reads user-named keys of a ConfigMap
// (env valueFrom, volume items) or all of it (envFrom), and a source with a
// user key filter: a change to a key the pod does not read, or that the
// filter leaves out, never changes the workload's hash; a change to one it
// reads and the filter lets through always does.
func FuzzWorkloadHash(f *testing.F) {
	f.Add("PORT", "nginx.conf", "LOG_LEVEL", "", "v", uint8(0))
	f.Add("a", "a", "b", "a", "", uint8(1))
	f.Add("", "", "", "", "", uint8(3))
	f.Fuzz(func(t *testing.T, envKey, itemKey, other, filter, value string, how uint8) {
		ref := corev1.LocalObjectReference{Name: "app"}
		c := corev1.Container{Name: "c", Env: []corev1.EnvVar{{Name: "E", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref, Key: envKey}}}}}
		wholeRead := how&1 == 1 || envKey == ""
		if how&1 == 1 {
			c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref}}}
		}
		spec := corev1.PodSpec{Containers: []corev1.Container{c}}
		readKeys := sets.New(envKey)
		if how&2 == 2 {
			spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref, Items: []corev1.KeyToPath{{Key: itemKey, Path: "p"}}}}}}
			readKeys.Insert(itemKey)
			wholeRead = wholeRead || itemKey == ""
		}
		uses := KeysRead(&spec)
		if got := References(&spec); !got.ConfigMaps.Equal(sets.New("app")) || got.Secrets.Len() != 0 {
			t.Fatalf("References = %v, %v; want the ConfigMap app alone", sets.List(got.ConfigMaps), sets.List(got.Secrets))
		}
		if uses.ConfigMaps["app"].Whole != wholeRead {
			t.Fatalf("KeysRead says whole=%t, want %t", uses.ConfigMaps["app"].Whole, wholeRead)
		}
		var filterKeys []string
		if filter != "" {
			filterKeys = []string{filter}
		}
		counts := func(k string) bool {
			return (wholeRead || readKeys.Has(k)) && (filter == "" || k == filter)
		}
		data := map[string][]byte{envKey: []byte("e"), itemKey: []byte("i"), other: []byte("o")}
		base := Content{Kind: KindConfigMap, Name: "app", Keys: filterKeys, Data: data}
		before := WorkloadHash([]Content{base}, uses)
		changed := Content{Kind: KindConfigMap, Name: "app", Keys: filterKeys, Data: map[string][]byte{}}
		for k, v := range data {
			changed.Data[k] = v
		}
		changed.Data[other] = append(append([]byte{}, changed.Data[other]...), "x"+value...)
		after := WorkloadHash([]Content{changed}, uses)
		if counts(other) && before == after {
			t.Fatalf("a change to key %q, which the pod reads and the filter %q lets through, did not change the hash", other, filter)
		}
		if !counts(other) && before != after {
			t.Fatalf("a change to key %q, which the pod does not read (whole=%t, keys %v) or the filter %q leaves out, changed the hash", other, wholeRead, sets.List(readKeys), filter)
		}
		if k, reads := ReadKeys(filterKeys, uses.ConfigMaps["app"]); reads && filter != "" && (len(k) != 1 || k[0] != filter) {
			t.Fatalf("ReadKeys(%q, ...) = %v: keys outside the filter", filter, k)
		}
	})
}

// FuzzReadersIndex drives readers with learns, forgets and events of a few
// workloads in any order: the workloads it names as reading a source are
// exactly those it knows read it, and none is unread at a generation it
// knows.
func FuzzReadersIndex(f *testing.F) {
	f.Add([]byte{0x00, 0x11, 0x22, 0x43, 0x05, 0x80, 0x61})
	f.Add([]byte{0xc1, 0x12, 0x13, 0x51, 0x91, 0x32, 0xe3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const ns = "ns"
		rd := newReaders(nil)
		rd.spaces[ns] = &space{noted: true, unread: map[string]int64{}}
		srcs := []string{"a", "b", "c", "d"}
		for _, op := range ops {
			// op: 2 bits what, 2 bits which workload, 2 bits generation, 2 bits source.
			name := string(rune('p' + op>>2&3))
			gen := int64(op>>4&3) + 1
			m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: gen}}
			switch op & 3 {
			case 0, 1:
				tmpl := &corev1.PodTemplateSpec{}
				tmpl.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: srcs[op>>6]}}}}}
				rd.learn(KindDeployment, m, tmpl)
			case 2:
				rd.forget(KindDeployment, m)
			default:
				rd.seen(KindDeployment, m)
			}
			for _, src := range srcs {
				want := sets.New[string]()
				for k, at := range rd.by {
					if sets.New(at.sources...).Has(autoSource(KindConfigMap, src)) {
						want.Insert(strings.TrimPrefix(k.Name, KindDeployment+"/"))
					}
				}
				got := sets.New[string]()
				for _, ref := range rd.readersOf(ns, []string{autoSource(KindConfigMap, src)}) {
					got.Insert(ref.Name)
				}
				if !got.Equal(want) {
					t.Fatalf("after op %#x: readers of %s %v, known to read it %v", op, src, sets.List(got), sets.List(want))
				}
			}
			for k, g := range rd.spaces[ns].unread {
				if at, ok := rd.by[types.NamespacedName{Namespace: ns, Name: k}]; ok && at.generation >= g {
					t.Fatalf("after op %#x: %s unread at %d, known at %d", op, k, g, at.generation)
				}
			}
		}
		for u, s := range rd.users {
			if s.Len() == 0 {
				t.Fatalf("an empty set of readers of %s is kept", u)
			}
		}
	})
}
