package integration

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/drift"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// copyConfig is the ClusterProviderConfig of the CopyRule tests: it reaches
// the copy-* namespaces only.
const copyConfig = "copy-tests"

var copyConfigOnce sync.Once

// ensureCopyConfig creates the ClusterProviderConfig of the CopyRule tests once.
func ensureCopyConfig(t *testing.T) {
	t.Helper()
	copyConfigOnce.Do(func() {
		env.Create(t, &v1alpha1.ClusterProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Name: copyConfig},
			Spec: v1alpha1.ClusterProviderConfigSpec{
				Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity},
				Reach:       &v1alpha1.Reach{Namespaces: []string{"copy-*"}, DeniedNamespaces: []string{"kube-*"}},
			},
		})
	})
}

func copyRule(t *testing.T, ns, name string, p copyv1alpha1.CopyRuleParameters) *copyv1alpha1.CopyRule {
	t.Helper()
	ensureCopyConfig(t)
	r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	r.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: copyConfig}
	r.Spec.ForProvider = p
	if p.ConflictPolicy == "" {
		r.Spec.ForProvider.ConflictPolicy = copyv1alpha1.ConflictSkip
	}
	if p.MaxParallelWrites == 0 {
		r.Spec.ForProvider.MaxParallelWrites = 8
	}
	env.Create(t, r)
	return r
}

func configMap(ns, name string, data map[string]string, lbls map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}, Data: data}
}

// copyHolds waits until ConfigMap ns/name exists with data.
func copyHolds(t *testing.T, ns, name string, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	testenv.Eventually(t, wait, fmt.Sprintf("ConfigMap %s/%s to hold %v", ns, name, data), func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm); err != nil {
			return false, err
		}
		return fmt.Sprint(cm.Data) == fmt.Sprint(data), nil
	})
	return cm
}

// gone waits until ConfigMap ns/name does not exist.
func gone(t *testing.T, ns, name string) {
	t.Helper()
	testenv.Eventually(t, wait, fmt.Sprintf("ConfigMap %s/%s to be deleted", ns, name), func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.ConfigMap{})
		return kerrors.IsNotFound(err), nil
	})
}

