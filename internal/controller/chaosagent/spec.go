package chaosagent

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
)

// Defaults of the parameters the CRD defaults as well, for objects that reach
// the controller without them (unit tests, older API servers).
const (
	defaultMaxReplicas = 128
	defaultEagerness   = 50
	defaultInterval    = time.Minute
	minInterval        = time.Second
)

// Spec is a ChaosAgent's parameters, parsed and defaulted.
type Spec struct {
	Tantrum, Cancer, Ipsum bool

	PodTolerance int
	MaxReplicas  int32
	Eagerness    int // percent, 1–100
	MaxActions   int
	MinPodAge    time.Duration
	Interval     time.Duration

	// Excluded are names or glob patterns of namespaces never acted in.
	Excluded []string

	// NamespaceSelector is nil when the agent selects no namespaces by label.
	NamespaceSelector labels.Selector
	// The object selectors select everything when unset.
	PodSelector, DeploymentSelector, ConfigMapSelector labels.Selector

	Windows []Window

	Evict, DryRun, Revert bool
	Seed                  *int64
}

// Compile parses and defaults a ChaosAgent's parameters.
func Compile(p v1alpha1.ChaosAgentParameters) (Spec, error) {
	s := Spec{
		Tantrum:      p.TantrumMode,
		Cancer:       p.CancerMode,
		Ipsum:        p.IpsumMode,
		PodTolerance: int(p.PodTolerance),
		MaxReplicas:  p.MaxReplicas,
		Eagerness:    int(p.Eagerness),
		MaxActions:   int(p.MaxActionsPerRound),
		Interval:     p.Interval.Duration,
		Excluded:     p.ExcludedNamespaces,
		Evict:        p.RespectDisruptionBudgets == nil || *p.RespectDisruptionBudgets,
		Revert:       p.RevertOnDelete == nil || *p.RevertOnDelete,
		DryRun:       p.DryRun,
		Seed:         p.Seed,
	}
	if !s.Tantrum && !s.Cancer && !s.Ipsum {
		return s, errors.New("enable at least one of tantrumMode, cancerMode or ipsumMode")
	}
	if s.PodTolerance < 0 {
		return s, errors.Errorf("podTolerance %d is negative", s.PodTolerance)
	}
	if s.MaxReplicas <= 0 {
		s.MaxReplicas = defaultMaxReplicas
	}
	if s.Eagerness == 0 {
		s.Eagerness = defaultEagerness
	}
	if s.Eagerness < 1 || s.Eagerness > 100 {
		return s, errors.Errorf("eagerness %d is outside 1–100", s.Eagerness)
	}
	if s.MaxActions <= 0 {
		s.MaxActions = 1
	}
	if s.Interval == 0 {
		s.Interval = defaultInterval
	}
	if s.Interval < minInterval {
		return s, errors.Errorf("interval %s is shorter than %s", s.Interval, minInterval)
	}
	if p.MinPodAge != nil {
		s.MinPodAge = p.MinPodAge.Duration
	}
	var err error
	if p.NamespaceSelector != nil {
		if s.NamespaceSelector, err = selector(p.NamespaceSelector, "namespaceSelector"); err != nil {
			return s, err
		}
	}
	if s.PodSelector, err = selector(p.PodSelector, "podSelector"); err != nil {
		return s, err
	}
	if s.DeploymentSelector, err = selector(p.DeploymentSelector, "deploymentSelector"); err != nil {
		return s, err
	}
	if s.ConfigMapSelector, err = selector(p.ConfigMapSelector, "configMapSelector"); err != nil {
		return s, err
	}
	for i, w := range p.QuietWindows {
		pw, err := ParseWindow(w)
		if err != nil {
			return s, errors.Wrapf(err, "quietWindows[%d] is invalid", i)
		}
		s.Windows = append(s.Windows, pw)
	}
	return s, nil
}

// selector parses a label selector; an unset one selects everything.
func selector(ls *metav1.LabelSelector, field string) (labels.Selector, error) {
	if ls == nil {
		return labels.Everything(), nil
	}
	s, err := metav1.LabelSelectorAsSelector(ls)
	return s, errors.Wrapf(err, "%s is invalid", field)
}
