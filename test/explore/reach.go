package explore

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
)

// applyReach runs the operations on namespaces, reach and management
// policies; ok is false for any other.
func (s *State) applyReach(ctx context.Context, op Op) (err error, ok bool) { //nolint:revive // ok says whether op is one of these.
	switch op.Type {
	case OpDeleteNamespace:
		return s.deleteNamespace(ctx, s.World.Flux()), true
	case OpCreateNamespace:
		return s.createNamespace(ctx, s.World.Flux()), true
	case OpDeny, OpAllow:
		return s.deny(ctx, op.T, op.Type == OpDeny), true
	case OpObserve:
		return s.observe(ctx, op.Kind, op.J, op.T == 1), true
	}
	return nil, false
}

// deleteNamespace deletes namespace ns as the namespace controller, which
// envtest lacks, would: the namespace turns Terminating, its ConfigMaps go,
// and then its finalizer.
func (s *State) deleteNamespace(ctx context.Context, ns string) error {
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := s.World.c.Delete(ctx, n); err != nil {
		return errors.Wrapf(err, "cannot delete namespace %s", ns)
	}
	if err := s.deleteConfigMaps(ctx, ns); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, goneTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := s.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if kerrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		// A copy written between the deletion of the ConfigMaps and the
		// namespace turning Terminating is deleted again.
		if err := s.deleteConfigMaps(ctx, ns); err != nil {
			return false, err
		}
		got.Spec.Finalizers = nil
		_, err = s.cs.CoreV1().Namespaces().Finalize(ctx, got, metav1.UpdateOptions{})
		return false, client.IgnoreNotFound(err)
	})
	return errors.Wrapf(err, "namespace %s was not gone within %s", ns, goneTimeout)
}

// deleteConfigMaps deletes every ConfigMap in ns, each recorded as the
// explorer's deletion.
func (s *State) deleteConfigMaps(ctx context.Context, ns string) error {
	l := &corev1.ConfigMapList{}
	if err := s.World.c.List(ctx, l, client.InNamespace(ns)); err != nil {
		return errors.Wrapf(err, "cannot list the ConfigMaps of namespace %s", ns)
	}
	for i := range l.Items {
		if err := s.delete(ctx, &l.Items[i]); err != nil {
			return errors.Wrapf(err, "cannot delete ConfigMap %s/%s", ns, l.Items[i].Name)
		}
	}
	return nil
}

// createNamespace creates namespace ns.
func (s *State) createNamespace(ctx context.Context, ns string) error {
	return errors.Wrapf(s.World.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}), "cannot create namespace %s", ns)
}

func causeDeny(ns string) string { return "namespace " + ns + " denied" }

// deny adds denyable namespace t to the world's config's deniedNamespaces,
// or removes it. Once every replica has seen the denial, nothing in the
// namespace is written.
func (s *State) deny(ctx context.Context, t int, on bool) error {
	ns := s.World.Denyable(t)
	if !on {
		s.lift(causeDeny(ns))
	}
	var denied []string
	for u, d := range s.m.denied {
		if (d && u != t) || (u == t && on) {
			denied = append(denied, s.World.Denyable(u))
		}
	}
	cpc := s.World.config(nil)
	err := s.update(ctx, cpc, func() {
		cpc.Spec.Reach.DeniedNamespaces = append(append([]string{}, baseDenied...), denied...)
	})
	if err != nil || !on {
		return err // An allow needs no more: the edit reconciles the config's resources.
	}
	s.freezeOn(causeDeny(ns), namespaceScope(ns), configSeen(cpc.ResourceVersion)).sealed = ns
	return nil
}

func causeObserve(kind string, j int) string { return fmt.Sprintf("%s %d under Observe", kind, j) }

// observe switches managed resource (kind, j) to managementPolicies
// [Observe] or back to ["*"]. Under Observe, once it has reconciled the
// edit, it writes nothing of what it makes.
func (s *State) observe(ctx context.Context, kind string, j int, on bool) error {
	cause := causeObserve(kind, j)
	if !on {
		s.lift(cause)
	}
	mg, scope := s.managedOf(kind, j)
	p := xpv2.ManagementPolicies{xpv2.ManagementActionAll}
	if on {
		p = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
	}
	if err := s.update(ctx, mg, func() { mg.SetManagementPolicies(p) }); err != nil {
		return err
	}
	if on {
		read, _ := s.managedOf(kind, j)
		s.freezeOn(cause, scope, generationSeen(read, mg.GetGeneration()))
	}
	return nil
}

// managedOf is managed resource (kind, j), named but not read, and the scope
// of what it makes.
func (s *State) managedOf(kind string, j int) (resource.Managed, []scan) {
	w := s.World
	switch kind {
	case KindCopyRule:
		var sc []scan
		for _, ns := range append(w.targetNamespaces(), w.Flux()) {
			sc = append(sc, scan{kind: "ConfigMap", ns: ns, names: []string{conf(j)}})
		}
		return w.Rule(j), sc
	case KindConfigRollout:
		return w.rollout(j), []scan{{kind: KindDeployment, ns: w.Target(j), names: []string{web(j)}}}
	case KindAppBundle:
		return w.Bundle(), []scan{
			{kind: KindDeployment, ns: w.App(), names: []string{bundleName}},
			{kind: KindClaim, ns: w.App(), names: []string{claimName()}},
			{kind: KindService, ns: w.App(), names: []string{bundleName}},
		}
	case KindImmortal:
		return w.Immortal(), []scan{{kind: "Pod", ns: w.App(), names: []string{podName()}}}
	}
	return w.Agent(), victimScope(w.ChaosTargets()...)
}

// targetNamespaces are target namespaces 0 to 2.
func (w World) targetNamespaces() []string {
	out := make([]string, 0, targets)
	for t := range targets {
		out = append(out, w.Target(t))
	}
	return out
}

// deniedNamespaces are the namespaces the model denies now.
func (s *State) deniedNamespaces() []string {
	var out []string
	for t, d := range s.m.denied {
		if d {
			out = append(out, s.World.Denyable(t))
		}
	}
	return out
}

// denies says whether ns is denied now.
func (s *State) denies(ns string) bool { return slices.Contains(s.deniedNamespaces(), ns) }
