package copyrule

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/drift"
)

// An Op is what a plan does to one object.
type Op string

// Ops.
const (
	// OpCreate creates a copy.
	OpCreate Op = "create"
	// OpUpdate brings a copy (or an object being taken over) in line with its source.
	OpUpdate Op = "update"
	// OpReplace deletes a copy that cannot be updated and creates it again.
	OpReplace Op = "replace"
	// OpPrune deletes a copy the rule created that is no longer wanted.
	OpPrune Op = "prune"
	// OpRelease removes the rule's marks from an object it took over.
	OpRelease Op = "release"
)

// An Action is one write of a plan.
type Action struct {
	Op Op
	// Object is the object to write, or to delete for OpPrune.
	Object Object
	// Current is the object as it is now, for OpReplace.
	Current *Object
	// Source is what a copy is made from, for OpCreate: a create that meets
	// an object decides by it what to do.
	Source Object
	// Drift are the fields of a copy, in sync with its source as last
	// written, that another writer changed: what OpUpdate or OpReplace
	// repairs. Empty when the write follows a change of the source or rule.
	Drift []string
	// Fields are the fields an OpUpdate or OpReplace changes, while the rule
	// only plans (PlanInput.Planning).
	Fields []string
}

// Ref names an object in a namespace.
type Ref struct{ Namespace, Name string }

// PlanInput is what planning needs, all of it read before.
type PlanInput struct {
	Owner   Owner
	Sources []Object
	Targets Targets
	// Copies are the objects labelled as this rule's.
	Copies []Object
	// Occupied are objects, not this rule's, found where a copy should go.
	Occupied map[Ref]Object
	Policy   v1alpha1.ConflictPolicy
	// MayDelete is false when the management policies leave out Delete.
	MayDelete bool
	// Reachable returns nil when the rule may act in a namespace.
	Reachable func(ns string) error
	// Conflicted are copy names that sources of more than one source
	// namespace would write, with those sources (SourceConflicts): nothing
	// is copied for them, and copies already made are kept as they are.
	Conflicted map[string][]Ref
	// Transform is what the rule changes between a source and its copies.
	Transform Transform
	// Synced is true when the rule was last in sync at its current spec:
	// only then can a copy differ by another writer's hand (Action.Drift).
	Synced bool
	// Planning is true when the rule only plans: each write names the
	// fields it changes (Action.Fields).
	Planning bool
}

// A Plan is what a rule must write to be in sync, and how far it is now.
type Plan struct {
	Actions  []Action
	Intended int
	InSync   int
	Skipped  int
	Problems []v1alpha1.CopyProblem
}

// prune plans what becomes of the copies no longer wanted: pruned, released
// when taken over, or left in place with the reason.
func (p *Plan) prune(in PlanInput, wanted map[Ref]bool) {
	for _, c := range in.Copies {
		if wanted[Ref{c.Namespace, c.Name}] {
			continue
		}
		switch {
		case !in.MayDelete:
			p.problem(c.Namespace, c.Name, v1alpha1.ProblemPruneSkipped, "no longer wanted, but the management policies leave out Delete, so it stays")
		case in.Reachable(c.Namespace) != nil:
			p.problem(c.Namespace, c.Name, v1alpha1.ProblemOutOfReach, "no longer wanted, but left in place: "+in.Reachable(c.Namespace).Error())
		case TakenOver(c):
			p.Actions = append(p.Actions, Action{Op: OpRelease, Object: Released(c)})
		default:
			p.Actions = append(p.Actions, Action{Op: OpPrune, Object: c})
		}
	}
}

// MakePlan compares the copies with their sources and targets and returns
// the writes that make them equal. It writes nothing itself.
func MakePlan(in PlanInput) Plan {
	p := Plan{}
	copies := make(map[Ref]Object, len(in.Copies))
	for _, c := range in.Copies {
		copies[Ref{c.Namespace, c.Name}] = c
	}
	wanted := map[Ref]bool{}
	outOfReach := make([]string, 0, len(in.Targets.OutOfReach))
	for ns := range in.Targets.OutOfReach {
		outOfReach = append(outOfReach, ns)
	}
	sort.Strings(outOfReach)
	for _, raw := range in.Sources {
		// The copies are compared with the source as the rule transforms
		// it, so a change of the rule's keys, name or metadata rewrites
		// exactly the copies it changes.
		src, err := in.Transform.Apply(raw)
		if err != nil {
			// Keys that collide: the copies stay as they are (not pruned),
			// and the source is reported once, not once per target.
			for _, ns := range in.Targets.Namespaces {
				wanted[Ref{ns, src.Name}] = true
				p.Intended++
				p.Skipped++
			}
			p.problem(raw.Namespace, raw.Name, v1alpha1.ProblemRefused, err.Error())
			continue
		}
		h := Hash(src)
		for _, ns := range outOfReach {
			wanted[Ref{ns, src.Name}] = true
			p.Intended++
			p.Skipped++
			p.problem(ns, src.Name, v1alpha1.ProblemOutOfReach, in.Targets.OutOfReach[ns])
		}
		for _, ns := range in.Targets.Namespaces {
			ref := Ref{ns, src.Name}
			wanted[ref] = true
			p.Intended++
			if c, ok := copies[ref]; ok {
				switch {
				case InSync(in.Owner, src, h, c):
					p.InSync++
				case NeedsReplace(c, src):
					cur := c
					p.Actions = append(p.Actions, Action{Op: OpReplace, Object: Desired(in.Owner, src, h, ns, nil, TakenOver(c)), Current: &cur, Drift: in.drift(src, h, c), Fields: in.planned(src, h, c)})
				default:
					p.Actions = append(p.Actions, Action{Op: OpUpdate, Object: Desired(in.Owner, src, h, ns, &c, TakenOver(c)), Drift: in.drift(src, h, c), Fields: in.planned(src, h, c)})
				}
				continue
			}
			o, occupied := in.Occupied[ref]
			if !occupied {
				p.Actions = append(p.Actions, Action{Op: OpCreate, Object: Desired(in.Owner, src, h, ns, nil, false), Source: src})
				continue
			}
			if a, problem := Conflict(in.Owner, in.Policy, src, h, o); problem != "" {
				p.Skipped++
				p.problem(ns, src.Name, v1alpha1.ProblemConflict, problem)
			} else {
				p.Actions = append(p.Actions, a)
			}
		}
	}
	p.holdConflicted(in, wanted)
	p.prune(in, wanted)
	for _, ns := range in.Targets.Missing {
		for _, src := range in.Sources {
			p.problem(ns, in.Transform.Name(src), v1alpha1.ProblemNamespaceMissing, fmt.Sprintf("namespace %q does not exist; the copy is made when it is created", ns))
		}
	}
	return p
}

