package integration

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

const hashKey = "workload.clusterops.io/config-hash"

// baseline is the hash ConfigRollout r's status records as the baseline of
// workload kind/name, which it follows and has not rolled; "" when none.
func baseline(r *workloadv1alpha1.ConfigRollout, kind, name string) string {
	for _, w := range r.Status.AtProvider.Workloads {
		if w.Kind == kind && w.Name == name && w.Baseline {
			return w.Hash
		}
	}
	return ""
}

// consumer is a Deployment whose pods use ConfigMap cm through a volume, or
// nothing when cm is empty.
func consumer(ns, name, cm string) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}},
			},
		},
	}
	if cm != "" {
		d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}
	}
	return d
}

// rolledTo waits until the ConfigRollout has settled (Ready) and Deployment
// name runs its current configuration: its pod template carries the current
// hash, or its baseline (recorded when the rollout started to follow it) is
// the current hash. It returns both.
func rolledTo(t *testing.T, ns, cr, name string) (*workloadv1alpha1.ConfigRollout, *appsv1.Deployment) {
	t.Helper()
	r, d := &workloadv1alpha1.ConfigRollout{}, &appsv1.Deployment{}
	testenv.Eventually(t, wait, "Deployment "+name+" to carry the current hash", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: cr}, r); err != nil {
			return false, err
		}
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d)
		if c := r.GetCondition(xpv2.TypeSynced); err == nil && c.Status == corev1.ConditionFalse {
			err = errors.New(c.Message)
		}
		h := r.Status.AtProvider.Hash
		runs := d.Spec.Template.Annotations[hashKey] == h || baseline(r, "Deployment", name) == h
		return h != "" && runs && r.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue, err
	})
	return r, d
}

func TestConfigRolloutRollsOnChange(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "rollout", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "nginx-conf", Namespace: ns}, Data: map[string]string{"nginx.conf": "worker_processes 1;", "notes": "a"}}
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "nginx-conf", Keys: []string{"nginx.conf"}}},
			Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "web"}},
		}},
	}
	env.Create(t, cm, consumer(ns, "web", "nginx-conf"), cr)
	r, d := rolledTo(t, ns, "nginx", "web")
	first, gen := r.Status.AtProvider.Hash, d.Generation

	// A change to a key that is not listed changes nothing; a listed one rolls.
	env.Update(t, cm, func() { cm.Data["notes"] = "b" })
	env.Update(t, cm, func() { cm.Data["nginx.conf"] = "worker_processes 2;" })
	testenv.Eventually(t, wait, "a new hash", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "nginx"}, r)
		return r.Status.AtProvider.Hash != first, err
	})
	r, d = rolledTo(t, ns, "nginx", "web")
	if d.Generation != gen+1 || r.Status.AtProvider.Rollouts != 1 {
		t.Errorf("generation %d → %d, rollouts %d: want exactly one rollout for the two changes", gen, d.Generation, r.Status.AtProvider.Rollouts)
	}
	if d.Spec.Template.Annotations[hashKey] != r.Status.AtProvider.Hash {
		t.Errorf("pod template hash %q, want %q", d.Spec.Template.Annotations[hashKey], r.Status.AtProvider.Hash)
	}

	if w := r.Status.AtProvider.Workloads; len(w) != 1 || w[0].LastRollout == nil || w[0].Baseline {
		t.Errorf("status.atProvider.workloads = %+v, want web with its last rollout", w)
	}
	events := &corev1.EventList{}
	if err := env.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := int32(0)
	for _, e := range events.Items {
		if e.InvolvedObject.Name == "nginx" && e.Reason == "RolledWorkload" {
			n += e.Count
		}
	}
	if n != 1 {
		t.Errorf("%d RolledWorkload events, want 1", n)
	}
}

func TestConfigRolloutDebounces(t *testing.T) {
	ns := env.Namespace(t, "debounce", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "0"}}
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Debounce:   &metav1.Duration{Duration: 2 * time.Second},
		}},
	}
	env.Create(t, cm, consumer(ns, "web", ""), cr)
	_, d := rolledTo(t, ns, "slow", "web")
	gen := d.Generation
	for _, v := range []string{"1", "2", "3"} {
		env.Update(t, cm, func() { cm.Data["k"] = v })
	}
	r := &workloadv1alpha1.ConfigRollout{}
	testenv.Eventually(t, wait, "the burst to be rolled", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "slow"}, r); err != nil {
			return false, err
		}
		return r.Status.AtProvider.Rollouts >= 1, nil
	})
	r, d = rolledTo(t, ns, "slow", "web")
	if r.Status.AtProvider.Rollouts != 1 || d.Generation != gen+1 {
		t.Errorf("rollouts %d, generation %d → %d: want one rollout for the burst", r.Status.AtProvider.Rollouts, gen, d.Generation)
	}
}

