package target_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/reach"
	"github.com/clusterops/provider-clusterops/internal/shard"
	. "github.com/clusterops/provider-clusterops/internal/target"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// control is the control plane (CRDs installed); remote a second API server
// reached through a kubeconfig Secret.
var control, remote *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(func() int {
		var err error
		if control, err = testenv.Start(true); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer control.Stop() //nolint:errcheck // Best effort at exit.
		if remote, err = testenv.Start(false); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer remote.Stop() //nolint:errcheck // Best effort at exit.
		return m.Run()
	}())
}

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("cannot create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
}

func mr(ns string, ref *xpv2.ProviderConfigReference) *workloadv1alpha1.ImmortalContainer {
	ic := &workloadv1alpha1.ImmortalContainer{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "ic-", Namespace: ns},
		Spec:       workloadv1alpha1.ImmortalContainerSpec{ForProvider: workloadv1alpha1.ImmortalContainerParameters{Image: "nginx"}},
	}
	ic.Spec.ProviderConfigReference = ref
	return ic
}

func newResolver(o ...Option) *Resolver {
	return NewResolver(control.Client, control.Client, control.Config, control.Scheme, append([]Option{WithProviderNamespace(testenv.ProviderNamespace)}, o...)...)
}

// canary creates a namespace only in the remote cluster, so a client that
// finds it is proven to talk to the remote cluster.
func canary(t *testing.T) string {
	t.Helper()
	return remote.Namespace(t, "only-remote", nil)
}

