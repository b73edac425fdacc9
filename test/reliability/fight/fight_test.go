package fight

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/controller/copyrule"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// edits is how many times the fighter takes a field back from the provider.
const edits = 20

// Fields of the fighter's own, that no managed resource sets.
const (
	fighterAnnotation = "fighter.example.com/note"
	fighterLabel      = "fighter.example.com/label"
	fighterEnv        = "FIGHTER"
)

// fight runs n rounds of: the fighter edits o, then waits until restored says
// the provider took its fields back.
func fight(t *testing.T, o client.Object, n int, mutate func(i int), restored func() bool) {
	t.Helper()
	for i := range n {
		edit(t, o, func() { mutate(i) })
		testenv.Eventually(t, wait, fmt.Sprintf("the provider to restore %s after edit %d", o.GetName(), i), func(ctx context.Context) (bool, error) {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o)
			return err == nil && restored(), err
		})
	}
}

// checkOnePerEdit fails the test unless the provider wrote exactly n times
// while the fighter made n edits, each restored before the next: once per
// edit (it restored every one), never twice, never in a loop.
func checkOnePerEdit(t *testing.T, writes []string, n int) {
	t.Helper()
	t.Logf("%d provider writes for %d edits", len(writes), n)
	if len(writes) != n {
		t.Errorf("the provider wrote %d times for %d edits, want one write per edit: %v", len(writes), n, writes)
	}
}

// annotateOnly is a fighter that only touches its own annotation: none of
// its edits may cost a write. Once it is done, the managed resource mr of
// kind is reconciled once more (settled), which would restore anything
// the provider owns that differs: it must find nothing to write.
func annotateOnly(t *testing.T, o, mr client.Object, kind, what string, parts ...string) {
	t.Helper()
	n := mark()
	for i := range 10 {
		edit(t, o, func() { annotate(o, fighterAnnotation, "only-"+strconv.Itoa(i)) })
		time.Sleep(100 * time.Millisecond) // The fighter's pace.
	}
	writesNothingMore(t, what+" with the fighter's annotation", mr, kind, parts...)
	if w := writesSince(n, parts...); len(w) > 0 {
		t.Errorf("%s: the provider wrote %d times when only a field it does not own changed: %v", what, len(w), w)
	}
}

func TestFightOverCopies(t *testing.T) {
	type accessor struct {
		object func(ns string) client.Object
		get    func(o client.Object) string
		set    func(o client.Object, v string)
	}
	cases := map[string]struct {
		reason string
		kind   string
		data   accessor
	}{
		"ConfigMap": {
			reason: "An edited ConfigMap copy is restored once per edit; the fighter's annotation stays.",
			kind:   copyv1alpha1.KindConfigMap,
			data: accessor{
				object: func(ns string) client.Object {
					return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}
				},
				get: func(o client.Object) string { return o.(*corev1.ConfigMap).Data["k"] },
				set: func(o client.Object, v string) { o.(*corev1.ConfigMap).Data = map[string]string{"k": v} },
			},
		},
		"Secret": {
			reason: "An edited Secret copy is restored once per edit; the fighter's annotation stays.",
			kind:   copyv1alpha1.KindSecret,
			data: accessor{
				object: func(ns string) client.Object {
					return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}
				},
				get: func(o client.Object) string { return string(o.(*corev1.Secret).Data["k"]) },
				set: func(o client.Object, v string) { o.(*corev1.Secret).Data = map[string][]byte{"k": []byte(v)} },
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := env.Namespace(t, "fight-src", nil)
			dst := env.Namespace(t, "fight-dst", nil)
			source := tc.data.object(src)
			source.SetLabels(map[string]string{"team": "a"})
			tc.data.set(source, "v1")
			env.Create(t, source)
			r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "fight"}}
			r.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: fightConfig}
			r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{Kind: tc.kind, Names: []string{"settings"}, Namespaces: []string{dst}}
			env.Create(t, r)

			cp := tc.data.object(dst)
			testenv.Eventually(t, wait, "the copy", func(ctx context.Context) (bool, error) {
				err := env.Client.Get(ctx, client.ObjectKeyFromObject(cp), cp)
				return err == nil && tc.data.get(cp) == "v1", err
			})

			inDst := "/namespaces/" + dst + "/"
			n := mark()
			fight(t, cp, edits, func(i int) {
				tc.data.set(cp, "fighter-"+strconv.Itoa(i))
				annotate(cp, fighterAnnotation, strconv.Itoa(i))
				l := cp.GetLabels()
				if l == nil {
					l = map[string]string{}
				}
				l[fighterLabel] = strconv.Itoa(i)
				cp.SetLabels(l)
			}, func() bool { return tc.data.get(cp) == "v1" })
			checkOnePerEdit(t, writesSince(n, inDst), edits)

			// A copy keeps its source's labels (docs/kinds/copyrule.md: a copy keeps data, type
			// and labels), so the fighter's label goes; annotations are not
			// content, so the fighter's stays, next to the rule's own.
			testenv.Eventually(t, wait, "the copy to settle", func(ctx context.Context) (bool, error) {
				err := env.Client.Get(ctx, client.ObjectKeyFromObject(cp), cp)
				_, labelled := cp.GetLabels()[fighterLabel]
				return !labelled && tc.data.get(cp) == "v1", err
			})
			if got := cp.GetAnnotations()[fighterAnnotation]; got != strconv.Itoa(edits-1) {
				t.Errorf("%s\nthe fighter's annotation = %q, want %q: it is not the rule's to remove", tc.reason, got, strconv.Itoa(edits-1))
			}
			if cp.GetLabels()["team"] != "a" || cp.GetAnnotations()[copyrule.AnnotationSource] != src+"/settings" {
				t.Errorf("%s\nthe copy lost its source's label or the rule's marks: labels %v, annotations %v", tc.reason, cp.GetLabels(), cp.GetAnnotations())
			}
			writesNothingMore(t, name+" copy", r, copyv1alpha1.CopyRuleGroupKind, inDst)
			annotateOnly(t, cp, r, copyv1alpha1.CopyRuleGroupKind, name+" copy", inDst)
		})
	}
}

