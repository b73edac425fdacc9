package explore

import (
	"context"
	"fmt"
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/controller/copyrule"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// Denied are the namespaces every world's ClusterProviderConfig keeps out
// of reach, whatever their labels: no copy is ever written there.
func Denied() []string {
	return []string{"kube-system", "kube-public", "kube-node-lease", testenv.ProviderNamespace}
}

// An oracle is one invariant: nil while it holds, else what breaks it.
type oracle struct {
	name  string
	check func(ctx context.Context, s *State) error
}

// safety are the invariants that hold after every step: cheap reads.
func safety() []oracle {
	return []oracle{
		{"no copy in a denied namespace", noCopyDenied},
		{"no roll without a change", rollsBounded},
		{"nothing written where writes are frozen", nothingWrittenFrozen},
	}
}

// liveness are the invariants that hold once the provider has caught up,
// at quiescence checkpoints.
func liveness() []oracle {
	return []oracle{
		{"every copy equals its source", copiesEqual},
		{"a deleted rule's copies are gone", deletedGone},
		{"every Deployment runs its ConfigMap's latest change", rolledToLatest},
		{"an AppBundle's objects match its spec", bundleMatches},
		{"an ImmortalContainer has one pod and counts its starts", immortalOne},
		{"a deleted workload resource is gone, and what it made", workloadGone},
		{"every managed resource is Synced and Ready", managedReady},
	}
}

// check runs oracles and returns the first that does not hold, by name.
func check(ctx context.Context, s *State, oracles []oracle) (string, error) {
	for _, o := range oracles {
		if err := o.check(ctx, s); err != nil {
			return o.name, err
		}
	}
	return "", nil
}

// noCopyDenied: no object the provider labels as a copy lies in a denied
// namespace.
func noCopyDenied(ctx context.Context, s *State) error {
	l := &corev1.ConfigMapList{}
	if err := s.World.c.List(ctx, l, client.HasLabels{copyrule.LabelRuleUID}); err != nil {
		return errors.Wrap(err, "cannot list copies")
	}
	for _, cm := range l.Items {
		for _, ns := range Denied() {
			if cm.Namespace == ns {
				return errors.Errorf("copy %s/%s of rule %s", cm.Namespace, cm.Name, cm.Annotations[copyrule.AnnotationRule])
			}
		}
	}
	return nil
}

// rollsBounded: web-j rolled no more often than local in its namespace
// changed since setup. A roll is a rise of its generation that no operation
// of the explorer caused: none changes a template, and the rise a replace
// causes (a Deployment's generation follows its annotations too) is counted
// in Bumps.
func rollsBounded(ctx context.Context, s *State) error {
	for j := range targets {
		d := &appsv1.Deployment{}
		if err := s.World.c.Get(ctx, types.NamespacedName{Namespace: s.World.Target(j), Name: web(j)}, d); err != nil {
			return errors.Wrapf(err, "cannot get %s", web(j))
		}
		if rolls := d.Generation - s.SetupGen[j] - s.Bumps[j]; rolls > int64(s.Changes[j]) {
			return errors.Errorf("%s/%s rolled %d times for %d changes of its ConfigMap; %s", d.Namespace, d.Name, rolls, s.Changes[j], describe(ctx, s, j, d))
		}
	}
	return nil
}

// getData is a ConfigMap's data, and whether it exists.
func getData(ctx context.Context, c client.Client, ns, name string) (*corev1.ConfigMap, bool, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm)
	if kerrors.IsNotFound(err) {
		return nil, false, nil
	}
	return cm, err == nil, errors.Wrapf(err, "cannot get ConfigMap %s/%s", ns, name)
}

// sameAs says how copy ns/name differs from src, or nothing.
func sameAs(ctx context.Context, c client.Client, src *corev1.ConfigMap, ns, name string) error {
	cp, ok, err := getData(ctx, c, ns, name)
	if err != nil {
		return err
	}
	if !ok {
		return errors.Errorf("no copy %s/%s", ns, name)
	}
	if cp.Labels[copyrule.LabelRuleUID] == "" || !maps.Equal(cp.Data, src.Data) {
		return errors.Errorf("copy %s/%s holds %v (rule-uid %q), source %s/%s holds %v",
			ns, name, cp.Data, cp.Labels[copyrule.LabelRuleUID], src.Namespace, src.Name, src.Data)
	}
	return nil
}

