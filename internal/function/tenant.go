package function

import (
	"fmt"
	"time"

	"github.com/crossplane/function-sdk-go/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
)

// Resource names of a Tenant's composed resources in the pipeline.
const (
	ResourceCopyPullSecret   resource.Name = "copy-pull-secret"
	ResourceCopySharedConfig resource.Name = "copy-shared-config"
	ResourceChaos            resource.Name = "chaos"
)

// DefaultProviderConfig is the ClusterProviderConfig composed managed
// resources use when the XR names none: the provider's own default.
const DefaultProviderConfig = "default"

// TenantSpec is the spec of a Tenant (XTenant through a claim). A tenant is
// its namespace: what the platform shares is copied into it, and chaos, when
// enabled, stays inside it.
type TenantSpec struct {
	// ProviderConfigName is the ClusterProviderConfig of the composed
	// managed resources. Its reach must include the namespaces copied from.
	ProviderConfigName string `json:"providerConfigName,omitempty"`

	// PullSecret is the registry pull Secret copied into the tenant.
	PullSecret *SourceObject `json:"pullSecret,omitempty"`

	// SharedConfig picks the ConfigMaps copied into the tenant.
	SharedConfig *SharedConfig `json:"sharedConfig,omitempty"`

	// Chaos runs a ChaosAgent confined to the tenant's namespace.
	Chaos *TenantChaos `json:"chaos,omitempty"`
}

// A SourceObject names an object in another namespace.
type SourceObject struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// SharedConfig picks ConfigMaps of one namespace by name, by label, or both.
type SharedConfig struct {
	Namespace string                `json:"namespace,omitempty"`
	Names     []string              `json:"names,omitempty"`
	Selector  *metav1.LabelSelector `json:"selector,omitempty"`
}

// TenantChaos is the chaos a tenant asks for. Unset numbers take the
// ChaosAgent's defaults.
type TenantChaos struct {
	Enabled      bool   `json:"enabled,omitempty"`
	TantrumMode  bool   `json:"tantrumMode,omitempty"`
	PodTolerance *int32 `json:"podTolerance,omitempty"`
	CancerMode   bool   `json:"cancerMode,omitempty"`
	MaxReplicas  *int32 `json:"maxReplicas,omitempty"`
	IpsumMode    bool   `json:"ipsumMode,omitempty"`
	Eagerness    *int32 `json:"eagerness,omitempty"`
	Interval     string `json:"interval,omitempty"`
	MinPodAge    string `json:"minPodAge,omitempty"`
}

// composeTenant composes CopyRules that copy the pull secret and the shared
// ConfigMaps into the tenant's namespace and nowhere else, and, when chaos is
// enabled, a ChaosAgent that acts only in that namespace.
func composeTenant(xr *xrInput, observed map[resource.Name]resource.ObservedComposed) (*composition, error) {
	spec := &TenantSpec{}
	if err := xr.decodeSpec(spec); err != nil {
		return nil, err
	}
	if err := spec.validate(xr.namespace); err != nil {
		return nil, err
	}

	pc := providerConfigRef(spec.ProviderConfigName)
	c := &composition{resources: map[resource.Name]*resource.DesiredComposed{}}

	ps := spec.PullSecret
	rule := copyRule(xr, pc, xr.baseName+"-pull-secret", copyv1alpha1.CopyRuleParameters{
		Kind:            copyv1alpha1.KindSecret,
		SourceNamespace: ps.Namespace,
		Names:           []string{ps.Name},
	})
	if err := c.add(ResourceCopyPullSecret, rule, copyv1alpha1.CopyRuleGroupVersionKind, mrReady(observed, ResourceCopyPullSecret)); err != nil {
		return nil, err
	}

	if sc := spec.SharedConfig; sc != nil {
		rule := copyRule(xr, pc, xr.baseName+"-shared-config", copyv1alpha1.CopyRuleParameters{
			Kind:            copyv1alpha1.KindConfigMap,
			SourceNamespace: sc.Namespace,
			Names:           sc.Names,
			Selector:        sc.Selector,
		})
		if err := c.add(ResourceCopySharedConfig, rule, copyv1alpha1.CopyRuleGroupVersionKind, mrReady(observed, ResourceCopySharedConfig)); err != nil {
			return nil, err
		}
	}

	if ch := spec.Chaos; ch != nil && ch.Enabled {
		// validate has parsed these already.
		interval, _ := duration("spec.chaos.interval", ch.Interval, time.Second)
		minAge, _ := duration("spec.chaos.minPodAge", ch.MinPodAge, 0)
		agent := &chaosv1alpha1.ChaosAgent{
			ObjectMeta: metav1.ObjectMeta{Name: xr.baseName + "-chaos", Namespace: xr.namespace},
			Spec: chaosv1alpha1.ChaosAgentSpec{
				ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: pc},
				// No namespaces and no namespaceSelector: the agent acts in
				// its own namespace, the tenant's, and nowhere else, whatever
				// reach its config grants. Dry run stays off: the tenant
				// asked for chaos.
				ForProvider: chaosv1alpha1.ChaosAgentParameters{
					TantrumMode:  ch.TantrumMode,
					PodTolerance: ptr.Deref(ch.PodTolerance, 0),
					CancerMode:   ch.CancerMode,
					MaxReplicas:  ptr.Deref(ch.MaxReplicas, 0),
					IpsumMode:    ch.IpsumMode,
					Eagerness:    ptr.Deref(ch.Eagerness, 0),
					MinPodAge:    minAge,
					DryRun:       false,
				},
			},
		}
		if interval != nil {
			agent.Spec.ForProvider.Interval = *interval
		}
		if err := c.add(ResourceChaos, agent, chaosv1alpha1.ChaosAgentGroupVersionKind, mrReady(observed, ResourceChaos)); err != nil {
			return nil, err
		}
	}

	if copies, ok := copiesInSync(observed); ok {
		c.status = map[string]any{"copies": copies}
	}
	return c, nil
}

