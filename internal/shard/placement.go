package shard

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// everyNamespace selects every object by its namespace's hash: a list with
// it tells whether the API server filters by shardSelector (its answer then
// says which selector it applied).
const everyNamespace = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')"

// keyBounds is the key of a ranges ConfigMap's data that holds Ranges.String.
const keyBounds = "bounds"

// A Placement says which shard a namespace's managed resources are labelled
// with: by Ranges of the API server's own hash of the namespace when the
// fleet has them, so that the objects of a shard's namespaces can be
// selected by the API server (Ranges.Selector); by Of otherwise.
type Placement struct {
	Shards int
	// Ranges, when set, place namespaces (Ranges.Of).
	Ranges *Ranges
	// Served is whether the API server filters lists and watches by
	// shardSelector (the ShardedListAndWatch feature gate).
	Served bool
}

// Of is the shard of namespace.
func (p Placement) Of(namespace string) int {
	if p.Ranges != nil {
		return p.Ranges.Of(namespace)
	}
	return Of(namespace, p.Shards)
}

// maxOutside bounds the namespaces outside a share's ranges that its
// filter names one by one: the API server parses a selector of at most
// 100,000 characters, about 1,000 ranges. A share with more (a fleet
// labelled before it had ranges) watches whole.
const maxOutside = 256

// filters is whether objects of a share with namespaces outside its ranges
// are selected by the API server.
func (p Placement) filters(namespaces []string) bool {
	return p.Served && p.Ranges != nil && len(namespaces) <= maxOutside
}

// Filter is the shardSelector of the objects in the namespaces of shards
// owned and in namespaces, as Ranges.Selector; empty when the API server
// cannot filter by it, the fleet has no ranges or too many namespaces lie
// outside them, so that such objects are watched whole.
func (p Placement) Filter(owned []int, namespaces []string) string {
	if !p.filters(namespaces) {
		return ""
	}
	return p.Ranges.Selector(owned, namespaces)
}

// Covers is whether the objects of namespace pass Filter(owned, namespaces):
// always when there is no filter.
func (p Placement) Covers(owned []int, namespaces []string, namespace string) bool {
	if !p.filters(namespaces) {
		return true
	}
	return slices.Contains(owned, p.Ranges.Of(namespace)) || slices.Contains(namespaces, namespace)
}

// RangesName is the ConfigMap, in the provider's namespace, that holds the
// ranges of a fleet of shards: one per count of shards, so that replicas
// started with another --shards never read ranges cut for a different one.
func RangesName(name string, shards int) string {
	return fmt.Sprintf("%s-shard-ranges-%d", name, shards)
}

// Place reads the placement of shards. The ranges are kept in an immutable
// ConfigMap (RangesName) in namespace: the first replica that finds none
// while the API server filters by shardSelector writes them, from the
// cluster's namespaces (Quantiles); every replica and the labeler then read
// the same. Without the feature gate and without a ConfigMap, namespaces are
// placed by Of, whose shares stay even as namespaces come and go.
func Place(ctx context.Context, cs kubernetes.Interface, namespace, name string, shards int) (Placement, error) {
	p := Placement{Shards: shards}
	cms := cs.CoreV1().ConfigMaps(namespace)
	l, err := cms.List(ctx, metav1.ListOptions{Limit: 1, ShardSelector: everyNamespace})
	if err != nil {
		return p, errors.Wrap(err, "cannot tell whether the API server filters by shardSelector")
	}
	p.Served = l.ShardInfo != nil
	cm, err := cms.Get(ctx, RangesName(name, shards), metav1.GetOptions{})
	switch {
	case kerrors.IsNotFound(err) && p.Served:
		if cm, err = writeRanges(ctx, cs, namespace, name, shards); err != nil {
			return p, err
		}
	case kerrors.IsNotFound(err):
		return p, nil
	case err != nil:
		return p, errors.Wrap(err, "cannot read the shard ranges")
	}
	r, err := ParseRanges(cm.Data[keyBounds], shards)
	if err != nil {
		return p, errors.Wrapf(err, "the shard ranges in ConfigMap %s/%s are invalid; delete it to have them written again", namespace, cm.Name)
	}
	p.Ranges = &r
	return p, nil
}

// writeRanges writes the ranges of the cluster's namespaces, or reads those
// another replica wrote first.
func writeRanges(ctx context.Context, cs kubernetes.Interface, namespace, name string, shards int) (*corev1.ConfigMap, error) {
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, errors.Wrap(err, "cannot list the namespaces to cut into shards")
	}
	names := make([]string, len(nss.Items))
	for i := range nss.Items {
		names[i] = nss.Items[i].Name
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: RangesName(name, shards), Namespace: namespace},
		Data:       map[string]string{keyBounds: Quantiles(names, shards).String()},
		Immutable:  ptr.To(true),
	}
	cms := cs.CoreV1().ConfigMaps(namespace)
	out, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if kerrors.IsAlreadyExists(err) {
		out, err = cms.Get(ctx, cm.Name, metav1.GetOptions{})
	}
	return out, errors.Wrap(err, "cannot write the shard ranges")
}