// copiesEqual: every live rule's copy in every target equals its source,
// and the allNamespaces rule's copy in every namespace of the world but its
// source's does too. A rule under Observe, a denied namespace and the flux
// namespace while it is gone are left out.
func copiesEqual(ctx context.Context, s *State) error {
	w, c := s.World, s.World.c
	for j := range targets {
		if s.m.deleted[j] || s.m.observes(KindCopyRule, j) {
			continue
		}
		src, _, err := getData(ctx, c, w.Source(), conf(j))
		if err != nil || src == nil {
			return errors.Errorf("source %s: %v", conf(j), err)
		}
		for _, ns := range s.copyTargets() {
			if err := sameAs(ctx, c, src, ns, conf(j)); err != nil {
				return err
			}
		}
	}
	src, _, err := getData(ctx, c, w.AllSource(), w.Everywhere())
	if err != nil || src == nil {
		return errors.Errorf("source %s: %v", w.Everywhere(), err)
	}
	for _, ns := range w.Namespaces() {
		if ns == w.AllSource() || s.denies(ns) || (ns == w.Flux() && s.m.fluxGone) {
			continue
		}
		if err := sameAs(ctx, c, src, ns, w.Everywhere()); err != nil {
			return err
		}
	}
	return nil
}

// copyTargets are rule-j's targets that must hold its copy: those not
// denied, and the flux namespace while it exists.
func (s *State) copyTargets() []string {
	var out []string
	for t := range targets {
		if !s.m.denied[t] {
			out = append(out, s.World.Target(t))
		}
	}
	if !s.m.fluxGone {
		out = append(out, s.World.Flux())
	}
	return out
}

// deletedGone: a deleted rule is gone, and so are its copies.
func deletedGone(ctx context.Context, s *State) error {
	w := s.World
	for j := range targets {
		if !s.m.deleted[j] {
			continue
		}
		err := w.c.Get(ctx, client.ObjectKeyFromObject(w.Rule(j)), w.Rule(j))
		if !kerrors.IsNotFound(err) {
			return errors.Errorf("deleted rule %s is still there (%v)", rule(j), err)
		}
		for _, ns := range append(w.targetNamespaces(), w.Flux()) {
			if _, ok, err := getData(ctx, w.c, ns, conf(j)); ok || err != nil {
				return errors.Errorf("copy %s/%s of deleted rule %s is still there (%v)", ns, conf(j), rule(j), err)
			}
		}
	}
	return nil
}

// wantHash is the hash a Deployment that reads cm whole carries once it
// rolled to cm's content (configrollout.Hash, Combined).
func wantHash(cm *corev1.ConfigMap) string {
	return configrollout.Combined([]string{configrollout.Hash(configrollout.ConfigMapContent(cm, nil))})
}

// rolledToLatest: a Deployment whose ConfigMap changed since setup carries
// the hash of its current content, and its rollout's status says so.
func rolledToLatest(ctx context.Context, s *State) error {
	w := s.World
	for j := range targets {
		if s.Changes[j] == 0 || s.m.denied[j] || s.m.observes(KindConfigRollout, j) {
			continue
		}
		cm, _, err := getData(ctx, w.c, w.Target(j), local)
		if err != nil || cm == nil {
			return errors.Errorf("ConfigMap %s/%s: %v", w.Target(j), local, err)
		}
		want := wantHash(cm)
		d := &appsv1.Deployment{}
		if err := w.c.Get(ctx, types.NamespacedName{Namespace: w.Target(j), Name: web(j)}, d); err != nil {
			return errors.Wrapf(err, "cannot get %s", web(j))
		}
		if got := d.Spec.Template.Annotations[configrollout.AnnotationHash]; got != want {
			return errors.Errorf("%s/%s carries hash %q, want %q of %v (%d changes)", d.Namespace, d.Name, got, want, cm.Data, s.Changes[j])
		}
		r := &workloadv1alpha1.ConfigRollout{}
		if err := w.c.Get(ctx, types.NamespacedName{Namespace: w.Target(j), Name: ro(j)}, r); err != nil {
			return errors.Wrapf(err, "cannot get %s", ro(j))
		}
		if r.Status.AtProvider.Hash != want {
			return errors.Errorf("%s/%s status hash %q, want %q", r.Namespace, r.Name, r.Status.AtProvider.Hash, want)
		}
	}
	return nil
}