func TestResolveCredentialSources(t *testing.T) {
	ctx := context.Background()
	ns := control.Namespace(t, "apps", nil)
	only := canary(t)
	kc, err := remote.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	create(t, control.Client,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "remote-kubeconfig", Namespace: ns}, Data: map[string][]byte{"kubeconfig": kc}},
		&v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: ns}, Spec: v1alpha1.ProviderConfigSpec{Credentials: v1alpha1.LocalCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity}}},
		&v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "remote", Namespace: ns}, Spec: v1alpha1.ProviderConfigSpec{Credentials: v1alpha1.LocalCredentials{
			Source: v1alpha1.CredentialsSourceSecret, SecretRef: &xpv2.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: "remote-kubeconfig"}, Key: "kubeconfig"}}}},
		&v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "remote-" + ns}, Spec: v1alpha1.ClusterProviderConfigSpec{Credentials: v1alpha1.ClusterCredentials{
			Source: v1alpha1.CredentialsSourceSecret, SecretRef: &xpv2.SecretKeySelector{SecretReference: xpv2.SecretReference{Name: "remote-kubeconfig", Namespace: ns}, Key: "kubeconfig"}}}},
		&v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "local-" + ns}, Spec: v1alpha1.ClusterProviderConfigSpec{Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity}}},
	)

	cases := map[string]struct {
		reason     string
		ref        xpv2.ProviderConfigReference
		wantRemote bool
	}{
		"ProviderConfigInjectedIdentity":        {reason: "A namespaced config with InjectedIdentity acts on the provider's own cluster.", ref: xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "local"}},
		"ProviderConfigSecret":                  {reason: "A namespaced config with a kubeconfig Secret acts on the remote cluster.", ref: xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "remote"}, wantRemote: true},
		"ClusterProviderConfigInjectedIdentity": {reason: "A cluster config with InjectedIdentity acts on the provider's own cluster.", ref: xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "local-" + ns}},
		"ClusterProviderConfigSecret":           {reason: "A cluster config with a kubeconfig Secret acts on the remote cluster.", ref: xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "remote-" + ns}, wantRemote: true},
	}
	r := newResolver()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := mr(ns, &tc.ref)
			create(t, control.Client, m)
			c, err := r.Resolve(ctx, m)
			if err != nil {
				t.Fatalf("\n%s\nResolve(...): %v", tc.reason, err)
			}
			err = c.Client.Get(ctx, types.NamespacedName{Name: only}, &corev1.Namespace{})
			if diff := cmp.Diff(tc.wantRemote, err == nil); diff != "" {
				t.Errorf("\n%s\nfound remote-only namespace: -want, +got:\n%s (err: %v)", tc.reason, diff, err)
			}
			if diff := cmp.Diff(!tc.wantRemote, c.Local); diff != "" {
				t.Errorf("\n%s\nLocal: -want, +got:\n%s", tc.reason, diff)
			}
			// The usage is tracked, so the config cannot be deleted while in use.
			pcu := &v1alpha1.ProviderConfigUsage{}
			if err := control.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: string(m.GetUID())}, pcu); err != nil {
				t.Errorf("\n%s\nno ProviderConfigUsage: %v", tc.reason, err)
			} else if diff := cmp.Diff(tc.ref, pcu.ProviderConfigReference); diff != "" {
				t.Errorf("\n%s\nProviderConfigUsage ref: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestClientsAreReused(t *testing.T) {
	ctx := context.Background()
	ns := control.Namespace(t, "reuse", nil)
	only := canary(t)
	kc, err := remote.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kc", Namespace: ns}, Data: map[string][]byte{"kubeconfig": kc}}
	create(t, control.Client, secret,
		&v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "remote", Namespace: ns}, Spec: v1alpha1.ProviderConfigSpec{Credentials: v1alpha1.LocalCredentials{
			Source: v1alpha1.CredentialsSourceSecret, SecretRef: &xpv2.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: "kc"}, Key: "kubeconfig"}}}},
		&v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: ns}, Spec: v1alpha1.ProviderConfigSpec{Credentials: v1alpha1.LocalCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity}}},
	)
	m := mr(ns, &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "remote"})
	l := mr(ns, &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "local"})
	create(t, control.Client, m, l)

	// Recheck at once, so every Resolve reads the Secret: the client must still
	// be reused while the kubeconfig is unchanged.
	r := newResolver(WithSecretRecheck(0))
	first, err := r.Resolve(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	second, err := r.Resolve(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if first.Client != second.Client {
		t.Errorf("Resolve built a new client for an unchanged kubeconfig")
	}
	l1, _ := r.Resolve(ctx, l)
	l2, _ := r.Resolve(ctx, l)
	if l1 == nil || l2 == nil || l1.Client != l2.Client {
		t.Errorf("Resolve built a new client for the provider's own identity")
	}

	// A rotated kubeconfig (here: one for the control plane) gives a new client.
	ckc, err := control.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	secret.Data["kubeconfig"] = ckc
	if err := control.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	third, err := r.Resolve(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if third.Client == second.Client {
		t.Errorf("Resolve kept the client of a rotated kubeconfig")
	}
	if err := third.Client.Get(ctx, types.NamespacedName{Name: only}, &corev1.Namespace{}); err == nil {
		t.Errorf("the new client still talks to the old cluster")
	}
}

func TestResolveErrors(t *testing.T) {
	ctx := context.Background()
	ns := control.Namespace(t, "errors", nil)
	const marker = "SECRET-MARKER-5b1c"
	create(t, control.Client,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "garbage", Namespace: ns}, Data: map[string][]byte{"kubeconfig": []byte("apiVersion: v1\nclusters: " + marker + "\n  - [")}},
		&v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "garbage", Namespace: ns}, Spec: v1alpha1.ProviderConfigSpec{Credentials: v1alpha1.LocalCredentials{
			Source: v1alpha1.CredentialsSourceSecret, SecretRef: &xpv2.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: "garbage"}, Key: "kubeconfig"}}}},
		&v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "nosecret", Namespace: ns}, Spec: v1alpha1.ProviderConfigSpec{Credentials: v1alpha1.LocalCredentials{
			Source: v1alpha1.CredentialsSourceSecret, SecretRef: &xpv2.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: "absent"}, Key: "kubeconfig"}}}},
		&v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "nokey", Namespace: ns}, Spec: v1alpha1.ProviderConfigSpec{Credentials: v1alpha1.LocalCredentials{
			Source: v1alpha1.CredentialsSourceSecret, SecretRef: &xpv2.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: "garbage"}, Key: "other"}}}},
	)
	cases := map[string]struct {
		reason string
		ref    *xpv2.ProviderConfigReference
		want   string
	}{
		"MissingClusterProviderConfig": {
			reason: "A missing config is named, with what to do.",
			ref:    &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "absent"},
			want:   `ClusterProviderConfig "absent" does not exist: create it, or point spec.providerConfigRef at one that does`,
		},
		"MissingProviderConfig": {
			reason: "A missing namespaced config names its namespace.",
			ref:    &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "absent"},
			want:   fmt.Sprintf(`ProviderConfig "absent" in namespace %q does not exist: create it, or point spec.providerConfigRef at one that does`, ns),
		},
		"MissingSecret": {
			reason: "A kubeconfig Secret that does not exist is named.",
			ref:    &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "nosecret"},
			want:   fmt.Sprintf(`Secret %s/absent named in credentials.secretRef of ProviderConfig "nosecret" in namespace %q does not exist`, ns, ns),
		},
		"MissingKey": {
			reason: "A missing key is named.",
			ref:    &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "nokey"},
			want:   fmt.Sprintf(`Secret %s/garbage has no key "other", which credentials.secretRef of ProviderConfig "nokey" in namespace %q names`, ns, ns),
		},
		"GarbageKubeconfig": {
			reason: "An invalid kubeconfig is reported without quoting the Secret.",
			ref:    &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "garbage"},
			want:   fmt.Sprintf(`key "kubeconfig" of Secret %s/garbage (used by ProviderConfig "garbage" in namespace %q) does not hold a valid kubeconfig`, ns, ns),
		},
		"UnknownKind": {
			reason: "An unknown config kind is refused with the kinds that work.",
			ref:    &xpv2.ProviderConfigReference{Kind: "Other", Name: "x"},
			want:   `spec.providerConfigRef.kind "Other" is not supported: use ProviderConfig or ClusterProviderConfig`,
		},
	}
	r := newResolver()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := mr(ns, tc.ref)
			create(t, control.Client, m)
			_, err := r.Resolve(ctx, m)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nResolve(...): -want, +got:\n%s", tc.reason, diff)
			}
			if strings.Contains(got, marker) {
				t.Errorf("\n%s\nerror leaks Secret data: %s", tc.reason, got)
			}
		})
	}
}

