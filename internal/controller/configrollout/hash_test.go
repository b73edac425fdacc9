package configrollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHashFollowsContentOnly(t *testing.T) {
	base := Content{Kind: KindConfigMap, Name: "nginx-conf", Data: map[string][]byte{"nginx.conf": []byte("worker_processes 1;"), "mime.types": []byte("types {}")}}
	with := func(mutate func(c *Content)) Content {
		c := base
		c.Data = map[string][]byte{}
		for k, v := range base.Data {
			c.Data[k] = v
		}
		mutate(&c)
		return c
	}
	cases := map[string]struct {
		reason string
		a, b   Content
		same   bool
	}{
		"Identical": {
			reason: "The same content hashes the same.",
			a:      base, b: with(func(*Content) {}), same: true,
		},
		"ValueChanged": {
			reason: "A changed value changes the hash.",
			a:      base, b: with(func(c *Content) { c.Data["nginx.conf"] = []byte("worker_processes 2;") }), same: false,
		},
		"KeyAdded": {
			reason: "An added key changes the hash when all keys count.",
			a:      base, b: with(func(c *Content) { c.Data["extra"] = []byte("x") }), same: false,
		},
		"UnlistedKeyIgnored": {
			reason: "With keys, a change to another key changes nothing.",
			a:      with(func(c *Content) { c.Keys = []string{"nginx.conf"} }),
			b:      with(func(c *Content) { c.Keys = []string{"nginx.conf"}; c.Data["mime.types"] = []byte("changed") }),
			same:   true,
		},
		"ListedKeyCounts": {
			reason: "With keys, a change to a listed key counts.",
			a:      with(func(c *Content) { c.Keys = []string{"nginx.conf"} }),
			b:      with(func(c *Content) { c.Keys = []string{"nginx.conf"}; c.Data["nginx.conf"] = []byte("changed") }),
			same:   false,
		},
		"KeyOrderIrrelevant": {
			reason: "The order keys are listed in does not matter, nor do repeats.",
			a:      with(func(c *Content) { c.Keys = []string{"nginx.conf", "mime.types"} }),
			b:      with(func(c *Content) { c.Keys = []string{"mime.types", "nginx.conf", "mime.types"} }),
			same:   true,
		},
		"MissingVersusEmpty": {
			reason: "A missing source differs from an empty one.",
			a:      Content{Kind: KindConfigMap, Name: "x", Missing: true},
			b:      Content{Kind: KindConfigMap, Name: "x", Data: map[string][]byte{}},
			same:   false,
		},
		"AbsentKeyVersusEmptyValue": {
			reason: "A listed key that is absent differs from one that is empty.",
			a:      Content{Kind: KindConfigMap, Name: "x", Keys: []string{"k"}, Data: map[string][]byte{}},
			b:      Content{Kind: KindConfigMap, Name: "x", Keys: []string{"k"}, Data: map[string][]byte{"k": {}}},
			same:   false,
		},
		"NoRunningTogether": {
			reason: "Key and value boundaries cannot shift into the same bytes.",
			a:      Content{Kind: KindConfigMap, Name: "x", Data: map[string][]byte{"ab": []byte("c")}},
			b:      Content{Kind: KindConfigMap, Name: "x", Data: map[string][]byte{"a": []byte("bc")}},
			same:   false,
		},
		"KindCounts": {
			reason: "A Secret and a ConfigMap of the same name and content hash apart.",
			a:      Content{Kind: KindConfigMap, Name: "x", Data: map[string][]byte{"k": []byte("v")}},
			b:      Content{Kind: KindSecret, Name: "x", Data: map[string][]byte{"k": []byte("v")}},
			same:   false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.same, Hash(tc.a) == Hash(tc.b)); diff != "" {
				t.Errorf("\n%s\nHash(a) == Hash(b): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestContentOfObjects(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": {2}}}
	want := Content{Kind: KindConfigMap, Name: "c", Keys: []string{"a"}, Data: map[string][]byte{"a": []byte("1"), "b": {2}}}
	if diff := cmp.Diff(want, ConfigMapContent(cm, []string{"a"})); diff != "" {
		t.Errorf("ConfigMapContent: -want, +got:\n%s", diff)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{"p": []byte("hunter2")}}
	if got := Hash(SecretContent(s, nil)); len(got) != 64 || got == Hash(SecretContent(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, nil)) {
		t.Errorf("SecretContent hash %q does not depend on the Secret's data", got)
	}
}

func TestCombinedHashesSourcesInOrder(t *testing.T) {
	a, b := Hash(Content{Kind: KindConfigMap, Name: "a"}), Hash(Content{Kind: KindSecret, Name: "b"})
	if Combined([]string{a, b}) != Combined([]string{b, a}) {
		t.Errorf("Combined depends on the order of sources")
	}
	if Combined([]string{a}) == Combined([]string{a, b}) {
		t.Errorf("Combined ignores a source")
	}
	if n := len(Combined([]string{a})); n != 32 {
		t.Errorf("Combined is %d characters, want 32 (fits an annotation comfortably)", n)
	}
}

// FuzzHashDeterministic: hashing is a function of content alone, whatever the
// map's iteration order or the order keys are listed in.
func FuzzHashDeterministic(f *testing.F) {
	f.Add("nginx.conf", "worker_processes 1;", "mime.types", "types {}")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		c := Content{Kind: KindConfigMap, Name: "n", Data: map[string][]byte{k1: []byte(v1), k2: []byte(v2)}}
		first := Hash(c)
		for range 5 {
			if Hash(c) != first {
				t.Fatal("Hash is not deterministic")
			}
		}
		c.Keys = []string{k2, k1}
		listed := Hash(c)
		c.Keys = []string{k1, k2}
		if Hash(c) != listed {
			t.Fatal("Hash depends on the order keys are listed in")
		}
	})
}
