package explore

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

// goneTimeout bounds how long a deleted rule may take to go, its copies
// deleted, before it is created again.
const goneTimeout = 60 * time.Second

// State is what the oracles need to know of what a sequence did: each
// ConfigRollout's changes since setup, which rules are deleted, each
// Deployment's generation at setup and how far the explorer's own writes
// raised it since.
type State struct {
	World    World
	Fleet    *Fleet
	Changes  [targets]int
	Deleted  [targets]bool
	SetupGen [targets]int64
	Bumps    [targets]int64
}

// Apply runs op against the world and the fleet.
func (s *State) Apply(ctx context.Context, op Op) error {
	w := s.World
	switch op.Type {
	case OpChangeSource:
		return setData(ctx, w.c, configMap(w.Source(), conf(op.J), ""), op.Value)
	case OpChangeLocal:
		if err := setData(ctx, w.c, configMap(w.Target(op.J), local, ""), op.Value); err != nil {
			return err
		}
		s.Changes[op.J]++
		return nil
	case OpReplace:
		return s.replace(ctx, op.J)
	case OpDeleteCopy:
		return client.IgnoreNotFound(w.c.Delete(ctx, configMap(w.Target(op.T), conf(op.J), "")))
	case OpEditCopy:
		return client.IgnoreNotFound(setData(ctx, w.c, configMap(w.Target(op.T), conf(op.J), ""), op.Value))
	case OpDeleteRule:
		s.Deleted[op.J] = true
		return client.IgnoreNotFound(w.c.Delete(ctx, w.Rule(op.J)))
	case OpCreateRule:
		return s.createRule(ctx, op.J)
	case OpPin:
		return s.pin(ctx, op)
	}
	return s.applyFleet(ctx, op)
}

// applyFleet runs the operations on replicas, and pauses.
func (s *State) applyFleet(ctx context.Context, op Op) error {
	switch op.Type {
	case OpRestart:
		if err := s.Fleet.Stop(op.Replica); err != nil {
			return err
		}
		return s.Fleet.Start(op.Identity)
	case OpJoin:
		return s.Fleet.Start(op.Identity)
	case OpLeave:
		return s.Fleet.Stop(op.Replica)
	case OpCheckpoint:
		// The run checks the liveness oracles after it.
		return nil
	case OpPause:
		// The generator's deliberate pause: the provider acts meanwhile.
		select {
		case <-time.After(time.Duration(op.Millis) * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Errorf("unknown operation %q", op.Type)
}

// replace updates web-j without the lock. A Deployment's generation rises
// on a change of its annotations too: the rise the replace itself causes is
// counted apart from the provider's rolls.
func (s *State) replace(ctx context.Context, j int) error {
	d := &appsv1.Deployment{}
	d.SetNamespace(s.World.Target(j))
	d.SetName(web(j))
	var read int64
	err := update(ctx, s.World.c, d, func() {
		read = d.Generation
		delete(d.Annotations, configrollout.AnnotationLock)
	})
	if err != nil {
		return err
	}
	s.Bumps[j] += d.Generation - read
	return nil
}

// createRule waits until the deleted rule-j is gone, its finalizer having
// deleted its copies, and creates it again.
func (s *State) createRule(ctx context.Context, j int) error {
	r := s.World.Rule(j)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, goneTimeout, true, func(ctx context.Context) (bool, error) {
		err := s.World.c.Get(ctx, client.ObjectKeyFromObject(r), &copyv1alpha1.CopyRule{})
		return kerrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		return errors.Wrapf(err, "deleted rule %s was not gone within %s", r.Name, goneTimeout)
	}
	if err := s.World.c.Create(ctx, r); err != nil {
		return errors.Wrapf(err, "cannot create rule %s again", r.Name)
	}
	s.Deleted[j] = false
	return nil
}

// pin labels a managed resource with a shard by hand: a pin, which the
// labeler keeps (no clusterops.io/shards beside it).
func (s *State) pin(ctx context.Context, op Op) error {
	w := s.World
	var mg client.Object
	var key types.NamespacedName
	switch op.Kind {
	case KindCopyRule:
		mg, key = &copyv1alpha1.CopyRule{}, types.NamespacedName{Namespace: w.Source(), Name: rule(op.J)}
	case KindConfigRollout:
		mg, key = &workloadv1alpha1.ConfigRollout{}, types.NamespacedName{Namespace: w.Target(op.J), Name: ro(op.J)}
	default:
		mg, key = &copyv1alpha1.CopyRule{}, types.NamespacedName{Namespace: w.AllSource(), Name: allRule}
	}
	mg.SetNamespace(key.Namespace)
	mg.SetName(key.Name)
	err := update(ctx, w.c, mg, func() {
		ls := mg.GetLabels()
		if ls == nil {
			ls = map[string]string{}
		}
		ls[shard.Label] = shard.Name(op.Shard)
		delete(ls, shard.LabelShards)
		mg.SetLabels(ls)
	})
	// A rule deleted and not created again has nothing to pin.
	return client.IgnoreNotFound(err)
}

// setData sets a ConfigMap's data to value.
func setData(ctx context.Context, c client.Client, cm *corev1.ConfigMap, value string) error {
	return update(ctx, c, cm, func() { cm.Data = map[string]string{dataKey: value} })
}

// update reads o, mutates it and updates it, again on a conflict.
func update(ctx context.Context, c client.Client, o client.Object, mutate func()) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		mutate()
		return c.Update(ctx, o)
	})
}
