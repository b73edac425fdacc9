// Package appbundle runs one image as a Deployment with its own storage and an
// optional Service, and repairs any drift of them on the watch event.
package appbundle

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	klabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/managedkind"
	"github.com/clusterops/provider-clusterops/internal/drift"
	"github.com/clusterops/provider-clusterops/internal/ownwrite"
	"github.com/clusterops/provider-clusterops/internal/plan"
	"github.com/clusterops/provider-clusterops/internal/target"
)

// TypeStorageSynced is the condition that tells whether the data claim is as
// the AppBundle wants, or why a wanted change cannot be made.
const TypeStorageSynced xpv2.ConditionType = "StorageSynced"

const reasonChangeRefused event.Reason = "StorageChangeRefused"

// reasonStorageRefused is the StorageSynced condition's reason while a storage
// change is refused.
const reasonStorageRefused xpv2.ConditionReason = "ChangeRefused"

// Setup adds the AppBundle controller to mgr.
func Setup(mgr ctrl.Manager, o managedkind.Options, r *target.Resolver) error {
	objects, err := o.NewCache(mgr, func(share klabels.Selector) cache.Options {
		return CacheOptions(mgr.GetScheme(), mgr.GetRESTMapper(), mgr.GetHTTPClient(), share)
	})
	if err != nil {
		return errors.Wrap(err, "cannot create the cache of the AppBundles' objects")
	}
	if err := mgr.Add(objects); err != nil {
		return errors.Wrap(err, "cannot add the cache of the AppBundles' objects")
	}
	own := ownwrite.New[ownwrite.Key]()
	dr, err := drift.NewReporter(o.Metrics)
	if err != nil {
		return err
	}
	return managedkind.Setup(mgr, o, r, managedkind.Kind[*v1alpha1.AppBundle]{
		GroupVersionKind: resource.ManagedKind(v1alpha1.AppBundleGroupVersionKind),
		Object:           &v1alpha1.AppBundle{},
		List:             &v1alpha1.AppBundleList{},
		OwnNamespace:     true,
		NewClient: func(c *target.Cluster, rec event.Recorder, _ client.SubResourceWriter, _ *v1alpha1.AppBundle) managed.TypedExternalClient[*v1alpha1.AppBundle] {
			e := &external{cluster: c, record: rec, drift: dr}
			if c.Local {
				// The cache and its events are of the provider's own cluster.
				e.cache, e.own = objects, own
			}
			return e
		},
		// A deleted or edited child, or a Deployment becoming or ceasing to
		// be ready, is acted on at the event, not at the next poll.
		Watch: func(b *builder.Builder) *builder.Builder {
			for _, s := range sources(objects, own, managedkind.EnqueueOwner(o, LabelOwner, mgr.GetCache(), func() client.Object { return &v1alpha1.AppBundle{} })) {
				b = b.WatchesRawSource(s)
			}
			return b
		},
	})
}

type external struct {
	cluster *target.Cluster
	record  event.Recorder
	drift   *drift.Reporter
	// cache holds the objects AppBundles made on the provider's own cluster;
	// nil on another cluster.
	cache client.Reader
	// own remembers the provider's writes of the objects the cache holds;
	// nil on another cluster.
	own *ownwrite.Filter[ownwrite.Key]
	// read are Observe's reads from the API server not yet used again, by
	// kind and name (nil: not found). The client lives for one reconcile:
	// Observe's reads of a bundle to create serve Create's, milliseconds
	// later, instead of a second GET of each object; Observe writes nothing
	// in between.
	read map[string]client.Object
	// drifted are the changes of other writers that Observe found, which
	// Create or Update report once they repaired them.
	drifted []apisv1alpha1.Drift
}

