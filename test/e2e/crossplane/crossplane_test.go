//go:build e2e

package crossplane

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

var (
	providerGVK      = pkgv1.SchemeGroupVersion.WithKind("Provider")
	functionGVK      = pkgv1.SchemeGroupVersion.WithKind("Function")
	configurationGVK = pkgv1.SchemeGroupVersion.WithKind("Configuration")
	providerRevs     = pkgv1.SchemeGroupVersion.WithKind("ProviderRevisionList")
	imageConfigGVK   = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1beta1", Kind: "ImageConfig"}
	drcGVK           = schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1beta1", Kind: "DeploymentRuntimeConfig"}
	icGVK            = workloadv1alpha1.SchemeGroupVersion.WithKind("ImmortalContainer")
	copyRuleGVK      = copyv1alpha1.SchemeGroupVersion.WithKind("CopyRule")
)

// Names of the packages in the Crossplane API: the Configuration's, which `crossplane xpkg
// install` derives from its repository, and those of the provider and the function, which core
// installs as its dependencies under names derived the same way (the Compositions name the
// function so). The provider's runtime config names its service account.
const (
	configurationName      = "clusterops-configuration-clusterops-platform"
	providerName           = "clusterops-provider-clusterops"
	functionName           = "clusterops-function-clusterops"
	providerServiceAccount = "provider-clusterops"
	mirrorImageConfig      = "clusterops-e2e-mirror"
)

// TestPlatformTeamsPathOnCrossplaneCore walks the path a platform team takes, in order: install the configuration
// package (and with it the provider and the function), use the provider's managed resources and
// the platform APIs composed from them, upgrade the provider, and run it under core's Deployment
// runtime. Core runs without --activation: the provider's kinds come on only as activation
// policies name them. Each step builds on the one before.
func TestPlatformTeamsPathOnCrossplaneCore(t *testing.T) {
	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"InstallConfiguration", testInstall},
		{"Activation", testActivation},
		{"Replicas", testReplicas},
		{"ManagedResourceThroughInstalledProvider", testManagedResource},
		{"PlatformAPIs", testPlatformAPIs},
		{"Tenants", testTenants},
		{"WebApps", testWebApps},
		{"UpgradeProviderKeepsState", testUpgrade},
		{"DeploymentRuntime", testDeploymentRuntime},
	}
	for _, st := range steps {
		if !t.Run(st.name, st.fn) {
			return
		}
	}
}

// testInstall installs the platform as README.md and docs/operations.md say: the provider's RBAC and runtime config,
// then the configuration package with `crossplane xpkg install configuration`. Core resolves the
// provider and the function the configuration depends on and installs them, pulling each through
// its multi-platform image index. The packages name xpkg.crossplane.io/clusterops; an ImageConfig
// points that at the suite's registry, as it would at a user's mirror.
func testInstall(t *testing.T) {
	ctx := context.Background()
	apply(t, "cluster/rbac/provider-rbac.yaml", nil)
	// Two replicas sharing the fleet, as docs/operations.md says to run it.
	apply(t, "examples/crossplane/sharded-runtime.yaml", nil)
	mirror := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"matchImages":  []any{map[string]any{"type": "Prefix", "prefix": canonicalPrefix}},
			"rewriteImage": map[string]any{"prefix": s.registry + "/clusterops/"},
		},
	}}
	mirror.SetGroupVersionKind(imageConfigGVK)
	mirror.SetName(mirrorImageConfig)
	if err := s.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(mirror), client.FieldOwner("e2e"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	// The runtime ImageConfig matches a package's source after the rewrite.
	apply(t, "examples/platform/provider-runtime.yaml", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Prefix", "prefix": s.registry + "/clusterops/provider-clusterops"}}, "spec", "matchImages")
	})

	configuration := s.pkgs["configuration-"+configurationV1]
	cmd := exec.Command(s.crank, "xpkg", "install", "configuration", configuration.source)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("crossplane xpkg install configuration %s: %v\n%s", configuration.source, err, out)
	}
	waitTrue(t, configurationGVK, "", configurationName, "Installed", "Healthy")
	for _, dep := range []struct {
		gvk        schema.GroupVersionKind
		name, pkey string
	}{{functionGVK, functionName, "function-" + functionV1}, {providerGVK, providerName, "provider-" + providerV1}} {
		p := waitTrue(t, dep.gvk, "", dep.name, "Installed", "Healthy")
		want := s.pkgs[dep.pkey]
		source, _, _ := unstructured.NestedString(p.Object, "spec", "package")
		resolved, _, _ := unstructured.NestedString(p.Object, "status", "resolvedPackage")
		if source != want.source || resolved != want.image {
			t.Errorf("%s %s: package %q resolved to %q, want the dependency %q, resolved to the mirror's %q", dep.gvk.Kind, dep.name, source, resolved, want.source, want.image)
		}
		checkPulledIndex(t, want)
	}

	apply(t, "examples/providerconfig/clusterproviderconfig.yaml", nil)
}

