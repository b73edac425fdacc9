package leastprivilege

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// syncedUnlessForbidden fails the test at once when a managed resource reports a forbidden
// request, and otherwise says whether it is Synced.
func syncedUnlessForbidden(t *testing.T, mg resource.Managed) bool {
	t.Helper()
	c := mg.GetCondition(xpv2.TypeSynced)
	if strings.Contains(strings.ToLower(c.Message), "forbidden") {
		t.Fatalf("%s %s: Synced = %s: %s", mg.GetObjectKind().GroupVersionKind().Kind, mg.GetName(), c.Status, c.Message)
	}
	return c.Status == corev1.ConditionTrue
}

// until polls cond, reading mg first and failing at once on a forbidden request.
func until(t *testing.T, mg resource.Managed, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	testenv.Eventually(t, wait, what, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mg), mg); err != nil {
			return false, err
		}
		if !syncedUnlessForbidden(t, mg) {
			return false, fmt.Errorf("not synced: %s", mg.GetCondition(xpv2.TypeSynced).Message)
		}
		return cond(ctx)
	})
}

// present polls until o exists (want true) or is gone or going (want false).
func present(t *testing.T, o client.Object, want bool, what string) {
	t.Helper()
	testenv.Eventually(t, wait, what, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o)
		if kerrors.IsNotFound(err) {
			return !want, nil
		}
		return want == (o.GetDeletionTimestamp() == nil), err
	})
}

func deleteAndWait(t *testing.T, mg client.Object) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), mg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "managed resource "+mg.GetName()+" to be deleted", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(mg), mg)
		return kerrors.IsNotFound(err), nil
	})
}

func namespace(t *testing.T, name string) string {
	t.Helper()
	env.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return name
}

// TestNotClusterAdmin shows the API server enforces RBAC on the provider's
// identity: it may not read nodes nor grant itself more.
func TestNotClusterAdmin(t *testing.T) {
	c, err := client.New(testenv.AsProvider(env.Config), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.List(ctx, &corev1.NodeList{}); !kerrors.IsForbidden(err) {
		t.Errorf("listing nodes: got %v, want Forbidden", err)
	}
	cr := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "escalate"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: saName, Namespace: saNamespace}},
	}
	if err := c.Create(ctx, cr); !kerrors.IsForbidden(err) {
		t.Errorf("binding cluster-admin: got %v, want Forbidden", err)
	}
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); !kerrors.IsForbidden(err) {
		t.Errorf("deleting a namespace: got %v, want Forbidden", err)
	}
}

// TestEveryKindUnderShippedRBAC takes every kind through what it does, each
// write verb the RBAC grants included, and checks no request was refused.
func TestEveryKindUnderShippedRBAC(t *testing.T) {
	t.Run("CopyRule", copyRule)
	t.Run("ConfigRollout", configRollout)
	t.Run("AppBundle", appBundle)
	t.Run("ImmortalContainer", immortalContainer)
	t.Run("ChaosAgent", chaosAgent)

	// The provider recorded events (create, patch) and tracked config usage.
	events := &corev1.EventList{}
	if err := env.Client.List(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, e := range events.Items {
		kinds[e.InvolvedObject.Kind] = true
		if strings.Contains(strings.ToLower(e.Message), "forbidden") {
			t.Errorf("event %s on %s %s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	}
	for _, k := range []string{"CopyRule", "ChaosAgent", "ConfigRollout"} {
		if !kinds[k] {
			t.Errorf("no event about a %s: the provider could not record events", k)
		}
	}
	usages := &v1alpha1.ProviderConfigUsageList{}
	if err := env.Client.List(context.Background(), usages); err != nil || len(usages.Items) == 0 {
		t.Errorf("no ProviderConfigUsage (%v): the provider could not track config usage", err)
	}
	if r := forbidden.all(); len(r) > 0 {
		t.Errorf("the API server refused %d requests of the provider: %v", len(r), r)
	}
}

// copyRule copies a ConfigMap and a Secret across namespaces, follows their
// sources, and prunes the copies when the rules go.
func copyRule(t *testing.T) {
	src, dst := namespace(t, "team-lp-src"), namespace(t, "team-lp-dst")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "shared"}, Data: map[string]string{"k": "v1"}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "pull"}, Data: map[string][]byte{"k": []byte("s1")}}
	env.Create(t, cm, sec)
	rules := map[string]*copyv1alpha1.CopyRule{}
	for kind, name := range map[string]string{copyv1alpha1.KindConfigMap: "shared", copyv1alpha1.KindSecret: "pull"} {
		r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: strings.ToLower(kind)}}
		r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{Kind: kind, Names: []string{name}, Namespaces: []string{dst}}
		env.Create(t, r)
		rules[kind] = r
	}
	cmCopy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: dst, Name: "shared"}}
	secCopy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: dst, Name: "pull"}}
	follows := func(v string) {
		until(t, rules[copyv1alpha1.KindConfigMap], "the ConfigMap copy to hold "+v, func(ctx context.Context) (bool, error) {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(cmCopy), cmCopy)
			return err == nil && cmCopy.Data["k"] == v, err
		})
		until(t, rules[copyv1alpha1.KindSecret], "the Secret copy to follow its source", func(ctx context.Context) (bool, error) {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(secCopy), secCopy)
			return err == nil && string(secCopy.Data["k"]) == strings.Replace(v, "v", "s", 1), err
		})
	}
	follows("v1")
	cm.Data["k"], sec.Data["k"] = "v2", []byte("s2")
	if err := env.Client.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Update(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	follows("v2")
	for _, r := range rules {
		until(t, r, "CopyRule "+r.Name+" to be Ready", func(context.Context) (bool, error) {
			return r.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue, nil
		})
		deleteAndWait(t, r)
	}
	present(t, cmCopy, false, "the ConfigMap copy to be pruned")
	present(t, secCopy, false, "the Secret copy to be pruned")
}