func (e *external) Observe(ctx context.Context, ab *v1alpha1.AppBundle) (managed.ExternalObservation, error) {
	c, err := e.children(ctx, ab, true)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	retainedPVC := meta.WasDeleted(ab) && ab.Spec.ForProvider.PVCDeletionPolicy != v1alpha1.PVCDelete
	f := newFindings(ab, c)
	e.drifted = f.drifted
	if c.deployment == nil && c.service == nil && (c.pvc == nil || retainedPVC) {
		if f.planning {
			// Reported as there, so that the plan, not crossplane-runtime's
			// "does not exist" error, is the answer: nothing is created
			// under the Observe policy either way.
			ab.Status.AtProvider.Plan = plan.Of(f.actions)
			ab.SetConditions(readiness(ab, c))
			return managed.ExternalObservation{ResourceExists: true, ConnectionDetails: connectionDetails(nil)}, nil
		}
		return managed.ExternalObservation{ResourceExists: false, ConnectionDetails: connectionDetails(nil)}, nil
	}
	if meta.WasDeleted(ab) {
		return managed.ExternalObservation{ResourceExists: true}, nil
	}
	ab.Status.AtProvider = observed(ab, c)
	deploymentOK, err := e.observeDeployment(ab, c, f)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	claimOK, err := e.observeClaim(ctx, ab, c, f)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	serviceOK, details, err := e.observeService(ab, c, f)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	e.drifted = f.drifted
	if f.planning {
		ab.Status.AtProvider.Plan = plan.Of(f.actions)
	}
	ab.SetConditions(readiness(ab, c))
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: deploymentOK && claimOK && serviceOK, ConnectionDetails: details}, nil
}

// observeDeployment reports whether the bundle's Deployment is as wanted.
func (e *external) observeDeployment(ab *v1alpha1.AppBundle, c children, f *findings) (bool, error) {
	if c.deployment == nil {
		return false, nil
	}
	if !bundleMark.On(c.deployment, ab) {
		f.adopted(kindDeployment, c.deployment.GetName())
		return false, nil
	}
	want, err := desiredDeployment(ab, e.cluster.Local)
	if err != nil {
		return false, err
	}
	drifted, err := deploymentDrifted(want, c.deployment)
	if err != nil {
		return false, err
	}
	f.changed(kindDeployment, c.deployment.GetName(), drifted)
	return len(drifted) == 0, nil
}

// observeClaim reports whether the bundle's claim is as wanted, or as near
// as it may be, and sets the StorageSynced condition.
func (e *external) observeClaim(ctx context.Context, ab *v1alpha1.AppBundle, c children, f *findings) (bool, error) {
	if c.pvc == nil {
		return false, nil
	}
	change, err := e.pvcChange(ctx, ab, c.pvc)
	if err != nil {
		return false, err
	}
	e.setStorageCondition(ab, change)
	if change.Apply {
		f.changed(kindClaim, c.pvc.GetName(), change.Drifted)
	}
	if !bundleMark.On(c.pvc, ab) {
		f.adopted(kindClaim, c.pvc.GetName())
		return false, nil
	}
	return !change.Apply, nil
}

// observeService reports whether the bundle's Service is as wanted (none,
// when it wants none), with the connection details it gives.
func (e *external) observeService(ab *v1alpha1.AppBundle, c children, f *findings) (bool, managed.ConnectionDetails, error) {
	switch {
	case wantsService(ab) && c.service == nil:
		return false, connectionDetails(nil), nil
	case wantsService(ab):
		drifted, err := serviceDrifted(desiredService(ab, e.cluster.Local), c.service)
		if err != nil {
			return false, nil, err
		}
		f.changed(kindService, c.service.GetName(), drifted)
		mine := bundleMark.On(c.service, ab)
		if !mine {
			f.adopted(kindService, c.service.GetName())
		}
		return mine && len(drifted) == 0, connectionDetails(c.service), nil
	case c.service != nil:
		f.unwanted(kindService, c.service.GetName(), "spec.forProvider.service is None")
		return false, connectionDetails(nil), nil
	}
	return true, connectionDetails(nil), nil
}

// observed is what status.atProvider shows of the bundle's objects c, with
// the drift it keeps.
func observed(ab *v1alpha1.AppBundle, c children) v1alpha1.AppBundleObservation {
	o := v1alpha1.AppBundleObservation{RecentDrift: ab.Status.AtProvider.RecentDrift}
	if c.deployment != nil {
		o.ReadyReplicas, o.Replicas = c.deployment.Status.ReadyReplicas, c.deployment.Status.Replicas
	}
	if c.pvc != nil {
		o.PVCPhase = c.pvc.Status.Phase
		if q, ok := c.pvc.Status.Capacity[corev1.ResourceStorage]; ok {
			o.PVCCapacity = q.String()
		}
	}
	if wantsService(ab) && c.service != nil {
		o.ServiceAddress = serviceAddress(c.service)
	}
	return o
}