func TestCopyRuleCopiesAndFollows(t *testing.T) {
	ctx := context.Background()
	src := env.Namespace(t, "copy-src", nil)
	a := env.Namespace(t, "copy-a", nil)
	b := env.Namespace(t, "copy-b", nil)
	later := "copy-later-" + strings.TrimPrefix(src, "copy-src-")
	env.Create(t,
		configMap(src, "settings", map[string]string{"k": "v1"}, map[string]string{"share": "yes", "team": "x"}),
		configMap(src, "private", map[string]string{"k": "secret-ish"}, nil))
	r := copyRule(t, src, "follow", copyv1alpha1.CopyRuleParameters{
		Kind: copyv1alpha1.KindConfigMap, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"share": "yes"}},
		Namespaces: []string{a, b, later},
	})

	// Copies keep data and labels and carry the rule's marks; unselected objects stay home.
	for _, ns := range []string{a, b} {
		cm := copyHolds(t, ns, "settings", map[string]string{"k": "v1"})
		if cm.Labels["team"] != "x" || cm.Labels["copy.clusterops.io/rule-uid"] != string(r.UID) {
			t.Errorf("copy in %s has labels %v", ns, cm.Labels)
		}
		if cm.Annotations["copy.clusterops.io/source"] != src+"/settings" || cm.Annotations["copy.clusterops.io/content-hash"] == "" {
			t.Errorf("copy in %s has annotations %v", ns, cm.Annotations)
		}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "private"}, &corev1.ConfigMap{}); !kerrors.IsNotFound(err) {
			t.Errorf("unselected ConfigMap copied into %s: %v", ns, err)
		}
	}
	// A listed namespace that is missing is reported, not a failure; it gets
	// copies once it exists.
	testenv.Eventually(t, wait, "the missing namespace to be reported", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r)
		for _, p := range r.Status.AtProvider.Problems {
			if p.Namespace == later && p.Reason == copyv1alpha1.ProblemNamespaceMissing {
				return true, err
			}
		}
		return false, err
	})
	env.WaitConverged(t, wait, r)
	if got := r.Status.AtProvider.Copies; got != "2/2" {
		t.Errorf("status.atProvider.copies = %q, want 2/2", got)
	}
	// One event tells what a reconcile wrote, not one event per copy.
	testenv.Eventually(t, wait, "the aggregated event", func(ctx context.Context) (bool, error) {
		l := &corev1.EventList{}
		err := env.Client.List(ctx, l, client.InNamespace(src))
		for _, e := range l.Items {
			if e.InvolvedObject.Name == r.Name && e.Reason == "SyncedCopies" && e.Message == "Created 2 ConfigMap copies" {
				return true, err
			}
		}
		return false, err
	})
	env.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: later}})
	t.Cleanup(func() { _ = env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: later}}) })
	copyHolds(t, later, "settings", map[string]string{"k": "v1"})

	// A source update reaches every copy.
	source := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: src, Name: "settings"}, source); err != nil {
		t.Fatal(err)
	}
	env.Update(t, source, func() { source.Data["k"] = "v2" })
	for _, ns := range []string{a, b, later} {
		copyHolds(t, ns, "settings", map[string]string{"k": "v2"})
	}

	// A copy edited by hand is restored, and so is a deleted one.
	edited := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: a, Name: "settings"}, edited); err != nil {
		t.Fatal(err)
	}
	env.WaitConverged(t, wait, r)
	if d := r.Status.AtProvider.RecentDrift; len(d) > 0 {
		t.Errorf("a source's change reported as drift: %+v", d)
	}
	env.Update(t, edited, func() { edited.Data["k"] = "hand-edited" })
	copyHolds(t, a, "settings", map[string]string{"k": "v2"})
	driftReported(t, r, func() []v1alpha1.Drift { return r.Status.AtProvider.RecentDrift }, drift.Of("ConfigMap", a, "settings", []string{"data.k"}))
	if err := env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "settings"}}); err != nil {
		t.Fatal(err)
	}
	copyHolds(t, b, "settings", map[string]string{"k": "v2"})

	// Pruning: a source that stops matching loses its copies…
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: src, Name: "settings"}, source); err != nil {
		t.Fatal(err)
	}
	env.Create(t, configMap(src, "more", map[string]string{"m": "1"}, map[string]string{"share": "yes"}))
	copyHolds(t, a, "more", map[string]string{"m": "1"})
	env.Update(t, source, func() { delete(source.Labels, "share") })
	for _, ns := range []string{a, b, later} {
		gone(t, ns, "settings")
	}
	// …a deleted source too…
	if err := env.Client.Delete(ctx, configMap(src, "more", nil, nil)); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{a, b, later} {
		gone(t, ns, "more")
	}
	// …and a deleted rule takes its copies with it.
	env.Create(t, configMap(src, "last", map[string]string{"l": "1"}, map[string]string{"share": "yes"}))
	copyHolds(t, b, "last", map[string]string{"l": "1"})
	if err := env.Client.Delete(ctx, r); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{a, b, later} {
		gone(t, ns, "last")
	}
	testenv.Eventually(t, wait, "the rule to be gone", func(ctx context.Context) (bool, error) {
		return kerrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(r), r)), nil
	})
}

func TestCopyRuleFollowsNamespaces(t *testing.T) {
	ctx := context.Background()
	src := env.Namespace(t, "copy-nssrc", nil)
	sel := map[string]string{"copy-test/wants": src}
	in := env.Namespace(t, "copy-in", sel)
	ignored := env.Namespace(t, "copy-ignored", map[string]string{"copy-test/wants": src, "copy.clusterops.io/ignore": "true"})
	env.Create(t, configMap(src, "shared", map[string]string{"k": "v"}, nil))
	r := copyRule(t, src, "by-label", copyv1alpha1.CopyRuleParameters{
		Kind: copyv1alpha1.KindConfigMap, Names: []string{"shared"},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: sel},
	})
	copyHolds(t, in, "shared", map[string]string{"k": "v"})
	env.WaitConverged(t, wait, r)
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ignored, Name: "shared"}, &corev1.ConfigMap{}); !kerrors.IsNotFound(err) {
		t.Errorf("namespace labelled copy.clusterops.io/ignore got a copy: %v", err)
	}

	// A new namespace with the label gets a copy; one relabelled away loses it.
	joined := env.Namespace(t, "copy-joined", sel)
	copyHolds(t, joined, "shared", map[string]string{"k": "v"})
	n := &corev1.Namespace{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: in}, n); err != nil {
		t.Fatal(err)
	}
	env.Update(t, n, func() { delete(n.Labels, "copy-test/wants") })
	gone(t, in, "shared")
}

