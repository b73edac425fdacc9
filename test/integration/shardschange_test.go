package integration

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// runLabeler runs the shard labeler of CopyRules under shards, with its
// cache scoped as the provider's leading replica scopes it, until the
// returned func stops it.
func runLabeler(t *testing.T, shards int) func() {
	t.Helper()
	s, err := testenv.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	gvk := copyv1alpha1.CopyRuleGroupVersionKind
	by, err := shard.LabelerCacheOptions([]schema.GroupVersionKind{gvk}, shards)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 s,
		Cache:                  cache.Options{ByObject: by},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Each run names its labeler as the last did.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := shard.SetupLabeler(mgr, gvk, shard.Placement{Shards: shards}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("labeler under %d shards: %v", shards, err)
		}
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			stop()
		}
	})
	return stop
}

// TestLabelerRecutsWhenShardsChange runs the labeler under 6 shards over
// CopyRules in 24 namespaces, two pinned by hand, then under 3: every rule
// it placed is recut to its namespace's shard of 3; the
// pin that names a shard of 3 is kept, the one that does not is reported
// (UnknownShard) and kept; a rule whose shard label is removed is placed
// again.
func TestLabelerRecutsWhenShardsChange(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	const namespaces = 24
	ns := func(i int) string { return fmt.Sprintf("shards-change-%d", i) }
	rule := func(namespace, name string, ls map[string]string) *copyv1alpha1.CopyRule {
		return &copyv1alpha1.CopyRule{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: ls},
			Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
				Kind: copyv1alpha1.KindConfigMap, Names: []string{"absent"}, Namespaces: []string{namespace},
			}},
		}
	}
	var placed []*copyv1alpha1.CopyRule
	for i := range namespaces {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns(i)}}); err != nil {
			t.Fatal(err)
		}
		placed = append(placed, rule(ns(i), "placed", nil))
	}
	// Pins: one to a shard of 3 that is neither its namespace's under 6 nor
	// under 3; one to a shard of 6 beyond 3, not its namespace's under 6.
	pinNS := ns(0)
	var valid, invalid string
	for i := range 6 {
		switch {
		case i == shard.Of(pinNS, 6):
		case i < 3 && i != shard.Of(pinNS, 3) && valid == "":
			valid = shard.Name(i)
		case i >= 3 && invalid == "":
			invalid = shard.Name(i)
		}
	}
	pins := map[string]*copyv1alpha1.CopyRule{
		valid:   rule(pinNS, "pinned-valid", map[string]string{shard.Label: valid}),
		invalid: rule(pinNS, "pinned-invalid", map[string]string{shard.Label: invalid}),
	}
	stop6 := runLabeler(t, 6)
	for _, r := range append(placed, pins[valid], pins[invalid]) {
		if err := c.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	placedUnder(t, placed, 6)
	stop6()
	start := time.Now()
	runLabeler(t, 3)
	placedUnder(t, placed, 3)
	t.Logf("%d rules recut from 6 shards to 3 in %s", len(placed), time.Since(start).Round(time.Millisecond))
	testenv.Eventually(t, wait, "a Warning UnknownShard on the pin to shard "+invalid, func(ctx context.Context) (bool, error) {
		evs := &corev1.EventList{}
		err := c.List(ctx, evs, client.InNamespace(pinNS), client.MatchingFields{"involvedObject.name": "pinned-invalid"})
		for _, e := range evs.Items {
			if e.Reason == shard.ReasonUnknownShard && e.Type == corev1.EventTypeWarning {
				return true, nil
			}
		}
		return false, err
	})
	for v, p := range pins {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			t.Fatal(err)
		}
		if diff := p.Labels; diff[shard.Label] != v || diff[shard.LabelShards] != "" {
			t.Errorf("pin %s: labels %v, want %s=%s alone", p.Name, p.Labels, shard.Label, v)
		}
	}

	// A rule placed under 3 whose shard label is removed is placed again.
	stray := placed[1]
	unlabel := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/labels/crossplane.io~1shard"}]`))
	if err := c.Patch(ctx, stray, unlabel); err != nil {
		t.Fatal(err)
	}
	placedUnder(t, []*copyv1alpha1.CopyRule{stray}, 3)
}