// connectionDetails are where the AppBundle's Service s answers inside its
// cluster. Every key is always there, empty without a Service (s nil):
// crossplane-runtime merges the details into the Secret, so a key left out
// would keep a stale value rather than disappear. Create and Update return the
// same as Observe, so the Secret is written only when the Service changes.
func connectionDetails(s *corev1.Service) managed.ConnectionDetails {
	d := managed.ConnectionDetails{
		v1alpha1.AppBundleEndpointKey:  []byte{},
		v1alpha1.AppBundlePortKey:      []byte{},
		v1alpha1.AppBundleClusterIPKey: []byte{},
	}
	if s == nil || len(s.Spec.Ports) == 0 {
		return d
	}
	d[v1alpha1.AppBundleEndpointKey] = []byte(s.GetName() + "." + s.GetNamespace() + ".svc")
	d[v1alpha1.AppBundlePortKey] = []byte(strconv.Itoa(int(s.Spec.Ports[0].Port)))
	if ip := s.Spec.ClusterIP; ip != corev1.ClusterIPNone {
		d[v1alpha1.AppBundleClusterIPKey] = []byte(ip)
	}
	return d
}

// readiness: Ready when the Deployment is ready (deploymentReady: Available,
// as of its current spec) and the Service, if wanted, exists.
func readiness(ab *v1alpha1.AppBundle, c children) xpv2.Condition {
	d := c.deployment
	switch {
	case d == nil:
		return xpv2.Unavailable().WithMessage("Deployment does not exist")
	case d.Status.ObservedGeneration < d.Generation:
		return xpv2.Unavailable().WithMessage(fmt.Sprintf("Deployment is rolling out generation %d: its controller has not seen it yet", d.Generation))
	case !deploymentReady(d):
		return xpv2.Unavailable().WithMessage(fmt.Sprintf("Deployment is not Available: %d/%d replicas ready", d.Status.ReadyReplicas, d.Status.Replicas))
	case wantsService(ab) && c.service == nil:
		return xpv2.Unavailable().WithMessage("Service does not exist")
	}
	return xpv2.Available()
}

func serviceAddress(s *corev1.Service) string {
	if len(s.Spec.Ports) == 0 {
		return ""
	}
	if s.Spec.Type == corev1.ServiceTypeNodePort && s.Spec.Ports[0].NodePort != 0 {
		return fmt.Sprintf("NodePort %d on every node", s.Spec.Ports[0].NodePort)
	}
	return fmt.Sprintf("%s:%d", s.Spec.ClusterIP, s.Spec.Ports[0].Port)
}

// pvcChange works out what may be done to the existing claim; it reads the
// storage class only when the claim would have to grow.
func (e *external) pvcChange(ctx context.Context, ab *v1alpha1.AppBundle, got *corev1.PersistentVolumeClaim) (pvcChange, error) {
	want := desiredPVC(ab, e.cluster.Local)
	drifted, err := claimDrifted(want, got)
	if err != nil {
		return pvcChange{}, err
	}
	expandable := false
	w, g := wantedSize(want), got.Spec.Resources.Requests[corev1.ResourceStorage]
	if w.Cmp(g) > 0 && got.Spec.StorageClassName != nil {
		sc := &storagev1.StorageClass{}
		err := e.cluster.Client.Get(ctx, types.NamespacedName{Name: *got.Spec.StorageClassName}, sc)
		if resource.IgnoreNotFound(err) != nil {
			return pvcChange{}, errors.Wrapf(err, "cannot get StorageClass %q", *got.Spec.StorageClassName)
		}
		expandable = err == nil && sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
	}
	c := pvcDiff(want, got, len(drifted) > 0, expandable)
	c.Drifted = drifted
	return c, nil
}

func (e *external) setStorageCondition(ab *v1alpha1.AppBundle, c pvcChange) {
	if c.Refused == "" {
		ab.SetConditions(xpv2.Condition{Type: TypeStorageSynced, Status: corev1.ConditionTrue, Reason: "UpToDate", LastTransitionTime: metav1.Now()})
		return
	}
	prev := ab.GetCondition(TypeStorageSynced)
	ab.SetConditions(xpv2.Condition{Type: TypeStorageSynced, Status: corev1.ConditionFalse, Reason: reasonStorageRefused, Message: c.Refused, ObservedGeneration: ab.GetGeneration(), LastTransitionTime: metav1.Now()})
	if prev.Reason != reasonStorageRefused || prev.ObservedGeneration != ab.GetGeneration() {
		// Once per refused spec, not on every poll: the condition records
		// which generation was refused.
		e.record.Event(ab, event.Warning(reasonChangeRefused, errors.New(c.Refused)))
	}
}