// managedReady: every managed resource of the world is Synced and none is
// being deleted; those that can be Ready on envtest are Ready too, unless
// what the sequence did makes them legitimately not: a denied or missing
// target, a denied own namespace, Observe. An AppBundle waits for its
// Deployment to be Available and an ImmortalContainer for its pod to run,
// which no kubelet or controller makes so here.
func managedReady(ctx context.Context, s *State) error {
	mgs, err := s.World.managed(ctx)
	if err != nil {
		return err
	}
	var bad []string
	for _, mg := range mgs {
		id := fmt.Sprintf("%T %s/%s", mg, mg.GetNamespace(), mg.GetName())
		if mg.GetDeletionTimestamp() != nil {
			bad = append(bad, id+" is being deleted")
			continue
		}
		synced, ready := s.expects(mg)
		want := []xpv2.ConditionType{}
		if synced {
			want = append(want, xpv2.TypeSynced)
		}
		if ready {
			want = append(want, xpv2.TypeReady)
		}
		for _, ct := range want {
			if c := mg.GetCondition(ct); c.Status != corev1.ConditionTrue {
				bad = append(bad, fmt.Sprintf("%s is %s=%s (%s: %s)", id, ct, c.Status, c.Reason, c.Message))
			}
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// expects says whether mg must be Synced and Ready at quiescence.
func (s *State) expects(mg resource.Managed) (synced, ready bool) {
	switch v := mg.(type) {
	case *copyv1alpha1.CopyRule:
		if v.Name == allRule {
			return true, true
		}
		j := int(v.Name[len(v.Name)-1] - '0')
		return true, !s.m.observes(KindCopyRule, j) && !s.m.anyDeniedTarget() && !s.m.fluxGone
	case *workloadv1alpha1.ConfigRollout:
		j := int(v.Name[len(v.Name)-1] - '0')
		return !s.m.denied[j], !s.m.denied[j] && !s.m.observes(KindConfigRollout, j)
	case *chaosv1alpha1.ChaosAgent:
		// An agent created while its kill switch is on has run no round,
		// and is not Ready until it does.
		return true, !s.m.observes(KindChaosAgent, 0) && !s.m.switchOn
	}
	return true, false
}

// baselined: each rollout follows its Deployment, recorded as a baseline:
// what setup waits for before the first operation.
func baselined(ctx context.Context, s *State) error {
	w := s.World
	for j := range targets {
		r := &workloadv1alpha1.ConfigRollout{}
		if err := w.c.Get(ctx, types.NamespacedName{Namespace: w.Target(j), Name: ro(j)}, r); err != nil {
			return errors.Wrapf(err, "cannot get %s", ro(j))
		}
		found := false
		for _, wl := range r.Status.AtProvider.Workloads {
			found = found || (wl.Kind == "Deployment" && wl.Name == web(j) && wl.Baseline)
		}
		if !found {
			return errors.Errorf("%s/%s records no baseline of %s: %+v", r.Namespace, r.Name, web(j), r.Status.AtProvider.Workloads)
		}
	}
	return nil
}

// noneLeft: none of the world's managed resources is left.
func noneLeft(ctx context.Context, s *State) error {
	mgs, err := s.World.managed(ctx)
	if err != nil {
		return err
	}
	if len(mgs) > 0 {
		return errors.Errorf("%d managed resources left, first %s/%s", len(mgs), mgs[0].GetNamespace(), mgs[0].GetName())
	}
	return nil
}

// describe is what a report of a violation on web-j shows: the lock and
// hash it carries, and what its rollout's status records.
func describe(ctx context.Context, s *State, j int, d *appsv1.Deployment) string {
	r := &workloadv1alpha1.ConfigRollout{}
	if err := s.World.c.Get(ctx, types.NamespacedName{Namespace: s.World.Target(j), Name: ro(j)}, r); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("lock %q, template hash %q; %s status: hash %q, rollouts %d, workloads %+v",
		d.Annotations[configrollout.AnnotationLock], d.Spec.Template.Annotations[configrollout.AnnotationHash],
		ro(j), r.Status.AtProvider.Hash, r.Status.AtProvider.Rollouts, r.Status.AtProvider.Workloads)
}

// noCopyLeft: no copy of any of the world's rules is left anywhere, once
// they are all deleted.
func noCopyLeft(ctx context.Context, s *State) error {
	rules := map[string]bool{s.World.AllSource() + "/" + allRule: true}
	for j := range targets {
		rules[s.World.Source()+"/"+rule(j)] = true
	}
	l := &corev1.ConfigMapList{}
	if err := s.World.c.List(ctx, l, client.HasLabels{copyrule.LabelRuleUID}); err != nil {
		return errors.Wrap(err, "cannot list copies")
	}
	for _, cm := range l.Items {
		if r := cm.Annotations[copyrule.AnnotationRule]; rules[r] {
			return errors.Errorf("copy %s/%s of deleted rule %s is still there", cm.Namespace, cm.Name, r)
		}
	}
	return nil
}
