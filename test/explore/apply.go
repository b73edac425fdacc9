package explore

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// goneTimeout bounds how long a deleted rule may take to go, its copies
// deleted, before it is created again.
const goneTimeout = 60 * time.Second

// State is what the oracles need to know of what a sequence did: the model
// of the ops applied, each ConfigRollout's changes since setup, each
// Deployment's generation at setup and how far the explorer's own writes
// raised it since, the freezes, and the ImmortalContainer's pods.
type State struct {
	World    World
	Fleet    *Fleet
	Changes  [targets]int
	SetupGen [targets]int64
	Bumps    [targets]int64
	m        *model
	cs       kubernetes.Interface
	frozen   []*freeze
	own      []ownWrite
	pods     *podLog
	// api is the API server, which OpRestartAPIServer restarts.
	api *testenv.Env
	// lasting are the faults on, by type, each ending on its own.
	lasting map[string]chan error
	// base is what the process and the API server held before the
	// replicas started.
	base *baseline
	// logf logs to the sequence's test.
	logf func(format string, args ...any)
	// knowns are the known provider gaps the sequence met, each once.
	knowns map[string]bool
	sum    *Summary
}

// known records that the sequence met a known provider gap, what and why,
// once per gap.
func (s *State) known(what, gap string) {
	if s.knowns == nil {
		s.knowns = map[string]bool{}
	}
	if s.knowns[gap] {
		return
	}
	s.knowns[gap] = true
	s.logf("known provider gap: %s: %s", gap, what)
	if s.sum != nil {
		s.sum.knownGap(s.World.Seed, gap, what)
	}
}

// Apply runs op against the world and the fleet.
func (s *State) Apply(ctx context.Context, op Op) error {
	w := s.World
	switch op.Type {
	case OpChangeSource:
		return s.setData(ctx, configMap(w.Source(), conf(op.J), ""), op.Value)
	case OpChangeLocal:
		if err := s.setData(ctx, configMap(w.Target(op.J), local, ""), op.Value); err != nil {
			return err
		}
		s.Changes[op.J]++
		return nil
	case OpReplace:
		return s.replace(ctx, op.J)
	case OpDeleteCopy:
		return s.delete(ctx, configMap(w.Target(op.T), conf(op.J), ""))
	case OpEditCopy:
		return client.IgnoreNotFound(s.setData(ctx, configMap(w.Target(op.T), conf(op.J), ""), op.Value))
	case OpDeleteRule:
		return s.delete(ctx, w.Rule(op.J))
	case OpCreateRule:
		return s.recreate(ctx, w.Rule(op.J), &copyv1alpha1.CopyRule{})
	case OpPin:
		return s.pin(ctx, op)
	}
	if err, ok := s.applyWorkload(ctx, op); ok {
		return err
	}
	if err, ok := s.applyReach(ctx, op); ok {
		return err
	}
	if err, ok := s.applyFault(ctx, op); ok {
		return err
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
		return sleep(ctx, time.Duration(op.Millis)*time.Millisecond)
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
	err := s.update(ctx, d, func() {
		read = d.Generation
		delete(d.Annotations, configrollout.AnnotationLock)
	})
	if err != nil {
		return err
	}
	s.Bumps[j] += d.Generation - read
	return nil
}

// recreate waits until the deleted managed resource mg is gone, its
// finalizer having cleaned up, and creates it again; read receives reads.
func (s *State) recreate(ctx context.Context, mg, read client.Object) error {
	if err := s.gone(ctx, mg, read); err != nil {
		return err
	}
	return errors.Wrapf(s.World.c.Create(ctx, mg), "cannot create %s %s/%s again", kindOf(mg), mg.GetNamespace(), mg.GetName())
}

// gone waits until o is gone.
func (s *State) gone(ctx context.Context, o, read client.Object) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, goneTimeout, true, func(ctx context.Context) (bool, error) {
		err := s.World.c.Get(ctx, client.ObjectKeyFromObject(o), read)
		return kerrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	return errors.Wrapf(err, "deleted %T %s/%s was not gone within %s", o, o.GetNamespace(), o.GetName(), goneTimeout)
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
	err := s.update(ctx, mg, func() {
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
func (s *State) setData(ctx context.Context, cm *corev1.ConfigMap, value string) error {
	return s.update(ctx, cm, func() { cm.Data = map[string]string{dataKey: value} })
}

// update reads o, mutates it and updates it, again on a conflict, and
// records the write as the explorer's.
func (s *State) update(ctx context.Context, o client.Object, mutate func()) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.World.c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		mutate()
		return s.World.c.Update(ctx, o)
	})
	if err == nil {
		s.wrote(o)
	}
	return err
}

// delete deletes o, gone already or not, and records the deletion as the
// explorer's.
func (s *State) delete(ctx context.Context, o client.Object) error {
	err := client.IgnoreNotFound(s.World.c.Delete(ctx, o))
	if err == nil {
		s.removed(o)
	}
	return err
}