func (e *external) Create(ctx context.Context, ab *v1alpha1.AppBundle) (managed.ExternalCreation, error) {
	ab.Status.AtProvider.Plan = nil
	ab.SetConditions(xpv2.Creating())
	applied, details, err := e.apply(ctx, ab)
	if err == nil {
		e.repaired(ab)
	}
	if err == nil && applied.deployment != nil && !deploymentReady(applied.deployment) {
		// Its controller's status update, when it is, reconciles the bundle;
		// until then status shows the objects as written.
		ab.Status.AtProvider = observed(ab, applied)
		managedkind.ReadinessFollows(ctx, ab)
	}
	return managed.ExternalCreation{ConnectionDetails: details}, err
}

// Update applies the AppBundle's objects and judges its readiness by what it
// wrote: the event of its own write does not reconcile it again (ownwrite),
// so the readiness Observe saw before the write must not stand.
func (e *external) Update(ctx context.Context, ab *v1alpha1.AppBundle) (managed.ExternalUpdate, error) {
	applied, details, err := e.apply(ctx, ab)
	if err == nil {
		e.repaired(ab)
		ab.SetConditions(readiness(ab, applied))
		// The Service's create or deletion is one of the bundle's own writes,
		// whose event does not reconcile it again: its address goes into
		// status now, from the Service as the API server answered.
		ab.Status.AtProvider.ServiceAddress = ""
		if applied.service != nil {
			ab.Status.AtProvider.ServiceAddress = serviceAddress(applied.service)
		}
	}
	return managed.ExternalUpdate{ConnectionDetails: details}, err
}