// checkPulledIndex checks the registry serves the package's tag as an image index of linux/amd64
// and linux/arm64 images, and that core pulled the linux/amd64 image, which only that index
// names.
func checkPulledIndex(t *testing.T, p pkg) {
	t.Helper()
	ref, err := name.ParseReference(p.image)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(ref)
	if err != nil {
		t.Fatalf("%s is not an image index: %v", p.image, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		if d.Platform != nil {
			platforms = append(platforms, d.Platform.String())
		}
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("%s: index platforms %v, want %v", p.image, platforms, want)
	}
	amd64, ok := p.platforms["linux/amd64"]
	if !ok {
		t.Fatalf("%s: the suite pushed no linux/amd64 image", p.image)
	}
	path := "/v2/" + ref.Context().RepositoryStr() + "/manifests/" + amd64.String()
	if !s.pulls.served("GET", path) {
		t.Errorf("core never pulled %s's linux/amd64 image through its index (GET %s)", p.image, path)
	}
}

// activeRevision returns the provider's active revision.
func activeRevision(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(providerRevs)
	if err := s.c.List(context.Background(), l, client.MatchingLabels{"pkg.crossplane.io/package": providerName}); err != nil {
		t.Fatal(err)
	}
	for i := range l.Items {
		if st, _, _ := unstructured.NestedString(l.Items[i].Object, "spec", "desiredState"); st == string(pkgv1.PackageRevisionActive) {
			return &l.Items[i]
		}
	}
	t.Fatalf("provider %s has no active revision among %d", providerName, len(l.Items))
	return nil
}

// revisions describes the provider's revisions: state, generation seen, health.
func revisions(ctx context.Context) string {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(providerRevs)
	if err := s.c.List(ctx, l); err != nil {
		return err.Error()
	}
	out := ""
	for i := range l.Items {
		r := &l.Items[i]
		st, _, _ := unstructured.NestedString(r.Object, "spec", "desiredState")
		h, msg := condition(r, "RevisionHealthy")
		out += fmt.Sprintf("[%s %s generation=%d healthy=%s %q] ", r.GetName(), st, r.GetGeneration(), h, msg)
	}
	return out
}

// icState is what an ImmortalContainer keeps that an upgrade must not lose.
type icState struct {
	podUID          types.UID
	startTimes      int64
	startTimestamps []metav1.Time
	restarts        int64
}

func immortalState(t *testing.T) icState {
	t.Helper()
	ctx := context.Background()
	ic := &workloadv1alpha1.ImmortalContainer{}
	if err := s.c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "example-immortalcontainer"}, ic); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := s.c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "example-immortalcontainer-immortalpod"}, pod); err != nil {
		t.Fatal(err)
	}
	o := ic.Status.AtProvider
	return icState{podUID: pod.UID, startTimes: o.StartTimes, startTimestamps: o.StartTimestamps, restarts: o.Restarts}
}

// testManagedResource applies the ImmortalContainer and pull-secret CopyRule examples: the
// provider Crossplane installed reconciles them.
func testManagedResource(t *testing.T) {
	apply(t, "examples/workload/example-immortalcontainer.yaml", nil)
	apply(t, "examples/copy/clusterproviderconfig.yaml", nil)
	apply(t, "examples/copy/registry-pull-secret.yaml", nil)
	waitTrue(t, icGVK, "demo", "example-immortalcontainer", "Ready", "Synced")
	waitTrue(t, copyRuleGVK, "platform", "registry-pull", "Ready", "Synced")
	if st := immortalState(t); st.startTimes != 1 || len(st.startTimestamps) != 1 {
		t.Fatalf("%d starts at %v, want one", st.startTimes, st.startTimestamps)
	}
	pullSecretCopy(t)
	testPlanThenAct(t)
}