func TestConfigRolloutAutoFindsConsumers(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "auto", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns}, Data: map[string]string{"k": "v"}}
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "auto", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "shared"}}, Auto: true,
		}},
	}
	env.Create(t, cm, consumer(ns, "user", "shared"), consumer(ns, "bystander", ""), cr)
	rolledTo(t, ns, "auto", "user")
	other := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "bystander"}, other); err != nil {
		t.Fatal(err)
	}
	if h, ok := other.Spec.Template.Annotations[hashKey]; ok {
		t.Errorf("a Deployment that does not use the ConfigMap got hash %q", h)
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "auto"}, cr); err != nil {
		t.Fatal(err)
	}
	if ws := cr.Status.AtProvider.Workloads; len(ws) != 1 || ws[0].Name != "user" || !ws[0].Baseline {
		t.Errorf("status.atProvider.workloads = %+v, want user alone, followed", ws)
	}
	// A consumer created later is found on its watch event.
	late := consumer(ns, "late", "")
	late.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}
	env.Create(t, late)
	rolledTo(t, ns, "auto", "late")
	// So is one whose template starts reading it, on the event of its new
	// generation (the provider's watch carries no template).
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "bystander"}, other); err != nil {
		t.Fatal(err)
	}
	other.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}}
	if err := env.Client.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	rolledTo(t, ns, "auto", "bystander")
}

func TestConfigRolloutWaitsForMissingSource(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "missing-source", nil)
	const marker = "SECRET-MARKER-91ce"
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			Secrets:   []workloadv1alpha1.SourceRef{{Name: "db-password"}},
			Workloads: []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "api"}},
		}},
	}
	env.Create(t, consumer(ns, "api", ""), cr)
	testenv.Eventually(t, wait, "a condition naming the missing Secret", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db"}, cr)
		c := cr.GetCondition(xpv2.TypeReady)
		return c.Status == corev1.ConditionFalse && c.Message == `Secret "db-password" does not exist: nothing is rolled until it does`, err
	})
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "api"}, d); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Spec.Template.Annotations[hashKey]; ok {
		t.Errorf("the Deployment was rolled while its Secret is missing")
	}
	// The Secret appears: picked up on its event, rolled, and its bytes show
	// nowhere but in the hash.
	env.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-password", Namespace: ns}, Data: map[string][]byte{"password": []byte(marker)}})
	r, _ := rolledTo(t, ns, "db", "api")
	b, _ := json.Marshal(r)
	events := &corev1.EventList{}
	if err := env.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	e, _ := json.Marshal(events)
	if strings.Contains(string(b), marker) || strings.Contains(string(e), marker) {
		t.Errorf("Secret data leaked into the ConfigRollout or its events")
	}
}

// TestConfigRolloutsDoNotFight points two ConfigRollouts with different
// sources at one Deployment: the first follows and rolls it, the second says
// why it does not, and the Deployment is not rewritten back and forth.
func TestConfigRolloutsDoNotFight(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "fight", nil)
	rollout := func(name, cm string) *workloadv1alpha1.ConfigRollout {
		return &workloadv1alpha1.ConfigRollout{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
				ConfigMaps: []workloadv1alpha1.SourceRef{{Name: cm}},
				Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "web"}},
			}},
		}
	}
	env.Create(t,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}, Data: map[string]string{"k": "a"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns}, Data: map[string]string{"k": "b"}},
		consumer(ns, "web", ""), rollout("first", "a"))
	r, d := rolledTo(t, ns, "first", "web")
	gen := d.Generation
	second := rollout("second", "b")
	env.Create(t, second)
	testenv.Eventually(t, wait, "the second ConfigRollout to say why it does not roll", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "second"}, second)
		c := second.GetCondition(xpv2.TypeSynced)
		ready := second.GetCondition(xpv2.TypeReady)
		return c.Status == corev1.ConditionTrue && ready.Status == corev1.ConditionFalse &&
			ready.Message == `Deployment "web" follows ConfigRollout "first": a workload follows one ConfigRollout, so it is not rolled by this one`, err
	})
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	if d.Generation != gen {
		t.Errorf("the Deployment was rewritten (generation %d → %d)", gen, d.Generation)
	}

	// A change of its source rolls it, by the one ConfigRollout it follows.
	a := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "a"}, a); err != nil {
		t.Fatal(err)
	}
	first := r.Status.AtProvider.Hash
	env.Update(t, a, func() { a.Data["k"] = "a2" })
	testenv.Eventually(t, wait, "the first ConfigRollout to roll web", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d)
		h := d.Spec.Template.Annotations[hashKey]
		return h != "" && h != first, err
	})
	// A manual edit of the annotation is drift, and is repaired by the one
	// ConfigRollout the workload follows.
	env.Update(t, d, func() { d.Spec.Template.Annotations[hashKey] = "edited" })
	rolledTo(t, ns, "first", "web")

	// Deleting the first releases the workload; the second takes over.
	if err := env.Client.Delete(ctx, rollout("first", "a")); err != nil {
		t.Fatal(err)
	}
	rolledTo(t, ns, "second", "web")
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	if got := d.Annotations["workload.clusterops.io/config-rollout"]; got != "" {
		t.Errorf("lock = %q, want it released: the second follows web without rolling it", got)
	}
}

