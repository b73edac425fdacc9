package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// heard records the names a handler heard added and deleted.
type heard struct {
	mu             sync.Mutex
	added, deleted []string
}

func (h *heard) OnAdd(o any, _ bool) { h.note(&h.added, o) }

func (h *heard) OnUpdate(_, _ any) {}

func (h *heard) OnDelete(o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	h.note(&h.deleted, o)
}

func (h *heard) note(to *[]string, o any) {
	if cm, ok := o.(*corev1.ConfigMap); ok {
		h.mu.Lock()
		*to = append(*to, cm.Name)
		h.mu.Unlock()
	}
}

func (h *heard) has(added, deleted string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return (added == "" || slices.Contains(h.added, added)) && (deleted == "" || slices.Contains(h.deleted, deleted))
}

// TestShareCacheFollowsItsParts: a share cache reads, lists and indexes the
// objects of the shards it holds, each in a cache of its own on the real
// API server. A shard added later is read once it synced and its handlers
// hear of its objects; a shard dropped is read no more, its handlers hear
// that its objects are gone, and the shard it keeps is never listed again.
func TestShareCacheFollowsItsParts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace(t, "share-cache", nil)
	for i := range 3 {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%d", i), Labels: map[string]string{shard.Label: shard.Name(i)}},
			Data:       map[string]string{"team": "blue"},
		}
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	part := func(i int) shard.Part {
		p, err := shard.PartOf(shard.Placement{Shards: 3}, i)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var mu sync.Mutex
	built := map[string]int{}
	shares := shard.NewShares(nil)
	shares.Hold([]shard.Part{part(0), part(1)})
	c := shares.New(clientgoscheme.Scheme, env.Client.RESTMapper(), nil, nil, func(p shard.Part) (cache.Cache, error) {
		mu.Lock()
		built[p.Name]++
		mu.Unlock()
		return cache.New(env.Config, cache.Options{Scheme: clientgoscheme.Scheme, DefaultLabelSelector: p.Select, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	})
	if err := c.IndexField(ctx, &corev1.ConfigMap{}, "team", func(o client.Object) []string {
		return []string{o.(*corev1.ConfigMap).Data["team"]}
	}); err != nil {
		t.Fatal(err)
	}
	h := &heard{}
	inf, err := c.GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandler(h); err != nil {
		t.Fatal(err)
	}
	testenv.Background(t, c.Start)

	holds := func(what string, want ...string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, what, func(ctx context.Context) (bool, error) {
			l := &corev1.ConfigMapList{}
			if err := c.List(ctx, l, client.MatchingFields{"team": "blue"}); err != nil {
				return false, err
			}
			var got []string
			for _, cm := range l.Items {
				got = append(got, cm.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				return false, fmt.Errorf("holds %v", got)
			}
			for _, n := range []string{"cm-0", "cm-1", "cm-2"} {
				err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, &corev1.ConfigMap{})
				if slices.Contains(want, n) != (err == nil) || (err != nil && !kerrors.IsNotFound(err)) {
					return false, fmt.Errorf("get %s: %w", n, err)
				}
			}
			return true, nil
		})
	}
	holds("the cache to hold shards 0 and 1", "cm-0", "cm-1")
	// A kind the API server does not serve is refused, as a cache refuses
	// it, so that a setup tries again; an index asked for again is taken
	// once.
	widget := &unstructured.Unstructured{}
	widget.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Widget"})
	if err := c.IndexField(ctx, widget, "x", func(client.Object) []string { return nil }); !apimeta.IsNoMatchError(err) {
		t.Errorf("IndexField of a kind not served: %v, want a no-match error", err)
	}
	if err := c.IndexField(ctx, &corev1.ConfigMap{}, "team", func(o client.Object) []string {
		return []string{o.(*corev1.ConfigMap).Data["team"]}
	}); err != nil {
		t.Errorf("IndexField of an index already there: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, "the handler to hear of cm-0 and cm-1", func(context.Context) (bool, error) {
		return h.has("cm-0", "") && h.has("cm-1", ""), nil
	})

	shares.Hold([]shard.Part{part(1), part(2)})
	if !h.has("", "cm-0") {
		t.Error("the handler did not hear that cm-0 is gone once Hold dropped its shard")
	}
	holds("the cache to hold shards 1 and 2", "cm-1", "cm-2")
	testenv.Eventually(t, 30*time.Second, "the handler to hear of cm-2", func(context.Context) (bool, error) {
		return h.has("cm-2", ""), nil
	})
	late := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm-late", Labels: map[string]string{shard.Label: "2"}}, Data: map[string]string{"team": "blue"}}
	if err := env.Client.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the handler to hear of cm-late through shard 2's cache", func(context.Context) (bool, error) {
		return h.has("cm-late", ""), nil
	})
	mu.Lock()
	defer mu.Unlock()
	if built["1"] != 1 {
		t.Errorf("the cache of shard 1, held throughout, was built %d times, want once", built["1"])
	}
}

