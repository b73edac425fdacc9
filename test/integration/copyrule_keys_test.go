package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// patchRule merge-patches a rule's spec.forProvider: a merge patch, since the
// provider writes the rule's status meanwhile.
func patchRule(t *testing.T, r *copyv1alpha1.CopyRule, forProvider string) {
	t.Helper()
	if err := env.Client.Patch(context.Background(), r, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"forProvider":`+forProvider+`}}`))); err != nil {
		t.Fatalf("cannot patch rule %s with %s: %v", r.Name, forProvider, err)
	}
}

// configMapIs waits until ConfigMap ns/name holds exactly data and binaryData.
func configMapIs(t *testing.T, ns, name string, data map[string]string, binary map[string][]byte) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	testenv.Eventually(t, wait, fmt.Sprintf("ConfigMap %s/%s to hold data %v and binaryData %v", ns, name, data, binary), func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm); err != nil {
			return false, err
		}
		return fmt.Sprint(cm.Data) == fmt.Sprint(data) && fmt.Sprint(cm.BinaryData) == fmt.Sprint(binary), nil
	})
	return cm
}

// refused waits until the rule reports its source as refused with a message
// containing want, and is not Ready.
func refused(t *testing.T, r *copyv1alpha1.CopyRule, want string) {
	t.Helper()
	testenv.Eventually(t, wait, "rule "+r.Name+" to report "+want, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r)
		for _, p := range r.Status.AtProvider.Problems {
			if p.Reason == copyv1alpha1.ProblemRefused && strings.Contains(p.Message, want) {
				return r.GetCondition(xpv2.TypeReady).Status == corev1.ConditionFalse, err
			}
		}
		return false, err
	})
}

// TestCopyRuleKeys copies some keys of a ConfigMap, renamed, under another
// name, follows changes of the rule's keys and name, and reports keys that
// would collide without touching the copy.
func TestCopyRuleKeys(t *testing.T) {
	ctx := context.Background()
	src := env.Namespace(t, "copy-keysrc", nil)
	dst := env.Namespace(t, "copy-keydst", nil)
	source := configMap(src, "settings", map[string]string{"a": "1", "b": "2", "c": "3"}, map[string]string{"app": "x"})
	source.BinaryData = map[string][]byte{"bin": {0x00, 0xff}}
	env.Create(t, source)
	r := copyRule(t, src, "keys", copyv1alpha1.CopyRuleParameters{
		Kind: copyv1alpha1.KindConfigMap, Names: []string{"settings"}, Namespaces: []string{dst},
		CopyName: "settings-copy",
		Keys:     &copyv1alpha1.CopyKeys{Exclude: []string{"c"}, Rename: map[string]copyv1alpha1.DataKey{"a": "A"}},
	})

	// Excluded keys stay home, renamed ones arrive under their new name,
	// binary data byte for byte; the copy has its own name.
	configMapIs(t, dst, "settings-copy", map[string]string{"A": "1", "b": "2"}, map[string][]byte{"bin": {0x00, 0xff}})
	env.WaitConverged(t, wait, r)
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: dst, Name: "settings"}, &corev1.ConfigMap{}); !kerrors.IsNotFound(err) {
		t.Errorf("a copy under the source's name exists: %v", err)
	}

	// A change of the keys rewrites the copy.
	patchRule(t, r, `{"keys":{"include":["b"],"exclude":null,"rename":null}}`)
	configMapIs(t, dst, "settings-copy", map[string]string{"b": "2"}, nil)
	env.WaitConverged(t, wait, r)

	// Keys that would collide: the source is reported (keys named, no value)
	// and the copy is left as it was, not pruned.
	patchRule(t, r, `{"keys":{"include":null,"rename":{"a":"b"}}}`)
	refused(t, r, `keys "a" and "b" would both be copied as "b"`)
	configMapIs(t, dst, "settings-copy", map[string]string{"b": "2"}, nil)
	for _, p := range r.Status.AtProvider.Problems {
		if strings.Contains(p.Message, `"1"`) || strings.Contains(p.Message, `"2"`) {
			t.Errorf("a problem holds a value: %s", p.Message)
		}
	}

	// Another copy name: the copy of the old name goes, one of the new comes.
	patchRule(t, r, `{"keys":null,"copyName":"settings-renamed"}`)
	configMapIs(t, dst, "settings-renamed", map[string]string{"a": "1", "b": "2", "c": "3"}, map[string][]byte{"bin": {0x00, 0xff}})
	gone(t, dst, "settings-copy")
	env.WaitConverged(t, wait, r)
}

// TestCopyRuleSecretIntoConfigMap copies chosen keys of a Secret into a
// ConfigMap, as the rule says explicitly: text into data, other bytes into
// binaryData, no Secret copy. The Secret's values appear in no status or
// event, on the happy path or when keys collide; into cannot change.
func TestCopyRuleSecretIntoConfigMap(t *testing.T) {
	ctx := context.Background()
	src := env.Namespace(t, "copy-intosrc", nil)
	dst := env.Namespace(t, "copy-intodst", nil)
	marker := "leak-marker-" + strings.TrimPrefix(src, "copy-intosrc-")
	env.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "db", Labels: map[string]string{"app": "db"}},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"host":     []byte("db." + marker + ".svc"),
			"password": []byte(marker),
			"ca":       {0xff, 0xfe, 0x01},
		},
	})
	r := copyRule(t, src, "public", copyv1alpha1.CopyRuleParameters{
		Kind: copyv1alpha1.KindSecret, Into: copyv1alpha1.KindConfigMap, Names: []string{"db"}, Namespaces: []string{dst},
		Keys: &copyv1alpha1.CopyKeys{Include: []string{"host", "ca"}, Rename: map[string]copyv1alpha1.DataKey{"host": "DB_HOST"}},
	})
	cm := configMapIs(t, dst, "db", map[string]string{"DB_HOST": "db." + marker + ".svc"}, map[string][]byte{"ca": {0xff, 0xfe, 0x01}})
	if cm.Labels["app"] != "db" || cm.Labels["copy.clusterops.io/rule-uid"] != string(r.UID) {
		t.Errorf("the ConfigMap copy has labels %v", cm.Labels)
	}
	env.WaitConverged(t, wait, r)
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: dst, Name: "db"}, &corev1.Secret{}); !kerrors.IsNotFound(err) {
		t.Errorf("a Secret copy exists: %v", err)
	}
	// The event names the copies' kind.
	testenv.Eventually(t, wait, "the event of the ConfigMap copies", func(ctx context.Context) (bool, error) {
		l := &corev1.EventList{}
		err := env.Client.List(ctx, l, client.InNamespace(src))
		for _, e := range l.Items {
			if e.InvolvedObject.Name == r.Name && e.Message == "Created 1 ConfigMap copies" {
				return true, err
			}
		}
		return false, err
	})

	// A collision among the Secret's keys is reported by key, never value.
	patchRule(t, r, `{"keys":{"include":null,"rename":{"host":"password"}}}`)
	refused(t, r, `keys "host" and "password" would both be copied as "password"`)

	// into cannot change: the copies are of another kind.
	err := env.Client.Patch(ctx, r, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"forProvider":{"into":null}}}`)))
	if err == nil || !strings.Contains(err.Error(), "into is immutable") {
		t.Errorf("removing into: want rejected with \"into is immutable\", got %v", err)
	}

	// No value of the Secret, plain or base64, is in the rule or its events.
	secretsIn := func(s string) []string {
		var found []string
		for _, v := range []string{marker, base64.StdEncoding.EncodeToString([]byte(marker))} {
			if strings.Contains(s, v) {
				found = append(found, v)
			}
		}
		return found
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	if f := secretsIn(string(b)); len(f) > 0 {
		t.Errorf("the rule holds Secret values: %s", b)
	}
	l := &corev1.EventList{}
	if err := env.Client.List(ctx, l, client.InNamespace(src)); err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Items {
		if f := secretsIn(e.Message); len(f) > 0 {
			t.Errorf("event %s holds a Secret value: %s", e.Reason, e.Message)
		}
	}
}

