package appbundle

import (
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/drift"
	"github.com/clusterops/provider-clusterops/internal/plan"
)

// findings gathers what Observe finds as it compares a bundle's objects with
// what it wants: the drift to report once repaired, when the bundle was in
// sync at its current spec, and the actions it would take, while it only
// plans.
type findings struct {
	ns               string
	synced, planning bool
	drifted          []apisv1alpha1.Drift
	actions          []apisv1alpha1.PlannedAction
}

// newFindings starts from what is missing of the bundle's objects c.
func newFindings(ab *v1alpha1.AppBundle, c children) *findings {
	f := &findings{
		ns: ab.GetNamespace(),
		// What differs from a bundle in sync at its current spec, another
		// writer changed.
		synced:   !meta.WasDeleted(ab) && drift.Synced(ab),
		planning: !meta.WasDeleted(ab) && plan.Only(ab),
	}
	if f.synced {
		f.drifted = gone(ab, c)
	}
	if f.planning {
		f.actions = creates(ab, c)
	}
	return f
}

// changed records an object of the bundle whose fields differ from what it
// wants.
func (f *findings) changed(kind, name string, fields []string) {
	if len(fields) == 0 {
		return
	}
	if f.synced {
		f.drifted = append(f.drifted, drift.Of(kind, f.ns, name, fields))
	}
	f.plan(apisv1alpha1.PlannedAction{Action: apisv1alpha1.ActionUpdate, Kind: kind, Name: name, Fields: fields})
}

// adopted records an object the bundle did not make, which adoptExisting
// lets it take over.
func (f *findings) adopted(kind, name string) {
	f.plan(apisv1alpha1.PlannedAction{Action: apisv1alpha1.ActionUpdate, Kind: kind, Name: name, Reason: "not made by this AppBundle: taken over (adoptExisting)"})
}

// unwanted records an object the bundle made and no longer wants.
func (f *findings) unwanted(kind, name, reason string) {
	f.plan(apisv1alpha1.PlannedAction{Action: apisv1alpha1.ActionDelete, Kind: kind, Name: name, Reason: reason})
}

func (f *findings) plan(a apisv1alpha1.PlannedAction) {
	if f.planning {
		a.Namespace = f.ns
		f.actions = append(f.actions, a)
	}
}

// creates are the actions that make the bundle's objects missing from c.
func creates(ab *v1alpha1.AppBundle, c children) []apisv1alpha1.PlannedAction {
	var out []apisv1alpha1.PlannedAction
	add := func(kind, name string) {
		out = append(out, apisv1alpha1.PlannedAction{Action: apisv1alpha1.ActionCreate, Kind: kind, Namespace: ab.GetNamespace(), Name: name})
	}
	if c.pvc == nil {
		add(kindClaim, PVCName(ab))
	}
	if c.deployment == nil {
		add(kindDeployment, ab.GetName())
	}
	if wantsService(ab) && c.service == nil {
		add(kindService, ab.GetName())
	}
	return out
}

// gone are the bundle's objects of a bundle in sync that are missing from c:
// another writer deleted them.
func gone(ab *v1alpha1.AppBundle, c children) []apisv1alpha1.Drift {
	var out []apisv1alpha1.Drift
	if c.pvc == nil {
		out = append(out, drift.Deleted(kindClaim, ab.GetNamespace(), PVCName(ab)))
	}
	if c.deployment == nil {
		out = append(out, drift.Deleted(kindDeployment, ab.GetNamespace(), ab.GetName()))
	}
	if wantsService(ab) && c.service == nil {
		out = append(out, drift.Deleted(kindService, ab.GetNamespace(), ab.GetName()))
	}
	return out
}

// repaired reports the drift Observe found, now that it is repaired.
func (e *external) repaired(ab *v1alpha1.AppBundle) {
	for _, d := range e.drifted {
		e.drift.Repaired(e.record, ab, v1alpha1.AppBundleKind, &ab.Status.AtProvider.RecentDrift, d, time.Now())
	}
	e.drifted = nil
}