// partsOneMayNotListSecrets is a share cache of two parts of namespace ns,
// both read, whose part 1 may list ConfigMaps and not Secrets: an informer
// of Secrets it starts never syncs. Holding only part 0 drops part 1.
func partsOneMayNotListSecrets(ctx context.Context, t *testing.T, name string) (c *shard.ShareCache, ns string, keepOnlyPart0 func()) {
	t.Helper()
	ns = env.Namespace(t, name, nil)
	user := "share-cache-part-reader-" + name
	env.Create(t,
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "configmaps"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "configmaps"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmaps"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		})
	part := func(i int) shard.Part {
		p, err := shard.PartOf(shard.Placement{Shards: 2}, i)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	shares := shard.NewShares(nil)
	shares.Hold([]shard.Part{part(0), part(1)})
	c = shares.New(clientgoscheme.Scheme, env.Client.RESTMapper(), nil, nil, func(p shard.Part) (cache.Cache, error) {
		cfg := rest.CopyConfig(env.Config)
		if p.Name == "1" {
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		}
		return cache.New(cfg, cache.Options{Scheme: clientgoscheme.Scheme, DefaultLabelSelector: p.Select, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	})
	if _, err := c.GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false)); err != nil {
		t.Fatal(err)
	}
	testenv.Background(t, c.Start)
	testenv.Eventually(t, 30*time.Second, "both parts to be read", func(context.Context) (bool, error) {
		return c.Live("0") && c.Live("1"), nil
	})
	return c, ns, func() { shares.Hold([]shard.Part{part(0)}) }
}

// TestShareCacheSyncsWithoutAPartDropped: a kind asked for just before a
// part is dropped starts an informer in that part which stops before it
// syncs. Waiting for the share cache to sync must not wait for it: a
// controller started then would never run, and a replica whose shards
// change as its controllers start would reconcile nothing of them. Here the
// part's informer cannot sync at all, as its reader may list ConfigMaps
// and not Secrets.
func TestShareCacheSyncsWithoutAPartDropped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _, keepOnlyPart0 := partsOneMayNotListSecrets(ctx, t, "share-drop")
	if _, err := c.GetInformer(ctx, &corev1.Secret{}, cache.BlockUntilSynced(false)); err != nil {
		t.Fatal(err)
	}
	synced := make(chan bool, 1)
	go func() { synced <- c.WaitForCacheSync(ctx) }()
	select {
	case <-synced:
		t.Fatal("the share cache synced while part 1 cannot list Secrets")
	case <-time.After(2 * time.Second):
	}
	keepOnlyPart0()
	select {
	case ok := <-synced:
		if !ok {
			t.Error("WaitForCacheSync returned false once part 1 was dropped, want true")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitForCacheSync still waits for part 1, dropped before its Secrets synced")
	}
}

// TestShareCacheReadsWithoutAPartDropped: a read of a kind whose informer a
// part starts waits for it to sync; if the part is dropped first, that
// informer never syncs, and the read waited for the rest of the
// reconcile's context (the explorer's seed 8268: a CopyRule could not read
// its ProviderConfigUsage for a minute after its replica lost and took back
// a shard). A read ends once the part is dropped, without it.
func TestShareCacheReadsWithoutAPartDropped(t *testing.T) {
	for name, read := range map[string]func(ctx context.Context, c client.Reader, ns string) error{
		"Get": func(ctx context.Context, c client.Reader, ns string) error {
			return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "nothing"}, &corev1.Secret{})
		},
		"List": func(ctx context.Context, c client.Reader, ns string) error {
			return c.List(ctx, &corev1.SecretList{}, client.InNamespace(ns))
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c, ns, keepOnlyPart0 := partsOneMayNotListSecrets(ctx, t, "share-read-drop-"+strings.ToLower(name))
			rctx, rcancel := context.WithTimeout(ctx, time.Minute)
			defer rcancel()
			done := make(chan error, 1)
			go func() { done <- read(rctx, c, ns) }()
			select {
			case err := <-done:
				t.Fatalf("the read returned (%v) while part 1 cannot list Secrets", err)
			case <-time.After(2 * time.Second):
			}
			keepOnlyPart0()
			select {
			case err := <-done:
				if err != nil && !kerrors.IsNotFound(err) {
					t.Errorf("the read returned %v once part 1 was dropped, want nothing found", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the read still waits for part 1, dropped before its Secrets synced")
			}
		})
	}
}
