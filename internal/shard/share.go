package shard

import (
	"fmt"

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

// Filters is whether the API server selects the objects without a shard
// label of each part by its namespaces (Part.Filter); otherwise they are
// watched whole, apart from the parts.
func (p Placement) Filters() bool { return p.filters(nil) }

// outsideShard picks no object by its shard label: the outside part holds
// only objects without one.
const outsideShard = "outside"

// Outside is the part of the namespaces of a share's ConfigRollouts that no
// shard it holds covers (pinned by hand to a shard of another namespace),
// named apart from each earlier one by generation; false once there are more
// than the API server's selector holds, and such namespaces are read from
// the API server instead.
func (p Placement) Outside(namespaces []string, generation int) (Part, bool) {
	if len(namespaces) == 0 || !p.filters(namespaces) {
		return Part{}, false
	}
	r, err := labels.NewRequirement(Label, selection.Equals, []string{outsideShard})
	if err != nil {
		return Part{}, false
	}
	return Part{
		Name:   fmt.Sprintf("%s-%d", outsideShard, generation),
		Select: labels.NewSelector().Add(*r),
		Filter: p.Ranges.Selector(nil, namespaces),
		Family: outsideShard,
	}, true
}
