//go:build e2e

package crossplane

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// The platform APIs of examples/platform: claims of legacy XRDs, and Crossplane v2 namespaced XRs.
var (
	tenantClaim = schema.GroupVersionKind{Group: "platform.clusterops.io", Version: "v1alpha1", Kind: "Tenant"}
	webAppClaim = schema.GroupVersionKind{Group: "platform.clusterops.io", Version: "v1alpha1", Kind: "WebApp"}
	tenantXR    = schema.GroupVersionKind{Group: "namespaced.platform.clusterops.io", Version: "v1alpha1", Kind: "Tenant"}
	webAppXR    = schema.GroupVersionKind{Group: "namespaced.platform.clusterops.io", Version: "v1alpha1", Kind: "WebApp"}

	appBundleGVK     = workloadv1alpha1.SchemeGroupVersion.WithKind("AppBundle")
	configRolloutGVK = workloadv1alpha1.SchemeGroupVersion.WithKind("ConfigRollout")
	chaosAgentGVK    = chaosv1alpha1.SchemeGroupVersion.WithKind("ChaosAgent")
	configMapGVK     = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	secretGVK        = corev1.SchemeGroupVersion.WithKind("Secret")
	deploymentGVK    = appsv1.SchemeGroupVersion.WithKind("Deployment")
	serviceGVK       = corev1.SchemeGroupVersion.WithKind("Service")
)

// The annotations a ConfigRollout writes on a workload when it rolls it: the hash in its pod
// template, and the lock (the rollout it follows) on its metadata.
const (
	configHashKey = "workload.clusterops.io/config-hash"
	configLockKey = "workload.clusterops.io/config-rollout"
)

// testPlatformAPIs applies what a platform team writes besides the packages: the config that
// grants the tenants' rules reach, and the shared objects. The XRDs and Compositions of both API
// styles are the configuration package's: its revision controls them, established (legacy XRDs
// offer their claims).
func testPlatformAPIs(t *testing.T) {
	apply(t, "examples/platform/clusterproviderconfig.yaml", nil)
	apply(t, "examples/platform/shared-source.yaml", nil)
	for _, style := range []string{"legacy", "namespaced"} {
		for _, kind := range []string{"xrd", "composition"} {
			files, _ := filepath.Glob(filepath.Join(s.root, "examples", "platform", style, kind+"-*.yaml"))
			if len(files) == 0 {
				t.Fatalf("no %s files in examples/platform/%s", kind, style)
			}
			for _, f := range files {
				objs, err := testenv.ReadObjects(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range objs {
					gvk, conds := o.GroupVersionKind(), []string(nil)
					if kind == "xrd" {
						conds = []string{"Established"}
						if style == "legacy" {
							conds = append(conds, "Offered") // Claims are served.
						}
					}
					eventually(t, fmt.Sprintf("%s %s from the configuration package", gvk.Kind, o.GetName()), func(ctx context.Context) (bool, string, error) {
						u, err := get(ctx, gvk, "", o.GetName())
						if err != nil {
							return false, "", err
						}
						ref := metav1.GetControllerOf(u)
						if ref == nil || ref.Kind != "ConfigurationRevision" {
							return false, fmt.Sprintf("controlled by %v", ref), nil
						}
						for _, c := range conds {
							if st, msg := condition(u, c); st != "True" {
								return false, fmt.Sprintf("%s=%s %q", c, st, msg), nil
							}
						}
						return true, "", nil
					})
				}
			}
		}
	}
}

// volumeFor stands in for a storage provisioner: a volume bound in advance to an AppBundle's claim.
func volumeFor(t *testing.T, ns, claim string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns}},
			ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: claim},
		},
	}
	if err := s.c.Create(context.Background(), pv); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.c.Delete(context.Background(), pv) })
}

// exists reports whether an object is there.
func exists(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (bool, error) {
	_, err := get(ctx, gvk, ns, name)
	if client.IgnoreNotFound(err) != nil {
		return false, err
	}
	return err == nil, nil
}

// waitObjects waits until each object is present (want true) or absent (want false).
func waitObjects(t *testing.T, want bool, ns string, objs map[string]schema.GroupVersionKind) {
	t.Helper()
	what := "present"
	if !want {
		what = "gone"
	}
	eventually(t, fmt.Sprintf("%v in %s %s", keys(objs), ns, what), func(ctx context.Context) (bool, string, error) {
		for name, gvk := range objs {
			ok, err := exists(ctx, gvk, ns, name)
			if err != nil || ok != want {
				return false, fmt.Sprintf("%s %s present=%t", gvk.Kind, name, ok), err
			}
		}
		return true, "", nil
	})
}

func keys(m map[string]schema.GroupVersionKind) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, v.Kind+"/"+k)
	}
	return out
}

