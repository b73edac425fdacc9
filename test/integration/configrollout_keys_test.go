package integration

import (
	"context"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestConfigRolloutRollsOnlyForKeysRead: in auto mode, a Deployment whose
// pods read single keys of a ConfigMap (env valueFrom, volume items) rolls
// only when one of those keys changes; one that reads all of it (envFrom)
// rolls on any change.
func TestConfigRolloutRollsOnlyForKeysRead(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "rollout-keys", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Data: map[string]string{
		"PORT": "80", "LOG_LEVEL": "info", "nginx.conf": "events {}",
	}}
	ref := corev1.LocalObjectReference{Name: "app"}
	port := consumer(ns, "port", "")
	port.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PORT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref, Key: "PORT"}}}}
	files := consumer(ns, "files", "")
	files.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: ref, Items: []corev1.KeyToPath{{Key: "nginx.conf", Path: "nginx.conf"}},
	}}}}
	everything := consumer(ns, "everything", "")
	everything.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref}}}
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "app"}}, Auto: true,
		}},
	}
	env.Create(t, cm, port, files, everything, cr)

	// settled waits until every Deployment carries the hash the rollout's
	// status records for it, the rollout is Ready, and the one that reads
	// everything carries the hash of the ConfigMap's current content; it
	// returns the Deployments' generations.
	settled := func(what string) map[string]int64 {
		t.Helper()
		gens := map[string]int64{}
		testenv.Eventually(t, wait, what, func(ctx context.Context) (bool, error) {
			r := &workloadv1alpha1.ConfigRollout{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "app"}, r); err != nil {
				return false, err
			}
			if len(r.Status.AtProvider.Workloads) != 3 || r.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue {
				return false, nil
			}
			for _, w := range r.Status.AtProvider.Workloads {
				d := &appsv1.Deployment{}
				if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: w.Name}, d); err != nil {
					return false, err
				}
				// What its pods run: its baseline until a change rolls it.
				h := d.Spec.Template.Annotations[hashKey]
				if w.Baseline {
					h = baseline(r, "Deployment", w.Name)
				}
				if h == "" || h != w.Hash || (w.Name == "everything" && h != r.Status.AtProvider.Hash) {
					return false, nil
				}
				gens[w.Name] = d.Generation
			}
			return true, nil
		})
		return gens
	}
	before := settled("every consumer followed")
	if before["port"] == 0 {
		t.Fatalf("generations %v", before)
	}
	rolls := func(change func(), want map[string]bool) {
		t.Helper()
		var hash string
		r := &workloadv1alpha1.ConfigRollout{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "app"}, r); err != nil {
			t.Fatal(err)
		}
		hash = r.Status.AtProvider.Hash
		env.Update(t, cm, change)
		// The Deployment that reads everything rolls on every change: its
		// rollout is the proof that the change was reconciled.
		testenv.Eventually(t, wait, "the change to be seen", func(ctx context.Context) (bool, error) {
			err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "app"}, r)
			return r.Status.AtProvider.Hash != hash, err
		})
		after := settled("the change rolled out")
		for name, rolled := range want {
			if got := after[name] != before[name]; got != rolled {
				t.Errorf("Deployment %s rolled = %t (generation %d → %d), want %t", name, got, before[name], after[name], rolled)
			}
		}
		before = after
	}
	rolls(func() { cm.Data["LOG_LEVEL"] = "debug" }, map[string]bool{"everything": true, "port": false, "files": false})
	rolls(func() { cm.Data["PORT"] = "8080" }, map[string]bool{"everything": true, "port": true, "files": false})
	rolls(func() { cm.Data["nginx.conf"] = "events { worker_connections 64; }" }, map[string]bool{"everything": true, "port": false, "files": true})
	rolls(func() { cm.Data["NEW"] = "x" }, map[string]bool{"everything": true, "port": false, "files": false})
}

// TestConfigRolloutCronJobAndKeysExample applies the example users read: the
// CronJob that reads all of the ConfigMap rolls on a change of RANGE, the
// Deployment that reads only PORT and nginx.conf does not.
func TestConfigRolloutCronJobAndKeysExample(t *testing.T) {
	ctx := context.Background()
	const ns = "reports"
	if _, err := testenv.ApplyFile(ctx, env.Client, filepath.Join(testenv.RepoRoot(), "examples", "configrollout", "cronjob-and-keys.yaml")); err != nil {
		t.Fatal(err)
	}
	cron, api := &batchv1.CronJob{}, &appsv1.Deployment{}
	r := &workloadv1alpha1.ConfigRollout{}
	hashes := func(what string, cronHash func(string) bool) (string, int64) {
		t.Helper()
		var h string
		testenv.Eventually(t, wait, what, func(ctx context.Context) (bool, error) {
			for name, o := range map[string]client.Object{"report-settings": r, "nightly-report": cron, "report-api": api} {
				if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, o); err != nil {
					return false, err
				}
			}
			// What their pods run: the baseline until a change rolls them.
			h = cron.Spec.JobTemplate.Spec.Template.Annotations[hashKey]
			if b := baseline(r, "CronJob", "nightly-report"); b != "" {
				h = b
			}
			return cronHash(h) && h == r.Status.AtProvider.Hash && (api.Spec.Template.Annotations[hashKey] != "" || baseline(r, "Deployment", "report-api") != "") &&
				r.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue, nil
		})
		return h, api.Generation
	}
	first, gen := hashes("the example's CronJob and Deployment to be followed", func(h string) bool { return h != "" })
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "report-settings"}, cm); err != nil {
		t.Fatal(err)
	}
	env.Update(t, cm, func() { cm.Data["RANGE"] = "30d" })
	_, after := hashes("the CronJob to be rolled", func(h string) bool { return h != "" && h != first })
	if after != gen {
		t.Errorf("report-api rolled (generation %d → %d) on a change of RANGE, which its pods do not read", gen, after)
	}
}
