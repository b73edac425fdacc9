package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clusterops/provider-clusterops/internal/controller/appbundle"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// ownedBy selects objects that carry the label key, as cmd/provider's
// manager cache does.
func ownedBy(t *testing.T, key string) labels.Selector {
	t.Helper()
	r, err := labels.NewRequirement(key, selection.Exists, nil)
	if err != nil {
		t.Fatal(err)
	}
	return labels.NewSelector().Add(*r)
}

// startedCache starts a cache with o on the test's API server until the test
// ends.
func startedCache(t *testing.T, o cache.Options) cache.Cache {
	t.Helper()
	o.Scheme = env.Scheme
	c, err := cache.New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = c.Start(ctx) }()
	return c
}

// metadataNames are the names of the Deployments in ns that c holds as
// metadata, as ConfigRollout reads them.
func metadataNames(ctx context.Context, c client.Reader, ns string) ([]string, error) {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
	if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []string
	for _, m := range l.Items {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out, nil
}

// TestAppBundleCacheLeavesConfigRolloutsDeploymentsAlone: AppBundles watch
// their Deployments whole (status included) in a cache of their own, scoped to
// their label, beside a manager cache set up as cmd/provider's is; the
// manager's metadata view of Deployments, which ConfigRollout matches
// selectors and finds claims in, still holds every Deployment, labelled or
// not. The same label scope in the manager's per-object options would not
// leave it so: controller-runtime keys those options by kind, typed and
// metadata-only alike. That is why the bundles have a cache of their own.
func TestAppBundleCacheLeavesConfigRolloutsDeploymentsAlone(t *testing.T) {
	ns := env.Namespace(t, "bundle-cache", nil)
	owned := ownedBy(t, appbundle.LabelOwner)
	// cmd/provider's manager cache options (pods are ImmortalContainer's).
	manager := startedCache(t, cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                   {Label: ownedBy(t, "workload.clusterops.io/immortalcontainer")},
			&corev1.PersistentVolumeClaim{}: {Label: owned},
			&corev1.Service{}:               {Label: owned},
		},
	})
	bundles := startedCache(t, appbundle.CacheOptions(env.Scheme, nil, nil, nil))

	for name, lbls := range map[string]map[string]string{
		"plain": {"app": "plain"},
		"web":   {"app": "web", appbundle.LabelOwner: "web"},
	} {
		env.Create(t, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
				},
			},
		})
	}

	testenv.Eventually(t, wait, "the manager's metadata cache to hold every Deployment", func(ctx context.Context) (bool, error) {
		got, err := metadataNames(ctx, manager, ns)
		if err != nil || !slices.Equal(got, []string{"plain", "web"}) {
			return false, fmt.Errorf("holds %v, want [plain web]: %w", got, err)
		}
		return true, nil
	})
	testenv.Eventually(t, wait, "the AppBundles' cache to hold only their Deployment, whole", func(ctx context.Context) (bool, error) {
		l := &appsv1.DeploymentList{}
		if err := bundles.List(ctx, l, client.InNamespace(ns)); err != nil {
			return false, err
		}
		if len(l.Items) != 1 || l.Items[0].Name != "web" || len(l.Items[0].Spec.Template.Spec.Containers) != 1 {
			return false, fmt.Errorf("holds %d Deployments, want only web with its spec", len(l.Items))
		}
		return true, nil
	})

	// The alternative this design avoids: a label scope for Deployments in
	// the manager's options narrows its metadata view too.
	scoped := startedCache(t, cache.Options{ByObject: map[client.Object]cache.ByObject{&appsv1.Deployment{}: {Label: owned}}})
	testenv.Eventually(t, wait, "a Deployment-scoped manager cache to show its metadata view narrowed", func(ctx context.Context) (bool, error) {
		got, err := metadataNames(ctx, scoped, ns)
		if err != nil || !slices.Equal(got, []string{"web"}) {
			return false, fmt.Errorf("holds %v, want [web]: %w", got, err)
		}
		return true, nil
	})
}