// sameData fails the test unless the copy holds the source's data.
func sameSecret(t *testing.T, srcNS, ns, name string) {
	t.Helper()
	src, cp := &corev1.Secret{}, &corev1.Secret{}
	if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: srcNS, Name: name}, src); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, cp); err != nil {
		t.Fatal(err)
	}
	if cp.Type != src.Type || fmt.Sprint(cp.Data) != fmt.Sprint(src.Data) {
		t.Errorf("the copy of Secret %s in %s differs from its source (type %s vs %s)", name, ns, cp.Type, src.Type)
	}
}

// patchSpec merge-patches an object's spec, as `kubectl patch --type=merge` would.
func patchSpec(t *testing.T, gvk schema.GroupVersionKind, ns, name string, spec map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	if err := s.c.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, mustJSON(map[string]any{"spec": spec}))); err != nil {
		t.Fatal(err)
	}
}

// testTenants applies the legacy Tenant claim and the namespaced Tenant XR: each gets the pull
// Secret and the shared ConfigMaps copied into its namespace, the namespaced one a ChaosAgent
// confined to it. A changed claim changes the copies; a deleted one takes its rules and copies
// with it, while the sources stay.
func testTenants(t *testing.T) {
	apply(t, "examples/platform/legacy/tenant-claim.yaml", nil)
	apply(t, "examples/platform/namespaced/tenant.yaml", nil)

	claim := waitTrue(t, tenantClaim, "tenant-alpha", "alpha", "Ready", "Synced")
	// Claim → XR: the claim binds a cluster-scoped XTenant, which is Ready too.
	xr, _, _ := unstructured.NestedString(claim.Object, "spec", "resourceRef", "name")
	waitTrue(t, schema.GroupVersionKind{Group: "platform.clusterops.io", Version: "v1alpha1", Kind: "XTenant"}, "", xr, "Ready", "Synced")
	waitTrue(t, copyRuleGVK, "tenant-alpha", "alpha-pull-secret", "Ready", "Synced")
	waitTrue(t, copyRuleGVK, "tenant-alpha", "alpha-shared-config", "Ready", "Synced")
	waitObjects(t, true, "tenant-alpha", map[string]schema.GroupVersionKind{"company-ca": configMapGVK, "feature-flags": configMapGVK})
	sameSecret(t, "platform-shared", "tenant-alpha", "registry-pull")

	waitTrue(t, tenantXR, "tenant-beta", "beta", "Ready", "Synced")
	waitTrue(t, chaosAgentGVK, "tenant-beta", "beta-chaos", "Ready", "Synced")
	waitObjects(t, true, "tenant-beta", map[string]schema.GroupVersionKind{"registry-pull": secretGVK, "company-ca": configMapGVK, "feature-flags": configMapGVK})
	agent := &chaosv1alpha1.ChaosAgent{}
	if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: "tenant-beta", Name: "beta-chaos"}, agent); err != nil {
		t.Fatal(err)
	}
	if fp := agent.Spec.ForProvider; len(fp.Namespaces) != 0 || fp.NamespaceSelector != nil || fp.DryRun {
		t.Errorf("the tenant's ChaosAgent reaches beyond its namespace or does nothing: %+v", fp)
	}

	// Updates flow through: the claim now shares only feature-flags, so company-ca's copy goes.
	patchSpec(t, tenantClaim, "tenant-alpha", "alpha", map[string]any{"sharedConfig": map[string]any{"selector": nil, "names": []string{"feature-flags"}}})
	waitObjects(t, false, "tenant-alpha", map[string]schema.GroupVersionKind{"company-ca": configMapGVK})
	waitObjects(t, true, "tenant-alpha", map[string]schema.GroupVersionKind{"feature-flags": configMapGVK, "registry-pull": secretGVK})
	// And chaos can be switched off on the XR: its agent goes.
	patchSpec(t, tenantXR, "tenant-beta", "beta", map[string]any{"chaos": map[string]any{"enabled": false}})
	waitGone(t, chaosAgentGVK, "tenant-beta", "beta-chaos")

	// Deletion cascades: claim → XR → rules → copies. The sources stay.
	del(t, tenantClaim, "tenant-alpha", "alpha")
	del(t, tenantXR, "tenant-beta", "beta")
	waitGone(t, tenantClaim, "tenant-alpha", "alpha")
	waitGone(t, tenantXR, "tenant-beta", "beta")
	for _, ns := range []string{"tenant-alpha", "tenant-beta"} {
		waitObjects(t, false, ns, map[string]schema.GroupVersionKind{"feature-flags": configMapGVK, "registry-pull": secretGVK, "company-ca": configMapGVK})
	}
	waitObjects(t, false, "tenant-alpha", map[string]schema.GroupVersionKind{"alpha-pull-secret": copyRuleGVK, "alpha-shared-config": copyRuleGVK})
	waitObjects(t, true, "platform-shared", map[string]schema.GroupVersionKind{"feature-flags": configMapGVK, "registry-pull": secretGVK, "company-ca": configMapGVK})
}