// testPlanThenAct applies the plan-first example, a CopyRule whose management policies are only
// Observe: through the provider Crossplane installed, it plans its two copies and makes neither.
// Its policies set to all, it makes the two it planned.
func testPlanThenAct(t *testing.T) {
	t.Helper()
	const file = "examples/copy/plan-first.yaml"
	apply(t, file, nil)
	eventually(t, "the plan-first CopyRule's plan", func(ctx context.Context) (bool, string, error) {
		u, err := get(ctx, copyRuleGVK, "platform", "search-tuning")
		if err != nil {
			return false, "", err
		}
		summary, _, _ := unstructured.NestedString(u.Object, "status", "atProvider", "plan", "summary")
		synced, _ := condition(u, "Synced")
		return summary == "Create 2" && synced == "True", "plan " + summary + ", synced " + synced, nil
	})
	targets := []string{"team-search", "team-payments"}
	for _, ns := range targets {
		if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "search-tuning"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a CopyRule that only plans made a copy in %s: %v", ns, err)
		}
	}
	apply(t, file, func(u *unstructured.Unstructured) {
		if u.GetKind() == "CopyRule" {
			_ = unstructured.SetNestedStringSlice(u.Object, []string{"*"}, "spec", "managementPolicies")
		}
	})
	eventually(t, "the planned copies", func(ctx context.Context) (bool, string, error) {
		for _, ns := range targets {
			err := s.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "search-tuning"}, &corev1.ConfigMap{})
			if apierrors.IsNotFound(err) {
				return false, "no copy in " + ns + " yet", nil
			}
			if err != nil {
				return false, "", err
			}
		}
		return true, "", nil
	})
}

// pullSecretCopy returns the copy the registry-pull example makes in team-payments.
func pullSecretCopy(t *testing.T) *corev1.Secret {
	t.Helper()
	sec := &corev1.Secret{}
	if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: "team-payments", Name: "registry-pull"}, sec); err != nil {
		t.Fatal(err)
	}
	return sec
}

// testUpgrade moves the Provider the configuration installed to the v2 package, which its
// version constraint allows. Crossplane makes a new revision active and the old one inactive, the
// runtime swaps the processes, and the managed resources keep their state: the same pod, the same
// history, and the new provider acting on them.
func testUpgrade(t *testing.T) {
	ctx := context.Background()
	before := immortalState(t)
	copyBefore := pullSecretCopy(t)
	old := activeRevision(t)

	// v0.2.0 is released: pushed to the mirror only now, as the configuration's dependency would
	// have resolved to it.
	release := s.pkgs["provider-"+providerV2]
	if err := push(&release); err != nil {
		t.Fatal(err)
	}
	s.pkgs["provider-"+providerV2] = release

	p, err := get(ctx, providerGVK, "", providerName)
	if err != nil {
		t.Fatal(err)
	}
	v2 := release.source
	_ = unstructured.SetNestedField(p.Object, v2, "spec", "package")
	if err := s.c.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	// Core hands the CRDs over once the old revision has released them; a transient error there
	// puts the old revision into core's backoff (up to a minute per retry), hence the long wait.
	eventuallyWithin(t, 5*time.Minute, "provider upgraded to "+providerV2, func(ctx context.Context) (bool, string, error) {
		p, err := get(ctx, providerGVK, "", providerName)
		if err != nil {
			return false, "", err
		}
		id, _, _ := unstructured.NestedString(p.Object, "status", "currentIdentifier")
		healthy, msg := condition(p, "Healthy")
		return id == v2 && healthy == "True", fmt.Sprintf("current %s healthy=%s %s; %s", id, healthy, msg, revisions(ctx)), nil
	})
	rev := activeRevision(t)
	if rev.GetName() == old.GetName() {
		t.Fatalf("revision %s still active after the upgrade", old.GetName())
	}
	o, err := get(ctx, providerRevs.GroupVersion().WithKind("ProviderRevision"), "", old.GetName())
	if err != nil {
		t.Fatal(err)
	}
	if st, _, _ := unstructured.NestedString(o.Object, "spec", "desiredState"); st != string(pkgv1.PackageRevisionInactive) {
		t.Errorf("old revision %s is %s, want Inactive", old.GetName(), st)
	}

	// The new provider knows the resource as the old one left it.
	waitTrue(t, icGVK, "demo", "example-immortalcontainer", "Ready", "Synced")
	after := immortalState(t)
	if after.podUID != before.podUID || after.startTimes != before.startTimes || len(after.startTimestamps) != len(before.startTimestamps) {
		t.Fatalf("upgrade changed the ImmortalContainer: pod %s → %s, starts %d at %v → %d at %v",
			before.podUID, after.podUID, before.startTimes, before.startTimestamps, after.startTimes, after.startTimestamps)
	}
	waitTrue(t, copyRuleGVK, "platform", "registry-pull", "Ready", "Synced")
	if c := pullSecretCopy(t); c.UID != copyBefore.UID || c.ResourceVersion != copyBefore.ResourceVersion {
		t.Errorf("the upgrade rewrote the pull secret's copy: uid %s → %s, resourceVersion %s → %s", copyBefore.UID, c.UID, copyBefore.ResourceVersion, c.ResourceVersion)
	}
	// And acts on it: a deleted pod comes back, and the history grows from where it was.
	if err := s.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "example-immortalcontainer-immortalpod"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the v2 provider to recreate the pod", func(ctx context.Context) (bool, string, error) {
		ic := &workloadv1alpha1.ImmortalContainer{}
		if err := s.c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "example-immortalcontainer"}, ic); err != nil {
			return false, "", err
		}
		o := ic.Status.AtProvider
		return o.StartTimes == before.startTimes+1 && len(o.StartTimestamps) == len(before.startTimestamps)+1 &&
				o.StartTimestamps[0].Equal(&before.startTimestamps[0]),
			fmt.Sprintf("%d starts at %v, restarts %d", o.StartTimes, o.StartTimestamps, o.Restarts), nil
	})
}

