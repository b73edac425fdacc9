package reliability

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestNoSecretBytesLeak runs every kind around Secrets that carry a unique
// marker, the error paths included (a copy in conflict, a service account
// token refused, a kubeconfig Secret of garbage), with the provider logging
// at debug level. The marker, plain or base64 or hex, must appear in no log
// line, event, managed resource or config (status, conditions, errors
// included), while the copies do hold it, which proves the data flowed.
func TestNoSecretBytesLeak(t *testing.T) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	marker := "leakmarker" + hex.EncodeToString(b)
	src := env.Namespace(t, "team-rel-leak-src", nil)
	dst := env.Namespace(t, "team-rel-leak-dst", nil)
	ctx := context.Background()

	// The values written, each also searched for in base64 (as a Secret's
	// data appears in JSON).
	values := map[string]string{}
	secret := func(ns, name string, typ corev1.SecretType, annotations map[string]string, data, stringData map[string]string) *corev1.Secret {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"leak-test": "copy"}, Annotations: annotations},
			Type:       typ, Data: map[string][]byte{}, StringData: stringData,
		}
		for k, v := range data {
			s.Data[k] = []byte(v)
			values[ns+"/"+name+"/"+k] = v
		}
		for k, v := range stringData {
			values[ns+"/"+name+"/"+k] = v
		}
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatalf("cannot create Secret %s: %v", name, err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, s) })
		return s
	}
	creds := secret(src, "creds", corev1.SecretTypeOpaque, nil,
		map[string]string{"password": marker},
		map[string]string{"dsn": "postgres://app:" + marker + "@db:5432/app"})
	// In the way of a copy, holding other data: Skip leaves it.
	secret(src, "clash", corev1.SecretTypeOpaque, nil, map[string]string{"token": marker + "-ours"}, nil)
	secret(dst, "clash", corev1.SecretTypeOpaque, nil, map[string]string{"token": marker + "-theirs"}, nil)
	// Service account tokens are never copied.
	secret(src, "sa-token", corev1.SecretTypeServiceAccountToken, map[string]string{corev1.ServiceAccountNameKey: "default"},
		map[string]string{"token": marker + "-sa"}, nil)
	// A kubeconfig of garbage that carries the marker: the error must not.
	secret(src, "kubeconfig", corev1.SecretTypeOpaque, nil, nil, map[string]string{"config": "clusters: [" + marker + "]\nnot: a kubeconfig"})

	rule := createYAML(t, fmt.Sprintf(`{apiVersion: copy.clusterops.io/v1alpha1, kind: CopyRule, metadata: {name: leak}, spec: {forProvider: {kind: Secret, selector: {matchLabels: {leak-test: copy}}, namespaces: [%s], conflictPolicy: Skip}}}`, dst), src)
	createYAML(t, fmt.Sprintf(`{apiVersion: apps/v1, kind: Deployment, metadata: {name: web, namespace: %s}, spec: {selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, image: nginx, envFrom: [{secretRef: {name: creds}}]}]}}}}`, src))
	rollout := createYAML(t, `{apiVersion: workload.clusterops.io/v1alpha1, kind: ConfigRollout, metadata: {name: leak}, spec: {forProvider: {secrets: [{name: creds}], workloads: [{kind: Deployment, name: web}]}}}`, src)
	createYAML(t, fmt.Sprintf(`{apiVersion: v1, kind: ConfigMap, metadata: {name: victim, namespace: %s}, data: {a: b}}`, src))
	createYAML(t, `{apiVersion: chaos.clusterops.io/v1alpha1, kind: ChaosAgent, metadata: {name: leak}, spec: {forProvider: {ipsumMode: true, eagerness: 100, interval: 1s}}}`, src)
	createYAML(t, `{apiVersion: workload.clusterops.io/v1alpha1, kind: AppBundle, metadata: {name: leak}, spec: {forProvider: {image: nginx, env: [{name: MODE, value: test}]}}}`, src)
	createYAML(t, fmt.Sprintf(`{apiVersion: clusterops.io/v1alpha1, kind: ClusterProviderConfig, metadata: {name: %s}, spec: {credentials: {source: Secret, secretRef: {name: kubeconfig, namespace: %s, key: config}}}}`, src, src))
	remote := createYAML(t, fmt.Sprintf(`{apiVersion: workload.clusterops.io/v1alpha1, kind: ImmortalContainer, metadata: {name: leak}, spec: {providerConfigRef: {kind: ClusterProviderConfig, name: %s}, forProvider: {image: nginx}}}`, src), src)

	// The data flowed: the copy holds the marker, conflicts and refusals are
	// reported, the rollout rolled, the agent acted, the bad config failed.
	copied := func(ctx context.Context, want string) (bool, error) {
		c := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: dst, Name: "creds"}, c); err != nil {
			return false, err
		}
		return string(c.Data["password"]) == want && string(c.Data["dsn"]) == values[src+"/creds/dsn"], nil
	}
	testenv.Eventually(t, wait, "the copy of creds with the marker", func(ctx context.Context) (bool, error) { return copied(ctx, marker) })
	testenv.Eventually(t, wait, "the clash and the token reported", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rule), rule); err != nil {
			return false, err
		}
		ps, _, _ := unstructured.NestedSlice(rule.Object, "status", "atProvider", "problems")
		got := map[string]bool{}
		for _, p := range ps {
			m, _ := p.(map[string]any)
			got[fmt.Sprint(m["name"], "/", m["reason"])] = true
		}
		if !got["clash/Conflict"] || !got["sa-token/Refused"] {
			return false, fmt.Errorf("problems: %v", ps)
		}
		return true, nil
	})
	// A workload first seen is followed, not rolled or written to: status
	// records the hash as its baseline, and no rollout is counted.
	testenv.Eventually(t, wait, "the Deployment followed at the hash", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rollout), rollout); err != nil {
			return false, err
		}
		web := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: src, Name: "web"}, web); err != nil {
			return false, err
		}
		h, _, _ := unstructured.NestedString(rollout.Object, "status", "atProvider", "hash")
		ws, _, _ := unstructured.NestedSlice(rollout.Object, "status", "atProvider", "workloads")
		n, _, _ := unstructured.NestedInt64(rollout.Object, "status", "atProvider", "rollouts")
		if h == "" || len(ws) != 1 || n != 0 || web.Annotations[configrollout.AnnotationLock] != "" || web.Spec.Template.Annotations[configrollout.AnnotationHash] != "" || web.Generation != 1 {
			return false, fmt.Errorf("status %v; web at generation %d, annotations %v, template annotations %v", rollout.Object["status"], web.Generation, web.Annotations, web.Spec.Template.Annotations)
		}
		w := ws[0].(map[string]any)
		return w["hash"] == h && w["baseline"] == true, nil
	})
	env.Update(t, creds, func() { creds.Data["password"] = []byte(marker + "-v2") })
	values[src+"/creds/password-v2"] = marker + "-v2"
	testenv.Eventually(t, wait, "the copy to follow the change", func(ctx context.Context) (bool, error) { return copied(ctx, marker+"-v2") })
	testenv.Eventually(t, wait, "a rollout for the change", rolled(rollout, 1))
	testenv.Eventually(t, wait, "the agent to rewrite the ConfigMap", func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: src, Name: "victim"}, cm); err != nil {
			return false, err
		}
		return cm.Data["a"] != "b", nil
	})
	testenv.Eventually(t, wait, "the bad kubeconfig to show", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(remote), remote); err != nil {
			return false, err
		}
		c := condition(remote, "Synced")
		return c != nil && c["status"] == "False" && strings.Contains(fmt.Sprint(c["message"]), "does not hold a valid kubeconfig"), nil
	})
	// The agent leaves Secrets alone.
	for _, name := range []string{"creds", "clash"} {
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: src, Name: name}, s); err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"creds": marker + "-v2", "clash": marker + "-ours"}[name]; string(s.Data["password"])+string(s.Data["token"]) != want {
			t.Errorf("Secret %s was changed", name)
		}
	}

	// Now look everywhere the provider writes to or says something.
	needles := map[string]string{"marker": marker, "marker (hex)": hex.EncodeToString([]byte(marker))}
	for k, v := range values {
		needles[k+" (base64)"] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	haystacks := map[string]string{"provider logs": logs.String()}
	// The logs searched are the debug ones, errors included.
	for _, want := range []string{"DEBUG", "Cannot connect to provider", "does not hold a valid kubeconfig"} {
		if !strings.Contains(haystacks["provider logs"], want) {
			t.Fatalf("the provider's logs do not contain %q: are debug logs captured?", want)
		}
	}
	evs := &corev1.EventList{}
	if err := env.Client.List(ctx, evs); err != nil {
		t.Fatal(err)
	}
	haystacks["events"] = jsonOf(t, evs)
	for _, gvk := range []string{
		"copy.clusterops.io/v1alpha1/CopyRuleList", "chaos.clusterops.io/v1alpha1/ChaosAgentList",
		"workload.clusterops.io/v1alpha1/AppBundleList", "workload.clusterops.io/v1alpha1/ImmortalContainerList",
		"workload.clusterops.io/v1alpha1/ConfigRolloutList", "clusterops.io/v1alpha1/ProviderConfigList",
		"clusterops.io/v1alpha1/ClusterProviderConfigList", "clusterops.io/v1alpha1/ProviderConfigUsageList",
	} {
		i := strings.LastIndex(gvk, "/")
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(gvk[:i])
		l.SetKind(gvk[i+1:])
		if err := env.Client.List(ctx, l); err != nil {
			t.Fatal(err)
		}
		haystacks[gvk] = jsonOf(t, l)
	}
	// The objects the provider made other than copies: the agent's backup,
	// the AppBundle's Deployment and claim, the rolled Deployment.
	cms := &corev1.ConfigMapList{}
	if err := env.Client.List(ctx, cms, client.InNamespace(src)); err != nil {
		t.Fatal(err)
	}
	haystacks["ConfigMaps of "+src] = jsonOf(t, cms)
	for name, h := range haystacks {
		for what, n := range needles {
			if i := strings.Index(h, n); i >= 0 {
				t.Errorf("%s contain the %s: ...%s...", name, what, h[max(0, i-200):min(len(h), i+len(n)+50)])
			}
		}
	}
	t.Logf("searched %d needles in %d places, %d bytes of provider logs", len(needles), len(haystacks), len(haystacks["provider logs"]))
}

// rolled is whether the ConfigRollout has rolled at least n times.
func rolled(u *unstructured.Unstructured, n int64) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return false, err
		}
		got, _, _ := unstructured.NestedInt64(u.Object, "status", "atProvider", "rollouts")
		if got < n {
			return false, fmt.Errorf("%d rollouts; status %v", got, u.Object["status"])
		}
		return true, nil
	}
}

func jsonOf(t *testing.T, o any) string {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
