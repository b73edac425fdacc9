// Package ratelimit runs the provider at --max-reconcile-rate=1 against a
// real API server, to show which reconciles that rate paces.
package ratelimit

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/flow"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// An hour's poll, and one routine reconcile a second (a burst of one).
	os.Exit(testenv.Main(m, time.Hour, func(e *testenv.Env) { env, e.Rate = e, 1 }, nil))
}

// TestNewFleetIsNotPacedByTheRate: resources applied at once take their
// first reconcile from the bucket LightShare times --max-reconcile-rate, as
// converged ones do, not from the rate itself. At one reconcile a second, 40
// new CopyRules would need at least 39 s to all be reconciled; from the
// larger bucket (10 a second, a burst of 10) about 3 s. The 20 s allowed sits
// far from both.
func TestNewFleetIsNotPacedByTheRate(t *testing.T) {
	const n, allowed = 40, 20 * time.Second
	if flow.LightShare < 10 {
		t.Fatalf("LightShare is %d: the arithmetic above assumes 10", flow.LightShare)
	}
	reachable := map[string]string{"clusterops.io/reachable": "true"}
	ns := env.Namespace(t, "rate", reachable)
	dst := env.Namespace(t, "rate-dst", reachable)
	ctx := context.Background()
	// The first rule starts the watches every rule shares; it is not timed.
	rule := func(i int) *copyv1alpha1.CopyRule {
		src := fmt.Sprintf("conf-%d", i)
		if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: src, Namespace: ns}, Data: map[string]string{"k": "v"}}); err != nil {
			t.Fatal(err)
		}
		return &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("copy-%d", i), Namespace: ns},
			Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
				Kind: copyv1alpha1.KindConfigMap, Names: []string{src}, Namespaces: []string{dst},
			}}}
	}
	first := rule(n)
	if err := env.Client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	ready := func(ctx context.Context, r *copyv1alpha1.CopyRule) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			return false, err
		}
		return r.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue, nil
	}
	testenv.Eventually(t, 30*time.Second, "the first CopyRule to be Ready", func(ctx context.Context) (bool, error) { return ready(ctx, first) })
	// Let the global bucket's one slot refill, so that both buckets start full.
	time.Sleep(2 * time.Second)

	rules := make([]*copyv1alpha1.CopyRule, n)
	for i := range rules {
		rules[i] = rule(i)
	}
	start := time.Now()
	for _, r := range rules {
		if err := env.Client.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, allowed, fmt.Sprintf("%d new CopyRules to be Ready at --max-reconcile-rate=1", n), func(ctx context.Context) (bool, error) {
		for _, r := range rules {
			if ok, err := ready(ctx, r); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	})
	t.Logf("%d new CopyRules Ready in %v at --max-reconcile-rate=1", n, time.Since(start).Round(time.Millisecond))
}
