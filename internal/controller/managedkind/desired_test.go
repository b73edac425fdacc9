package managedkind

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

// TestDesiredStateChanged: what an update of a managed resource's metadata
// reconciles it for.
func TestDesiredStateChanged(t *testing.T) {
	cases := map[string]struct {
		reason      string
		labels      map[string]string
		annotations map[string]string
		want        bool
	}{
		"ShardMoved": {
			reason: "A new shard label moves the resource: its new holder acts on it.",
			labels: map[string]string{shard.Label: "2", shard.LabelShards: "4"}, want: true,
		},
		"CountOnly": {
			reason: "The count the labeler placed it under changes nothing it acts on.",
			labels: map[string]string{shard.Label: "1", shard.LabelShards: "6"},
		},
		"CreateSucceeded": {
			reason:      "The managed reconciler's own create annotation asks for no reconcile.",
			labels:      map[string]string{shard.Label: "1", shard.LabelShards: "4"},
			annotations: map[string]string{meta.AnnotationKeyExternalCreateSucceeded: "now"}, want: false,
		},
		"UserAnnotation": {
			reason:      "Another annotation is a change someone made.",
			labels:      map[string]string{shard.Label: "1", shard.LabelShards: "4"},
			annotations: map[string]string{"team": "a"}, want: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := &v1alpha1.AppBundle{ObjectMeta: metav1.ObjectMeta{Name: "a", Generation: 1, Labels: map[string]string{shard.Label: "1", shard.LabelShards: "4"}}}
			cur := old.DeepCopy()
			cur.Labels, cur.Annotations = tc.labels, tc.annotations
			if got := desiredStateChanged().Update(ctrlevent.UpdateEvent{ObjectOld: old, ObjectNew: cur}); got != tc.want {
				t.Errorf("\n%s\ndesiredStateChanged: %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}
