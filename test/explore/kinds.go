package explore

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// Names of the workload kinds' objects.
const (
	bundleName   = "app"
	immortalName = "immortal"
	agentName    = "chaos"
	// victimName names the chaos agent's victims: a pod, a Deployment and a
	// ConfigMap in each namespace it targets.
	victimName = "victim"
	// victimLabel marks the victims; the agent's selectors pick only them,
	// so that it never disturbs what the other kinds' oracles watch. Its
	// group is no clusterops.io one: the agent spares objects labelled so
	// as the provider's own.
	victimLabel = "explore.example.com/victim"
	// victimData is what a fed victim ConfigMap holds.
	victimData = "fed"
	// agentInterval is the time between the agent's rounds.
	agentInterval = 2 * time.Second
)

// claimName is the claim AppBundle app makes.
func claimName() string { return bundleName + "-data" }

// podName is the pod ImmortalContainer immortal keeps.
func podName() string { return immortalName + "-immortalpod" }

// Bundle is AppBundle app as the world creates it: one replica, no Service,
// its claim retained when it is deleted.
func (w World) Bundle() *workloadv1alpha1.AppBundle {
	b := &workloadv1alpha1.AppBundle{ObjectMeta: metav1.ObjectMeta{Name: bundleName, Namespace: w.App()}}
	b.Spec.ProviderConfigReference = w.configRef()
	b.Spec.ForProvider = workloadv1alpha1.AppBundleParameters{Image: initialBundleImage, Replicas: ptr.To[int32](1)}
	return b
}

// Immortal is ImmortalContainer immortal as the world creates it, with a
// backoff short enough for a crash loop of endPods to settle within a
// checkpoint.
func (w World) Immortal() *workloadv1alpha1.ImmortalContainer {
	ic := &workloadv1alpha1.ImmortalContainer{ObjectMeta: metav1.ObjectMeta{Name: immortalName, Namespace: w.App()}}
	ic.Spec.ProviderConfigReference = w.configRef()
	ic.Spec.ForProvider = workloadv1alpha1.ImmortalContainerParameters{
		Image:          initialImmortalImage,
		RestartBackoff: &workloadv1alpha1.RestartBackoff{Initial: metav1.Duration{Duration: time.Second}, Max: metav1.Duration{Duration: 2 * time.Second}},
	}
	return ic
}

// Agent is ChaosAgent chaos as the world creates it: every mode, every
// round, only on the victims of its two target namespaces, deleting pods
// outright (envtest runs no kubelet for evictions to wait on).
func (w World) Agent() *chaosv1alpha1.ChaosAgent {
	victim := &metav1.LabelSelector{MatchLabels: map[string]string{victimLabel: "true"}}
	a := &chaosv1alpha1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Name: agentName, Namespace: w.Chaos()}}
	a.Spec.ProviderConfigReference = w.configRef()
	a.Spec.ForProvider = chaosv1alpha1.ChaosAgentParameters{
		TantrumMode: true, CancerMode: true, IpsumMode: true,
		MaxReplicas: 4, Eagerness: 100, MaxActionsPerRound: 3,
		Interval:                 metav1.Duration{Duration: agentInterval},
		Seed:                     ptr.To(int64(w.Seed)),
		RespectDisruptionBudgets: ptr.To(false),
		Namespaces:               w.ChaosTargets(),
		PodSelector:              victim, DeploymentSelector: victim, ConfigMapSelector: victim,
	}
	return a
}

// victims are the chaos agent's victims in namespace ns.
func victims(ns string) []client.Object {
	ls := map[string]string{victimLabel: "true", "app": victimName}
	om := metav1.ObjectMeta{Name: victimName, Namespace: ns, Labels: ls}
	return []client.Object{
		&corev1.Pod{ObjectMeta: om, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}},
		&appsv1.Deployment{ObjectMeta: om, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": victimName}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": victimName}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		}},
		&corev1.ConfigMap{ObjectMeta: om, Data: map[string]string{dataKey: victimData}},
	}
}

// feed gives the agent its victims in ns again: the pod created if it is
// gone, the Deployment at one replica, the ConfigMap's data as created.
func (s *State) feed(ctx context.Context, ns string) error {
	for _, o := range victims(ns) {
		switch v := o.(type) {
		case *corev1.Pod:
			err := s.World.c.Create(ctx, v)
			if err == nil {
				s.wrote(v)
			}
			if client.IgnoreAlreadyExists(err) != nil {
				return err
			}
		case *appsv1.Deployment:
			if err := s.update(ctx, v, func() { v.Spec.Replicas = ptr.To[int32](1) }); err != nil {
				return err
			}
		case *corev1.ConfigMap:
			if err := s.update(ctx, v, func() { v.Data = map[string]string{dataKey: victimData} }); err != nil {
				return err
			}
		}
	}
	return nil
}

