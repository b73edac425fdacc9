//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
)

// BenchmarkCopyRuleFanOut copies one ConfigMap into BENCH_COPY_NAMESPACES
// (default 1000) namespaces: the time until every copy exists, and after a
// source update until every copy holds the new data. Beside it, in the same
// run, a raw client writes the same objects with the rule's parallelism (16),
// as the floor the API server allows.
func BenchmarkCopyRuleFanOut(b *testing.B) {
	e := provider(b)
	ctx := context.Background()
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("BENCH_COPY_NAMESPACES")); err == nil && v > 0 {
		n = v
	}
	run := fmt.Sprintf("%d", time.Now().Unix()%100000)
	sel := map[string]string{"bench-copy": run}
	nss := make([]string, n)
	parallel(b, n, func(i int) error {
		nss[i] = fmt.Sprintf("bench-copy-%s-%d", run, i)
		return e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nss[i], Labels: sel}})
	})
	src := "bench-copy-" + run + "-src"
	cpc := "bench-copy-" + run
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: src}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "shared"}, Data: map[string]string{"k": "v1"}},
		&v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: cpc}, Spec: v1alpha1.ClusterProviderConfigSpec{
			Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity},
			Reach:       &v1alpha1.Reach{Namespaces: []string{"bench-copy-*"}},
		}},
	} {
		if err := e.Client.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "fan-out"}}
	r.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: cpc}
	r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{"shared"}, NamespaceSelector: &metav1.LabelSelector{MatchLabels: sel}, ConflictPolicy: copyv1alpha1.ConflictSkip, MaxParallelWrites: 16}

	// copies counts the rule's copies that hold v.
	copies := func(v string) (int, error) {
		l := &corev1.ConfigMapList{}
		if err := e.Client.List(ctx, l, client.MatchingLabels{"copy.clusterops.io/rule-uid": string(r.UID)}); err != nil {
			return 0, err
		}
		c := 0
		for _, cm := range l.Items {
			if cm.Data["k"] == v {
				c++
			}
		}
		return c, nil
	}
	until := func(v string) time.Duration {
		start := time.Now()
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Minute, true, func(context.Context) (bool, error) {
			c, err := copies(v)
			return c == n, err
		}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}

	b.ResetTimer()
	// until starts its clock right after the create: the reaction is measured.
	if err := e.Client.Create(ctx, r); err != nil {
		b.Fatal(err)
	}
	initial := until("v1")
	cm := &corev1.ConfigMap{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: src, Name: "shared"}, cm); err != nil {
		b.Fatal(err)
	}
	cm.Data["k"] = "v2"
	if err := e.Client.Update(ctx, cm); err != nil {
		b.Fatal(err)
	}
	update := until("v2")
	b.StopTimer()

	// The raw client: the same creates, then the same updates, 16 at a time.
	raw := func(fn func(i int) error) time.Duration {
		start := time.Now()
		parallelN(b, 16, n, fn)
		return time.Since(start)
	}
	rawCreate := raw(func(i int) error {
		return e.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nss[i], Name: "raw"}, Data: map[string]string{"k": "v1"}})
	})
	rawUpdate := raw(func(i int) error {
		return e.Client.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nss[i], Name: "raw"}, Data: map[string]string{"k": "v2"}})
	})
	b.ReportMetric(initial.Seconds(), "s-initial")
	b.ReportMetric(update.Seconds(), "s-update")
	b.ReportMetric(rawCreate.Seconds(), "s-raw-create")
	b.ReportMetric(rawUpdate.Seconds(), "s-raw-update")
	b.ReportMetric(float64(n), "namespaces")

	// Clean up: the rule prunes its copies; namespaces go with the control plane.
	_ = e.Client.Delete(ctx, r)
}