func TestFightOverRolloutAnnotation(t *testing.T) {
	ns := env.Namespace(t, "fight-roll", nil)
	conf := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conf"}, Data: map[string]string{"k": "v1"}}
	env.Create(t, conf)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}},
					Volumes:    []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}}}},
				},
			},
		},
	}
	env.Create(t, d)
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conf"},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
			Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: configrollout.KindDeployment, Name: "web"}},
			// Each restore of the fought hash rolls web again (21 rolls): the default rollout limit (5 within 10m) would hold it back.
			RolloutLimit: &workloadv1alpha1.RolloutLimit{Rollouts: 1000, Within: &metav1.Duration{Duration: 10 * time.Second}},
		}},
	}
	env.Create(t, cr)
	// The rollout's creation rolls nothing: the fight is over the hash a
	// change of the configuration wrote into the template.
	following(t, cr, d, 1)
	rollFor(t, cr, d, conf)
	hash := cr.Status.AtProvider.Hash

	web := "/namespaces/" + ns + "/deployments/web"
	n := mark()
	fight(t, d, edits, func(i int) {
		d.Spec.Template.Annotations[configrollout.AnnotationHash] = "fighter-" + strconv.Itoa(i)
		d.Spec.Template.Annotations[fighterAnnotation] = strconv.Itoa(i)
		d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: fighterEnv, Value: strconv.Itoa(i)}}
	}, func() bool { return d.Spec.Template.Annotations[configrollout.AnnotationHash] == hash })
	checkOnePerEdit(t, writesSince(n, web), edits)

	// The rollout applies only its hash annotation (and its claim) under its
	// own field manager: the rest of the template is the fighter's.
	want := strconv.Itoa(edits - 1)
	if got := d.Spec.Template.Annotations[fighterAnnotation]; got != want {
		t.Errorf("the fighter's template annotation = %q, want %q", got, want)
	}
	if got := d.Spec.Template.Spec.Containers[0].Env; len(got) != 1 || got[0].Value != want {
		t.Errorf("the fighter's env = %v, want %s=%s", got, fighterEnv, want)
	}
	writesNothingMore(t, "rolled Deployment", cr, workloadv1alpha1.ConfigRolloutGroupKind, web)
	annotateOnly(t, d, cr, workloadv1alpha1.ConfigRolloutGroupKind, "rolled Deployment", web)

	// Its template changed under it 20 times, yet the hash of its sources
	// did not: a rollout restores what it owns, it does not count new ones.
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(cr), cr); err != nil {
		t.Fatal(err)
	}
	if cr.Status.AtProvider.Hash != hash {
		t.Errorf("hash = %q, want %q: the sources did not change", cr.Status.AtProvider.Hash, hash)
	}
}

