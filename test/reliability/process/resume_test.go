package process

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
)

// TestCopyRuleRestartReadsOnlyWhatChanged converges CopyRules, stops the
// provider, changes one rule's source and edits another rule's copy, and
// starts a new provider: it repairs exactly those two, and reads nothing of
// the rules that stayed in sync (their status digest matches what their
// watches list). Before, a restart read every rule's source and copies
// again: two GETs per rule, 20,000 for 10,000 rules. The two rules that
// change copy Secrets, the others ConfigMaps, so the provider's request
// counts tell them apart.
func TestCopyRuleRestartReadsOnlyWhatChanged(t *testing.T) {
	c := startCluster(t, false)
	ctx := context.Background()
	const rules = 12
	own := "team-resume"
	targets := []string{"team-resume-a", "team-resume-b"}
	for _, ns := range append([]string{own}, targets...) {
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// Rules 0 and 1 copy a Secret, the others a ConfigMap.
	kind := func(i int) string {
		if i < 2 {
			return copyv1alpha1.KindSecret
		}
		return copyv1alpha1.KindConfigMap
	}
	object := func(i int, ns string) client.Object {
		m := metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("conf-%02d", i)}
		if kind(i) == copyv1alpha1.KindSecret {
			return &corev1.Secret{ObjectMeta: m}
		}
		return &corev1.ConfigMap{ObjectMeta: m}
	}
	data := func(i int) map[string]string { return map[string]string{"v": fmt.Sprint(i)} }
	for i := range rules {
		src := object(i, own)
		switch o := src.(type) {
		case *corev1.Secret:
			o.StringData = data(i)
		case *corev1.ConfigMap:
			o.Data = data(i)
		}
		if err := c.Client.Create(ctx, src); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.Create(ctx, &copyv1alpha1.CopyRule{
			ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: src.GetName()},
			Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
				Kind: kind(i), Names: []string{src.GetName()}, Namespaces: targets,
			}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	// copiesHold reports whether every rule's copies hold want(i).
	copiesHold := func(want func(i int) map[string]string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			for i := range rules {
				for _, ns := range targets {
					o := object(i, ns)
					if err := c.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
						return false, client.IgnoreNotFound(err)
					}
					got := map[string]string{}
					switch o := o.(type) {
					case *corev1.Secret:
						for k, v := range o.Data {
							got[k] = string(v)
						}
					case *corev1.ConfigMap:
						got = o.Data
					}
					if !maps.Equal(got, want(i)) {
						return false, errors.Errorf("%s/%s holds %v, want %v", ns, o.GetName(), got, want(i))
					}
				}
			}
			return true, nil
		}
	}
	first := c.runProvider(t, "resume-1", "--poll=1h")
	eventually(t, time.Minute, "every rule's copies", copiesHold(data))
	eventually(t, time.Minute, "every rule Ready with a digest of what it found in sync", func(ctx context.Context) (bool, error) {
		l := &copyv1alpha1.CopyRuleList{}
		if err := c.Client.List(ctx, l, client.InNamespace(own)); err != nil {
			return false, err
		}
		for _, r := range l.Items {
			if r.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue || r.Status.AtProvider.SyncedDigest == "" {
				return false, errors.Errorf("%s: Ready %s, digest %q", r.Name, r.GetCondition(xpv2.TypeReady).Status, r.Status.AtProvider.SyncedDigest)
			}
		}
		return len(l.Items) == rules, nil
	})
	first.Kill()

	// While no provider runs: rule 0's source changes, rule 1's copy in the
	// first target is edited by someone.
	changed := func(i int) map[string]string {
		if i == 0 {
			return map[string]string{"v": "changed"}
		}
		return data(i)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"stringData":{"v":"changed"}}`))
	if err := c.Client.Patch(ctx, object(0, own), patch); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Patch(ctx, object(1, targets[0]), patch); err != nil {
		t.Fatal(err)
	}

	second := c.runProvider(t, "resume-2", "--poll=1h")
	eventually(t, time.Minute, "the changed source copied and the edited copy repaired", copiesHold(changed))
	controller := managed.ControllerName(copyv1alpha1.CopyRuleGroupKind)
	got := second.idleAfter(t, controller, rules)
	for _, verb := range []string{"get", "list", "create", "update", "patch", "delete"} {
		if n := got[`resource="configmaps",verb="`+verb+`"`]; n > 0 {
			t.Errorf("the restarted provider sent %v %s requests of ConfigMaps, want none: every ConfigMap rule was in sync; all requests: %v", n, verb, got)
		}
	}
	if w := got[`resource="secrets",verb="update"`]; w != 3 {
		t.Errorf("the restarted provider updated Secrets %v times, want 3 (rule 0's two copies, rule 1's edited one); all requests: %v", w, got)
	}
}