// testDeploymentRuntime restarts core with the Deployment runtime: core itself runs each
// package's image as a Deployment (kwok's fake node makes it Available), the provider's with the
// runtime config's service account, and reports the runtimes healthy. The binaries keep running
// on the host, where the fake pods cannot run them; compositions are not exercised here because
// core would dial the function through a Service address the host cannot reach. The PodMonitor
// examples/monitoring ships selects the provider's pods there.
func testDeploymentRuntime(t *testing.T) {
	ctx := context.Background()
	revs := map[string]*unstructured.Unstructured{"ProviderRevision": activeRevision(t)}
	if f := activeFunctionRevision(t); f != nil {
		revs["FunctionRevision"] = f
	}
	for kind, rev := range revs {
		s.runtime.setExternal(kind, false)
		// Core, not the suite, must be the one to report the runtime healthy again.
		if setCondition(rev, string(pkgv1.TypeRuntimeHealthy), "False", "HandedOver") {
			if err := s.c.Status().Update(ctx, rev); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.core.stop()
	if err := s.core.start(ctx, "Function=Deployment;Provider=Deployment"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.core.stop()
		if err := s.core.start(context.Background(), "Function=External;Provider=External"); err != nil {
			t.Error(err)
		}
		for kind := range revs {
			s.runtime.setExternal(kind, true)
		}
	})
	for kind, rev := range revs {
		// Core runs the image it pulled: the package's source after the ImageConfig's rewrite.
		image, _, _ := unstructured.NestedString(rev.Object, "status", "resolvedImage")
		eventually(t, "core's Deployment of "+rev.GetName()+" to be Available", func(ctx context.Context) (bool, string, error) {
			d := &appsv1.Deployment{}
			if err := s.c.Get(ctx, types.NamespacedName{Namespace: crossplaneNamespace, Name: rev.GetName()}, d); err != nil {
				return false, "", err
			}
			available := false
			for _, c := range d.Status.Conditions {
				available = available || (c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue)
			}
			spec := d.Spec.Template.Spec
			ok := available && len(spec.Containers) > 0 && spec.Containers[0].Image == image
			replicas := int32(1)
			if d.Spec.Replicas != nil {
				replicas = *d.Spec.Replicas
			}
			if kind == "ProviderRevision" {
				// The runtime config the runtime ImageConfig names: its service account, and
				// examples/crossplane/sharded-runtime.yaml's two replicas and flag.
				ok = ok && spec.ServiceAccountName == providerServiceAccount && replicas == 2 && slices.Contains(spec.Containers[0].Args, "--shards=8")
			}
			return ok, fmt.Sprintf("available=%t serviceAccount=%s replicas=%d containers=%d", available, spec.ServiceAccountName, replicas, len(spec.Containers)), nil
		})
		waitTrue(t, pkgv1.SchemeGroupVersion.WithKind(kind), "", rev.GetName(), "RuntimeHealthy", "RevisionHealthy")
	}
	waitTrue(t, providerGVK, "", providerName, "Healthy")
	checkPodMonitorSelects(t)
	if revs["FunctionRevision"] != nil {
		waitTrue(t, functionGVK, "", functionName, "Healthy")
	}
	waitTrue(t, icGVK, "demo", "example-immortalcontainer", "Ready", "Synced")
}

// activeFunctionRevision returns the function's active revision, or nil when it is not installed.
func activeFunctionRevision(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(pkgv1.SchemeGroupVersion.WithKind("FunctionRevisionList"))
	if err := s.c.List(context.Background(), l, client.MatchingLabels{"pkg.crossplane.io/package": functionName}); err != nil {
		t.Fatal(err)
	}
	for i := range l.Items {
		if st, _, _ := unstructured.NestedString(l.Items[i].Object, "spec", "desiredState"); st == string(pkgv1.PackageRevisionActive) {
			return &l.Items[i]
		}
	}
	return nil
}

// uninstall removes what the suite installed, while core and the runtime still run so that
// finalizers are honoured: every object of the platform's and the provider's kinds first, then
// the configuration and the packages it brought (core leaves dependencies installed), then the
// ImageConfigs.
func uninstall(ctx context.Context) {
	deleteInstances(ctx)
	for _, p := range []struct {
		gvk  schema.GroupVersionKind
		name string
	}{
		{configurationGVK, configurationName}, {providerGVK, providerName}, {functionGVK, functionName},
		{imageConfigGVK, "provider-clusterops-runtime"}, {imageConfigGVK, mirrorImageConfig},
		{mrapGVK, "clusterops-platform"}, {mrapGVK, "provider-clusterops"},
	} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(p.gvk)
		u.SetName(p.name)
		_ = s.c.Delete(ctx, u)
		_ = waitFor(ctx, time.Minute, p.name+" uninstalled", func(ctx context.Context) (bool, error) { return isGone(ctx, u), nil })
	}
}

