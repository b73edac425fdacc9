package explore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// Names of the world's objects. Namespace names start with team- so the
// default ClusterProviderConfig reaches them.
const (
	local   = "local"
	allRule = "all"
	dataKey = "v"
	initial = "init"
)

// A World is one sequence's objects, in namespaces of its own named after
// its seed: a source namespace holding conf-0..2, copied by rule-0..2 into
// every target namespace and the flux namespace; in target namespace j,
// ConfigMap local read by Deployment web-j, which ConfigRollout ro-j
// follows; a rule with allNamespaces: true whose source lives in a
// namespace of its own; AppBundle app and ImmortalContainer immortal in the
// app namespace; and ChaosAgent chaos acting on the victims of its own
// namespace and of a second one. Every managed resource uses the world's
// own ClusterProviderConfig, whose reach is the world's namespaces.
type World struct {
	Seed uint64
	// Tag, when set, names the world instead of the seed, so that one seed
	// can run more than once in one API server, each time in a world of
	// its own.
	Tag string
	c   client.Client
}

// id is what the world's names carry.
func (w World) id() string {
	if w.Tag != "" {
		return w.Tag
	}
	return strconv.FormatUint(w.Seed, 10)
}

func (w World) ns(suffix string) string { return fmt.Sprintf("team-%s-%s", w.id(), suffix) }

// Source is the namespace of the rules and their sources.
func (w World) Source() string { return w.ns("src") }

// Target is target namespace t.
func (w World) Target(t int) string { return w.ns(strconv.Itoa(t)) }

// AllSource is the namespace of the allNamespaces rule and its source.
func (w World) AllSource() string { return w.ns("all") }

// Everywhere is the name of the ConfigMap the allNamespaces rule copies.
func (w World) Everywhere() string { return fmt.Sprintf("everywhere-%d", w.Seed) }

// Flux is the namespace that operations delete and create again, a listed
// target of every rule-j.
func (w World) Flux() string { return w.ns("flux") }

// App is the namespace of AppBundle app and ImmortalContainer immortal.
func (w World) App() string { return w.ns("app") }

// Chaos is ChaosAgent chaos's own namespace; ChaosSecond is its second
// target, the one an OpExclude excludes.
func (w World) Chaos() string       { return w.ns("chaos") }
func (w World) ChaosSecond() string { return w.ns("cx") }

// ChaosTargets are the namespaces the agent targets: J of an OpFeed.
func (w World) ChaosTargets() []string { return []string{w.Chaos(), w.ChaosSecond()} }

// Denyable is namespace t of an OpDeny: a target namespace, or the agent's
// second target.
func (w World) Denyable(t int) string {
	if t == chaosSecondTarget {
		return w.ChaosSecond()
	}
	return w.Target(t)
}

// Config is the name of the world's ClusterProviderConfig.
func (w World) Config() string { return "explore-" + w.id() }

// Namespaces are the world's namespaces.
func (w World) Namespaces() []string {
	out := []string{w.Source(), w.AllSource()}
	for t := range targets {
		out = append(out, w.Target(t))
	}
	return append(out, w.Flux(), w.App(), w.Chaos(), w.ChaosSecond())
}

// configRef is the reference every managed resource of the world carries.
func (w World) configRef() *xpv2.ProviderConfigReference {
	return &xpv2.ProviderConfigReference{Kind: apisv1alpha1.ClusterProviderConfigKind, Name: w.Config()}
}

// baseDenied are the namespaces the world's config always denies.
var baseDenied = []string{"kube-system", "kube-public", "kube-node-lease"}

// config is the world's ClusterProviderConfig: it reaches the world's
// namespaces and those labelled reachable, and denies the system ones and
// denied.
func (w World) config(denied []string) *apisv1alpha1.ClusterProviderConfig {
	return &apisv1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: w.Config()},
		Spec: apisv1alpha1.ClusterProviderConfigSpec{
			Credentials: apisv1alpha1.ClusterCredentials{Source: apisv1alpha1.CredentialsSourceInjectedIdentity},
			Reach: &apisv1alpha1.Reach{
				Namespaces:        []string{w.ns("*")},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"clusterops.io/reachable": "true"}},
				DeniedNamespaces:  append(append([]string{}, baseDenied...), denied...),
			},
		},
	}
}

func conf(j int) string { return fmt.Sprintf("conf-%d", j) }
func rule(j int) string { return fmt.Sprintf("rule-%d", j) }
func web(j int) string  { return fmt.Sprintf("web-%d", j) }
func ro(j int) string   { return fmt.Sprintf("ro-%d", j) }

func configMap(ns, name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{dataKey: value}}
}

// Rule is CopyRule rule-j as the world creates it.
func (w World) Rule(j int) *copyv1alpha1.CopyRule {
	var into []string
	for t := range targets {
		into = append(into, w.Target(t))
	}
	into = append(into, w.Flux())
	r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Name: rule(j), Namespace: w.Source()}}
	r.Spec.ProviderConfigReference = w.configRef()
	r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{Kind: "ConfigMap", Names: []string{conf(j)}, Namespaces: into}
	return r
}

