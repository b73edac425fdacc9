package shard

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Share selects the objects of shards owned by their Label: a replica's
// managed resources, and the objects they made, which carry their owner's
// label (Carry).
func Share(owned []int) (labels.Selector, error) {
	r, err := labels.NewRequirement(Label, selection.In, Names(owned))
	if err != nil {
		return nil, errors.Wrap(err, "cannot select the replica's shards")
	}
	return labels.NewSelector().Add(*r), nil
}

// Within is sel narrowed to share as well; sel itself when share is nil (no
// sharding).
func Within(sel, share labels.Selector) labels.Selector {
	if share == nil {
		return sel
	}
	rs, _ := share.Requirements()
	return sel.Add(rs...)
}

// Carry sets, in the labels of an object a managed resource makes, the shard
// label the managed resource carries, so that the replica acting on its
// shard watches that object and no other replica does. An owner without one
// (no sharding) leaves labels as they are.
func Carry(dst, owner map[string]string) map[string]string {
	if v, ok := owner[Label]; ok {
		dst[Label] = v
	}
	return dst
}
