package shard

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/internal/flow"
	"github.com/clusterops/provider-clusterops/internal/whole"
)

// ReasonUnknownShard is the reason of the Warning event on a managed resource
// whose shard label names no shard: no replica acts on it.
const ReasonUnknownShard = "UnknownShard"

// LabelShards records the number of shards under which the labeler placed a
// managed resource. A shard label without it was set by hand (a pin) or by a
// provider older than it; one with it is the labeler's own, which it recuts
// when --shards changes (decide).
const LabelShards = "clusterops.io/shards"

// ToPlace selects the managed resources the labeler may have to place under
// shards: those it did not place under that count, that is every one without
// LabelShards (unlabelled, pinned by hand, or labelled by an older provider)
// and those placed under another count. Once the fleet is placed under shards
// it selects only the pins.
func ToPlace(shards int) (labels.Selector, error) {
	r, err := labels.NewRequirement(LabelShards, selection.NotIn, []string{strconv.Itoa(shards)})
	if err != nil {
		return nil, errors.Wrap(err, "cannot select managed resources to place into shards")
	}
	return labels.NewSelector().Add(*r), nil
}

// Strays selects the managed resources the labeler placed under shards whose
// shard label was since removed or set to name no shard, which ToPlace does
// not select: no replica acts on them until they are placed again.
func Strays(shards int) (labels.Selector, error) {
	placed, err := labels.NewRequirement(LabelShards, selection.In, []string{strconv.Itoa(shards)})
	if err != nil {
		return nil, errors.Wrap(err, "cannot select managed resources placed into shards")
	}
	lost, err := labels.NewRequirement(Label, selection.NotIn, All(shards))
	if err != nil {
		return nil, errors.Wrap(err, "cannot select managed resources outside every shard")
	}
	return labels.NewSelector().Add(*placed, *lost), nil
}

// LabelerCacheOptions scope a cache's metadata watch of each of gvks to the
// resources the labeler may have to place (ToPlace), so that the replica
// that labels holds next to nothing once the fleet is placed under shards.
func LabelerCacheOptions(gvks []schema.GroupVersionKind, shards int) (map[client.Object]cache.ByObject, error) {
	sel, err := ToPlace(shards)
	if err != nil {
		return nil, err
	}
	out := make(map[client.Object]cache.ByObject, len(gvks))
	for _, gvk := range gvks {
		out[metadataOf(gvk)] = cache.ByObject{Label: sel}
	}
	return out, nil
}

// SetupLabeler adds a controller that places each managed resource of gvk
// by its namespace (Placement.Of) as decide says: at once when it is
// created, so that the replica that owns its shard picks it up, and again
// when --shards changed since the labeler placed it. A pin that names no
// shard is left alone and reported. It watches the manager's cache, scoped
// by LabelerCacheOptions, and a cache of its own of the Strays.
func SetupLabeler(mgr ctrl.Manager, gvk schema.GroupVersionKind, place Placement) error {
	name := "shard-labeler/" + strings.ToLower(gvk.Kind)
	sel, err := Strays(place.Shards)
	if err != nil {
		return err
	}
	strays, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject:    map[client.Object]cache.ByObject{metadataOf(gvk): {Label: sel}},
		NewInformer: NewInformer("", nil),
	})
	if err != nil {
		return errors.Wrapf(err, "cannot make the cache of the %s the shard labeler lost", gvk.Kind)
	}
	if err := mgr.Add(strays); err != nil {
		return errors.Wrapf(err, "cannot add the cache of the %s the shard labeler lost", gvk.Kind)
	}
	r := &labeler{
		client:   mgr.GetClient(),
		strays:   strays,
		gvk:      gvk,
		place:    place,
		recorder: mgr.GetEventRecorderFor(name), //nolint:staticcheck // Events as the other controllers record them, with the record API.
	}
	err = whole.Controller(mgr, func(mgr ctrl.Manager) error {
		return ctrl.NewControllerManagedBy(mgr).
			Named(name).
			WithOptions(flow.WithQueue(controller.Options{}, mgr.GetLogger())).
			For(metadataOf(gvk), builder.OnlyMetadata).
			WatchesRawSource(source.Kind(strays, metadataOf(gvk), &handler.TypedEnqueueRequestForObject[*metav1.PartialObjectMetadata]{})).
			// A patch made from a cached version that the managed reconcilers'
			// status writes overtook is tried again on what is there, quietly.
			Complete(errors.WithSilentRequeueOnConflict(r))
	})
	return errors.Wrapf(err, "cannot set up the shard labeler of %s", gvk.Kind)
}

type labeler struct {
	client   client.Client
	strays   client.Reader
	gvk      schema.GroupVersionKind
	place    Placement
	recorder record.EventRecorder
}

func (l *labeler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := metadataOf(l.gvk)
	err := l.client.Get(ctx, req.NamespacedName, m)
	if kerrors.IsNotFound(err) {
		err = l.strays.Get(ctx, req.NamespacedName, m)
	}
	if err != nil {
		// Not found in either cache: gone, or placed under this count.
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	d := decide(m.GetLabels(), m.GetNamespace(), l.place)
	if d.unknown {
		l.recorder.Eventf(m, corev1.EventTypeWarning, ReasonUnknownShard,
			"Label %s=%q names no shard: no replica acts on this resource; set it to 0-%d, or remove it to place the resource by its namespace", Label, m.GetLabels()[Label], l.place.Shards-1)
	}
	if len(d.set) == 0 {
		return reconcile.Result{}, nil
	}
	// The resource's version makes the patch fail, to be tried again on
	// what is there now, if someone changed it since the cache saw it.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": m.GetResourceVersion(), "labels": d.set}})
	if err != nil {
		return reconcile.Result{}, errors.Wrap(err, "cannot encode the shard labels")
	}
	err = l.client.Patch(ctx, m, client.RawPatch(types.MergePatchType, patch))
	return reconcile.Result{}, errors.Wrap(client.IgnoreNotFound(err), "cannot label the managed resource with its shard")
}

// A decision is what the labeler does about one managed resource: the labels
// it sets (none when empty), and whether it reports that the resource's shard
// label names no shard.
type decision struct {
	set     map[string]string
	unknown bool
}

// decide is what the labeler does about a managed resource in namespace with
// labels ls, under place. A resource without a shard label, or one the
// labeler placed under another number of shards, is placed (both labels, in
// one patch); one it placed under this number whose shard label names no
// shard, edited since, is placed again. A shard label without LabelShards is
// a pin, or the label of a provider older than LabelShards, the two
// indistinguishable: one that names the shard its namespace is placed in
// under place is taken as the labeler's own (LabelShards added, so that the
// labeler's cache lets it go and a later change of --shards recuts it); one
// that names another shard is kept; one that names no shard is reported.
// TestDecidePlacesAResourceByItsNamespace and FuzzDecide hold these rules.
func decide(ls map[string]string, namespace string, place Placement) decision {
	n := strconv.Itoa(place.Shards)
	v, labelled := ls[Label]
	count, placed := ls[LabelShards]
	_, valid := Parse(v, place.Shards)
	own := Name(place.Of(namespace))
	switch {
	case !labelled, placed && count != n, placed && !valid:
		return decision{set: map[string]string{Label: own, LabelShards: n}}
	case placed:
		return decision{}
	case !valid:
		return decision{unknown: true}
	case v == own:
		return decision{set: map[string]string{LabelShards: n}}
	}
	return decision{}
}

func metadataOf(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}
