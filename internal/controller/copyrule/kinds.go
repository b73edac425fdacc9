package copyrule

// This file says which kinds a rule may copy, and what a copy of each keeps.
// Admission (the CEL rules on CopyRuleParameters) refuses the same kinds
// Copyable does; TestCopyRuleKindAdmission checks that the two agree.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/target"
)

// A Mapping is the kind of objects a rule reads or writes and the resource
// its API serves them as, as a REST mapping pairs them.
type Mapping struct {
	schema.GroupVersionKind
	Resource schema.GroupVersionResource
}

// String names the kind as messages and events do: ConfigMap, or
// NetworkPolicy.networking.k8s.io.
func (k Mapping) String() string {
	if k.Group == "" {
		return k.Kind
	}
	return k.Kind + "." + k.Group
}

// typed reports whether the kind is a ConfigMap or a Secret, which the rule
// reads and writes as such; any other is read and written unstructured.
func (k Mapping) typed() bool {
	return k.Group == "" && (k.Kind == v1alpha1.KindConfigMap || k.Kind == v1alpha1.KindSecret)
}

// builtinKinds are the kinds of the API groups Kubernetes itself serves that
// a rule copies, by group: the rest of those groups run pods (Pods,
// Deployments, Jobs, …), belong to the cluster, or are kept by controllers
// (Endpoints, Events, Leases). Any kind of another group is a custom
// resource, copied when it is namespaced.
var builtinKinds = map[string][]string{
	"":                          {"ConfigMap", "Secret", "LimitRange", "ResourceQuota", "ServiceAccount"},
	"networking.k8s.io":         {"NetworkPolicy"},
	"rbac.authorization.k8s.io": {"Role", "RoleBinding"},
	"policy":                    {"PodDisruptionBudget"},
	"apps":                      nil, "batch": nil, "autoscaling": nil,
	"storage.k8s.io": nil, "apiextensions.k8s.io": nil, "admissionregistration.k8s.io": nil,
	"apiregistration.k8s.io": nil, "scheduling.k8s.io": nil, "certificates.k8s.io": nil,
	"coordination.k8s.io": nil, "discovery.k8s.io": nil, "events.k8s.io": nil, "node.k8s.io": nil,
	"flowcontrol.apiserver.k8s.io": nil, "authentication.k8s.io": nil, "authorization.k8s.io": nil,
	"resource.k8s.io": nil, "storagemigration.k8s.io": nil, "internal.apiserver.k8s.io": nil,
}

// sourceGVK is the group, version and kind of rule p's sources.
func sourceGVK(p v1alpha1.CopyRuleParameters) schema.GroupVersionKind {
	v := p.APIVersion
	if v == "" {
		v = "v1"
	}
	gv, err := schema.ParseGroupVersion(v)
	if err != nil {
		// Admission refuses it; the kind check names it.
		return schema.GroupVersionKind{Version: v, Kind: p.Kind}
	}
	return gv.WithKind(p.Kind)
}

// Copyable returns nil when a rule may copy objects of gvk, and otherwise
// why not, as admission words it.
func Copyable(gvk schema.GroupVersionKind) error {
	g := gvk.Group
	if g == "clusterops.io" || strings.HasSuffix(g, ".clusterops.io") {
		return errors.New("the provider's own kinds are not copied: a copy of a managed resource would act a second time")
	}
	allowed, builtin := builtinKinds[g]
	if !builtin || slices.Contains(allowed, gvk.Kind) {
		return nil
	}
	return errors.Errorf("kind %s of %s is not copied: of the built-in kinds, a rule copies %s; workloads run pods, and the other kinds are cluster-scoped or kept by controllers", gvk.Kind, gvk.GroupVersion(), copiedBuiltins())
}

// copiedBuiltins lists the built-in kinds a rule copies.
func copiedBuiltins() string {
	var out []string
	for _, g := range slices.Sorted(maps.Keys(builtinKinds)) {
		for _, k := range builtinKinds[g] {
			if g == "" {
				out = append(out, k)
				continue
			}
			out = append(out, k+"."+g)
		}
	}
	return strings.Join(out, ", ")
}

// staticKinds are the kinds whose resources are known without asking the
// API server: ConfigMaps and Secrets, which every rule of the fleet's bulk
// copies, resolve without a lookup.
var staticKinds = map[schema.GroupVersionKind]string{
	corev1.SchemeGroupVersion.WithKind(v1alpha1.KindConfigMap): "configmaps",
	corev1.SchemeGroupVersion.WithKind(v1alpha1.KindSecret):    "secrets",
}

