package process

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

// A reshardFleet is 120 CopyRules over 30 namespaces, as in issue #53: rule
// j of namespace i copies its ConfigMap conf-i-j into one namespace of copies.
type reshardFleet struct {
	namespaces, rules int
	copies            string
}

func (f reshardFleet) ns(i int) string      { return fmt.Sprintf("team-reshard-%d", i) }
func (f reshardFleet) conf(i, j int) string { return fmt.Sprintf("conf-%d-%d", i, j) }
func (f reshardFleet) rule(i, j int) types.NamespacedName {
	return types.NamespacedName{Namespace: f.ns(i), Name: "rule-" + strconv.Itoa(j)}
}

func (f reshardFleet) create(t *testing.T, c *cluster) {
	t.Helper()
	ctx := context.Background()
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.copies}}); err != nil {
		t.Fatal(err)
	}
	for i := range f.namespaces {
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns(i)}}); err != nil {
			t.Fatal(err)
		}
		for j := range f.rules {
			src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns(i), Name: f.conf(i, j)}, Data: map[string]string{"v": "1"}}
			r := &copyv1alpha1.CopyRule{
				ObjectMeta: metav1.ObjectMeta{Namespace: f.ns(i), Name: f.rule(i, j).Name},
				Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
					Kind: copyv1alpha1.KindConfigMap, Names: []string{src.Name}, Namespaces: []string{f.copies},
				}},
			}
			for _, o := range []client.Object{src, r} {
				if err := c.Client.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// placed reports whether every rule carries its namespace's shard of n and
// the count n, is Ready, and its copy holds v.
func (f reshardFleet) placed(c *cluster, n int, v string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		for i := range f.namespaces {
			for j := range f.rules {
				r := &copyv1alpha1.CopyRule{}
				if err := c.Client.Get(ctx, f.rule(i, j), r); err != nil {
					return false, err
				}
				want := shard.Name(shard.Of(r.Namespace, n))
				if r.Labels[shard.Label] != want || r.Labels[shard.LabelShards] != strconv.Itoa(n) {
					return false, errors.Errorf("%s/%s labelled %v, want shard %s of %d", r.Namespace, r.Name, r.Labels, want, n)
				}
				if r.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue {
					return false, errors.Errorf("%s/%s not Ready", r.Namespace, r.Name)
				}
				cp := &corev1.ConfigMap{}
				if err := c.Client.Get(ctx, types.NamespacedName{Namespace: f.copies, Name: f.conf(i, j)}, cp); err != nil {
					return false, client.IgnoreNotFound(err)
				}
				if cp.Data["v"] != v {
					return false, errors.Errorf("copy %s holds %q, want %q", cp.Name, cp.Data["v"], v)
				}
			}
		}
		return true, nil
	}
}

// registered waits until want replicas of --shards=n have their membership
// Lease: they take part in sharing the fleet.
func (c *cluster) registered(t *testing.T, n, want int) {
	t.Helper()
	eventually(t, startup, fmt.Sprintf("%d replicas of %d shards to register", want, n), func(ctx context.Context) (bool, error) {
		l := &coordinationv1.LeaseList{}
		err := c.Client.List(ctx, l, client.InNamespace(providerNamespace), client.MatchingLabels{shard.LabelShards: strconv.Itoa(n)})
		return len(l.Items) == want, err
	})
}

// TestChangingShardsByRollingUpdate is issue #53: two replicas with
// --shards=6 over 120 CopyRules in 30 namespaces are replaced one at a time
// by two with --shards=3, as a rolling update of the DeploymentRuntimeConfig
// replaces them. Every rule is recut to its namespace's shard of 3 and acted
// on by the new replicas (a change of every source reaches every copy), the
// Leases of shards 3 to 5 are deleted, and deleting every rule leaves none
// Terminating.
func TestChangingShardsByRollingUpdate(t *testing.T) {
	c := startCluster(t, false)
	f := reshardFleet{namespaces: 30, rules: 4, copies: "team-reshard-copies"}
	replica := func(name string, n, want int) *provider {
		p := c.runProvider(t, name, append(replicaArgs(), "--shards="+strconv.Itoa(n))...)
		c.registered(t, n, want)
		return p
	}
	a, b := replica("a", 6, 1), replica("b", 6, 2)
	f.create(t, c)
	eventually(t, settle, "every rule placed under 6 shards, Ready and copied", f.placed(c, 6, "1"))

	// The rolling update: a new replica starts, then an old one stops.
	start := time.Now()
	replica("d", 3, 1)
	a.Stop()
	replica("e", 3, 2)
	b.Stop()
	eventually(t, settle, "every rule placed under 3 shards", f.placed(c, 3, "1"))
	t.Logf("every rule recut %s after the first new replica started", time.Since(start).Round(time.Millisecond))

	// The new replicas act on every rule: a change of each source reaches
	// its copy.
	for i := range f.namespaces {
		for j := range f.rules {
			src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns(i), Name: f.conf(i, j)}}
			if err := c.Client.Patch(context.Background(), src, client.RawPatch(types.MergePatchType, []byte(`{"data":{"v":"2"}}`))); err != nil {
				t.Fatal(err)
			}
		}
	}
	eventually(t, settle, "every source's change copied by the new replicas", f.placed(c, 3, "2"))
	eventually(t, shardTakeover, "the Leases of shards 3 to 5 deleted", func(ctx context.Context) (bool, error) {
		for i := 3; i < 6; i++ {
			err := c.Client.Get(ctx, types.NamespacedName{Namespace: providerNamespace, Name: fmt.Sprintf("provider-clusterops-shard-%d", i)}, &coordinationv1.Lease{})
			if err == nil {
				return false, nil
			}
			if client.IgnoreNotFound(err) != nil {
				return false, err
			}
		}
		return true, nil
	})

	// Deleting every rule leaves none Terminating.
	for i := range f.namespaces {
		if err := c.Client.DeleteAllOf(context.Background(), &copyv1alpha1.CopyRule{}, client.InNamespace(f.ns(i))); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, settle, "every rule gone", func(ctx context.Context) (bool, error) {
		l := &copyv1alpha1.CopyRuleList{}
		if err := c.Client.List(ctx, l); err != nil {
			return false, err
		}
		if len(l.Items) > 0 {
			return false, errors.Errorf("%d rules left, %s/%s among them", len(l.Items), l.Items[0].Namespace, l.Items[0].Name)
		}
		return true, nil
	})
	evs := &corev1.EventList{}
	if err := c.Client.List(context.Background(), evs, client.MatchingFields{"reason": shard.ReasonUnknownShard}); err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) > 0 {
		t.Errorf("%d UnknownShard events, the first on %s/%s", len(evs.Items), evs.Items[0].InvolvedObject.Namespace, evs.Items[0].InvolvedObject.Name)
	}
}