func TestCopyRuleFollowsPattern(t *testing.T) {
	src := env.Namespace(t, "copy-patsrc", nil)
	id := strings.TrimPrefix(src, "copy-patsrc-")
	env.Create(t, configMap(src, "shared", map[string]string{"k": "v"}, nil))
	copyRule(t, src, "by-pattern", copyv1alpha1.CopyRuleParameters{
		Kind: copyv1alpha1.KindConfigMap, Names: []string{"shared"}, NamespacePattern: "copy-pat" + id + "-.*",
	})
	// A namespace created after the rule that matches the pattern gets a copy;
	// one that only contains the pattern does not (the whole name must match).
	in := env.Namespace(t, "copy-pat"+id, nil)
	out := env.Namespace(t, "copy-x-copy-pat"+id, nil)
	copyHolds(t, in, "shared", map[string]string{"k": "v"})
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: out, Name: "shared"}, &corev1.ConfigMap{}); !kerrors.IsNotFound(err) {
		t.Errorf("a namespace the pattern matches only in part got a copy: %v", err)
	}
}

func TestCopyRuleKindIsImmutable(t *testing.T) {
	src := env.Namespace(t, "copy-imm", nil)
	r := copyRule(t, src, "fixed", copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{"a"}, Namespaces: []string{"copy-nowhere"}})
	// A merge patch: the provider writes the rule's status meanwhile.
	err := env.Client.Patch(context.Background(), r, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"forProvider":{"kind":"Secret"}}}`)))
	if err == nil || !strings.Contains(err.Error(), "kind is immutable") {
		t.Errorf("changing kind: want rejected with \"kind is immutable\", got %v", err)
	}
}

func TestCopyRuleConflicts(t *testing.T) {
	ctx := context.Background()
	src := env.Namespace(t, "copy-csrc", nil)
	skip := env.Namespace(t, "copy-skip", nil)
	adopt := env.Namespace(t, "copy-adopt", nil)
	adoptDiff := env.Namespace(t, "copy-adoptdiff", nil)
	over := env.Namespace(t, "copy-over", nil)
	data := map[string]string{"k": "source"}
	mine := map[string]string{"k": "mine"}
	env.Create(t, configMap(src, "conf", data, nil),
		configMap(skip, "conf", mine, nil),
		configMap(adopt, "conf", data, map[string]string{"owner": "user"}),
		configMap(adoptDiff, "conf", mine, nil),
		configMap(over, "conf", mine, nil))

	skipRule := copyRule(t, src, "skip", copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{"conf"}, Namespaces: []string{skip}})
	adoptRule := copyRule(t, src, "adopt", copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{"conf"}, Namespaces: []string{adopt, adoptDiff}, ConflictPolicy: copyv1alpha1.ConflictAdopt})
	overRule := copyRule(t, src, "over", copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{"conf"}, Namespaces: []string{over}, ConflictPolicy: copyv1alpha1.ConflictOverwrite})

	problem := func(r *copyv1alpha1.CopyRule, ns string) {
		t.Helper()
		testenv.Eventually(t, wait, "a conflict in "+ns+" reported by "+r.Name, func(ctx context.Context) (bool, error) {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r)
			for _, p := range r.Status.AtProvider.Problems {
				if p.Namespace == ns && p.Reason == copyv1alpha1.ProblemConflict {
					return r.GetCondition(xpv2.TypeReady).Status == corev1.ConditionFalse, err
				}
			}
			return false, err
		})
	}
	// Skip leaves the user's object and says so; so does Adopt when the data differs.
	problem(skipRule, skip)
	problem(adoptRule, adoptDiff)
	copyHolds(t, skip, "conf", mine)
	copyHolds(t, adoptDiff, "conf", mine)
	// Adopt takes over the identical object; Overwrite replaces the other one.
	adopted := copyHolds(t, adopt, "conf", data)
	testenv.Eventually(t, wait, "the identical object to be adopted", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: adopt, Name: "conf"}, adopted)
		return adopted.Labels["copy.clusterops.io/rule-uid"] == string(adoptRule.UID), err
	})
	copyHolds(t, over, "conf", data)

	// When the user removes their object, the Skip rule puts its copy there at once.
	if err := env.Client.Delete(ctx, configMap(skip, "conf", nil, nil)); err != nil {
		t.Fatal(err)
	}
	copyHolds(t, skip, "conf", data)
	env.WaitConverged(t, wait, skipRule)

	// Deleting the rules releases what they took over and deletes what they made.
	for _, r := range []*copyv1alpha1.CopyRule{skipRule, adoptRule, overRule} {
		if err := env.Client.Delete(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	gone(t, skip, "conf")
	for _, ns := range []string{adopt, over} {
		testenv.Eventually(t, wait, "the object in "+ns+" to be released", func(ctx context.Context) (bool, error) {
			cm := &corev1.ConfigMap{}
			err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "conf"}, cm)
			_, marked := cm.Labels["copy.clusterops.io/rule-uid"]
			return err == nil && !marked && cm.Annotations["copy.clusterops.io/taken-over"] == "", err
		})
	}
	copyHolds(t, adoptDiff, "conf", mine)
}

// TestCopyRuleConvergedWritesNothing forces a full reconcile of a settled
// rule and checks that not one write reaches its namespaces.
func TestCopyRuleConvergedWritesNothing(t *testing.T) {
	src := env.Namespace(t, "copy-zsrc", nil)
	var targets []string
	for range 5 {
		targets = append(targets, env.Namespace(t, "copy-z", nil))
	}
	env.Create(t, configMap(src, "one", map[string]string{"a": "1"}, map[string]string{"z": "y"}),
		configMap(src, "two", map[string]string{"b": "2"}, map[string]string{"z": "y"}))
	r := copyRule(t, src, "steady", copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"z": "y"}}, Namespaces: targets})
	env.WaitConverged(t, wait, r)
	var before int
	for _, ns := range targets {
		before += len(env.Requests.Writes("/namespaces/" + ns + "/configmaps"))
	}
	if before != 10 {
		t.Errorf("initial sync wrote %d times, want 10 (2 sources × 5 namespaces)", before)
	}
	env.Update(t, r, func() { r.Spec.ForProvider.MaxParallelWrites = 3 })
	env.WaitConverged(t, wait, r)
	var after int
	for _, ns := range targets {
		after += len(env.Requests.Writes("/namespaces/" + ns + "/configmaps"))
	}
	if after != before {
		t.Errorf("a converged rule wrote %d times on a full reconcile, want 0", after-before)
	}
}

// TestCopyRuleOwnWritesDoNotReconcileIt: an edit of a source reconciles its
// rule once. The rule updates its five copies, and their events, being its
// own writes, do not reconcile it again; at fleet size that second reconcile
// of every rule cost as much as the first. Each reconcile lists the rule's
// sources once, which is how the test counts them.
func TestCopyRuleOwnWritesDoNotReconcileIt(t *testing.T) {
	src := env.Namespace(t, "copy-own-src", nil)
	var targets []string
	for range 5 {
		targets = append(targets, env.Namespace(t, "copy-own", nil))
	}
	env.Create(t, configMap(src, "one", map[string]string{"a": "1"}, map[string]string{"own": "yes"}))
	r := copyRule(t, src, "own-writes", copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"own": "yes"}}, Namespaces: targets})
	env.WaitConverged(t, wait, r)
	for _, ns := range targets {
		copyHolds(t, ns, "one", map[string]string{"a": "1"})
	}
	testenv.WaitIdle(t, wait)
	mark := env.Requests.Len()
	p := client.RawPatch(types.MergePatchType, []byte(`{"data":{"a":"2"}}`))
	if err := env.Client.Patch(context.Background(), configMap(src, "one", nil, nil), p); err != nil {
		t.Fatal(err)
	}
	for _, ns := range targets {
		copyHolds(t, ns, "one", map[string]string{"a": "2"})
	}
	testenv.WaitIdle(t, wait)
	// Each reconcile reads the rule's one source once.
	var reads, seen []string
	for _, q := range env.Requests.Since(mark) {
		if strings.Contains(q, "/namespaces/"+src+"/") || strings.Contains(q, "/namespaces/copy-own-") {
			seen = append(seen, q)
		}
		if strings.HasPrefix(q, "GET /api/v1/namespaces/"+src+"/configmaps") && !strings.Contains(q, "watch=true") {
			reads = append(reads, q)
		}
	}
	if len(reads) != 1 {
		t.Errorf("the source edit reconciled the rule %d times (its reads of the source), want 1\nthe provider's requests:\n%s", len(reads), strings.Join(seen, "\n"))
	}
}

func TestCopyRuleReach(t *testing.T) {
	src := env.Namespace(t, "copy-rsrc", nil)
	ok := env.Namespace(t, "copy-ok", nil)
	far := env.Namespace(t, "far", nil)
	env.Create(t, configMap(src, "conf", map[string]string{"k": "v"}, nil))
	r := copyRule(t, src, "reach", copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{"conf"}, Namespaces: []string{ok, far}})
	copyHolds(t, ok, "conf", map[string]string{"k": "v"})
	testenv.Eventually(t, wait, "the out-of-reach target to be reported", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r)
		for _, p := range r.Status.AtProvider.Problems {
			if p.Namespace == far && p.Reason == copyv1alpha1.ProblemOutOfReach {
				return r.GetCondition(xpv2.TypeReady).Status == corev1.ConditionFalse, err
			}
		}
		return false, err
	})
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: far, Name: "conf"}, &corev1.ConfigMap{}); !kerrors.IsNotFound(err) {
		t.Errorf("copy written out of reach: %v", err)
	}

	// A source namespace out of reach is a Synced=False condition that says why.
	home := env.Namespace(t, "copy-home", nil)
	r2 := copyRule(t, home, "far-source", copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, SourceNamespace: far, Names: []string{"conf"}, Namespaces: []string{ok}})
	testenv.Eventually(t, wait, "the out-of-reach source to be reported", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(r2), r2)
		c := r2.GetCondition(xpv2.TypeSynced)
		return c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "out of reach"), err
	})
}

// TestCopyRuleReadsNothingInADeniedNamespace: once its config denies a
// namespace that holds one of a rule's copies, the rule sends no request
// there, not even a read of that copy after someone else edits it; the copy
// stays as it is. Denied no more, the copy is read and repaired. Each edit
// of the config takes effect without any other change.
func TestCopyRuleReadsNothingInADeniedNamespace(t *testing.T) {
	ctx := context.Background()
	src := env.Namespace(t, "copy-deny-src", nil)
	open, denied := env.Namespace(t, "copy-deny-open", nil), env.Namespace(t, "copy-deny-shut", nil)
	cpc := &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: src},
		Spec: v1alpha1.ClusterProviderConfigSpec{
			Credentials: v1alpha1.ClusterCredentials{Source: v1alpha1.CredentialsSourceInjectedIdentity},
			Reach:       &v1alpha1.Reach{Namespaces: []string{"copy-deny-*"}},
		},
	}
	env.Create(t, cpc)
	env.Create(t, configMap(src, "one", map[string]string{"a": "1"}, nil))
	r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "deny"}}
	r.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: cpc.Name}
	r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{"one"}, Namespaces: []string{open, denied}, MaxParallelWrites: 8}
	env.Create(t, r)
	env.WaitConverged(t, wait, r)
	copyHolds(t, denied, "one", map[string]string{"a": "1"})

	env.Update(t, cpc, func() { cpc.Spec.Reach.DeniedNamespaces = []string{denied} })
	// The config's edit reconciles the rule (poll: 1 h).
	testenv.Eventually(t, wait, "the denied target to be reported", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r)
		for _, p := range r.Status.AtProvider.Problems {
			if p.Namespace == denied && p.Reason == copyv1alpha1.ProblemOutOfReach {
				return true, err
			}
		}
		return false, cmp.Or(err, fmt.Errorf("problems %v", r.Status.AtProvider.Problems))
	})
	testenv.WaitIdle(t, wait)
	mark := env.Requests.Len()
	edit := client.RawPatch(types.MergePatchType, []byte(`{"data":{"a":"edited"}}`))
	if err := env.Client.Patch(ctx, configMap(denied, "one", nil, nil), edit); err != nil {
		t.Fatal(err)
	}
	// The source touched: the rule reconciles after the edit reached it.
	touch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"touched":"yes"}}}`))
	if err := env.Client.Patch(ctx, configMap(src, "one", nil, nil), touch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the rule to read its source again", func(context.Context) (bool, error) {
		for _, q := range env.Requests.Since(mark) {
			if strings.HasPrefix(q, "GET /api/v1/namespaces/"+src+"/configmaps/one") {
				return true, nil
			}
		}
		return false, nil
	})
	testenv.WaitIdle(t, wait)
	for _, q := range env.Requests.Since(mark) {
		if strings.Contains(q, "/namespaces/"+denied+"/") {
			t.Errorf("a request into the denied namespace %s: %s", denied, q)
		}
	}
	copyHolds(t, denied, "one", map[string]string{"a": "edited"})

	env.Update(t, cpc, func() { cpc.Spec.Reach.DeniedNamespaces = nil })
	copyHolds(t, denied, "one", map[string]string{"a": "1"})
}