func TestCheckNamespaceReadsLabels(t *testing.T) {
	ctx := context.Background()
	own := control.Namespace(t, "own", nil)
	labelled := control.Namespace(t, "labelled", map[string]string{"clusterops.io/reachable": "true"})
	plain := control.Namespace(t, "plain", nil)
	create(t, control.Client, &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "reach-" + own},
		Spec: v1alpha1.ClusterProviderConfigSpec{
			Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity},
			Reach:       &v1alpha1.Reach{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"clusterops.io/reachable": "true"}}},
		},
	})
	m := mr(own, &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "reach-" + own})
	create(t, control.Client, m)
	c, err := newResolver().Resolve(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		ns      string
		allowed bool
	}{
		"Own":               {ns: own, allowed: true},
		"Labelled":          {ns: labelled, allowed: true},
		"Plain":             {ns: plain, allowed: false},
		"KubeSystem":        {ns: "kube-system", allowed: false},
		"ProviderNamespace": {ns: testenv.ProviderNamespace, allowed: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := c.CheckNamespace(ctx, own, tc.ns)
			if tc.allowed != (err == nil) {
				t.Errorf("CheckNamespace(%q): allowed=%v, want %v (err: %v)", tc.ns, err == nil, tc.allowed, err)
			}
			if err != nil && !reach.IsOutOfReach(err) {
				t.Errorf("CheckNamespace(%q): want an OutOfReachError, got %v", tc.ns, err)
			}
		})
	}
}

