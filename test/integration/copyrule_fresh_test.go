package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestCopyRuleReportsStaleCopies denies the provider's writes of a copy with
// a ValidatingAdmissionPolicy while its source changes: the rule reports the
// copy out of sync since the first failed write, turns Fresh False (Stale)
// with a Warning event once staleAfter passes, and the provider's oldest
// unsynced time is set. With the policy gone, the copy catches up and the
// rule is fresh again, with nothing since.
func TestCopyRuleReportsStaleCopies(t *testing.T) {
	src := env.Namespace(t, "copy-fresh-src", nil)
	dst := env.Namespace(t, "copy-fresh-dst", nil)
	env.Create(t, configMap(src, "settings", map[string]string{"k": "v1"}, nil))
	r := copyRule(t, src, "fresh", copyv1alpha1.CopyRuleParameters{
		Kind: copyv1alpha1.KindConfigMap, Names: []string{"settings"}, Namespaces: []string{dst},
		StaleAfter: &metav1.Duration{Duration: 2 * time.Second},
	})
	env.WaitConverged(t, wait, r)
	if c := r.GetCondition(copyv1alpha1.TypeFresh); c.Status != corev1.ConditionTrue || c.Reason != copyv1alpha1.ReasonInSync {
		t.Errorf("a rule in sync: Fresh %s %s, want True InSync", c.Status, c.Reason)
	}

	unfreeze := freeze(t, dst)
	source := &corev1.ConfigMap{}
	get(t, src, "settings", source)
	env.Update(t, source, func() { source.Data["k"] = "v2" })
	var since time.Time
	testenv.Eventually(t, wait, "the copy reported out of sync, then stale", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			return false, err
		}
		o, fresh := r.Status.AtProvider, r.GetCondition(copyv1alpha1.TypeFresh)
		if o.OutOfSyncSince == nil || len(o.Problems) != 1 || o.Problems[0].Reason != copyv1alpha1.ProblemWriteFailed || o.Problems[0].Since == nil {
			return false, fmt.Errorf("status %+v", o)
		}
		since = o.OutOfSyncSince.Time
		if s := r.GetCondition(xpv2.TypeSynced); s.Status != corev1.ConditionFalse {
			return false, fmt.Errorf("Synced %s", s.Status)
		}
		if fresh.Status != corev1.ConditionFalse || fresh.Reason != copyv1alpha1.ReasonStale {
			return false, fmt.Errorf("Fresh %s %s", fresh.Reason, fresh.Message)
		}
		return true, nil
	})
	if !r.Status.AtProvider.Problems[0].Since.Time.Equal(since) {
		t.Errorf("the copy's problem since %s, the rule's out of sync since %s: want the same, the first failed write", r.Status.AtProvider.Problems[0].Since, since)
	}
	testenv.Eventually(t, wait, "a CopiesStale Warning event", func(ctx context.Context) (bool, error) {
		events := &corev1.EventList{}
		err := env.Client.List(ctx, events, client.InNamespace(src))
		for _, e := range events.Items {
			if e.InvolvedObject.Name == r.Name && e.Reason == "CopiesStale" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, dst+"/settings") {
				return true, nil
			}
		}
		return false, err
	})
	if v := gauge(t, "clusterops_copy_oldest_unsynced_timestamp_seconds"); v <= 0 || v > float64(since.Unix())+1 {
		t.Errorf("oldest unsynced %v, want a time no later than the rule's %d", v, since.Unix())
	}

	unfreeze()
	copyHolds(t, dst, "settings", map[string]string{"k": "v2"})
	testenv.Eventually(t, wait, "the rule fresh again", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			return false, err
		}
		fresh := r.GetCondition(copyv1alpha1.TypeFresh)
		return fresh.Reason == copyv1alpha1.ReasonInSync && r.Status.AtProvider.OutOfSyncSince == nil && len(r.Status.AtProvider.Problems) == 0, nil
	})
}

// freeze denies every update of ConfigMaps in namespace ns with a
// ValidatingAdmissionPolicy, once it is in force, and returns what lifts it.
func freeze(t *testing.T, ns string) func() {
	t.Helper()
	ctx := context.Background()
	name := "freeze-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "frozen"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	env.Create(t, policy, binding)
	probe := configMap(ns, "freeze-probe", map[string]string{"n": "0"}, nil)
	env.Create(t, probe)
	testenv.Eventually(t, wait, "the freeze to be in force", func(ctx context.Context) (bool, error) {
		probe.Data["n"] += "1"
		err := env.Client.Update(ctx, probe)
		return err != nil && strings.Contains(err.Error(), "frozen"), nil
	})
	lift := func() {
		_ = env.Client.Delete(ctx, binding)
		_ = env.Client.Delete(ctx, policy)
		testenv.Eventually(t, wait, "the freeze to be lifted", func(ctx context.Context) (bool, error) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(probe), probe); err != nil {
				return false, err
			}
			probe.Data["n"] += "1"
			return env.Client.Update(ctx, probe) == nil, nil
		})
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, binding)
		_ = env.Client.Delete(ctx, policy)
	})
	return lift
}

// gauge reads a gauge of the in-process provider's metrics.
func gauge(t *testing.T, name string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) > 0 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