// TestCopyRuleMetadata drops a GitOps tool's tracking labels from copies, by
// key and by prefix, adds labels and annotations, and removes an added
// annotation from the copies when the rule stops adding it, leaving others'.
func TestCopyRuleMetadata(t *testing.T) {
	src := env.Namespace(t, "copy-metasrc", nil)
	dst := env.Namespace(t, "copy-metadst", nil)
	env.Create(t, configMap(src, "shared", map[string]string{"k": "v"}, map[string]string{
		"argocd.argoproj.io/instance": "platform", "app.kubernetes.io/instance": "platform", "app.kubernetes.io/name": "shared",
		"team": "platform", "tier": "source",
	}))
	r := copyRule(t, src, "meta", copyv1alpha1.CopyRuleParameters{
		Kind: copyv1alpha1.KindConfigMap, Names: []string{"shared"}, Namespaces: []string{dst},
		Metadata: &copyv1alpha1.CopyMetadata{
			DropLabels:        []string{"argocd.argoproj.io/instance"},
			DropLabelPrefixes: []string{"app.kubernetes.io/"},
			Labels:            map[string]copyv1alpha1.LabelValue{"copied": "true", "tier": "copy"},
			Annotations:       map[string]copyv1alpha1.AnnotationValue{"note": "copied by a rule", "contact": "platform"},
		},
	})
	cm := &corev1.ConfigMap{}
	want := map[string]string{"team": "platform", "tier": "copy", "copied": "true", "copy.clusterops.io/rule-uid": string(r.UID)}
	testenv.Eventually(t, wait, "the copy's labels and annotations", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: dst, Name: "shared"}, cm); err != nil {
			return false, err
		}
		return fmt.Sprint(cm.Labels) == fmt.Sprint(want) && cm.Annotations["note"] == "copied by a rule" && cm.Annotations["contact"] == "platform", nil
	})
	env.WaitConverged(t, wait, r)

	// Someone else annotates the copy; the rule stops adding "note".
	env.Update(t, cm, func() { cm.Annotations["theirs"] = "kept" })
	patchRule(t, r, `{"metadata":{"annotations":{"note":null}}}`)
	testenv.Eventually(t, wait, "the removed annotation to leave the copy", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: dst, Name: "shared"}, cm); err != nil {
			return false, err
		}
		_, note := cm.Annotations["note"]
		return !note && cm.Annotations["contact"] == "platform" && cm.Annotations["theirs"] == "kept", nil
	})
	env.WaitConverged(t, wait, r)

	// Without metadata, the copy has the source's labels again.
	patchRule(t, r, `{"metadata":null}`)
	testenv.Eventually(t, wait, "the source's labels on the copy", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: dst, Name: "shared"}, cm); err != nil {
			return false, err
		}
		_, contact := cm.Annotations["contact"]
		return cm.Labels["argocd.argoproj.io/instance"] == "platform" && cm.Labels["app.kubernetes.io/name"] == "shared" && cm.Labels["tier"] == "source" && !contact, nil
	})
}
