// Package throttle runs the provider with a client-side request limit
// (--client-qps) far below what a fleet asks for, to show what the limit holds
// back and what it does not.
package throttle

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

var env *testenv.Env

// qps is the provider's --client-qps: two requests a second per resource.
const qps = 2

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, time.Hour, func(e *testenv.Env) { env = e; e.ClientQPS = qps }, nil))
}

// TestChangeGoesAheadOfThrottledFleet: with a fleet of new CopyRules whose
// ConfigMap requests wait for the limit (about 30 s of them at two a
// second), a change to the source of a rule already in sync is copied before
// that backlog is through: the reconcile the change causes takes its tokens
// ahead of the routine requests waiting.
func TestChangeGoesAheadOfThrottledFleet(t *testing.T) {
	ctx := context.Background()
	// The fleet reads from a namespace of its own: in the changed rule's, the
	// fleet's arrival reconciled that rule once more, and that routine
	// reconcile, throttled, held the change's behind it (one key is never
	// reconciled twice at once).
	src, bulk, tgt := env.Namespace(t, "throttle-src", nil), env.Namespace(t, "throttle-bulk", nil), env.Namespace(t, "throttle-tgt", nil)
	create := func(o client.Object) {
		t.Helper()
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	create(&v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "throttle"},
		Spec: v1alpha1.ClusterProviderConfigSpec{
			Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity},
			Reach:       &v1alpha1.Reach{Namespaces: []string{"throttle-*"}},
		},
	})
	rule := func(ns, name string) *copyv1alpha1.CopyRule {
		r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		r.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: "throttle"}
		r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{name}, Namespaces: []string{tgt}}
		return r
	}
	holds := func(name, v string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			cm := &corev1.ConfigMap{}
			err := env.Client.Get(ctx, types.NamespacedName{Namespace: tgt, Name: name}, cm)
			return err == nil && cm.Data["k"] == v, client.IgnoreNotFound(err)
		}
	}

	create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "watched"}, Data: map[string]string{"k": "v1"}})
	create(rule(src, "watched"))
	testenv.Eventually(t, time.Minute, "the first copy", holds("watched", "v1"))

	// The fleet: each rule reads its own source and creates its copy, two
	// ConfigMap requests of 30 rules at two a second.
	const fleet = 30
	for i := range fleet {
		name := fmt.Sprintf("bulk-%d", i)
		create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: bulk, Name: name}, Data: map[string]string{"k": "v"}})
	}
	for i := range fleet {
		name := fmt.Sprintf("bulk-%d", i)
		create(rule(bulk, name))
	}
	// Routine requests are waiting for the limit before the change is made.
	testenv.Eventually(t, time.Minute, "routine requests waiting for the limit", func(context.Context) (bool, error) {
		n, err := throttledRequests()
		return n > 0, err
	})
	changed := time.Now()
	watched := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "watched"}}
	env.Update(t, watched, func() { watched.Data["k"] = "v2" })
	testenv.Eventually(t, time.Minute, "the changed source copied", holds("watched", "v2"))
	took := time.Since(changed)

	// Ordering, not a time: how many of the fleet were through by then.
	copied := 0
	for i := range fleet {
		if ok, err := holds(fmt.Sprintf("bulk-%d", i), "v")(ctx); err != nil {
			t.Fatal(err)
		} else if ok {
			copied++
		}
	}
	t.Logf("the change copied after %v, with %d of the fleet's %d copies made", took, copied, fleet)
	if copied == fleet {
		t.Errorf("the change was copied only after the whole fleet: it waited behind the throttled routine requests")
	}
	// The limit still holds the fleet back: it converges, at the limit's pace.
	for i := range fleet {
		testenv.Eventually(t, 2*time.Minute, "the fleet's copies", holds(fmt.Sprintf("bulk-%d", i), "v"))
	}
}

// throttledRequests is how many routine requests have waited for the limit.
func throttledRequests() (uint64, error) {
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() == "clusterops_api_throttled_seconds" {
			var n uint64
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
			return n, nil
		}
	}
	return 0, nil
}
