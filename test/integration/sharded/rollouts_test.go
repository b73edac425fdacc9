package sharded

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/provider"
	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

const (
	hashKey = "workload.clusterops.io/config-hash"
	lockKey = "workload.clusterops.io/config-rollout"
	// split is the shards of TestShardedRolloutsRollOnce, as in issue #52:
	// their ranges and Leases are not the other tests' (shard.RangesName).
	split = 2
)

// TestShardedRolloutsRollOnce: two ConfigRollouts of one namespace follow
// one Deployment, r1 (ConfigMap a) pinned to a shard of one replica and r2
// (a and b) to a shard of the other. Each replica's cache holds only its
// shards' rollouts; locks and baselines are read from every rollout of the
// namespace all the same. The Deployment follows r1, the older, by its
// baseline and then its lock; r2 says so, and each change of a rolls it
// once (its generation rises by one), a change of b not at all.
func TestShardedRolloutsRollOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testenv.ProviderNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	if _, err := testenv.ApplyFile(ctx, c, testenv.RepoRoot()+"/examples/providerconfig/clusterproviderconfig.yaml"); err != nil {
		t.Fatal(err)
	}
	sel := startReplicas(ctx, t, split, "c", "d")
	cs := kubernetes.NewForConfigOrDie(env.Config)
	held := holders(ctx, t, cs, split, "c", "d")

	// A namespace that exists already: a new one would move the ranges the
	// other tests' replicas cut over the cluster's namespaces.
	ns := metav1.NamespaceDefault
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}, Data: map[string]string{"k": "1"}}
	b := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns}, Data: map[string]string{"k": "1"}}
	web := reading(ns, "web", "a", "b")
	// The rollouts go while their replicas run, which release their
	// finalizers: the next tests' replicas find none pinned to their shards.
	defer deleteAll(t, ns, []string{"r1", "r2"}, a, b, web)
	for _, o := range []client.Object{a, b, web} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	place, err := shard.Place(ctx, cs, testenv.ProviderNamespace, provider.LeaderElectionID, split)
	if err != nil {
		t.Fatal(err)
	}
	// r1 on the shard of the namespace; r2 on a shard the other replica holds.
	own := place.Of(ns)
	other := -1
	for i, id := range held {
		if id != held[own] {
			other = i
		}
	}
	if other < 0 {
		t.Fatalf("one replica holds every shard: %v", held)
	}
	if err := c.Create(ctx, pinned(ns, "r1", own, "a")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "r1 to follow web", func(ctx context.Context) (bool, error) {
		r, err := rollout(ctx, ns, "r1")
		return err == nil && followed(r) && r.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue, err
	})
	if err := c.Create(ctx, pinned(ns, "r2", other, "a", "b")); err != nil {
		t.Fatal(err)
	}
	// r2's replica acts on it with the namespace's workloads in its watch.
	testenv.Eventually(t, wait, "replica "+held[other]+" to watch the workloads of "+ns, func(context.Context) (bool, error) {
		return selects(t, sel.current(held[other]), ns), nil
	})
	testenv.Eventually(t, wait, "r2 to be observed", func(ctx context.Context) (bool, error) {
		r, err := rollout(ctx, ns, "r2")
		return err == nil && r.Status.AtProvider.Hash != "" && r.GetCondition(xpv2.TypeReady).Reason != "", err
	})
	r2, err := rollout(ctx, ns, "r2")
	if err != nil {
		t.Fatal(err)
	}
	if msg := r2.GetCondition(xpv2.TypeReady).Message; followed(r2) || !strings.Contains(msg, `follows ConfigRollout "r1"`) {
		t.Errorf("r2 records %+v, says %q: want web left to r1, which follows it by its baseline", r2.Status.AtProvider.Workloads, msg)
	}

	// Two changes of a, the first against r1's baseline, the second against
	// its lock: one roll each. A change of b, which r1 does not read: none.
	for i, step := range []struct {
		cm   *corev1.ConfigMap
		want int64
	}{{a, 2}, {a, 3}, {b, 3}} {
		change(ctx, t, ns, step.cm, fmt.Sprint(i+2))
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d); err != nil {
			t.Fatal(err)
		}
		if d.Generation != step.want || d.Annotations[lockKey] != "r1" {
			t.Errorf("change %d, of ConfigMap %s: generation %d, lock %q; want generation %d, one roll a change of a, by r1", i+1, step.cm.Name, d.Generation, d.Annotations[lockKey], step.want)
		}
	}
}