func (w World) allRule() *copyv1alpha1.CopyRule {
	r := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Name: allRule, Namespace: w.AllSource()}}
	r.Spec.ProviderConfigReference = w.configRef()
	r.Spec.ForProvider = copyv1alpha1.CopyRuleParameters{Kind: "ConfigMap", Names: []string{w.Everywhere()}, AllNamespaces: true}
	return r
}

// deployment is web-j: its pods read ConfigMap local whole, by envFrom.
func (w World) deployment(j int) *appsv1.Deployment {
	ls := map[string]string{"app": web(j)}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: web(j), Namespace: w.Target(j), Labels: ls},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: ls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: ls},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "nginx",
					EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: local}}}},
				}}},
			},
		},
	}
}

// rollout is ro-j, following web-j on changes of local. Its rollout limit is
// out of reach of any sequence, so that every change rolls at once.
func (w World) rollout(j int) *workloadv1alpha1.ConfigRollout {
	r := &workloadv1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: ro(j), Namespace: w.Target(j)}}
	r.Spec.ProviderConfigReference = w.configRef()
	r.Spec.ForProvider = workloadv1alpha1.ConfigRolloutParameters{
		ConfigMaps:   []workloadv1alpha1.SourceRef{{Name: local}},
		Workloads:    []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: web(j)}},
		RolloutLimit: &workloadv1alpha1.RolloutLimit{Rollouts: 1000, Within: &metav1.Duration{Duration: 10 * time.Second}},
	}
	return r
}

// objects are the world's objects in the order setup creates them.
func (w World) objects() []client.Object {
	out := []client.Object{w.config(nil)}
	for _, ns := range w.Namespaces() {
		out = append(out, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	out = append(out, configMap(w.AllSource(), w.Everywhere(), initial))
	for j := range targets {
		out = append(out, configMap(w.Source(), conf(j), initial), configMap(w.Target(j), local, initial), w.deployment(j))
	}
	for _, ns := range w.ChaosTargets() {
		out = append(out, victims(ns)...)
	}
	out = append(out, w.allRule())
	for j := range targets {
		out = append(out, w.Rule(j), w.rollout(j))
	}
	return append(out, w.Bundle(), w.Immortal(), w.Agent())
}

// Create creates the world's objects.
func (w World) Create(ctx context.Context) error {
	for _, o := range w.objects() {
		if err := w.c.Create(ctx, o); err != nil {
			return errors.Wrapf(err, "cannot create %T %s/%s", o, o.GetNamespace(), o.GetName())
		}
	}
	return nil
}

// A ref names one of the world's managed resources.
type ref struct {
	mg   resource.Managed
	ns   string
	name string
}

// refs are the world's managed resources, empty objects to read them into.
func (w World) refs() []ref {
	out := []ref{{&copyv1alpha1.CopyRule{}, w.AllSource(), allRule}}
	for j := range targets {
		out = append(out,
			ref{&copyv1alpha1.CopyRule{}, w.Source(), rule(j)},
			ref{&workloadv1alpha1.ConfigRollout{}, w.Target(j), ro(j)})
	}
	return append(out,
		ref{&workloadv1alpha1.AppBundle{}, w.App(), bundleName},
		ref{&workloadv1alpha1.ImmortalContainer{}, w.App(), immortalName},
		ref{&chaosv1alpha1.ChaosAgent{}, w.Chaos(), agentName})
}

// managed are the world's managed resources that exist (a deleted rule-j is
// left out), read from the API server.
func (w World) managed(ctx context.Context) ([]resource.Managed, error) {
	var out []resource.Managed
	for _, r := range w.refs() {
		err := w.c.Get(ctx, types.NamespacedName{Namespace: r.ns, Name: r.name}, r.mg)
		if kerrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, errors.Wrapf(err, "cannot get %s/%s", r.ns, r.name)
		}
		out = append(out, r.mg)
	}
	return out, nil
}

// Delete deletes the world's managed resources and then its namespaces
// (which stay Terminating on envtest: no namespace controller runs).
func (w World) Delete(ctx context.Context) error {
	mgs, err := w.managed(ctx)
	if err != nil {
		return err
	}
	for _, mg := range mgs {
		if err := w.c.Delete(ctx, mg); client.IgnoreNotFound(err) != nil {
			return errors.Wrapf(err, "cannot delete %s/%s", mg.GetNamespace(), mg.GetName())
		}
	}
	return nil
}

// DeleteNamespaces deletes the world's namespaces and its config.
func (w World) DeleteNamespaces(ctx context.Context) error {
	for _, ns := range w.Namespaces() {
		if err := w.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreNotFound(err) != nil {
			return errors.Wrapf(err, "cannot delete namespace %s", ns)
		}
	}
	return errors.Wrap(client.IgnoreNotFound(w.c.Delete(ctx, w.config(nil))), "cannot delete the world's config")
}
