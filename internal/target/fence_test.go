package target

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/clusterops/provider-clusterops/internal/shard"
)

func TestFencedClientWrites(t *testing.T) {
	// The fence of a replica that holds no shard: every write for one is
	// refused.
	stale := shard.WithFence(context.Background(), shard.NewFence("p", "me", time.Minute))
	cases := map[string]struct {
		reason string
		ctx    func() context.Context
		wrote  bool
	}{
		"Unsharded": {
			reason: "Without sharding, writes go through.",
			ctx:    context.Background, wrote: true,
		},
		"OutsideAReconcile": {
			reason: "A write not made for a managed resource's shard goes through.",
			ctx:    func() context.Context { return stale }, wrote: true,
		},
		"FenceRefuses": {
			reason: "A write for a shard whose Lease the replica does not hold is not sent.",
			ctx:    func() context.Context { return shard.WritingFor(stale, "3") }, wrote: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := tc.ctx()
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "victim"}}
			c := fenced(fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(pod.DeepCopy()).Build())
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "made"}}
			writes := map[string]error{
				"create": c.Create(ctx, cm),
				"patch":  c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "made"}}, client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"v"}}`))),
				"evict":  c.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{}),
				"delete": c.Delete(ctx, cm),
			}
			for verb, err := range writes {
				if (err == nil || kerrors.IsNotFound(err)) != tc.wrote {
					t.Errorf("\n%s\n%s: %v, want written %t", tc.reason, verb, err, tc.wrote)
				}
			}
			// Reads are never fenced.
			if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); err != nil && !tc.wrote {
				t.Errorf("\n%s\nget: %v, want reads to go through", tc.reason, err)
			}
		})
	}
}