// configRollout follows a Deployment, a StatefulSet, a DaemonSet and a
// CronJob (a baseline for each in its status, nothing written to them), rolls
// them when their configuration changes, and releases them when it goes.
func configRollout(t *testing.T) {
	ns := namespace(t, "lp-rollout")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conf"}, Data: map[string]string{"k": "v1"}}
	env.Create(t, cm)
	labels := map[string]string{"app": "x"}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
	sel := &metav1.LabelSelector{MatchLabels: labels}
	workloads := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{Selector: sel, Template: tmpl}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: appsv1.StatefulSetSpec{Selector: sel, Template: tmpl}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl}},
		&batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"}, Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobTemplate(tmpl)}}}},
	}
	env.Create(t, workloads...)
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conf"},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
			Workloads: []workloadv1alpha1.WorkloadRef{
				{Kind: configrollout.KindDeployment, Name: "web"},
				{Kind: configrollout.KindStatefulSet, Name: "db"},
				{Kind: configrollout.KindDaemonSet, Name: "agent"},
				{Kind: configrollout.KindCronJob, Name: "nightly"},
			},
		}},
	}
	env.Create(t, cr)
	rolled := func(what, previous string) string {
		until(t, cr, what, func(ctx context.Context) (bool, error) {
			h := cr.Status.AtProvider.Hash
			if h == previous {
				return false, nil
			}
			for _, w := range workloads {
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
					return false, err
				}
				if templateOf(w).Annotations[configrollout.AnnotationHash] != h {
					return false, nil
				}
			}
			return h != "" && cr.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue, nil
		})
		return cr.Status.AtProvider.Hash
	}
	// Its creation follows them: a baseline for each in its status, and
	// neither a lock nor a hash written to them.
	until(t, cr, "every workload to be followed", func(ctx context.Context) (bool, error) {
		o := cr.Status.AtProvider
		if o.Hash == "" || o.Rollouts != 0 || len(o.Workloads) != len(workloads) || cr.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue {
			return false, nil
		}
		for _, w := range o.Workloads {
			if !w.Baseline || w.Hash != o.Hash {
				return false, nil
			}
		}
		for _, w := range workloads {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
				return false, err
			}
			if w.GetAnnotations()[configrollout.AnnotationLock] != "" || templateOf(w).Annotations[configrollout.AnnotationHash] != "" || w.GetGeneration() != 1 {
				return false, fmt.Errorf("%s written to on adoption: generation %d, annotations %v", w.GetName(), w.GetGeneration(), w.GetAnnotations())
			}
		}
		return true, nil
	})
	first := cr.Status.AtProvider.Hash
	cm.Data["k"] = "v2"
	if err := env.Client.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	rolled("every workload to be rolled for the change", first)
	for _, w := range workloads {
		if got := w.GetAnnotations()[configrollout.AnnotationLock]; got != cr.Name {
			t.Errorf("%s has lock %q after its first rollout, want %q", w.GetName(), got, cr.Name)
		}
	}
	if n := cr.Status.AtProvider.Rollouts; n != int64(len(workloads)) {
		t.Errorf("%d rollouts for the change, want %d", n, len(workloads))
	}
	deleteAndWait(t, cr)
	for _, w := range workloads {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(w), w); err != nil {
			t.Fatal(err)
		}
		if _, claimed := w.GetAnnotations()[configrollout.AnnotationLock]; claimed {
			t.Errorf("%s still claimed after its ConfigRollout went", w.GetName())
		}
	}
}

func templateOf(o client.Object) corev1.PodTemplateSpec {
	switch w := o.(type) {
	case *appsv1.Deployment:
		return w.Spec.Template
	case *appsv1.StatefulSet:
		return w.Spec.Template
	case *appsv1.DaemonSet:
		return w.Spec.Template
	case *batchv1.CronJob:
		return w.Spec.JobTemplate.Spec.Template
	}
	return corev1.PodTemplateSpec{}
}

