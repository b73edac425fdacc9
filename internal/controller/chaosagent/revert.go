package chaosagent

import (
	"context"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
)

const (
	reasonRestored      event.Reason = "Restored"
	reasonCannotRestore event.Reason = "CannotRestore"
)

// revert restores every Deployment's replicas and every ConfigMap's data the
// backup holds and that still differ from it. It keeps going past failures and
// returns them all, so that one stuck object does not hide the others.
func (e *external) revert(ctx context.Context, ca *v1alpha1.ChaosAgent, b *backup) error {
	if b.cm == nil {
		return nil
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(b.cm.Data)) {
		kind, ns, name, ok := parseBackupKey(k)
		if !ok {
			continue
		}
		if err := mayActIn(e.check(ctx), e.cluster.Reach.ProviderNamespace, ca.GetNamespace(), ns); err != nil {
			errs = append(errs, errors.Wrapf(err, "cannot restore %s %s/%s (set revertOnDelete to false to delete the agent without restoring)", kind, ns, name))
			continue
		}
		var err error
		switch kind {
		case kindDeployment:
			err = e.restoreReplicas(ctx, ca, ns, name, b.cm.Data[k])
		case kindConfigMap:
			err = e.restoreData(ctx, ca, ns, name, b.cm.Data[k])
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (e *external) restoreReplicas(ctx context.Context, ca *v1alpha1.ChaosAgent, ns, name, value string) error {
	want, err := parseReplicas(value)
	if err != nil {
		return errors.Wrapf(err, "cannot read the backed up replicas of Deployment %s/%s", ns, name)
	}
	changed := false
	d := &appsv1.Deployment{}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.cluster.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
			return err
		}
		if ptr.Deref(d.Spec.Replicas, 1) == want {
			return nil
		}
		d.Spec.Replicas, changed = &want, true
		return e.cluster.Client.Update(ctx, d)
	})
	if kerrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return errors.Wrapf(err, "cannot restore the replicas of Deployment %s/%s", ns, name)
	}
	if changed {
		e.announce(ca, d, event.Normal(reasonRestored, fmt.Sprintf("Restored Deployment %s/%s to %d replicas", ns, name, want)), false)
	}
	return nil
}

func (e *external) restoreData(ctx context.Context, ca *v1alpha1.ChaosAgent, ns, name, value string) error {
	want, err := decodeData(value)
	if err != nil {
		return errors.Errorf("cannot read the backed up data of ConfigMap %s/%s", ns, name)
	}
	changed := false
	cm := &corev1.ConfigMap{}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.cluster.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm); err != nil {
			return err
		}
		if maps.Equal(cm.Data, want) {
			return nil
		}
		if ptr.Deref(cm.Immutable, false) {
			// Made immutable since: nothing can change it any more.
			e.record.Event(ca, event.Warning(reasonCannotRestore, errors.Errorf("cannot restore ConfigMap %s/%s: it was made immutable", ns, name)))
			return nil
		}
		cm.Data, changed = want, true
		return e.cluster.Client.Update(ctx, cm)
	})
	if kerrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return errors.Wrapf(err, "cannot restore the data of ConfigMap %s/%s", ns, name)
	}
	if changed {
		e.announce(ca, cm, event.Normal(reasonRestored, fmt.Sprintf("Restored the data of ConfigMap %s/%s", ns, name)), false)
	}
	return nil
}