// TestResolveRefTracksAndReleases: a config named outside
// spec.providerConfigRef (a CopyRule's source side) resolves to its cluster
// and reach, and is tracked in a usage of its own beside the main one;
// ReleaseRef deletes that usage, only that one, and never a usage the managed
// resource does not control.
func TestResolveRefTracksAndReleases(t *testing.T) {
	ctx := context.Background()
	ns := control.Namespace(t, "apps", nil)
	primary := xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "main-" + ns}
	side := xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "side-" + ns}
	create(t, control.Client,
		&v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: primary.Name}, Spec: v1alpha1.ClusterProviderConfigSpec{Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity}}},
		&v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: side.Name}, Spec: v1alpha1.ClusterProviderConfigSpec{
			Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity},
			Reach:       &v1alpha1.Reach{Namespaces: []string{"side-*"}},
		}},
	)
	m := mr(ns, &primary)
	create(t, control.Client, m)
	r := newResolver()
	if _, err := r.Resolve(ctx, m); err != nil {
		t.Fatal(err)
	}
	c, err := r.ResolveRef(ctx, m, side, "source")
	if err != nil {
		t.Fatalf("ResolveRef(...): %v", err)
	}
	if err := c.Reach.Check(ns, "side-a", nil); err != nil {
		t.Errorf("ResolveRef(...): the cluster does not have the side config's reach: %v", err)
	}
	usage := func(name string) (*v1alpha1.ProviderConfigUsage, error) {
		u := &v1alpha1.ProviderConfigUsage{}
		return u, control.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u)
	}
	sideUsage := string(m.GetUID()) + "-source"
	if u, err := usage(sideUsage); err != nil || u.ProviderConfigReference != side {
		t.Fatalf("ResolveRef(...): usage %s of %v: %v %+v", sideUsage, side, err, u.ProviderConfigReference)
	}

	// Another resource's usage of the same role name is not this one's to delete.
	other := mr(ns, &primary)
	create(t, control.Client, other)
	foreign := &v1alpha1.ProviderConfigUsage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: string(other.GetUID()) + "-source"}}
	foreign.SetProviderConfigReference(side)
	foreign.SetResourceReference(xpv2.TypedReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x"})
	create(t, control.Client, foreign)
	if err := r.ReleaseRef(ctx, other, "source"); err != nil {
		t.Fatalf("ReleaseRef(other): %v", err)
	}
	if _, err := usage(foreign.Name); err != nil {
		t.Errorf("ReleaseRef(...) deleted a usage the managed resource does not control: %v", err)
	}

	if err := r.ReleaseRef(ctx, m, "source"); err != nil {
		t.Fatalf("ReleaseRef(...): %v", err)
	}
	if _, err := usage(sideUsage); err == nil {
		t.Errorf("ReleaseRef(...) left usage %s", sideUsage)
	}
	if _, err := usage(string(m.GetUID())); err != nil {
		t.Errorf("ReleaseRef(...) took the main config's usage too: %v", err)
	}
	// Nothing left to release is no error.
	if err := r.ReleaseRef(ctx, m, "source"); err != nil {
		t.Errorf("ReleaseRef(...) a second time: %v", err)
	}
}

// shardCache is a client that sees ProviderConfigUsages as a sharded
// replica's cache does: only those labelled with its shard. It counts the
// writes that pass through it.
type shardCache struct {
	client.Client
	shard  string
	writes int
}

func (c *shardCache) Get(ctx context.Context, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, o, opts...); err != nil {
		return err
	}
	if _, usage := o.(*v1alpha1.ProviderConfigUsage); usage && o.GetLabels()[shard.Label] != c.shard {
		return kerrors.NewNotFound(v1alpha1.SchemeGroupVersion.WithResource("providerconfigusages").GroupResource(), key.Name)
	}
	return nil
}

func (c *shardCache) Create(ctx context.Context, o client.Object, opts ...client.CreateOption) error {
	c.writes++
	return c.Client.Create(ctx, o, opts...)
}

func (c *shardCache) Update(ctx context.Context, o client.Object, opts ...client.UpdateOption) error {
	c.writes++
	return c.Client.Update(ctx, o, opts...)
}

