package copyrule

import (
	"context"
	"fmt"
	"sort"
	"sync"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
)

// A Result is what running a plan did.
type Result struct {
	// Done counts successful writes by op.
	Done map[Op]int
	// Written are the copies now in sync.
	Written int
	// Skipped are copies left alone: conflicts found while writing.
	Skipped int
	// Problems are the writes that failed or met a conflict.
	Problems []v1alpha1.CopyProblem
	// Failed counts the failed writes.
	Failed int
	// Repaired are the actions done that repaired drift (Action.Drift).
	Repaired []Action
}

// writer runs a plan's actions against a cluster.
type writer struct {
	c      client.Client
	kind   Mapping
	owner  Owner
	policy v1alpha1.ConflictPolicy
	// writing, when set, hears of each create or update before it is made:
	// the object's namespace and name, and the version it is written from
	// (none for a create). What it returns hears of the write's outcome: the
	// version the API server answered with, or the write's error.
	writing func(namespace, name, before string) func(answer string, err error)
	// wrote, when set, hears of each object written as the API server
	// returned it, or of its deletion (nil).
	wrote func(ref Ref, o *Object)
}

// write makes write, a create or update of o from version before, telling
// writing of it.
func (w *writer) write(o client.Object, before string, write func() error) error {
	done := func(string, error) {}
	if w.writing != nil {
		done = w.writing(o.GetNamespace(), o.GetName(), before)
	}
	err := write()
	done(o.GetResourceVersion(), err)
	if err == nil {
		if got, ok := fromAPI(o); ok {
			w.written(Ref{o.GetNamespace(), o.GetName()}, &got)
		}
	}
	return err
}

// written tells wrote, when set, of what is at ref now: o, or nothing.
func (w *writer) written(ref Ref, o *Object) {
	if w.wrote != nil {
		w.wrote(ref, o)
	}
}

// Run runs the actions, at most parallel at once. A failed write does not
// stop the others; each is reported in the result. Messages name objects,
// never their data.
func (w *writer) Run(ctx context.Context, actions []Action, parallel int) Result {
	r := Result{Done: map[Op]int{}}
	var mu sync.Mutex
	workqueue.ParallelizeUntil(ctx, parallel, len(actions), func(i int) {
		a := actions[i]
		op, problem, err := w.run(ctx, a)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			r.Failed++
			r.Problems = append(r.Problems, v1alpha1.CopyProblem{Namespace: a.Object.Namespace, Name: a.Object.Name, Reason: v1alpha1.ProblemWriteFailed, Message: fmt.Sprintf("cannot %s: %s", a.Op, err)})
		case problem != "":
			r.Skipped++
			r.Problems = append(r.Problems, v1alpha1.CopyProblem{Namespace: a.Object.Namespace, Name: a.Object.Name, Reason: v1alpha1.ProblemConflict, Message: problem})
		default:
			r.Done[op]++
			if len(a.Drift) > 0 {
				r.Repaired = append(r.Repaired, a)
			}
			if op != OpPrune && op != OpRelease {
				r.Written++
			}
		}
	})
	sort.Slice(r.Problems, func(i, j int) bool {
		a, b := r.Problems[i], r.Problems[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	sort.Slice(r.Repaired, func(i, j int) bool {
		a, b := r.Repaired[i].Object, r.Repaired[j].Object
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	return r
}

// run performs one action and returns the op it ended up as (a create that
// meets an object may become an update), or the conflict that stopped it.
func (w *writer) run(ctx context.Context, a Action) (Op, string, error) {
	switch a.Op {
	case OpCreate:
		o := a.Object.ToAPI(w.kind)
		err := w.write(o, "", func() error { return w.c.Create(ctx, o) })
		if !kerrors.IsAlreadyExists(err) {
			return OpCreate, "", err
		}
		// Someone else's object is in the way: the conflict policy decides.
		cur, found, err := get(ctx, w.c, w.kind, Ref{a.Object.Namespace, a.Object.Name})
		if err != nil || !found {
			return OpCreate, "", conflictErr(err)
		}
		taken, problem := Conflict(w.owner, w.policy, a.Source, a.Object.Annotations[AnnotationHash], cur)
		if problem != "" {
			return OpCreate, problem, nil
		}
		return w.run(ctx, taken)
	case OpUpdate, OpRelease:
		o := a.Object.ToAPI(w.kind)
		return a.Op, "", w.write(o, a.Object.ResourceVersion, func() error { return w.c.Update(ctx, o) })
	case OpReplace:
		cur := a.Current.ToAPI(w.kind)
		// The preconditions make sure what is deleted is what was compared.
		err := w.c.Delete(ctx, cur, client.Preconditions{UID: ptr.To(a.Current.UID), ResourceVersion: ptr.To(a.Current.ResourceVersion)})
		if err != nil && !kerrors.IsNotFound(err) {
			return OpReplace, "", err
		}
		w.written(Ref{a.Current.Namespace, a.Current.Name}, nil)
		o := a.Object
		o.ResourceVersion = ""
		made := o.ToAPI(w.kind)
		return OpReplace, "", w.write(made, "", func() error { return w.c.Create(ctx, made) })
	case OpPrune:
		o := a.Object.ToAPI(w.kind)
		err := w.c.Delete(ctx, o, client.Preconditions{UID: ptr.To(a.Object.UID)})
		if kerrors.IsNotFound(err) {
			err = nil
		}
		if err == nil {
			w.written(Ref{a.Object.Namespace, a.Object.Name}, nil)
		}
		return OpPrune, "", err
	}
	return a.Op, "", fmt.Errorf("unknown op %q", a.Op)
}

func conflictErr(err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("an object of this name existed a moment ago and is gone now; retrying")
}

// FirstFailure names the first failed write and why.
func (r Result) FirstFailure() string {
	for _, p := range r.Problems {
		if p.Reason == v1alpha1.ProblemWriteFailed {
			return p.Namespace + "/" + p.Name + ": " + p.Message
		}
	}
	return "none"
}