// following waits until ConfigRollout cr follows Deployment d without
// having rolled or written to it: status at the rollout's hash as d's
// baseline, no rollout counted, cr Ready; d still at generation gen, with no
// hash in its pod template, no lock and no field owned by the rollout. It
// leaves cr and d read.
func following(t *testing.T, cr *workloadv1alpha1.ConfigRollout, d *appsv1.Deployment, gen int64) {
	t.Helper()
	testenv.Eventually(t, wait, "the rollout to follow the Deployment without rolling it", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return false, err
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return false, err
		}
		o := cr.Status.AtProvider
		if o.Hash == "" || o.Rollouts != 0 || len(o.Workloads) != 1 || !o.Workloads[0].Baseline || o.Workloads[0].Hash != o.Hash || cr.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue {
			return false, fmt.Errorf("status %+v, Ready %s", o, cr.GetCondition(xpv2.TypeReady).Status)
		}
		if d.Annotations[configrollout.AnnotationLock] != "" || d.Spec.Template.Annotations[configrollout.AnnotationHash] != "" || d.Generation != gen {
			return false, fmt.Errorf("%s: generation %d, annotations %v, template annotations %v", d.Name, d.Generation, d.Annotations, d.Spec.Template.Annotations)
		}
		for _, f := range d.ManagedFields {
			if strings.HasPrefix(f.Manager, "configrollout-") {
				return false, fmt.Errorf("%s: field manager %s wrote to it: %s", d.Name, f.Manager, f.FieldsV1.GetRawString())
			}
		}
		return true, nil
	})
}

// rollFor changes ConfigMap conf, which ConfigRollout cr follows Deployment d
// for (cr and d as last read), and waits until cr rolled d for the change,
// once: the new hash in its template and the rollout's lock on it, its
// generation one more, one more rollout counted, and status no longer has it
// run a baseline. It leaves cr and d read.
func rollFor(t *testing.T, cr *workloadv1alpha1.ConfigRollout, d *appsv1.Deployment, conf *corev1.ConfigMap) {
	t.Helper()
	before, rollouts, gen := cr.Status.AtProvider.Hash, cr.Status.AtProvider.Rollouts, d.Generation
	env.Update(t, conf, func() { conf.Data["k"] += "-changed" })
	testenv.Eventually(t, wait, "the rollout to roll the Deployment for the change", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return false, err
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return false, err
		}
		o := cr.Status.AtProvider
		if o.Hash == "" || o.Hash == before || o.Rollouts != rollouts+1 || len(o.Workloads) != 1 || o.Workloads[0].Baseline ||
			d.Spec.Template.Annotations[configrollout.AnnotationHash] != o.Hash || d.Annotations[configrollout.AnnotationLock] != cr.Name || d.Generation != gen+1 {
			return false, fmt.Errorf("status %+v; %s: generation %d, annotations %v, template annotations %v", o, d.Name, d.Generation, d.Annotations, d.Spec.Template.Annotations)
		}
		return true, nil
	})
}

func TestFightOverBundleDeployment(t *testing.T) {
	ns := env.Namespace(t, "fight-bundle", nil)
	ab := &workloadv1alpha1.AppBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: workloadv1alpha1.AppBundleSpec{ForProvider: workloadv1alpha1.AppBundleParameters{
			Image: "nginx:1.21",
			Env: []corev1.EnvVar{
				{Name: "MODE", Value: "prod"},
				// The API server fills in the fieldRef's apiVersion: that is no drift either.
				{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			},
		}},
	}
	env.Create(t, ab)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	image := func() string {
		if len(d.Spec.Template.Spec.Containers) == 0 {
			return ""
		}
		return d.Spec.Template.Spec.Containers[0].Image
	}
	testenv.Eventually(t, wait, "the AppBundle's Deployment", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d)
		return err == nil && image() == "nginx:1.21", err
	})

	web := "/namespaces/" + ns + "/deployments/web"
	n := mark()
	fight(t, d, edits, func(i int) {
		c := &d.Spec.Template.Spec.Containers[0]
		c.Image = "evil:" + strconv.Itoa(i)
		c.Env = setEnv(c.Env, corev1.EnvVar{Name: fighterEnv, Value: strconv.Itoa(i)})
		annotate(d, fighterAnnotation, strconv.Itoa(i))
	}, func() bool { return image() == "nginx:1.21" })
	checkOnePerEdit(t, writesSince(n, web), edits)

	// The AppBundle applies its fields by server-side apply: an env var and an
	// annotation another manager added are left alone.
	want := strconv.Itoa(edits - 1)
	env := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["MODE"] != "prod" || env[fighterEnv] != want {
		t.Errorf("env = %v, want MODE=prod (the AppBundle's) and %s=%s (the fighter's)", env, fighterEnv, want)
	}
	if got := d.Annotations[fighterAnnotation]; got != want {
		t.Errorf("the fighter's annotation = %q, want %q", got, want)
	}
	writesNothingMore(t, "AppBundle Deployment", ab, workloadv1alpha1.AppBundleGroupKind, web)
	annotateOnly(t, d, ab, workloadv1alpha1.AppBundleGroupKind, "AppBundle Deployment", web)
}

// setEnv sets one variable in env, keeping the others.
func setEnv(env []corev1.EnvVar, v corev1.EnvVar) []corev1.EnvVar {
	for i := range env {
		if env[i].Name == v.Name {
			env[i] = v
			return env
		}
	}
	return append(env, v)
}

// annotate sets one annotation of o, keeping the others.
func annotate(o client.Object, k, v string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	o.SetAnnotations(a)
}