// testWebApps applies the legacy WebApp claim and the namespaced WebApp XR: each becomes an
// AppBundle (claim, Deployment, Service), a ConfigMap with its config and a ConfigRollout, which
// follows the new Deployment without rolling it. A changed config then rolls the Deployment once;
// a changed replica count scales it; deletion removes the bundle's Deployment and Service and
// keeps its data, as AppBundle promises.
func testWebApps(t *testing.T) {
	ctx := context.Background()
	volumeFor(t, "tenant-alpha", "hello-data")
	volumeFor(t, "tenant-beta", "hello-data")
	apply(t, "examples/platform/legacy/webapp-claim.yaml", nil)
	apply(t, "examples/platform/namespaced/webapp.yaml", nil)

	waitTrue(t, webAppClaim, "tenant-alpha", "hello", "Ready", "Synced")
	waitTrue(t, webAppXR, "tenant-beta", "hello", "Ready", "Synced")
	for _, ns := range []string{"tenant-alpha", "tenant-beta"} {
		waitTrue(t, appBundleGVK, ns, "hello", "Ready", "Synced")
		waitTrue(t, configRolloutGVK, ns, "hello-config", "Ready", "Synced")
		waitObjects(t, true, ns, map[string]schema.GroupVersionKind{"hello": deploymentGVK, "hello-config": configMapGVK})
	}
	// What a user sees debugging them: the claim → its composite → the managed resources, Ready.
	checkTrace(t, "webapp.platform.clusterops.io/hello", "tenant-alpha", []string{
		"WebApp/hello Ready=True Synced=True",
		"WebApp/hello > XWebApp/* Ready=True Synced=True",
		"WebApp/hello > XWebApp/* > AppBundle/hello Ready=True Synced=True",
		"WebApp/hello > XWebApp/* > ConfigRollout/hello-config Ready=True Synced=True",
		"WebApp/hello > XWebApp/* > ConfigMap/hello-config",
	})
	checkTrace(t, "webapp.namespaced.platform.clusterops.io/hello", "tenant-beta", []string{
		"WebApp/hello Ready=True Synced=True",
		"WebApp/hello > AppBundle/hello Ready=True Synced=True",
		"WebApp/hello > ConfigRollout/hello-config Ready=True Synced=True",
		"WebApp/hello > ConfigMap/hello-config",
	})
	// The real objects behind the claim: pods running on kwok's node, the data claim bound.
	eventually(t, "the WebApp's pods running and its data claim bound", func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := s.c.List(ctx, pods, client.InNamespace("tenant-alpha")); err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.Containers[0].Image == "nginx:1.27" {
				running++
			}
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := s.c.Get(ctx, types.NamespacedName{Namespace: "tenant-alpha", Name: "hello-data"}, pvc); err != nil {
			return false, "", err
		}
		return running == 2 && pvc.Status.Phase == corev1.ClaimBound, fmt.Sprintf("%d pods running, claim %s", running, pvc.Status.Phase), nil
	})
	d := deployment(t, "tenant-alpha", "hello")
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("Deployment replicas %v, want the claim's 2", d.Spec.Replicas)
	}
	if ok, _ := exists(ctx, serviceGVK, "tenant-alpha", "hello"); !ok {
		t.Error("the claim asked for a Service; there is none")
	}
	// The ConfigRollout follows the app's new Deployment without rolling it: a baseline of the
	// current config in its status, no rollout counted, no hash in the Deployment's pod template.
	followed := map[string]string{}
	for _, ns := range []string{"tenant-alpha", "tenant-beta"} {
		eventually(t, "ConfigRollout "+ns+"/hello-config to follow Deployment hello without rolling it", func(ctx context.Context) (bool, string, error) {
			cr, d, err := rolloutAndApp(ctx, ns)
			if err != nil {
				return false, "", err
			}
			st := cr.Status.AtProvider
			observed := fmt.Sprintf("status hash %q, rollouts %d, workloads %+v; Deployment template hash %q, lock %q",
				st.Hash, st.Rollouts, st.Workloads, d.Spec.Template.Annotations[configHashKey], d.Annotations[configLockKey])
			if st.Rollouts != 0 || d.Spec.Template.Annotations[configHashKey] != "" {
				t.Fatalf("the WebApp's Deployment in %s was rolled when its ConfigRollout started to follow it: %s", ns, observed)
			}
			followed[ns] = st.Hash
			ready := cr.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue
			return st.Hash != "" && ready && len(st.Workloads) == 1 && st.Workloads[0].Name == "hello" &&
				st.Workloads[0].Baseline && st.Workloads[0].Hash == st.Hash && st.Workloads[0].LastRollout == nil, observed, nil
		})
	}

	// A changed config reaches the ConfigMap, and the rollout rolls the Deployment, once.
	patchSpec(t, webAppClaim, "tenant-alpha", "hello", map[string]any{"config": map[string]any{"GREETING": "hello again"}, "replicas": 3})
	eventually(t, "the changed config rolled out and the Deployment scaled", func(ctx context.Context) (bool, string, error) {
		cm := &corev1.ConfigMap{}
		if err := s.c.Get(ctx, types.NamespacedName{Namespace: "tenant-alpha", Name: "hello-config"}, cm); err != nil {
			return false, "", err
		}
		cr, d, err := rolloutAndApp(ctx, "tenant-alpha")
		if err != nil {
			return false, "", err
		}
		st := cr.Status.AtProvider
		if st.Rollouts > 1 {
			t.Fatalf("%d rollouts counted for one change of the config; status %+v", st.Rollouts, st)
		}
		rolled := st.Rollouts == 1 && st.Hash != followed["tenant-alpha"] && d.Spec.Template.Annotations[configHashKey] == st.Hash &&
			d.Annotations[configLockKey] == "hello-config" && len(st.Workloads) == 1 && !st.Workloads[0].Baseline
		scaled := d.Spec.Replicas != nil && *d.Spec.Replicas == 3
		return cm.Data["GREETING"] == "hello again" && rolled && scaled,
			fmt.Sprintf("GREETING=%q; status hash %q (was %q), rollouts %d, workloads %+v; template hash %q, lock %q, replicas %v",
				cm.Data["GREETING"], st.Hash, followed["tenant-alpha"], st.Rollouts, st.Workloads, d.Spec.Template.Annotations[configHashKey], d.Annotations[configLockKey], d.Spec.Replicas), nil
	})
	waitTrue(t, webAppClaim, "tenant-alpha", "hello", "Ready")

	del(t, webAppClaim, "tenant-alpha", "hello")
	del(t, webAppXR, "tenant-beta", "hello")
	for _, ns := range []string{"tenant-alpha", "tenant-beta"} {
		waitObjects(t, false, ns, map[string]schema.GroupVersionKind{
			"hello": deploymentGVK, "hello-config": configMapGVK,
		})
		waitObjects(t, false, ns, map[string]schema.GroupVersionKind{"hello": appBundleGVK})
		waitObjects(t, false, ns, map[string]schema.GroupVersionKind{"hello-config": configRolloutGVK})
	}
	waitGone(t, webAppClaim, "tenant-alpha", "hello")
	waitGone(t, webAppXR, "tenant-beta", "hello")
	if ok, _ := exists(ctx, serviceGVK, "tenant-alpha", "hello"); ok {
		t.Error("the WebApp's Service outlived it")
	}
	// The data claim outlives the bundle unless its policy says otherwise.
	if ok, _ := exists(ctx, corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"), "tenant-alpha", "hello-data"); !ok {
		t.Error("the WebApp's data claim was deleted with it; AppBundle keeps it by default")
	}
}

// rolloutAndApp are a WebApp's ConfigRollout hello-config and Deployment hello in ns.
func rolloutAndApp(ctx context.Context, ns string) (*workloadv1alpha1.ConfigRollout, *appsv1.Deployment, error) {
	cr, d := &workloadv1alpha1.ConfigRollout{}, &appsv1.Deployment{}
	if err := s.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hello-config"}, cr); err != nil {
		return nil, nil, err
	}
	err := s.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hello"}, d)
	return cr, d, err
}

func deployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	return d
}