// jobTemplate is tmpl as a Job's pod template, which must not restart always.
func jobTemplate(tmpl corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	t := *tmpl.DeepCopy()
	t.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	return t
}

// appBundle creates its claim, Deployment and Service, deletes the Service
// once unwanted, and everything on deletion under the Delete policy.
func appBundle(t *testing.T) {
	ns := namespace(t, "lp-bundle")
	ab := &workloadv1alpha1.AppBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: workloadv1alpha1.AppBundleSpec{ForProvider: workloadv1alpha1.AppBundleParameters{
			Image: "nginx:1.21", Port: ptr.To[int32](80), Service: workloadv1alpha1.ServiceClusterIP,
			PVCDeletionPolicy: workloadv1alpha1.PVCDelete,
		}},
	}
	env.Create(t, ab)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-data"}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	until(t, ab, "the claim, Deployment and Service", func(ctx context.Context) (bool, error) {
		for _, o := range []client.Object{d, pvc, svc} {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return false, err
			}
		}
		return ab.Status.AtProvider.ServiceAddress != "", nil
	})
	// Edited: restored by apply.
	d.Spec.Template.Spec.Containers[0].Image = "evil"
	if err := env.Client.Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	until(t, ab, "the image to be restored", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d)
		return err == nil && d.Spec.Template.Spec.Containers[0].Image == "nginx:1.21", err
	})
	// The provider writes the bundle too (crossplane-runtime's annotations,
	// its status): read it again on a conflict.
	env.Update(t, ab, func() { ab.Spec.ForProvider.Service = workloadv1alpha1.ServiceNone })
	present(t, svc, false, "the unwanted Service to be deleted")
	if err := env.Client.Delete(context.Background(), ab); err != nil {
		t.Fatal(err)
	}
	present(t, d, false, "the Deployment to be deleted")
	present(t, pvc, false, "the claim to be deleted")
	// No controller runs here to lift the claim's protection once no pod
	// uses it: do its part, so the claim and then the AppBundle can go.
	edit := func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return err
		}
		pvc.Finalizers = nil
		return env.Client.Update(context.Background(), pvc)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, edit); resource.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, "the AppBundle to be deleted", func(ctx context.Context) (bool, error) {
		return kerrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(ab), ab)), nil
	})
}

// immortalContainer creates its pod, again when it is deleted, and deletes it
// when it goes.
func immortalContainer(t *testing.T) {
	ns := namespace(t, "lp-immortal")
	ic := &workloadv1alpha1.ImmortalContainer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       workloadv1alpha1.ImmortalContainerSpec{ForProvider: workloadv1alpha1.ImmortalContainerParameters{Image: "nginx:1.27"}},
	}
	env.Create(t, ic)
	pod := &corev1.Pod{}
	key := types.NamespacedName{Namespace: ns, Name: "web-immortalpod"}
	podAfter := func(previous types.UID) {
		until(t, ic, "the pod to be (re)created", func(ctx context.Context) (bool, error) {
			err := env.Client.Get(ctx, key, pod)
			return err == nil && pod.UID != previous && pod.DeletionTimestamp == nil, resource.IgnoreNotFound(err)
		})
	}
	podAfter("")
	uid := pod.UID
	if err := env.Client.Delete(context.Background(), pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	podAfter(uid)
	deleteAndWait(t, ic)
	present(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}}, false, "the pod to be deleted")
}

// chaosAgent evicts a pod, scales a Deployment and rewrites a ConfigMap in a
// namespace other than its own, and reverts on deletion.
func chaosAgent(t *testing.T) {
	home, target := namespace(t, "team-lp-chaos"), namespace(t, "team-lp-victims")
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "victim"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	env.Create(t, p)
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := env.Client.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "settings"}, Data: map[string]string{"k": "original"}}
	env.Create(t, d, cm)
	ca := &chaosv1alpha1.ChaosAgent{
		ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "agent"},
		Spec: chaosv1alpha1.ChaosAgentSpec{ForProvider: chaosv1alpha1.ChaosAgentParameters{
			TantrumMode: true, CancerMode: true, IpsumMode: true, MaxReplicas: 4,
			Eagerness: 100, Interval: metav1.Duration{Duration: time.Second}, MaxActionsPerRound: 3,
			Namespaces: []string{target}, Seed: ptr.To[int64](1),
		}},
	}
	env.Create(t, ca)
	until(t, ca, "an eviction, a scaling and a rewrite", func(context.Context) (bool, error) {
		o := ca.Status.AtProvider
		return o.PodsKilled >= 1 && o.DeploymentsScaled >= 1 && o.ConfigMapsRewritten >= 1, nil
	})
	present(t, p, false, "the pod to be evicted")
	deleteAndWait(t, ca)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas after revert = %v (%v), want 1", d.Spec.Replicas, err)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(cm), cm); err != nil || cm.Data["k"] != "original" {
		t.Errorf("ConfigMap after revert = %v (%v), want the original", cm.Data, err)
	}
	present(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "agent-chaos-backup"}}, false, "the backup to be deleted")
}