func TestCopyRuleSecrets(t *testing.T) {
	ctx := context.Background()
	src := env.Namespace(t, "copy-ssrc", nil)
	dst := env.Namespace(t, "copy-sdst", nil)
	const value = "do-not-leak-0123456789"
	imm := true
	env.Create(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "tls", Labels: map[string]string{"s": "y"}}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"key": []byte(value)}, Immutable: &imm},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "token", Labels: map[string]string{"s": "y"}, Annotations: map[string]string{"kubernetes.io/service-account.name": "default"}}, Type: corev1.SecretTypeServiceAccountToken})
	r := copyRule(t, src, "secrets", copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindSecret, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"s": "y"}}, Namespaces: []string{dst}})

	got := &corev1.Secret{}
	testenv.Eventually(t, wait, "the Secret copy", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: dst, Name: "tls"}, got)
		return err == nil && string(got.Data["key"]) == value && got.Immutable != nil && *got.Immutable, err
	})
	// The token is refused with a reason, and never copied.
	testenv.Eventually(t, wait, "the service account token to be refused", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r)
		for _, p := range r.Status.AtProvider.Problems {
			if p.Name == "token" && p.Reason == copyv1alpha1.ProblemRefused {
				return true, err
			}
		}
		return false, err
	})
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: dst, Name: "token"}, &corev1.Secret{}); !kerrors.IsNotFound(err) {
		t.Errorf("service account token copied: %v", err)
	}

	// An immutable source is replaced, not updated: the copy is replaced too.
	if err := env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "tls"}}); err != nil {
		t.Fatal(err)
	}
	const value2 = "do-not-leak-rotated-987"
	env.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "tls", Labels: map[string]string{"s": "y"}}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"key": []byte(value2)}, Immutable: &imm})
	testenv.Eventually(t, wait, "the immutable copy to be replaced", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: dst, Name: "tls"}, got)
		return err == nil && string(got.Data["key"]) == value2, err
	})

	// Secret data appears nowhere: not in status, not in events.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
		t.Fatal(err)
	}
	events := &corev1.EventList{}
	if err := env.Client.List(ctx, events, client.InNamespace(src)); err != nil {
		t.Fatal(err)
	}
	leak := fmt.Sprintf("%v", r.Status)
	for _, e := range events.Items {
		leak += e.Message
	}
	for _, v := range []string{value, value2} {
		if strings.Contains(leak, v) {
			t.Errorf("Secret data %q appears in status or events", v)
		}
	}
}

