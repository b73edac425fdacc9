package integration

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// cronJob is a CronJob whose Jobs' pods read ConfigMap cm through envFrom.
func cronJob(ns, name, cm string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: batchv1.CronJobSpec{
			Schedule: "0 3 * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyOnFailure,
					Containers: []corev1.Container{{Name: "report", Image: "busybox", EnvFrom: []corev1.EnvFromSource{
						{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}},
					}}},
				},
			}}},
		},
	}
}

// cronRolledTo waits until the ConfigRollout is Ready and CronJob name runs
// its current configuration (its job template carries the current hash, or
// its baseline is the current hash), and returns both.
func cronRolledTo(t *testing.T, ns, cr, name string) (*workloadv1alpha1.ConfigRollout, *batchv1.CronJob) {
	t.Helper()
	r, c := &workloadv1alpha1.ConfigRollout{}, &batchv1.CronJob{}
	testenv.Eventually(t, wait, "CronJob "+name+" to carry the current hash", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: cr}, r); err != nil {
			return false, err
		}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c); err != nil {
			return false, err
		}
		h := r.Status.AtProvider.Hash
		runs := c.Spec.JobTemplate.Spec.Template.Annotations[hashKey] == h || baseline(r, "CronJob", name) == h
		return h != "" && runs && r.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue, nil
	})
	return r, c
}

// TestConfigRolloutRollsCronJobs: auto finds a CronJob that uses the source,
// follows it, and on a change writes the hash into its job template, so the
// next Job runs with the new configuration; a Job already running (made from the template before) is
// not touched; a CronJob created later is found on its watch event.
func TestConfigRolloutRollsCronJobs(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "rollout-cron", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "report-settings", Namespace: ns}, Data: map[string]string{"RANGE": "1d"}}
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "reports", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "report-settings"}}, Auto: true,
		}},
	}
	nightly := cronJob(ns, "nightly", "report-settings")
	env.Create(t, cm, nightly)
	// A Job the CronJob started, still running: its own copy of the template.
	running := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly-1", Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: nightly.UID,
		}}},
		Spec: *nightly.Spec.JobTemplate.Spec.DeepCopy(),
	}
	env.Create(t, running, cr)
	r, _ := cronRolledTo(t, ns, "reports", "nightly")
	first := r.Status.AtProvider.Hash
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "nightly-1"}, running); err != nil {
		t.Fatal(err)
	}
	jobVersion := running.ResourceVersion

	env.Update(t, cm, func() { cm.Data["RANGE"] = "7d" })
	testenv.Eventually(t, wait, "a new hash", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "reports"}, r)
		return r.Status.AtProvider.Hash != first, err
	})
	r, _ = cronRolledTo(t, ns, "reports", "nightly")
	if h := r.Status.AtProvider.Hash; r.Status.AtProvider.Rollouts != 1 {
		t.Errorf("rollouts = %d, want 1: the change", r.Status.AtProvider.Rollouts)
	} else if c := &(batchv1.CronJob{}); env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "nightly"}, c) != nil || c.Spec.JobTemplate.Spec.Template.Annotations[hashKey] != h {
		t.Errorf("the CronJob's job template does not carry hash %s after the change", h)
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "nightly-1"}, running); err != nil {
		t.Fatal(err)
	}
	if running.ResourceVersion != jobVersion {
		t.Errorf("the running Job was written (resourceVersion %s → %s): only the CronJob's template is rolled", jobVersion, running.ResourceVersion)
	}

	// A CronJob created later is found on its watch event.
	env.Create(t, cronJob(ns, "weekly", "report-settings"))
	cronRolledTo(t, ns, "reports", "weekly")
}

// TestConfigRolloutCronJobAdmission: CronJob is a workload kind; a Job is
// not (it cannot be rolled: its pod template is immutable).
func TestConfigRolloutCronJobAdmission(t *testing.T) {
	ns := env.Namespace(t, "rollout-cron-admission", nil)
	named := func(name, kind string) *workloadv1alpha1.ConfigRollout {
		return &workloadv1alpha1.ConfigRollout{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
				ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
				Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: kind, Name: "x"}},
			}},
		}
	}
	if err := env.Client.Create(context.Background(), named("cron", "CronJob")); err != nil {
		t.Errorf("a ConfigRollout naming a CronJob was refused: %v", err)
	}
	err := env.Client.Create(context.Background(), named("job", "Job"))
	if err == nil || !strings.Contains(err.Error(), `Unsupported value: "Job"`) {
		t.Errorf("a ConfigRollout naming a Job: got %v, want it refused naming the supported kinds", err)
	}
}