// TestConfigRolloutReconcileWithoutChangeWritesNothing reconciles a settled
// ConfigRollout again: nothing is written to its workloads. The controller
// keeps no state between reconciles (everything comes from status and the
// cluster), so this is also what a provider restart or a new leader does.
func TestConfigRolloutReconcileWithoutChangeWritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "no-change", nil)
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "steady", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}}, Auto: true,
		}},
	}
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "v"}},
		consumer(ns, "one", "conf"), consumer(ns, "two", "conf"), cr)
	rolledTo(t, ns, "steady", "one")
	_, two := rolledTo(t, ns, "steady", "two")
	one := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "one"}, one); err != nil {
		t.Fatal(err)
	}

	// A change of the spec that does not change what is rolled forces a full reconcile.
	env.Update(t, cr, func() { cr.Spec.ForProvider.Debounce = &metav1.Duration{Duration: time.Millisecond} })
	testenv.Eventually(t, wait, "the changed ConfigRollout to be reconciled", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "steady"}, cr)
		c := cr.GetCondition(xpv2.TypeSynced)
		return c.Status == corev1.ConditionTrue && c.ObservedGeneration == cr.Generation, err
	})
	for _, before := range []*appsv1.Deployment{one, two} {
		after := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: before.Name}, after); err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != before.ResourceVersion {
			t.Errorf("Deployment %s was written (resourceVersion %s → %s) though nothing changed", before.Name, before.ResourceVersion, after.ResourceVersion)
		}
	}
}

// TestConfigRolloutRecordsALostRollout: when the status write after a rollout
// is lost (a conflict on a stale read), the next reconcile finds the workload
// carrying the new hash while the status still records the old one, and
// records the rollout without rolling again.
func TestConfigRolloutRecordsALostRollout(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "lost", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "1", "notes": "a"}}
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "lost", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf", Keys: []string{"k"}}},
			Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "web"}},
		}},
	}
	env.Create(t, cm, consumer(ns, "web", "conf"), cr)
	r, _ := rolledTo(t, ns, "lost", "web")
	first := r.Status.AtProvider.Hash
	env.Update(t, cm, func() { cm.Data["k"] = "2" })
	testenv.Eventually(t, wait, "the rollout", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "lost"}, r)
		return r.Status.AtProvider.Hash != first && r.Status.AtProvider.Rollouts == 1, err
	})
	r, d := rolledTo(t, ns, "lost", "web")
	second, gen := r.Status.AtProvider.Hash, d.Generation

	// The status as a lost write leaves it: the rollout done, not recorded.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "lost"}, r); err != nil {
			return err
		}
		r.Status.AtProvider.Rollouts = 0
		w := &r.Status.AtProvider.Workloads[0]
		w.Hash, w.LastRollout, w.Baseline = first, nil, true
		return env.Client.Status().Update(ctx, r)
	})
	if err != nil {
		t.Fatal(err)
	}
	env.Update(t, cm, func() { cm.Data["notes"] = "b" }) // A reconcile, nothing to roll.
	testenv.Eventually(t, wait, "the lost rollout recorded", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "lost"}, r)
		w := r.Status.AtProvider.Workloads
		return r.Status.AtProvider.Rollouts == 1 && len(w) == 1 && w[0].Hash == second && w[0].LastRollout != nil && !w[0].Baseline, err
	})
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	if d.Generation != gen {
		t.Errorf("Deployment generation %d → %d: recording a rollout must not roll again", gen, d.Generation)
	}
}