// applyWorkload runs the operations on AppBundle, ImmortalContainer and
// ChaosAgent; ok is false for any other.
func (s *State) applyWorkload(ctx context.Context, op Op) (err error, ok bool) { //nolint:revive // ok says whether op is one of these.
	w := s.World
	switch op.Type {
	case OpEditBundle:
		b := w.Bundle()
		return s.update(ctx, b, func() {
			b.Spec.ForProvider.Image = op.Value
			b.Spec.ForProvider.Service, b.Spec.ForProvider.Port = workloadv1alpha1.ServiceNone, nil
			if op.T == 1 {
				b.Spec.ForProvider.Service, b.Spec.ForProvider.Port = workloadv1alpha1.ServiceClusterIP, ptr.To[int32](80)
			}
		}), true
	case OpDeleteBundle:
		return s.delete(ctx, w.Bundle()), true
	case OpCreateBundle:
		return s.recreate(ctx, w.Bundle(), &workloadv1alpha1.AppBundle{}), true
	case OpDeleteChild:
		return s.deleteChild(ctx, op.Kind), true
	case OpEditChild:
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: bundleName, Namespace: w.App()}}
		return client.IgnoreNotFound(s.update(ctx, d, func() { d.Spec.Template.Spec.Containers[0].Image = op.Value })), true
	case OpEditImmortal:
		ic := w.Immortal()
		return s.update(ctx, ic, func() { ic.Spec.ForProvider.Image = op.Value }), true
	case OpDeleteImmortal:
		return s.delete(ctx, w.Immortal()), true
	case OpCreateImmortal:
		return s.recreate(ctx, w.Immortal(), &workloadv1alpha1.ImmortalContainer{}), true
	case OpDeletePod:
		return s.delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName(), Namespace: w.App()}}), true
	case OpEndPod:
		return s.endPod(ctx), true
	case OpFeed:
		return s.feed(ctx, w.ChaosTargets()[op.J]), true
	case OpKillSwitch:
		return s.killSwitch(ctx, op.T == 1), true
	case OpExclude:
		return s.exclude(ctx, op.T == 1), true
	case OpDeleteAgent:
		return s.delete(ctx, w.Agent()), true
	case OpCreateAgent:
		return s.recreate(ctx, w.Agent(), &chaosv1alpha1.ChaosAgent{}), true
	}
	return nil, false
}

// deleteChild deletes app's object of kind. A claim's pvc-protection
// finalizer is removed then, as the controller envtest lacks would once no
// pod uses it (none runs).
func (s *State) deleteChild(ctx context.Context, kind string) error {
	om := metav1.ObjectMeta{Name: bundleName, Namespace: s.World.App()}
	switch kind {
	case KindDeployment:
		return s.delete(ctx, &appsv1.Deployment{ObjectMeta: om})
	case KindService:
		return s.delete(ctx, &corev1.Service{ObjectMeta: om})
	}
	om.Name = claimName()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: om}
	if err := s.World.c.Delete(ctx, pvc); err != nil {
		return client.IgnoreNotFound(err)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.World.c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return err
		}
		pvc.Finalizers = nil
		return s.World.c.Update(ctx, pvc)
	})
	if err := client.IgnoreNotFound(err); err != nil {
		return errors.Wrap(err, "cannot remove the deleted claim's finalizers")
	}
	s.removed(pvc)
	return nil
}

// endPod marks immortal's pod Failed with a crash, as a kubelet would; a
// pod that is gone, terminating or ended already is left as it is.
func (s *State) endPod(ctx context.Context) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName(), Namespace: s.World.App()}}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.World.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed {
			return nil
		}
		now := metav1.Now()
		pod.Status.Phase = corev1.PodFailed
		pod.Status.StartTime = &now
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Image: "x", ImageID: "x", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, StartedAt: now, FinishedAt: now},
		}}}
		if err := s.World.c.Status().Update(ctx, pod); err != nil {
			return err
		}
		s.wrote(pod)
		return nil
	})
	return client.IgnoreNotFound(err)
}

// Causes of the freezes a ChaosAgent's operations make.
const (
	causeSwitch  = "kill switch on"
	causeExclude = "second target excluded"
)

// killSwitch sets or lifts the stop annotation on the world's config. While
// it is on, once every replica has seen it, the agent writes no victim.
func (s *State) killSwitch(ctx context.Context, on bool) error {
	if !on {
		s.lift(causeSwitch)
	}
	cpc := s.World.config(nil)
	err := s.update(ctx, cpc, func() {
		a := cpc.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		delete(a, chaosv1alpha1.AnnotationStop)
		if on {
			a[chaosv1alpha1.AnnotationStop] = "explore"
		}
		cpc.SetAnnotations(a)
	})
	if err != nil || !on {
		return err
	}
	s.freezeOn(causeSwitch, victimScope(s.World.ChaosTargets()...), configSeen(cpc.ResourceVersion))
	return nil
}

// exclude puts the agent's second target into its excludedNamespaces or
// takes it out. While it is excluded, once the agent has reconciled the
// edit, it writes no victim there.
func (s *State) exclude(ctx context.Context, on bool) error {
	if !on {
		s.lift(causeExclude)
	}
	a := s.World.Agent()
	err := s.update(ctx, a, func() {
		a.Spec.ForProvider.ExcludedNamespaces = nil
		if on {
			a.Spec.ForProvider.ExcludedNamespaces = []string{s.World.ChaosSecond()}
		}
	})
	if err != nil || !on {
		return err
	}
	s.freezeOn(causeExclude, victimScope(s.World.ChaosSecond()), generationSeen(&chaosv1alpha1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: a.Namespace}}, a.Generation))
	return nil
}