// deleteInstances deletes every object of the platform's and the
// provider's kinds (claims, composites, managed resources, configs), and
// waits until they are gone: one left with a finalizer would hold its CRD,
// which core deletes with its package, terminating for good, and the next
// tier could not install the provider's CRDs again.
func deleteInstances(ctx context.Context) {
	kinds := func() []schema.GroupVersionKind {
		crds := &apiextensionsv1.CustomResourceDefinitionList{}
		if err := s.c.List(ctx, crds); err != nil {
			logf("cannot list CRDs: %v", err)
			return nil
		}
		var out []schema.GroupVersionKind
		for _, crd := range crds.Items {
			if g := crd.Spec.Group; g != "clusterops.io" && !strings.HasSuffix(g, ".clusterops.io") {
				continue
			}
			for _, v := range crd.Spec.Versions {
				if v.Storage {
					out = append(out, schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind + "List"})
				}
			}
		}
		return out
	}()
	left := func(ctx context.Context, del bool) int {
		n := 0
		for _, gvk := range kinds {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(gvk)
			if err := s.c.List(ctx, l); err != nil {
				continue // A kind whose CRD went meanwhile has nothing left.
			}
			for i := range l.Items {
				n++
				if del {
					_ = s.c.Delete(ctx, &l.Items[i])
				}
			}
		}
		return n
	}
	left(ctx, true)
	err := waitFor(ctx, 3*time.Minute, "the platform's and the provider's objects deleted", func(ctx context.Context) (bool, error) {
		return left(ctx, false) == 0, nil
	})
	if err != nil {
		logf("%v: %d left", err, left(ctx, false))
	}
}

// isGone reports whether o no longer exists.
func isGone(ctx context.Context, o client.Object) bool {
	return apierrors.IsNotFound(s.c.Get(ctx, client.ObjectKeyFromObject(o), o))
}
