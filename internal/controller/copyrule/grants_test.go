package copyrule

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/clusterops/provider-clusterops/internal/target"
)

// TestGrantsAskOncePerClusterAndKind checks that a kind's access is asked once per cluster and
// grantsFor, and that a kind not granted is an error naming what grants it.
func TestGrantsAskOncePerClusterAndKind(t *testing.T) {
	np := Mapping{GroupVersionKind: schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
		Resource: schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}}
	cm := Mapping{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Resource: corev1.SchemeGroupVersion.WithResource("configmaps")}
	allowed, asked := false, 0
	c := &target.Cluster{ID: "local", Client: fake.NewClientBuilder().WithScheme(scheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, o client.Object, _ ...client.CreateOption) error {
			asked++
			o.(*authorizationv1.SelfSubjectAccessReview).Status.Allowed = allowed
			return nil
		},
	}).Build()}
	now := time.Unix(0, 0)
	g := newGrants()
	g.now = func() time.Time { return now }
	ctx := context.Background()

	if err := g.check(ctx, c, cm); err != nil || asked != 0 {
		t.Fatalf("ConfigMaps: %v after %d reviews, want nil after none: the shipped RBAC grants them", err, asked)
	}
	err := g.check(ctx, c, np)
	if !isNotGranted(err) || !strings.Contains(err.Error(), "networkpolicies.networking.k8s.io") || !strings.Contains(err.Error(), grantFile) {
		t.Fatalf("not granted: got %v, want an error naming the resource and %s", err, grantFile)
	}
	allowed = true
	now = now.Add(grantsFor - time.Second)
	if err := g.check(ctx, c, np); !isNotGranted(err) || asked != 1 {
		t.Fatalf("within grantsFor: %v after %d reviews, want the answer remembered after 1", err, asked)
	}
	now = now.Add(time.Second)
	if err := g.check(ctx, c, np); err != nil || asked != 3 {
		t.Fatalf("after grantsFor: %v after %d reviews, want nil after 3 (list, then watch)", err, asked)
	}
	if err := g.check(ctx, &target.Cluster{ID: "remote", Client: c.Client}, np); err != nil || asked != 5 {
		t.Fatalf("another cluster: %v after %d reviews, want its own answer", err, asked)
	}
}
