package chaosagent

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
)

// An outcome is what carrying out one planned action came to: a recorded
// action, or a note saying why the object was passed over after all.
type outcome struct {
	action *v1alpha1.ChaosAction
	object client.Object // the object acted on
	note   string
	// workload is the Deployment or StatefulSet the action disturbed, whose
	// recovery the agent measures; nil when it disturbed none.
	workload *WorkloadRef
}

// act carries out a planned action, or in a dry run only reads what it would
// change. Objects are read again first: the plan may be a moment old.
func (e *external) act(ctx context.Context, b *backup, s Spec, a Action, round int64, now time.Time, dry bool) (outcome, error) {
	rec := &v1alpha1.ChaosAction{Time: metav1.NewTime(now), Action: a.Kind, Namespace: a.Namespace, Name: a.Name, DryRun: dry}
	switch a.Kind {
	case v1alpha1.ActionDeletePod, v1alpha1.ActionEvictPod:
		return e.killPod(ctx, a, rec, dry)
	case v1alpha1.ActionScaleDeployment:
		return e.scale(ctx, b, s, a, rec, dry)
	case v1alpha1.ActionRewriteConfigMap:
		return e.rewrite(ctx, b, a, rec, round, dry)
	}
	return outcome{}, errors.Errorf("unknown action %q", a.Kind)
}

func (e *external) killPod(ctx context.Context, a Action, rec *v1alpha1.ChaosAction, dry bool) (outcome, error) {
	pod := &corev1.Pod{}
	if err := e.cluster.Client.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: a.Name}, pod); err != nil {
		if kerrors.IsNotFound(err) {
			return outcome{note: fmt.Sprintf("pod %s/%s went away before the tantrum", a.Namespace, a.Name)}, nil
		}
		return outcome{}, errors.Wrapf(err, "cannot get pod %s/%s", a.Namespace, a.Name)
	}
	if pod.UID != a.UID || pod.DeletionTimestamp != nil || ProviderOwned(objectOf(pod)) {
		return outcome{note: fmt.Sprintf("pod %s/%s changed before the tantrum", a.Namespace, a.Name)}, nil
	}
	rec.Before = string(pod.Status.Phase)
	if dry {
		rec.After = afterKill(a.Kind)
		return outcome{action: rec, object: pod}, nil
	}
	w := e.workloadOf(ctx, pod)
	// The UID precondition makes sure the pod killed is the pod chosen, not a successor.
	var err error
	if a.Kind == v1alpha1.ActionEvictPod {
		err = e.evict(ctx, pod)
	} else {
		err = e.cluster.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
	}
	switch {
	case err == nil:
		rec.After = afterKill(a.Kind)
		return outcome{action: rec, object: pod, workload: w}, nil
	case kerrors.IsTooManyRequests(err):
		// A PodDisruptionBudget said no: reported, never forced.
		rec.Action, rec.After = v1alpha1.ActionEvictionRefused, string(pod.Status.Phase)
		return outcome{action: rec, object: pod}, nil
	case kerrors.IsNotFound(err), kerrors.IsConflict(err):
		return outcome{note: fmt.Sprintf("pod %s/%s went away before the tantrum", a.Namespace, a.Name)}, nil
	}
	return outcome{}, errors.Wrapf(err, "cannot kill pod %s/%s", a.Namespace, a.Name)
}

func afterKill(kind string) string {
	if kind == v1alpha1.ActionEvictPod {
		return "Evicted"
	}
	return "Deleted"
}

func (e *external) scale(ctx context.Context, b *backup, s Spec, a Action, rec *v1alpha1.ChaosAction, dry bool) (outcome, error) {
	var note string
	d := &appsv1.Deployment{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		note = ""
		if err := e.cluster.Client.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: a.Name}, d); err != nil {
			return err
		}
		from := ptr.Deref(d.Spec.Replicas, 1)
		if from < 1 || from >= s.MaxReplicas || ProviderOwned(objectOf(d)) {
			note = fmt.Sprintf("Deployment %s/%s changed before it could be scaled", a.Namespace, a.Name)
			return nil
		}
		to := Doubled(from, s.MaxReplicas)
		rec.Before, rec.After = replicasValue(from), replicasValue(to)
		if dry {
			return nil
		}
		if err := b.add(ctx, backupKey(kindDeployment, a.Namespace, a.Name), replicasValue(from)); err != nil {
			return err
		}
		d.Spec.Replicas = &to
		return e.cluster.Client.Update(ctx, d)
	})
	switch {
	case kerrors.IsNotFound(err):
		return outcome{note: fmt.Sprintf("Deployment %s/%s went away before it could be scaled", a.Namespace, a.Name)}, nil
	case errors.Is(err, errBackupFull):
		return outcome{note: fmt.Sprintf("Deployment %s/%s not scaled: its original would not fit into the backup", a.Namespace, a.Name)}, nil
	case err != nil:
		return outcome{}, errors.Wrapf(err, "cannot scale Deployment %s/%s", a.Namespace, a.Name)
	case note != "":
		return outcome{note: note}, nil
	}
	return outcome{action: rec, object: d, workload: &WorkloadRef{Kind: kindDeploymentName, Namespace: a.Namespace, Name: a.Name}}, nil
}

func (e *external) rewrite(ctx context.Context, b *backup, a Action, rec *v1alpha1.ChaosAction, round int64, dry bool) (outcome, error) {
	var note string
	key := backupKey(kindConfigMap, a.Namespace, a.Name)
	// An original this call recorded is refreshed when a conflict makes it
	// read the ConfigMap again: the backup holds what was overwritten.
	recorded := false
	cm := &corev1.ConfigMap{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		note = ""
		if err := e.cluster.Client.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: a.Name}, cm); err != nil {
			return err
		}
		if ptr.Deref(cm.Immutable, false) || cm.Name == rootCAConfigMap || len(cm.Data) == 0 || ProviderOwned(objectOf(cm)) {
			note = fmt.Sprintf("ConfigMap %s/%s changed before it could be rewritten", a.Namespace, a.Name)
			return nil
		}
		keys := make([]string, 0, len(cm.Data))
		for k := range cm.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		data := IpsumData(round, a.Namespace, a.Name, keys)
		rec.Before, rec.After = Digest(cm.Data), Digest(data)
		if dry {
			return nil
		}
		if !b.has(key) || recorded {
			if err := b.put(ctx, key, encodeData(cm.Data)); err != nil {
				return err
			}
			recorded = true
		}
		cm.Data = data
		return e.cluster.Client.Update(ctx, cm)
	})
	switch {
	case kerrors.IsNotFound(err):
		return outcome{note: fmt.Sprintf("ConfigMap %s/%s went away before it could be rewritten", a.Namespace, a.Name)}, nil
	case errors.Is(err, errBackupFull):
		return outcome{note: fmt.Sprintf("ConfigMap %s/%s not rewritten: its data would not fit into the backup", a.Namespace, a.Name)}, nil
	case err != nil:
		// Names the ConfigMap, never its data.
		return outcome{}, errors.Wrapf(err, "cannot rewrite ConfigMap %s/%s", a.Namespace, a.Name)
	case note != "":
		return outcome{note: note}, nil
	}
	return outcome{action: rec, object: cm}, nil
}

// objectOf is what Choose knows of an object.
func objectOf(o client.Object) Object {
	return Object{Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID(), Labels: o.GetLabels(), Owners: o.GetOwnerReferences()}
}