// placedUnder waits until each rule carries its namespace's shard of shards
// and the count it was placed under, and reads them.
func placedUnder(t *testing.T, rules []*copyv1alpha1.CopyRule, shards int) {
	t.Helper()
	testenv.Eventually(t, wait, fmt.Sprintf("%d rules placed under %d shards", len(rules), shards), func(ctx context.Context) (bool, error) {
		for _, r := range rules {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
				return false, err
			}
			want := map[string]string{shard.Label: shard.Name(shard.Of(r.Namespace, shards)), shard.LabelShards: strconv.Itoa(shards)}
			if r.Labels[shard.Label] != want[shard.Label] || r.Labels[shard.LabelShards] != want[shard.LabelShards] {
				return false, nil
			}
		}
		return true, nil
	})
}

// TestReplicaSweepsLeasesOfShardsGone runs a replica with 3 shards beside
// the Leases of shards 3 to 5 left by replicas of 6: those nobody renews are
// deleted once unrenewed for a lease duration, the one a live replica
// renews is kept until it no longer does.
func TestReplicaSweepsLeasesOfShardsGone(t *testing.T) {
	const (
		name          = "shards-change"
		leaseDuration = 2 * time.Second
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testenv.ProviderNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	lease := func(i int) *coordinationv1.Lease {
		now := metav1.NewMicroTime(time.Now())
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: testenv.ProviderNamespace, Name: fmt.Sprintf("%s-shard-%d", name, i), Labels: map[string]string{shard.LabelReplicaOf: name}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To("old"), LeaseDurationSeconds: ptr.To(int32(leaseDuration.Seconds())),
				AcquireTime: &now, RenewTime: &now,
			},
		}
	}
	for i := 3; i < 6; i++ {
		if err := c.Create(ctx, lease(i)); err != nil {
			t.Fatal(err)
		}
	}
	// A live replica of 6 renews shard 4's Lease every 300 ms.
	renewing, renewed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(renewed)
		for {
			select {
			case <-renewing:
				return
			case <-time.After(300 * time.Millisecond):
			}
			l := &coordinationv1.Lease{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: testenv.ProviderNamespace, Name: name + "-shard-4"}, l); err != nil {
				t.Errorf("renew shard 4's Lease: %v", err)
				return
			}
			l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
			if err := c.Update(ctx, l); err != nil && !kerrors.IsConflict(err) {
				t.Errorf("renew shard 4's Lease: %v", err)
			}
		}
	}()
	o := shard.Options{
		Config: env.Config, Namespace: testenv.ProviderNamespace, Name: name, Identity: "new", Shards: 3,
		LeaseDuration: leaseDuration, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 250 * time.Millisecond,
	}
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		if err := shard.Run(ctx, o, idle{}); err != nil {
			t.Errorf("replica: %v", err)
		}
	}()
	defer func() { cancel(); <-ran }()
	exists := func(ctx context.Context, i int) (bool, error) {
		err := c.Get(ctx, types.NamespacedName{Namespace: testenv.ProviderNamespace, Name: fmt.Sprintf("%s-shard-%d", name, i)}, &coordinationv1.Lease{})
		return err == nil, client.IgnoreNotFound(err)
	}
	start := time.Now()
	testenv.Eventually(t, wait, "the Leases of shards 3 and 5 deleted", func(ctx context.Context) (bool, error) {
		three, err := exists(ctx, 3)
		if err != nil {
			return false, err
		}
		five, err := exists(ctx, 5)
		return !three && !five, err
	})
	t.Logf("unrenewed Leases deleted %s after the replica started (lease duration %s)", time.Since(start).Round(time.Millisecond), leaseDuration)
	if ok, err := exists(ctx, 4); err != nil || !ok {
		t.Fatalf("the Lease of shard 4, renewed, deleted (%v)", err)
	}
	close(renewing)
	<-renewed
	testenv.Eventually(t, wait, "the Lease of shard 4 deleted once no longer renewed", func(ctx context.Context) (bool, error) {
		ok, err := exists(ctx, 4)
		return !ok, err
	})
}

// idle is a replica's work that does nothing.
type idle struct{}

func (idle) Run(ctx context.Context) error { <-ctx.Done(); return nil }

func (idle) Hold([]int) error { return nil }
