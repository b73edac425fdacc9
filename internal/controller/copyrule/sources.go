package copyrule

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
)

// SourceNamespaces returns the namespaces rule p, whose managed resource
// lives in namespace own, copies from, sorted and without repeats:
// sourceNamespaces, or sourceNamespace, or own.
func SourceNamespaces(p v1alpha1.CopyRuleParameters, own string) []string {
	var nss []string
	switch {
	case len(p.SourceNamespaces) > 0:
		nss = slices.Clone(p.SourceNamespaces)
	case p.SourceNamespace != "":
		nss = []string{p.SourceNamespace}
	default:
		nss = []string{own}
	}
	slices.Sort(nss)
	return slices.Compact(nss)
}

// SourceConflicts splits the sources read from every source namespace into
// those to copy and the copy names (name gives a source's) that sources of
// more than one namespace would write, each with those sources, sorted. A
// conflicted name has no winner: which one a target should hold is the user's
// call, and picking one silently would flip copies whenever a source comes or
// goes. Sources of one namespace never conflict here.
func SourceConflicts(sources []Object, name func(Object) string) ([]Object, map[string][]Ref) {
	byName := make(map[string][]Ref, len(sources))
	for _, s := range sources {
		n := name(s)
		byName[n] = append(byName[n], Ref{s.Namespace, s.Name})
	}
	conflicts := map[string][]Ref{}
	for n, refs := range byName {
		first := refs[0].Namespace
		if slices.ContainsFunc(refs, func(r Ref) bool { return r.Namespace != first }) {
			sort.Slice(refs, func(i, j int) bool {
				return refs[i].Namespace+"/"+refs[i].Name < refs[j].Namespace+"/"+refs[j].Name
			})
			conflicts[n] = refs
		}
	}
	out := make([]Object, 0, len(sources))
	for _, s := range sources {
		if _, c := conflicts[name(s)]; !c {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	if len(conflicts) == 0 {
		conflicts = nil
	}
	return out, conflicts
}

// holdConflicted keeps, for each name in conflict between source namespaces,
// the copies already made as they are: wanted, so not pruned, and not in the
// plan's writes, so not updated. Deleting them would break their consumers
// for a conflict they did not make; they follow the one remaining source once
// the conflict goes. Each target counts as intended and skipped, and each
// name is one problem.
func (p *Plan) holdConflicted(in PlanInput, wanted map[Ref]bool) {
	for _, n := range slices.Sorted(maps.Keys(in.Conflicted)) {
		refs := in.Conflicted[n]
		for _, ns := range in.Targets.Namespaces {
			wanted[Ref{ns, n}] = true
			p.Intended++
			p.Skipped++
		}
		p.problem(refs[0].Namespace, n, v1alpha1.ProblemSourceConflict, ConflictMessage(refs))
	}
}

// ConflictMessage says what sources refs, in several source namespaces,
// writing copies of one name means, and what to do. It names objects only.
func ConflictMessage(refs []Ref) string {
	q := make([]string, len(refs))
	for i, r := range refs {
		q[i] = r.Namespace + "/" + r.Name
	}
	return fmt.Sprintf("sources %s, in different source namespaces, would each write this copy: none is copied (copies already made are left as they are) until only one of them does; rename or unselect the others", strings.Join(q, ", "))
}

// NewConflicts returns the names in conflict now that the status's problems
// (the last reconcile's) did not report yet: each gets one Warning event,
// not one per reconcile.
func NewConflicts(reported []v1alpha1.CopyProblem, conflicts map[string][]Ref) []string {
	was := map[string]bool{}
	for _, pr := range reported {
		if pr.Reason == v1alpha1.ProblemSourceConflict {
			was[pr.Name] = true
		}
	}
	var out []string
	for _, n := range slices.Sorted(maps.Keys(conflicts)) {
		if !was[n] {
			out = append(out, n)
		}
	}
	return out
}