// TestUsageCarriesTheShard: a managed resource's usage carries its shard
// label, so that a sharded replica's cache of usages holds its share's; once
// the resource moves to another shard, the replica that now acts on it,
// whose cache cannot see the usage, labels it again; and a usage that is
// current is not written.
func TestUsageCarriesTheShard(t *testing.T) {
	ctx := context.Background()
	ns := control.Namespace(t, "apps", nil)
	ref := xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "local-" + ns}
	create(t, control.Client, &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: ref.Name},
		Spec: v1alpha1.ClusterProviderConfigSpec{Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity}}})
	m := mr(ns, &ref)
	m.SetLabels(map[string]string{shard.Label: "3"})
	create(t, control.Client, m)
	labelled := func() string {
		t.Helper()
		u := &v1alpha1.ProviderConfigUsage{}
		if err := control.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: string(m.GetUID())}, u); err != nil {
			t.Fatal(err)
		}
		return u.GetLabels()[shard.Label]
	}
	resolve := func(c *shardCache) {
		t.Helper()
		r := NewResolver(c, control.Client, control.Config, control.Scheme, WithProviderNamespace(testenv.ProviderNamespace))
		if _, err := r.Resolve(ctx, m); err != nil {
			t.Fatal(err)
		}
	}

	three := &shardCache{Client: control.Client, shard: "3"}
	resolve(three)
	if got := labelled(); got != "3" {
		t.Errorf("the usage is labelled shard %q, want the resource's 3", got)
	}
	m.Labels[shard.Label] = "5"
	five := &shardCache{Client: control.Client, shard: "5"}
	resolve(five)
	if got := labelled(); got != "5" {
		t.Errorf("once the resource moved to shard 5, the usage is labelled %q", got)
	}
	writes := five.writes
	resolve(five)
	if five.writes != writes {
		t.Errorf("a current usage was written %d times", five.writes-writes)
	}
}

// TestDeletedResourceDecidesOnTheNewestReach: a config edit allows a
// namespace again, and a managed resource is deleted before the cache has
// the edit. Resolved from that cache it would leave what it made there for
// good; being deleted, it reads its config from the API server and reaches
// the namespace, while a resource not being deleted reads the cache.
func TestDeletedResourceDecidesOnTheNewestReach(t *testing.T) {
	ctx := context.Background()
	ns := control.Namespace(t, "apps", nil)
	other := control.Namespace(t, "allowed-again", nil)
	cpc := &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "reach-" + ns},
		Spec: v1alpha1.ClusterProviderConfigSpec{
			Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity},
			Reach:       &v1alpha1.Reach{Namespaces: []string{other}, DeniedNamespaces: []string{other}},
		}}
	create(t, control.Client, cpc)
	stale := staleConfig{Client: control.Client, cpc: cpc.DeepCopy()}
	control.Update(t, cpc, func() { cpc.Spec.Reach.DeniedNamespaces = nil })
	m := mr(ns, &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: cpc.Name})
	create(t, control.Client, m)
	r := NewResolver(stale, control.Client, control.Config, control.Scheme, WithProviderNamespace(testenv.ProviderNamespace))

	c, err := r.Resolve(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckNamespace(ctx, ns, other); err == nil {
		t.Errorf("a resource not being deleted reaches %s: it should decide on the cache, which denies it", other)
	}
	now := metav1.Now()
	m.SetDeletionTimestamp(&now)
	if c, err = r.Resolve(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckNamespace(ctx, ns, other); err != nil {
		t.Errorf("a resource being deleted does not reach %s, which its config allows again: %v", other, err)
	}
}

// staleConfig is a cache behind an edit: it answers a read of its
// ClusterProviderConfig with the copy it holds.
type staleConfig struct {
	client.Client
	cpc *v1alpha1.ClusterProviderConfig
}

func (s staleConfig) Get(ctx context.Context, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	if c, ok := o.(*v1alpha1.ClusterProviderConfig); ok && key.Name == s.cpc.Name {
		s.cpc.DeepCopyInto(c)
		return nil
	}
	return s.Client.Get(ctx, key, o, opts...)
}
