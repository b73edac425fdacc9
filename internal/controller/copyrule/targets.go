package copyrule

import (
	"regexp"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/reach"
)

// LabelIgnore on a namespace keeps every CopyRule out of it.
const LabelIgnore = "copy.clusterops.io/ignore"

// A Namespace is what target selection needs to know of a namespace.
type Namespace struct {
	Name        string
	Labels      map[string]string
	Terminating bool
}

// Targets are the namespaces a rule copies into.
type Targets struct {
	// Namespaces to copy into, sorted.
	Namespaces []string
	// OutOfReach are namespaces the rule names explicitly that its config
	// does not let it reach, with why. Namespaces a pattern, selector or
	// allNamespaces would select beyond reach are simply not targets.
	OutOfReach map[string]string
	// Missing are namespaces the rule names explicitly that do not exist (yet).
	Missing []string
}

// SelectTargets picks the target namespaces of rule p, whose managed resource
// lives in namespace own, among the cluster's namespaces nss, within reach r.
// It never returns a namespace of sources (the rule's source namespaces when
// they are on the same cluster as the targets, none when they are on
// another), a terminating namespace, or one labelled
// copy.clusterops.io/ignore=true.
func SelectTargets(p v1alpha1.CopyRuleParameters, own string, sources []string, nss []Namespace, r reach.Policy) (Targets, error) {
	match, err := matcher(p)
	if err != nil {
		return Targets{}, err
	}
	isSource := make(map[string]bool, len(sources))
	for _, s := range sources {
		isSource[s] = true
	}
	t := Targets{Namespaces: []string{}, OutOfReach: map[string]string{}}
	exists := make(map[string]bool, len(nss))
	for _, ns := range nss {
		exists[ns.Name] = true
		if isSource[ns.Name] || ns.Terminating || ns.Labels[LabelIgnore] == "true" || !match(ns) {
			continue
		}
		if err := r.Check(own, ns.Name, ns.Labels); err != nil {
			if len(p.Namespaces) > 0 {
				t.OutOfReach[ns.Name] = err.Error()
			}
			continue
		}
		t.Namespaces = append(t.Namespaces, ns.Name)
	}
	for _, n := range p.Namespaces {
		if !exists[n] && !isSource[n] {
			t.Missing = append(t.Missing, n)
		}
	}
	sort.Strings(t.Namespaces)
	sort.Strings(t.Missing)
	return t, nil
}

// matcher returns the rule's target mode as a predicate on namespaces.
func matcher(p v1alpha1.CopyRuleParameters) (func(Namespace) bool, error) {
	switch {
	case len(p.Namespaces) > 0:
		// A sorted slice, not a set: every rule keeps its matcher for the
		// namespaces watch, and a slice of a few names is smaller than a
		// map's table (BenchmarkFleet's heap per resource).
		named := slices.Clone(p.Namespaces)
		slices.Sort(named)
		named = slices.Clip(slices.Compact(named))
		return func(ns Namespace) bool {
			_, ok := slices.BinarySearch(named, ns.Name)
			return ok
		}, nil
	case p.NamespacePattern != "":
		re, err := regexp.Compile("^(?:" + p.NamespacePattern + ")$")
		if err != nil {
			return nil, errors.Wrap(err, "spec.forProvider.namespacePattern is not a valid regular expression")
		}
		return func(ns Namespace) bool { return re.MatchString(ns.Name) }, nil
	case p.NamespaceSelector != nil:
		s, err := metav1.LabelSelectorAsSelector(p.NamespaceSelector)
		if err != nil {
			return nil, errors.Wrap(err, "spec.forProvider.namespaceSelector is not a valid label selector")
		}
		return func(ns Namespace) bool { return s.Matches(labels.Set(ns.Labels)) }, nil
	case p.AllNamespaces:
		return func(Namespace) bool { return true }, nil
	default:
		return nil, errors.New("spec.forProvider sets no target namespaces: set namespaces, namespacePattern, namespaceSelector or allNamespaces")
	}
}
