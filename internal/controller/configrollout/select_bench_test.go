package configrollout

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// metadataCache lists workloads as the manager's metadata cache does without
// copies: every item of the namespace copied into the list. (The informer
// cache also gathers them from its namespace index first, so this is its
// cost's lower bound.)
type metadataCache struct {
	client.Reader
	items map[string][]metav1.PartialObjectMetadata // by kind
}

func (m metadataCache) List(_ context.Context, l client.ObjectList, _ ...client.ListOption) error {
	ml, ok := l.(*metav1.PartialObjectMetadataList)
	if !ok {
		return fmt.Errorf("unexpected list %T", l)
	}
	ml.Items = append(ml.Items[:0], m.items[strings.TrimSuffix(ml.Kind, "List")]...)
	return nil
}

// BenchmarkAutoSelect is one reconcile's choice of workloads by an auto
// rollout in a namespace of n Deployments, each reading a ConfigMap of its
// own, once every workload's template is known: what a fleet of n auto
// rollouts there pays n times over.
func BenchmarkAutoSelect(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			objs := make([]client.Object, 0, n)
			cache := metadataCache{items: map[string][]metav1.PartialObjectMetadata{}}
			for i := range n {
				d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: fmt.Sprintf("d-%d", i), Generation: 1}}
				d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: fmt.Sprintf("cm-%d", i)}}}}}}
				objs = append(objs, d)
				cache.items[KindDeployment] = append(cache.items[KindDeployment], metav1.PartialObjectMetadata{ObjectMeta: d.ObjectMeta})
			}
			api := fake.NewClientBuilder().WithScheme(testScheme(b)).WithObjects(objs...).Build()
			rd := newReaders(api)
			cr := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "r-0"}}
			cr.Spec.ForProvider.Auto = true
			cr.Spec.ForProvider.ConfigMaps = []v1alpha1.SourceRef{{Name: "cm-0"}}
			ctx := context.Background()
			// The first reconcile learns every template; the fleet's later ones
			// are what is measured.
			if ws, _, err := selectWorkloads(ctx, api, cache, rd, cr); err != nil || len(ws) != 1 {
				b.Fatalf("selected %d workloads (%v), want 1", len(ws), err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if ws, _, err := selectWorkloads(ctx, api, cache, rd, cr); err != nil || len(ws) != 1 {
					b.Fatalf("selected %d workloads (%v), want 1", len(ws), err)
				}
			}
		})
	}
}