func (p *Plan) problem(ns, name, reason, msg string) {
	p.Problems = append(p.Problems, v1alpha1.CopyProblem{Namespace: ns, Name: name, Reason: reason, Message: msg})
}

// Conflict decides what happens to object o, not this rule's, where the copy
// of src (hash h) should go: the action that takes it over, or why it is left.
func Conflict(owner Owner, policy v1alpha1.ConflictPolicy, src Object, h string, o Object) (Action, string) {
	switch policy {
	case v1alpha1.ConflictOverwrite:
		if NeedsReplace(o, src) {
			cur := o
			return Action{Op: OpReplace, Object: Desired(owner, src, h, o.Namespace, nil, true), Current: &cur}, ""
		}
		return Action{Op: OpUpdate, Object: Desired(owner, src, h, o.Namespace, &o, true)}, ""
	case v1alpha1.ConflictAdopt:
		if !SameData(o, src) {
			return Action{}, "an object of this name that the rule did not create holds other data; conflictPolicy Adopt takes over only identical objects (Overwrite replaces it)"
		}
		if NeedsReplace(o, src) {
			return Action{}, "an identical object of this name that the rule did not create is immutable and the source is not, so it cannot be adopted in place (Overwrite replaces it)"
		}
		return Action{Op: OpUpdate, Object: Desired(owner, src, h, o.Namespace, &o, true)}, ""
	default:
		return Action{}, "an object of this name that the rule did not create is in the way; conflictPolicy Skip leaves it (Adopt or Overwrite take it over)"
	}
}

// drift returns the fields at which copy c, written for source content h,
// differs from the copy of src the rule wants: another writer changed them.
// A copy written for other content follows its source, and one whose content
// was not read cannot tell; neither is drift.
func (in PlanInput) drift(src Object, h string, c Object) []string {
	if !in.Synced || c.Summary != nil || c.Annotations[AnnotationHash] != h || !OwnedBy(in.Owner, c) {
		return nil
	}
	return in.fields(src, h, c)
}

// planned returns the fields at which copy c differs from the copy of src
// the rule wants, while the rule only plans.
func (in PlanInput) planned(src Object, h string, c Object) []string {
	if !in.Planning {
		return nil
	}
	return in.fields(src, h, c)
}

// fields returns the fields at which copy c differs from the copy of src
// (content hash h) the rule wants.
func (in PlanInput) fields(src Object, h string, c Object) []string {
	if c.Summary != nil {
		// Not read whole: only that its content or marks differ is known.
		return []string{"."}
	}
	want := Desired(in.Owner, src, h, c.Namespace, &c, TakenOver(c))
	keys := ruleAnnotations(want.Annotations, c.Annotations)
	fields, err := drift.Fields(view(want, keys), view(c, keys))
	if err != nil || len(fields) == 0 {
		// Apart in a way the view does not show: still repaired.
		return []string{"."}
	}
	return fields
}

// ruleAnnotations are the keys of the annotations the rule sets on a copy,
// by either list of those it added. The content hash is left out: it changes
// with the content, which names the fields that changed.
func ruleAnnotations(a, b map[string]string) []string {
	keys := []string{AnnotationAdded, AnnotationRule, AnnotationSource, AnnotationTakenOver}
	for _, l := range []string{a[AnnotationAdded], b[AnnotationAdded]} {
		if l != "" {
			keys = append(keys, strings.Split(l, ",")...)
		}
	}
	return keys
}

// view is what a copy holds, as its kind's fields are named: a Secret's
// data and type, a ConfigMap's data and binaryData, or another kind's
// fields; its labels and the annotations of keys.
func view(o Object, keys []string) map[string]any {
	ann := map[string]string{}
	for _, k := range keys {
		if v, ok := o.Annotations[k]; ok {
			ann[k] = v
		}
	}
	v := map[string]any{"metadata": map[string]any{"labels": o.Labels, "annotations": ann}}
	if o.Body != nil {
		// Another kind than ConfigMap and Secret: its fields as they are.
		maps.Copy(v, o.Body)
		return v
	}
	v["immutable"] = o.Immutable
	if o.Type != "" {
		v["type"], v["data"] = o.Type, o.Bytes
	} else {
		v["data"], v["binaryData"] = o.Data, o.Bytes
	}
	return v
}
