package shard

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// ReasonUnknownShard is the reason of the Warning event on a managed resource
// whose shard label names no shard: no replica acts on it.
const ReasonUnknownShard = "UnknownShard"

// Unlabelled selects the managed resources that no replica acts on: those
// without a shard label, or with one that names none of shards.
func Unlabelled(shards int) (labels.Selector, error) {
	r, err := labels.NewRequirement(Label, selection.NotIn, All(shards))
	if err != nil {
		return nil, errors.Wrap(err, "cannot select managed resources outside every shard")
	}
	return labels.NewSelector().Add(*r), nil
}

// LabelerCacheOptions scope a cache's metadata watch of each of gvks to the
// resources the labeler has to act on, so that the replica that labels holds
// next to nothing once the fleet is labelled.
func LabelerCacheOptions(gvks []schema.GroupVersionKind, shards int) (map[client.Object]cache.ByObject, error) {
	sel, err := Unlabelled(shards)
	if err != nil {
		return nil, err
	}
	out := make(map[client.Object]cache.ByObject, len(gvks))
	for _, gvk := range gvks {
		out[metadataOf(gvk)] = cache.ByObject{Label: sel}
	}
	return out, nil
}

// SetupLabeler adds a controller that gives each managed resource of gvk
// without a shard label the shard of its namespace (Placement.Of), at once
// when it is created, so that the replica that owns that shard picks it up.
// A label that names no shard, such as one set by hand, is left alone and
// reported.
func SetupLabeler(mgr ctrl.Manager, gvk schema.GroupVersionKind, place Placement) error {
	name := "shard-labeler/" + strings.ToLower(gvk.Kind)
	r := &labeler{
		client:   mgr.GetClient(),
		gvk:      gvk,
		place:    place,
		recorder: mgr.GetEventRecorderFor(name), //nolint:staticcheck // Events as the other controllers record them, with the record API.
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(metadataOf(gvk), builder.OnlyMetadata).
		Complete(r)
	return errors.Wrapf(err, "cannot set up the shard labeler of %s", gvk.Kind)
}

type labeler struct {
	client   client.Client
	gvk      schema.GroupVersionKind
	place    Placement
	recorder record.EventRecorder
}

func (l *labeler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := metadataOf(l.gvk)
	if err := l.client.Get(ctx, req.NamespacedName, m); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if v, ok := m.GetLabels()[Label]; ok {
		if _, valid := Parse(v, l.place.Shards); !valid {
			l.recorder.Eventf(m, corev1.EventTypeWarning, ReasonUnknownShard,
				"Label %s=%q names no shard: no replica acts on this resource; set it to 0-%d, or remove it to place the resource by its namespace", Label, v, l.place.Shards-1)
		}
		return reconcile.Result{}, nil
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, Label, Name(l.place.Of(m.GetNamespace())))
	err := l.client.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(patch)))
	return reconcile.Result{}, errors.Wrap(client.IgnoreNotFound(err), "cannot label the managed resource with its shard")
}

func metadataOf(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}