// apply writes every child with server-side apply, so that fields others own
// (an HPA's replicas, another controller's annotations) are left alone. The
// claim is written only where a change is allowed. It returns the objects as
// they are after the writes, and the connection details of the Service it
// applied, empty without one.
func (e *external) apply(ctx context.Context, ab *v1alpha1.AppBundle) (children, managed.ConnectionDetails, error) {
	c, err := e.children(ctx, ab, false)
	if err != nil {
		return c, nil, err
	}
	want, err := desiredDeployment(ab, e.cluster.Local)
	if err != nil {
		return c, nil, err
	}
	sel := &metav1.LabelSelector{MatchLabels: selector(ab)}
	if d := c.deployment; d != nil && !equality.Semantic.DeepEqual(d.Spec.Selector, sel) {
		return c, nil, errors.Errorf("cannot adopt Deployment %q: its selector %s differs from %s, and a Deployment's selector cannot change; delete it so the AppBundle can create its own",
			d.GetName(), metav1.FormatLabelSelector(d.Spec.Selector), metav1.FormatLabelSelector(sel))
	}
	writePVC := c.pvc == nil
	if c.pvc != nil {
		change, err := e.pvcChange(ctx, ab, c.pvc)
		if err != nil {
			return c, nil, err
		}
		writePVC = change.Apply
	}
	if writePVC {
		p := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ab.GetNamespace(), Name: PVCName(ab)}}
		if err := e.applyObject(ctx, ab, kindClaim, desiredPVC(ab, e.cluster.Local), p, c.pvc == nil); err != nil {
			return c, nil, errors.Wrapf(err, "cannot apply PersistentVolumeClaim %q", PVCName(ab))
		}
		c.pvc = p
	}
	if d := c.deployment; d != nil && recreate(ab) && d.Spec.Strategy.RollingUpdate != nil {
		// rollingUpdate is owned by whoever set or defaulted it, so applying
		// Recreate alone would leave an invalid mix: clear it explicitly.
		p := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"strategy":{"type":"Recreate","rollingUpdate":null}}}`))
		if err := e.patch(ctx, ab, kindDeployment, d, p); err != nil {
			return c, nil, errors.Wrapf(err, "cannot switch Deployment %q to the Recreate strategy", d.GetName())
		}
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ab.GetNamespace(), Name: ab.GetName()}}
	if err := e.applyObject(ctx, ab, kindDeployment, want, d, c.deployment == nil); err != nil {
		return c, nil, errors.Wrapf(err, "cannot apply Deployment %q", ab.GetName())
	}
	c.deployment = d
	if want := desiredService(ab, e.cluster.Local); want != nil {
		// The applied Service comes back as stored, its cluster IP included.
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ab.GetNamespace(), Name: ab.GetName()}}
		if err := e.applyObject(ctx, ab, kindService, want, s, c.service == nil); err != nil {
			return c, nil, errors.Wrapf(err, "cannot apply Service %q", ab.GetName())
		}
		c.service = s
		return c, connectionDetails(s), nil
	}
	if s := c.service; s != nil {
		c.service = nil
		return c, connectionDetails(nil), errors.Wrapf(e.delete(ctx, s), "cannot delete Service %q that is no longer wanted", ab.GetName())
	}
	return c, connectionDetails(nil), nil
}

// applyObject applies ac with the provider's field manager, taking over the
// fields others changed, and reads the object the API server answered into
// into, which names it. create says it does not exist yet. The write is one
// of ab's own that e.own notes.
func (e *external) applyObject(ctx context.Context, ab *v1alpha1.AppBundle, kind string, ac runtime.ApplyConfiguration, into client.Object, create bool) error {
	w := ownwrite.Patch()
	if create {
		w = ownwrite.Create()
	}
	done := e.own.Writing(client.ObjectKeyFromObject(ab), ownwrite.KeyOf(kind, into), w)
	err := e.cluster.Client.Apply(ctx, ac, client.FieldOwner(FieldManager), client.ForceOwnership)
	if err == nil {
		// Apply answers into ac: the object as stored, status included.
		err = convert(ac, into)
	}
	return wrote(done, kind, into, err)
}

// patch writes o with p, as a write of ab's own that e.own notes.
func (e *external) patch(ctx context.Context, ab *v1alpha1.AppBundle, kind string, o client.Object, p client.Patch) error {
	done := e.own.Writing(client.ObjectKeyFromObject(ab), ownwrite.KeyOf(kind, o), ownwrite.Patch())
	err := e.cluster.Client.Patch(ctx, o, p, client.FieldOwner(FieldManager))
	return wrote(done, kind, o, err)
}

// wrote completes with its outcome a write of o that done hears of. An event
// taken for the write's own that the answer shows was somebody else's (their
// create of the object came first) fails the reconcile, to be retried: no
// event may follow to reconcile the bundle.
func wrote(done ownwrite.Done, kind string, o client.Object, err error) error {
	if done(o.GetResourceVersion(), err) && err == nil {
		return errors.Errorf("%s %q changed while it was written; reconciling again", kind, o.GetName())
	}
	return err
}

// Delete deletes the Deployment and the Service, and the claim only under the
// Delete policy.
func (e *external) Delete(ctx context.Context, ab *v1alpha1.AppBundle) (managed.ExternalDelete, error) {
	ab.SetConditions(xpv2.Deleting())
	c, err := e.children(ctx, ab, false)
	if err != nil {
		return managed.ExternalDelete{}, err
	}
	for _, o := range []client.Object{c.service, c.deployment} {
		if !isNil(o) {
			if err := e.delete(ctx, o); err != nil {
				return managed.ExternalDelete{}, errors.Wrapf(err, "cannot delete %s", o.GetName())
			}
		}
	}
	if c.pvc != nil && ab.Spec.ForProvider.PVCDeletionPolicy == v1alpha1.PVCDelete {
		return managed.ExternalDelete{}, errors.Wrapf(e.delete(ctx, c.pvc), "cannot delete PersistentVolumeClaim %q", PVCName(ab))
	}
	return managed.ExternalDelete{}, nil
}

func (e *external) delete(ctx context.Context, o client.Object) error {
	uid := o.GetUID()
	return resource.IgnoreNotFound(e.cluster.Client.Delete(ctx, o, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground)))
}

func isNil(o client.Object) bool {
	switch v := o.(type) {
	case *corev1.Service:
		return v == nil
	case *appsv1.Deployment:
		return v == nil
	}
	return o == nil
}

func (e *external) Disconnect(context.Context) error { return nil }
