package configrollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

func useWhole() Use               { return Use{Whole: true, Keys: sets.New[string]()} }
func useKeys(k ...string) Use     { return Use{Keys: sets.New(k...)} }
func useWholeAnd(k ...string) Use { return Use{Whole: true, Keys: sets.New(k...)} }
func keyItems(k ...string) []corev1.KeyToPath {
	out := make([]corev1.KeyToPath, 0, len(k))
	for _, x := range k {
		out = append(out, corev1.KeyToPath{Key: x, Path: x})
	}
	return out
}

func TestKeysRead(t *testing.T) {
	ref := func(n string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: n} }
	cmKey := func(n, k string) corev1.EnvVar {
		return corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref(n), Key: k}}}
	}
	secKey := func(n, k string) corev1.EnvVar {
		return corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: ref(n), Key: k}}}
	}
	cases := map[string]struct {
		reason string
		spec   corev1.PodSpec
		want   Uses
	}{
		"Nothing": {
			reason: "A pod that uses no configuration reads nothing.",
			spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
			want:   Uses{ConfigMaps: map[string]Use{}, Secrets: map[string]Use{}},
		},
		"EnvValueFrom": {
			reason: "env valueFrom reads single keys; a field ref or a plain value reads nothing.",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{
				cmKey("app", "LOG_LEVEL"), cmKey("app", "PORT"), secKey("db", "password"),
				{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "PLAIN", Value: "x"},
			}}}},
			want: Uses{ConfigMaps: map[string]Use{"app": useKeys("LOG_LEVEL", "PORT")}, Secrets: map[string]Use{"db": useKeys("password")}},
		},
		"EnvFrom": {
			reason: "envFrom reads the whole source, whatever its prefix.",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{
				{Prefix: "APP_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("app")}},
				{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("db")}},
			}}}},
			want: Uses{ConfigMaps: map[string]Use{"app": useWhole()}, Secrets: map[string]Use{"db": useWhole()}},
		},
		"VolumeItems": {
			reason: "Volume items read their keys; a volume without items reads the whole source.",
			spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("nginx"), Items: keyItems("nginx.conf")}}},
				{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", Items: keyItems("tls.crt", "tls.key")}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("all")}}},
			}},
			want: Uses{ConfigMaps: map[string]Use{"nginx": useKeys("nginx.conf"), "all": useWhole()}, Secrets: map[string]Use{"tls": useKeys("tls.crt", "tls.key")}},
		},
		"Projected": {
			reason: "Projected sources read their items' keys, or the whole source without items.",
			spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("settings"), Items: keyItems("a")}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: ref("creds")}},
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			}}}}}},
			want: Uses{ConfigMaps: map[string]Use{"settings": useKeys("a")}, Secrets: map[string]Use{"creds": useWhole()}},
		},
		"WholeWins": {
			reason: "A source read whole in one place and by key in another is read whole; keys of every container count.",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "i", Env: []corev1.EnvVar{cmKey("app", "MIGRATE")}}},
				Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{cmKey("app", "PORT")}, EnvFrom: []corev1.EnvFromSource{
					{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("app")}},
				}}},
				EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e", Env: []corev1.EnvVar{secKey("db", "user")}}}},
			},
			want: Uses{ConfigMaps: map[string]Use{"app": useWholeAnd("MIGRATE", "PORT")}, Secrets: map[string]Use{"db": useKeys("user")}},
		},
		"EmptyNamesAndKeys": {
			reason: "An empty name is no source; an empty key (refused by the API server) reads the whole source, to be safe.",
			spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{cmKey("", "k"), cmKey("app", "")}}}},
			want:   Uses{ConfigMaps: map[string]Use{"app": useWhole()}, Secrets: map[string]Use{}},
		},
		"EmptyItemKey": {
			reason: "Volume items with an empty key (refused by the API server) read the whole source, to be safe; no items at all read the whole source too.",
			spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "odd"}, Items: keyItems("k", "")}}},
				{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", Items: []corev1.KeyToPath{}}}},
			}},
			want: Uses{ConfigMaps: map[string]Use{"odd": useWhole()}, Secrets: map[string]Use{"tls": useWhole()}},
		},
		"ImagePullSecretsDoNotCount": {
			reason: "An image pull secret is not content the workload reads.",
			spec:   corev1.PodSpec{ImagePullSecrets: []corev1.LocalObjectReference{ref("registry")}},
			want:   Uses{ConfigMaps: map[string]Use{}, Secrets: map[string]Use{}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, KeysRead(&tc.spec)); diff != "" {
				t.Errorf("\n%s\nKeysRead(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestReadKeys(t *testing.T) {
	type want struct {
		keys  []string
		reads bool
	}
	cases := map[string]struct {
		reason string
		filter []string
		use    Use
		want   want
	}{
		"WholeNoFilter": {
			reason: "A pod that reads the whole source sees every key.",
			use:    useWhole(),
			want:   want{reads: true},
		},
		"WholeFiltered": {
			reason: "A pod that reads the whole source sees every key the filter lets through.",
			filter: []string{"b", "a"},
			use:    useWholeAnd("x"),
			want:   want{keys: []string{"b", "a"}, reads: true},
		},
		"KeysNoFilter": {
			reason: "A pod that reads single keys sees those, in order.",
			use:    useKeys("z", "a"),
			want:   want{keys: []string{"a", "z"}, reads: true},
		},
		"KeysFiltered": {
			reason: "Of the keys a pod reads, only the ones the filter lists count.",
			filter: []string{"a", "b"},
			use:    useKeys("b", "c"),
			want:   want{keys: []string{"b"}, reads: true},
		},
		"NothingThatCounts": {
			reason: "A pod that reads only keys outside the filter reads nothing that counts.",
			filter: []string{"a"},
			use:    useKeys("c"),
			want:   want{keys: []string{}, reads: false},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			k, r := ReadKeys(tc.filter, tc.use)
			if diff := cmp.Diff(tc.want, want{keys: k, reads: r}, cmp.AllowUnexported(want{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nReadKeys(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWorkloadHash(t *testing.T) {
	app := func(level, port string) Content {
		return Content{Kind: KindConfigMap, Name: "app", Data: map[string][]byte{"LOG_LEVEL": []byte(level), "PORT": []byte(port)}}
	}
	db := func(pw string) Content {
		return Content{Kind: KindSecret, Name: "db", Data: map[string][]byte{"password": []byte(pw)}}
	}
	all := func(cs ...Content) string {
		h := make([]string, 0, len(cs))
		for _, c := range cs {
			h = append(h, Hash(c))
		}
		return Combined(h)
	}
	readsPort := Uses{ConfigMaps: map[string]Use{"app": useKeys("PORT")}, Secrets: map[string]Use{}}
	readsAll := Uses{ConfigMaps: map[string]Use{"app": useWhole()}, Secrets: map[string]Use{"db": useWhole()}}
	cases := map[string]struct {
		reason string
		a, b   []Content
		uses   Uses
		same   bool
	}{
		"UnreadKeyChanged": {
			reason: "A change to a key the pods do not read rolls nothing.",
			a:      []Content{app("info", "80")}, b: []Content{app("debug", "80")},
			uses: readsPort, same: true,
		},
		"ReadKeyChanged": {
			reason: "A change to a key the pods read rolls them.",
			a:      []Content{app("info", "80")}, b: []Content{app("info", "81")},
			uses: readsPort, same: false,
		},
		"UnreadSourceChanged": {
			reason: "A change to a source the pods do not read rolls nothing.",
			a:      []Content{app("info", "80"), db("a")}, b: []Content{app("info", "80"), db("b")},
			uses: readsPort, same: true,
		},
		"WholeSourceChanged": {
			reason: "Pods that read a whole source roll on any change of it.",
			a:      []Content{app("info", "80"), db("a")}, b: []Content{app("debug", "80"), db("a")},
			uses: readsAll, same: false,
		},
		"FilterStillApplies": {
			reason: "A source's own key filter still applies to pods that read it whole.",
			a:      []Content{withKeys(app("info", "80"), "PORT")}, b: []Content{withKeys(app("debug", "80"), "PORT")},
			uses: readsAll, same: true,
		},
		"ReadKeyGoesMissing": {
			reason: "A key the pods read that is removed from the source rolls them.",
			a:      []Content{app("info", "80")},
			b:      []Content{{Kind: KindConfigMap, Name: "app", Data: map[string][]byte{"LOG_LEVEL": []byte("info")}}},
			uses:   readsPort, same: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, b := WorkloadHash(tc.a, tc.uses), WorkloadHash(tc.b, tc.uses)
			if (a == b) != tc.same {
				t.Errorf("\n%s\nWorkloadHash: %s and %s, want same=%t", tc.reason, a, b, tc.same)
			}
		})
	}
	// Pods that read every source whole carry the hash of all sources, as
	// every workload did before keys were told apart: an upgrade rolls none.
	cs := []Content{withKeys(app("info", "80"), "PORT"), db("a")}
	if got, want := WorkloadHash(cs, readsAll), all(cs...); got != want {
		t.Errorf("WorkloadHash of whole reads = %s, want the hash of all sources %s", got, want)
	}
}

func withKeys(c Content, k ...string) Content {
	c.Keys = k
	return c
}

func TestUpToDate(t *testing.T) {
	cases := map[string]struct {
		reason             string
		carried, want, all string
		upToDate           bool
	}{
		"CarriesWant":    {reason: "A workload that carries its hash is current.", carried: "w", want: "w", all: "a", upToDate: true},
		"CarriesAll":     {reason: "A workload rolled to the hash of every source's current content is current whatever it reads.", carried: "a", want: "w", all: "a", upToDate: true},
		"CarriesOld":     {reason: "A workload that carries an older hash is rolled.", carried: "old", want: "w", all: "a", upToDate: false},
		"CarriesNothing": {reason: "A workload never rolled is rolled.", carried: "", want: "", all: "", upToDate: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := upToDate(tc.carried, tc.want, tc.all); got != tc.upToDate {
				t.Errorf("\n%s\nupToDate(%q, %q, %q) = %t, want %t", tc.reason, tc.carried, tc.want, tc.all, got, tc.upToDate)
			}
		})
	}
}