func TestCopyRuleWithoutDeletePolicyPrunesNothing(t *testing.T) {
	ctx := context.Background()
	src := env.Namespace(t, "copy-psrc", nil)
	dst := env.Namespace(t, "copy-pdst", nil)
	env.Create(t, configMap(src, "conf", map[string]string{"k": "v"}, nil))
	r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "keep"}}
	r.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionUpdate, xpv2.ManagementActionLateInitialize}
	r.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: copyConfig}
	r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{"conf"}, Namespaces: []string{dst}, ConflictPolicy: copyv1alpha1.ConflictSkip, MaxParallelWrites: 4}
	ensureCopyConfig(t)
	env.Create(t, r)
	copyHolds(t, dst, "conf", map[string]string{"k": "v"})
	if err := env.Client.Delete(ctx, configMap(src, "conf", nil, nil)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the withheld prune to be reported", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r)
		for _, p := range r.Status.AtProvider.Problems {
			if p.Namespace == dst && p.Reason == copyv1alpha1.ProblemPruneSkipped {
				return true, err
			}
		}
		return false, err
	})
	copyHolds(t, dst, "conf", map[string]string{"k": "v"})
	if err := env.Client.Delete(ctx, r); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the rule to be gone", func(ctx context.Context) (bool, error) {
		return kerrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(r), r)), nil
	})
	copyHolds(t, dst, "conf", map[string]string{"k": "v"})
}