// A KindError is a kind the rule cannot copy on the cluster it acts on: not
// served there, or not namespaced. It stops the rule, with its message in the
// rule's conditions, until the cluster or the rule changes.
type KindError struct{ msg string }

func (e *KindError) Error() string { return e.msg }

// resolveKind returns the Mapping of gvk as the cluster mapper describes it:
// its resource, and an error when the cluster does not serve the kind or the
// kind is not namespaced.
func resolveKind(gvk schema.GroupVersionKind, mapper meta.RESTMapper) (Mapping, error) {
	if err := Copyable(gvk); err != nil {
		return Mapping{}, &KindError{msg: err.Error()}
	}
	if r, ok := staticKinds[gvk]; ok {
		return Mapping{GroupVersionKind: gvk, Resource: gvk.GroupVersion().WithResource(r)}, nil
	}
	if mapper == nil {
		return Mapping{}, errors.Errorf("cannot look up kind %s of %s: no API discovery for this cluster", gvk.Kind, gvk.GroupVersion())
	}
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case meta.IsNoMatchError(err):
		return Mapping{}, &KindError{msg: fmt.Sprintf("the cluster does not serve kind %s of %s: is its CustomResourceDefinition installed?", gvk.Kind, gvk.GroupVersion())}
	case err != nil:
		return Mapping{}, errors.Wrapf(err, "cannot look up kind %s of %s", gvk.Kind, gvk.GroupVersion())
	case m.Scope.Name() != meta.RESTScopeNameNamespace:
		return Mapping{}, &KindError{msg: fmt.Sprintf("kind %s of %s is cluster-scoped: a rule copies namespaced kinds only", gvk.Kind, gvk.GroupVersion())}
	}
	return Mapping{GroupVersionKind: gvk, Resource: m.Resource}, nil
}

// copyGVK is the group, version and kind of rule p's copies: its sources',
// unless it copies Secrets into ConfigMaps.
func copyGVK(p v1alpha1.CopyRuleParameters) schema.GroupVersionKind {
	if NewTransform(p).IntoConfigMap {
		return corev1.SchemeGroupVersion.WithKind(v1alpha1.KindConfigMap)
	}
	return sourceGVK(p)
}

// grantFile is where the provider's RBAC for kinds beyond ConfigMaps and
// Secrets is shipped.
const grantFile = "cluster/rbac/copy-kinds.yaml"

// forbidden adds to an error the API server's refusal of a read or write of
// kind k, what grants it; other errors it returns as they are.
func forbidden(err error, k Mapping) error {
	if err == nil || !kerrors.IsForbidden(err) {
		return err
	}
	return errors.Wrap(err, refusal(k))
}

// refusal says that the provider may not read or write kind k, and what
// grants it.
func refusal(k Mapping) string {
	return fmt.Sprintf("the provider may not read or write %s: grant it to the provider's service account (%s has a ClusterRole per kind)", k.Resource.GroupResource(), grantFile)
}

// droppedFields are the fields of objects of a kind that a copy does not get,
// beyond status and server-set metadata, which no copy gets: what names
// objects of the source namespace alone.
var droppedFields = map[schema.GroupKind][]string{
	// The token Secrets a ServiceAccount lists are its namespace's own; its
	// imagePullSecrets are names the copy's namespace resolves.
	{Kind: "ServiceAccount"}: {"secrets"},
}

// body returns the content of an object of kind gk, given as unstructured
// content u, that a copy gets: all but its type, metadata and status, and
// the kind's droppedFields.
func body(gk schema.GroupKind, u map[string]any) map[string]any {
	out := make(map[string]any, len(u))
	for k, v := range u {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			continue
		}
		if slices.Contains(droppedFields[gk], k) {
			continue
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// kind resolves gvk on cluster c for rule cr. A kind the rule cannot copy
// there makes the rule unavailable, with why in its conditions.
func (e *external) kind(ctx context.Context, cr *v1alpha1.CopyRule, gvk schema.GroupVersionKind, c *target.Cluster) (Mapping, error) {
	var m meta.RESTMapper
	if c.Client != nil {
		m = c.Client.RESTMapper()
	}
	k, err := resolveKind(gvk, m)
	if err == nil {
		err = e.grants.check(ctx, c, k)
	}
	if isKindError(err) || isNotGranted(err) {
		cr.SetConditions(xpv2.Unavailable().WithMessage(err.Error()))
	}
	return k, err
}

// isKindError reports whether err is a KindError.
func isKindError(err error) bool {
	var k *KindError
	return errors.As(err, &k)
}
