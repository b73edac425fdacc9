package integration

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestCopyRulesDoNotLoop runs two rules that copy into each other's source
// namespace with the same selector, which the copies match too, as their
// labels are the sources': a copy is never a source, so each rule copies
// only the other namespace's original, nothing is copied back, and a change
// of a source writes its one copy once and then nothing more.
func TestCopyRulesDoNotLoop(t *testing.T) {
	ctx := context.Background()
	a, b := env.Namespace(t, "copy-loop-a", nil), env.Namespace(t, "copy-loop-b", nil)
	loop := map[string]string{"loop": "yes"}
	sel := &metav1.LabelSelector{MatchLabels: loop}
	env.Create(t, configMap(a, "from-a", map[string]string{"v": "1"}, loop), configMap(b, "from-b", map[string]string{"v": "1"}, loop))
	ra := copyRule(t, a, "a-to-b", copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Selector: sel, Namespaces: []string{b}})
	rb := copyRule(t, b, "b-to-a", copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Selector: sel, Namespaces: []string{a}})
	env.WaitConverged(t, wait, ra)
	env.WaitConverged(t, wait, rb)
	copyHolds(t, b, "from-a", map[string]string{"v": "1"})
	copyHolds(t, a, "from-b", map[string]string{"v": "1"})
	testenv.WaitIdle(t, wait)

	// Each namespace holds its original and the other's copy, nothing more,
	// and each rule counts the one copy it made.
	for _, ns := range []string{a, b} {
		l := &corev1.ConfigMapList{}
		if err := env.Client.List(ctx, l, client.InNamespace(ns), client.MatchingLabels(loop)); err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 2 {
			t.Errorf("namespace %s holds %d ConfigMaps labelled loop=yes, want its original and one copy", ns, len(l.Items))
		}
	}
	for _, r := range []*copyv1alpha1.CopyRule{ra, rb} {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			t.Fatal(err)
		}
		if n := r.Status.AtProvider.CopiesInSync; n != 1 {
			t.Errorf("rule %s has %d copies in sync, want 1: a copy was taken for a source", r.Name, n)
		}
	}

	// A change of a source is one write of its copy, then quiet.
	mark := env.Requests.Len()
	if err := env.Client.Patch(ctx, configMap(a, "from-a", nil, nil), client.RawPatch(types.MergePatchType, []byte(`{"data":{"v":"2"}}`))); err != nil {
		t.Fatal(err)
	}
	copyHolds(t, b, "from-a", map[string]string{"v": "2"})
	testenv.WaitIdle(t, wait)
	var writes []string
	for _, q := range env.Requests.Since(mark) {
		if !strings.HasPrefix(q, "GET ") && (strings.Contains(q, "/namespaces/"+a+"/configmaps") || strings.Contains(q, "/namespaces/"+b+"/configmaps")) {
			writes = append(writes, q)
		}
	}
	if len(writes) != 1 {
		t.Errorf("one source change made %d writes of ConfigMaps, want the one of its copy: %v", len(writes), writes)
	}
}