// TestCopyRuleReadsOnlyCopiesThatChanged: a rule in sync, reconciled again,
// reads none of its copies (it remembers each at the version it wrote, and
// the copies watch says none moved); a copy someone edits is read alone and
// repaired. Before, every reconcile listed the rule's copies by label across
// the cluster: a scan of every ConfigMap on the API server, O(N²) for a
// fleet.
func TestCopyRuleReadsOnlyCopiesThatChanged(t *testing.T) {
	ctx := context.Background()
	src := env.Namespace(t, "copy-known-src", nil)
	var targets []string
	for range 5 {
		targets = append(targets, env.Namespace(t, "copy-known", nil))
	}
	env.Create(t, configMap(src, "one", map[string]string{"a": "1"}, map[string]string{"team": "x"}))
	r := copyRule(t, src, "known", copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap, Names: []string{"one"}, Namespaces: targets,
		Metadata: &copyv1alpha1.CopyMetadata{Annotations: map[string]copyv1alpha1.AnnotationValue{"owner": "platform"}}})
	env.WaitConverged(t, wait, r)
	for _, ns := range targets {
		copyHolds(t, ns, "one", map[string]string{"a": "1"})
	}
	testenv.WaitIdle(t, wait)

	// reads returns the provider's reads of the source and of copies since
	// mark, and its lists of ConfigMaps across the cluster.
	reads := func(mark int) (source, copies, lists []string) {
		for _, q := range env.Requests.Since(mark) {
			switch {
			case strings.HasPrefix(q, "GET /api/v1/namespaces/"+src+"/configmaps/one"):
				source = append(source, q)
			case strings.HasPrefix(q, "GET /api/v1/namespaces/copy-known-") && strings.Contains(q, "/configmaps"):
				copies = append(copies, q)
			case strings.HasPrefix(q, "GET /api/v1/configmaps?"):
				lists = append(lists, q)
			}
		}
		return source, copies, lists
	}

	// An edit of the source that no copy carries reconciles the rule.
	mark := env.Requests.Len()
	touch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"touched":"yes"}}}`))
	if err := env.Client.Patch(ctx, configMap(src, "one", nil, nil), touch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the rule to read its source again", func(context.Context) (bool, error) {
		s, _, _ := reads(mark)
		return len(s) > 0, nil
	})
	testenv.WaitIdle(t, wait)
	if _, copies, lists := reads(mark); len(copies)+len(lists) > 0 {
		t.Errorf("a rule in sync read its copies:\n%s", strings.Join(append(copies, lists...), "\n"))
	}

	// Someone edits one copy: that copy alone is read, and repaired.
	mark = env.Requests.Len()
	edit := client.RawPatch(types.MergePatchType, []byte(`{"data":{"a":"edited"}}`))
	if err := env.Client.Patch(ctx, configMap(targets[2], "one", nil, nil), edit); err != nil {
		t.Fatal(err)
	}
	copyHolds(t, targets[2], "one", map[string]string{"a": "1"})
	testenv.WaitIdle(t, wait)
	_, copies, lists := reads(mark)
	for _, q := range copies {
		if !strings.Contains(q, "/namespaces/"+targets[2]+"/") {
			t.Errorf("read a copy nobody changed: %s", q)
		}
	}
	if len(lists) > 0 || len(copies) == 0 {
		t.Errorf("repairing one copy read %d copies and listed %d times, want that copy read and no list:\n%s", len(copies), len(lists), strings.Join(append(copies, lists...), "\n"))
	}
	for _, ns := range targets {
		cm := copyHolds(t, ns, "one", map[string]string{"a": "1"})
		if cm.Annotations["owner"] != "platform" {
			t.Errorf("copy in %s has annotations %v, want owner=platform", ns, cm.Annotations)
		}
	}
}

// A rule that picks its sources by selector reads the ones its selector
// watch holds, one by one, instead of listing the namespace by label on every
// reconcile: the API server answers such a list by scanning every ConfigMap
// of the namespace, and a fleet of rules reading one crowded namespace would
// scan it N times per round.
func TestCopyRuleSelectorReadsItsSourcesNotTheNamespace(t *testing.T) {
	ctx := context.Background()
	src := env.Namespace(t, "copy-sel-src", nil)
	targets := []string{env.Namespace(t, "copy-sel", nil), env.Namespace(t, "copy-sel", nil)}
	picked := map[string]string{"pick": "me"}
	env.Create(t, configMap(src, "one", map[string]string{"a": "1"}, picked), configMap(src, "two", map[string]string{"b": "2"}, picked))
	for i := range 10 {
		env.Create(t, configMap(src, fmt.Sprintf("other-%d", i), map[string]string{"c": "3"}, nil))
	}
	r := copyRule(t, src, "sel", copyv1alpha1.CopyRuleParameters{Kind: copyv1alpha1.KindConfigMap,
		Selector: &metav1.LabelSelector{MatchLabels: picked}, Namespaces: targets})
	env.WaitConverged(t, wait, r)
	for _, ns := range targets {
		copyHolds(t, ns, "one", map[string]string{"a": "1"})
		copyHolds(t, ns, "two", map[string]string{"b": "2"})
	}
	testenv.WaitIdle(t, wait)

	// reads returns the provider's reads of single sources and its lists of
	// the source namespace since mark (its watches' requests aside).
	reads := func(mark int) (gets, lists []string) {
		for _, q := range env.Requests.Since(mark) {
			switch {
			case strings.Contains(q, "watch=true"):
			case strings.HasPrefix(q, "GET /api/v1/namespaces/"+src+"/configmaps/"):
				gets = append(gets, q)
			case strings.HasPrefix(q, "GET /api/v1/namespaces/"+src+"/configmaps?"):
				lists = append(lists, q)
			}
		}
		return gets, lists
	}

	// A source edited: the selected sources are read, the namespace is not listed.
	mark := env.Requests.Len()
	edit := client.RawPatch(types.MergePatchType, []byte(`{"data":{"a":"edited"}}`))
	if err := env.Client.Patch(ctx, configMap(src, "one", nil, nil), edit); err != nil {
		t.Fatal(err)
	}
	for _, ns := range targets {
		copyHolds(t, ns, "one", map[string]string{"a": "edited"})
	}
	testenv.WaitIdle(t, wait)
	gets, lists := reads(mark)
	if len(lists) > 0 {
		t.Errorf("the rule listed its source namespace:\n%s", strings.Join(lists, "\n"))
	}
	for _, q := range gets {
		if strings.Contains(q, "/configmaps/other-") {
			t.Errorf("the rule read a ConfigMap its selector does not pick: %s", q)
		}
	}

	// A ConfigMap labelled later is copied; one that loses the label is no
	// source any more, and its copies go.
	if err := env.Client.Patch(ctx, configMap(src, "other-3", nil, nil), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"pick":"me"}}}`))); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(ctx, configMap(src, "two", nil, nil), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"pick":null}}}`))); err != nil {
		t.Fatal(err)
	}
	for _, ns := range targets {
		copyHolds(t, ns, "other-3", map[string]string{"c": "3"})
		gone(t, ns, "two")
	}
}