// deleteAll deletes ConfigRollouts names of namespace ns, waits until they
// are gone, and deletes objs.
func deleteAll(t *testing.T, ns string, names []string, objs ...client.Object) {
	t.Helper()
	for _, name := range names {
		cr := &workloadv1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		if err := env.Client.Delete(context.Background(), cr); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, wait, fmt.Sprintf("ConfigRollouts %v to be gone", names), func(ctx context.Context) (bool, error) {
		for _, name := range names {
			if _, err := rollout(ctx, ns, name); !kerrors.IsNotFound(err) {
				return false, fmt.Errorf("%s: %w", name, err)
			}
		}
		return true, nil
	})
	for _, o := range objs {
		if err := env.Client.Delete(context.Background(), o); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
}

// startReplicas starts sharded replicas ids of the provider with n shards,
// each recording the shardSelector of its workloads' watches in what it
// returns.
func startReplicas(ctx context.Context, t *testing.T, n int, ids ...string) *selectors {
	t.Helper()
	sel := newSelectors()
	for _, id := range ids {
		o := testenv.ProviderOptions(env.Config, time.Hour, 50)
		o.Shards, o.Identity, o.SkipNameValidation = n, id, true
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
		o.MetricsRegistry = prometheus.NewRegistry()
		o.WrapManager = sel.wrap(id)
		p, err := provider.New(o)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			if err := p.Start(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("replica %s: %v", id, err)
			}
		}()
	}
	return sel
}

// holders waits until replicas ids hold the n shards evenly, and returns
// the holder of each shard.
func holders(ctx context.Context, t *testing.T, cs kubernetes.Interface, n int, ids ...string) []string {
	t.Helper()
	held := make([]string, n)
	testenv.Eventually(t, wait, fmt.Sprintf("%v to hold the shards evenly", ids), func(ctx context.Context) (bool, error) {
		count := map[string]int{}
		for i := range n {
			l, err := cs.CoordinationV1().Leases(testenv.ProviderNamespace).Get(ctx, fmt.Sprintf("%s-shard-%d", provider.LeaderElectionID, i), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			held[i] = ptr.Deref(l.Spec.HolderIdentity, "")
			count[held[i]]++
		}
		for _, id := range ids {
			if count[id] != n/len(ids) {
				return false, fmt.Errorf("shards held: %v", held)
			}
		}
		return true, nil
	})
	return held
}

// reading is a Deployment whose pods read ConfigMaps cms through volumes.
func reading(ns, name string, cms ...string) *appsv1.Deployment {
	d := deployment(ns, name)
	d.Spec.Template.Spec.Volumes = nil
	for _, cm := range cms {
		d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: cm, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}},
		}})
	}
	return d
}

// pinned is a ConfigRollout of Deployment web, labelled with shard s.
func pinned(ns, name string, s int, cms ...string) *workloadv1alpha1.ConfigRollout {
	cr := &workloadv1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{shard.Label: shard.Name(s)}}}
	for _, cm := range cms {
		cr.Spec.ForProvider.ConfigMaps = append(cr.Spec.ForProvider.ConfigMaps, workloadv1alpha1.SourceRef{Name: cm})
	}
	cr.Spec.ForProvider.Workloads = []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "web"}}
	return cr
}

func rollout(ctx context.Context, ns, name string) (*workloadv1alpha1.ConfigRollout, error) {
	r := &workloadv1alpha1.ConfigRollout{}
	return r, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, r)
}

// followed is whether the rollout records Deployment web.
func followed(r *workloadv1alpha1.ConfigRollout) bool {
	for _, w := range r.Status.AtProvider.Workloads {
		if w.Kind == "Deployment" && w.Name == "web" {
			return true
		}
	}
	return false
}

// change sets ConfigMap cm's value and waits until every rollout that reads
// it has observed the change to its end: its status, written after any
// roll of that reconcile, is at the new hash and settled. r1, when it reads
// cm, has rolled web to its hash by then.
func change(ctx context.Context, t *testing.T, ns string, cm *corev1.ConfigMap, value string) {
	t.Helper()
	before := map[string]string{}
	for _, name := range []string{"r1", "r2"} {
		r, err := rollout(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		before[name] = r.Status.AtProvider.Hash
	}
	env.Update(t, cm, func() { cm.Data["k"] = value })
	readers := map[string]bool{"r1": cm.Name == "a", "r2": true}
	testenv.Eventually(t, wait, "the rollouts that read "+cm.Name+" to settle at its change", func(ctx context.Context) (bool, error) {
		for name, reads := range readers {
			r, err := rollout(ctx, ns, name)
			if err != nil || !reads {
				continue
			}
			ready := r.GetCondition(xpv2.TypeReady)
			if r.Status.AtProvider.Hash == before[name] || ready.Reason == "" || strings.Contains(ready.Message, "to roll") {
				return false, fmt.Errorf("%s at hash %s, Ready %q", name, r.Status.AtProvider.Hash, ready.Message)
			}
		}
		r1, err := rollout(ctx, ns, "r1")
		if err != nil {
			return false, err
		}
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d); err != nil {
			return false, err
		}
		if r1.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue || d.Spec.Template.Annotations[hashKey] != r1.Status.AtProvider.Hash {
			return false, fmt.Errorf("web at generation %d carries hash %s and lock %q, r1 at %s", d.Generation, d.Spec.Template.Annotations[hashKey], d.Annotations[lockKey], r1.Status.AtProvider.Hash)
		}
		return true, nil
	})
}