// copyRule returns a CopyRule in the tenant's namespace that copies into that
// namespace only.
func copyRule(xr *xrInput, pc *xpv2.ProviderConfigReference, name string, p copyv1alpha1.CopyRuleParameters) *copyv1alpha1.CopyRule {
	p.Namespaces = []string{xr.namespace}
	// A copy that already exists with the same content is taken over; one
	// that differs is left alone and reported in the rule's status.
	p.ConflictPolicy = copyv1alpha1.ConflictAdopt
	return &copyv1alpha1.CopyRule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: xr.namespace},
		Spec: copyv1alpha1.CopyRuleSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: pc},
			ForProvider:         p,
		},
	}
}

// copiesInSync sums the copies of the observed CopyRules as in-sync/intended,
// once the provider has reported them.
func copiesInSync(observed map[resource.Name]resource.ObservedComposed) (string, bool) {
	var inSync, intended int64
	reported := false
	for _, n := range []resource.Name{ResourceCopyPullSecret, ResourceCopySharedConfig} {
		o, ok := observed[n]
		if !ok {
			continue
		}
		want, err := o.Resource.GetInteger("status.atProvider.intendedCopies")
		if err != nil {
			continue
		}
		have, _ := o.Resource.GetInteger("status.atProvider.copiesInSync")
		inSync, intended, reported = inSync+have, intended+want, true
	}
	return fmt.Sprintf("%d/%d", inSync, intended), reported
}

// validate checks what the XRD's schema checks too, so that an XR applied
// without it (or an older XRD) gets a clear answer rather than an MR the API
// server refuses.
func (s *TenantSpec) validate(tenantNamespace string) error {
	if s.ProviderConfigName != "" {
		if err := objectName("spec.providerConfigName", s.ProviderConfigName); err != nil {
			return err
		}
	}
	if s.PullSecret == nil {
		return required("spec.pullSecret")
	}
	if err := namespaceName("spec.pullSecret.namespace", s.PullSecret.Namespace); err != nil {
		return err
	}
	if s.PullSecret.Namespace == tenantNamespace {
		return invalid("spec.pullSecret.namespace", "is the tenant's own namespace %q: name the namespace the secret is copied from", tenantNamespace)
	}
	if err := objectName("spec.pullSecret.name", s.PullSecret.Name); err != nil {
		return err
	}
	if err := s.SharedConfig.validate(tenantNamespace); err != nil {
		return err
	}
	return s.Chaos.validate()
}

func (sc *SharedConfig) validate(tenantNamespace string) error {
	if sc == nil {
		return nil
	}
	if err := namespaceName("spec.sharedConfig.namespace", sc.Namespace); err != nil {
		return err
	}
	if sc.Namespace == tenantNamespace {
		return invalid("spec.sharedConfig.namespace", "is the tenant's own namespace %q: name the namespace the ConfigMaps are copied from", tenantNamespace)
	}
	sel := sc.Selector != nil && (len(sc.Selector.MatchLabels) > 0 || len(sc.Selector.MatchExpressions) > 0)
	if len(sc.Names) == 0 && !sel {
		return invalid("spec.sharedConfig", "needs names or a non-empty selector: a tenant must not receive every ConfigMap of %q by accident", sc.Namespace)
	}
	for i, n := range sc.Names {
		if err := objectName(fmt.Sprintf("spec.sharedConfig.names[%d]", i), n); err != nil {
			return err
		}
	}
	return labelSelector("spec.sharedConfig.selector", sc.Selector)
}

func (ch *TenantChaos) validate() error {
	if ch == nil || !ch.Enabled {
		return nil
	}
	if !ch.TantrumMode && !ch.CancerMode && !ch.IpsumMode {
		return invalid("spec.chaos", "is enabled without a mode: set tantrumMode, cancerMode or ipsumMode")
	}
	if ch.PodTolerance != nil && *ch.PodTolerance < 0 {
		return invalid("spec.chaos.podTolerance", "must not be negative, got %d", *ch.PodTolerance)
	}
	if err := between("spec.chaos.eagerness", ch.Eagerness, 1, 100); err != nil {
		return err
	}
	if err := between("spec.chaos.maxReplicas", ch.MaxReplicas, 1, 10000); err != nil {
		return err
	}
	if _, err := duration("spec.chaos.interval", ch.Interval, time.Second); err != nil {
		return err
	}
	_, err := duration("spec.chaos.minPodAge", ch.MinPodAge, 0)
	return err
}

// providerConfigRef refers to the named ClusterProviderConfig, or the default.
func providerConfigRef(name string) *xpv2.ProviderConfigReference {
	if name == "" {
		name = DefaultProviderConfig
	}
	return &xpv2.ProviderConfigReference{Kind: apisv1alpha1.ClusterProviderConfigKind, Name: name}
}
