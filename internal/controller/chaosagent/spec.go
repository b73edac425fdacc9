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

	defaultRecoveryTimeout = 5 * time.Minute
	minRecoveryTimeout     = time.Second
	maxRecoveryTimeout     = 24 * time.Hour
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

	// Steady is nil when the agent has no steady-state guard.
	Steady *Steady
	// RecoveryTimeout bounds the wait for a disturbed workload to be whole.
	RecoveryTimeout time.Duration
}

// Steady is a parsed steady-state guard.
type Steady struct {
	// MinAvailablePercent is 0 when availability is not checked.
	MinAvailablePercent int
	NoCrashLoops        bool
	// Selector selects everything when the guard sets none.
	Selector labels.Selector
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
	if s.Steady, err = compileSteady(p.SteadyState); err != nil {
		return s, err
	}
	s.RecoveryTimeout = defaultRecoveryTimeout
	if p.RecoveryTimeout != nil {
		s.RecoveryTimeout = p.RecoveryTimeout.Duration
	}
	if s.RecoveryTimeout < minRecoveryTimeout || s.RecoveryTimeout > maxRecoveryTimeout {
		return s, errors.Errorf("recoveryTimeout %s is outside %s to %s", s.RecoveryTimeout, minRecoveryTimeout, maxRecoveryTimeout)
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

func compileSteady(p *v1alpha1.SteadyState) (*Steady, error) {
	if p == nil {
		return nil, nil
	}
	st := &Steady{NoCrashLoops: p.NoCrashLoops}
	if p.MinAvailablePercent != nil {
		st.MinAvailablePercent = int(*p.MinAvailablePercent)
		if st.MinAvailablePercent < 1 || st.MinAvailablePercent > 100 {
			return nil, errors.Errorf("steadyState.minAvailablePercent %d is outside 1–100", st.MinAvailablePercent)
		}
	}
	if st.MinAvailablePercent == 0 && !st.NoCrashLoops {
		return nil, errors.New("steadyState: set minAvailablePercent, noCrashLoops: true, or both")
	}
	var err error
	if st.Selector, err = selector(p.Selector, "steadyState.selector"); err != nil {
		return nil, err
	}
	return st, nil
}
