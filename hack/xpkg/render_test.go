/*
Copyright 2026 The provider-clusterops Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xcrd"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// The render tests run `crossplane render` as a user does to see what a
// platform example composes, with function-clusterops built from cmd/function
// and served on a loopback port: render's Development runtime, which dials a
// function already running instead of starting its package in Docker.

// Groups of the platform APIs: legacy XRs and their claims, and namespaced XRs.
const (
	platformLegacyGroup     = "platform.clusterops.io"
	platformNamespacedGroup = "namespaced.platform.clusterops.io"
)

// claimXRSuffix stands in for the random suffix Crossplane gives the XR it
// creates for a claim (test/integration/platform uses the same).
const claimXRSuffix = "-x7k2p"

// renderCase is what rendering one example must give.
type renderCase struct {
	// xrKind and composition are the XR render is given and the Composition
	// it selects (the XRD's defaultCompositionRef).
	xrKind      string
	composition string

	// composed are the composed resources of the first render, before any
	// of them exists, by their resource name in the pipeline; unready is
	// how that render's Ready condition lists them, all unready.
	composed []composedWant
	unready  string

	// observed is the status, as the provider reports it, of each composed
	// resource in the second render, which observes all of them; one not
	// named here is observed without status (a ConfigMap has none).
	observed map[string]string
	// ready and status are what the second render reports of the XR: its
	// Ready condition and the rest of its status.
	ready  wantCondition
	status string
}

// composedWant is one composed resource: what it is, and every field but
// metadata and status (its spec, or a ConfigMap's data).
type composedWant struct {
	resource         string
	apiVersion, kind string
	name             string
	body             string
}

// wantCondition is a condition less its transition time.
type wantCondition struct {
	Type, Status, Reason, Message string
}

// renderCases are the examples under examples/platform, by file. The
// composed resources are those TestComposedResourcesValid in
// test/integration/platform expects of the same examples; the providerConfigRef
// is the XRDs' default, which render applies with --xrd as the API server
// would.
var renderCases = map[string]renderCase{ // Test table.
	"legacy/tenant-claim.yaml": {
		xrKind:      "XTenant",
		composition: "xtenants.platform.clusterops.io",
		unready:     "copy-pull-secret, copy-shared-config",
		composed: []composedWant{
			{
				resource: "copy-pull-secret", apiVersion: "copy.clusterops.io/v1alpha1", kind: "CopyRule", name: "alpha-pull-secret",
				body: `
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: platform-tenants}
  forProvider:
    kind: Secret
    sourceNamespace: platform-shared
    names: [registry-pull]
    namespaces: [tenant-alpha]
    conflictPolicy: Adopt`,
			},
			{
				resource: "copy-shared-config", apiVersion: "copy.clusterops.io/v1alpha1", kind: "CopyRule", name: "alpha-shared-config",
				body: `
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: platform-tenants}
  forProvider:
    kind: ConfigMap
    sourceNamespace: platform-shared
    selector: {matchLabels: {platform.clusterops.io/shared: "true"}}
    namespaces: [tenant-alpha]
    conflictPolicy: Adopt`,
			},
		},
		observed: map[string]string{
			"copy-pull-secret":   mrStatus("True", "atProvider: {sources: 1, intendedCopies: 1, copiesInSync: 1, copies: 1/1}"),
			"copy-shared-config": mrStatus("True", "atProvider: {sources: 2, intendedCopies: 2, copiesInSync: 2, copies: 2/2}"),
		},
		ready:  wantCondition{Type: "Ready", Status: "True", Reason: "Available"},
		status: "copies: 3/3",
	},
	"legacy/webapp-claim.yaml": {
		xrKind:      "XWebApp",
		composition: "xwebapps.platform.clusterops.io",
		unready:     "app, config, and rollout",
		composed: []composedWant{
			{
				resource: "app", apiVersion: "workload.clusterops.io/v1alpha1", kind: "AppBundle", name: "hello",
				body: `
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: platform-tenants}
  forProvider:
    image: nginx:1.27
    replicas: 2
    port: 80
    service: ClusterIP
    env:
    - {name: GREETING, valueFrom: {configMapKeyRef: {name: hello-config, key: GREETING}}}
    - {name: LOG_LEVEL, valueFrom: {configMapKeyRef: {name: hello-config, key: LOG_LEVEL}}}`,
			},
			{
				resource: "config", apiVersion: "v1", kind: "ConfigMap", name: "hello-config",
				body: `
data:
  GREETING: hello from the platform
  LOG_LEVEL: info`,
			},
			{
				resource: "rollout", apiVersion: "workload.clusterops.io/v1alpha1", kind: "ConfigRollout", name: "hello-config",
				body: `
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: platform-tenants}
  forProvider:
    configMaps: [{name: hello-config}]
    workloads: [{kind: Deployment, name: hello}]`,
			},
		},
		observed: map[string]string{
			"app":     mrStatus("True", "atProvider: {replicas: 2, readyReplicas: 2, serviceAddress: '10.96.0.17:80'}"),
			"rollout": mrStatus("True", ""),
		},
		ready:  wantCondition{Type: "Ready", Status: "True", Reason: "Available"},
		status: "{readyReplicas: 2, serviceAddress: '10.96.0.17:80'}",
	},
	"namespaced/tenant.yaml": {
		xrKind:      "Tenant",
		composition: "tenants.namespaced.platform.clusterops.io",
		unready:     "chaos, copy-pull-secret, and copy-shared-config",
		composed: []composedWant{
			{
				// No namespaces and no dryRun: the agent acts in the
				// tenant's namespace only, for real.
				resource: "chaos", apiVersion: "chaos.clusterops.io/v1alpha1", kind: "ChaosAgent", name: "beta-chaos",
				body: `
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: platform-tenants}
  forProvider:
    tantrumMode: true
    podTolerance: 3
    eagerness: 10
    interval: 5m0s
    minPodAge: 10m0s`,
			},
			{
				resource: "copy-pull-secret", apiVersion: "copy.clusterops.io/v1alpha1", kind: "CopyRule", name: "beta-pull-secret",
				body: `
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: platform-tenants}
  forProvider:
    kind: Secret
    sourceNamespace: platform-shared
    names: [registry-pull]
    namespaces: [tenant-beta]
    conflictPolicy: Adopt`,
			},
			{
				resource: "copy-shared-config", apiVersion: "copy.clusterops.io/v1alpha1", kind: "CopyRule", name: "beta-shared-config",
				body: `
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: platform-tenants}
  forProvider:
    kind: ConfigMap
    sourceNamespace: platform-shared
    names: [company-ca, feature-flags]
    namespaces: [tenant-beta]
    conflictPolicy: Adopt`,
			},
		},
		// The copies are done; the agent is not ready yet.
		observed: map[string]string{
			"chaos":              mrStatus("False", ""),
			"copy-pull-secret":   mrStatus("True", "atProvider: {sources: 1, intendedCopies: 1, copiesInSync: 1, copies: 1/1}"),
			"copy-shared-config": mrStatus("True", "atProvider: {sources: 2, intendedCopies: 2, copiesInSync: 2, copies: 2/2}"),
		},
		ready:  wantCondition{Type: "Ready", Status: "False", Reason: "Creating", Message: "Unready resources: chaos"},
		status: "copies: 3/3",
	},
	"namespaced/webapp.yaml": {
		xrKind:      "WebApp",
		composition: "webapps.namespaced.platform.clusterops.io",
		unready:     "app, config, and rollout",
		composed: []composedWant{
			{
				// replicas and service are the XRD's defaults.
				resource: "app", apiVersion: "workload.clusterops.io/v1alpha1", kind: "AppBundle", name: "hello",
				body: `
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: platform-tenants}
  forProvider:
    image: nginx:1.27
    replicas: 1
    service: None
    env:
    - {name: GREETING, valueFrom: {configMapKeyRef: {name: hello-config, key: GREETING}}}`,
			},
			{
				resource: "config", apiVersion: "v1", kind: "ConfigMap", name: "hello-config",
				body: `
data:
  GREETING: hello from a namespaced WebApp`,
			},
			{
				resource: "rollout", apiVersion: "workload.clusterops.io/v1alpha1", kind: "ConfigRollout", name: "hello-config",
				body: `
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: platform-tenants}
  forProvider:
    configMaps: [{name: hello-config}]
    workloads: [{kind: Deployment, name: hello}]`,
			},
		},
		// No Service, so no address.
		observed: map[string]string{
			"app":     mrStatus("True", "atProvider: {replicas: 1, readyReplicas: 1}"),
			"rollout": mrStatus("True", ""),
		},
		ready:  wantCondition{Type: "Ready", Status: "True", Reason: "Available"},
		status: "readyReplicas: 1",
	},
}

// mrStatus is the status of a managed resource: Synced, Ready as given, and
// more (YAML at the status's level).
func mrStatus(ready, more string) string {
	reason := "Available"
	if ready != "True" {
		reason = "Creating"
	}
	return "conditions:\n" +
		"- {type: Synced, status: 'True', reason: ReconcileSuccess, lastTransitionTime: '2026-01-01T00:00:00Z'}\n" +
		"- {type: Ready, status: '" + ready + "', reason: " + reason + ", lastTransitionTime: '2026-01-01T00:00:00Z'}\n" +
		more
}

// TestRenderPlatformExamples runs `crossplane render` of every example claim
// and XR under examples/platform, with the Composition its XRD selects,
// examples/platform/function.yaml switched to the Development runtime, and
// the XRD for defaults, through function-clusterops built from cmd/function.
// Each example is rendered twice, as Crossplane reconciles it: before anything
// exists, where every composed resource is named, placed in the example's
// namespace, owned by the XR and carries the example's spec, and the XR is
// not ready; then with the composed resources observed as the provider
// reports them, where the XR's readiness and status follow theirs. Each
// output passes `crossplane beta validate` against the provider's CRDs and the
// XRD, as `crossplane render ... | crossplane beta validate` does.
//
// crank 2.2 renders XRs, not claims: a legacy example's claim is rendered as
// the XR Crossplane creates for it (spec.claimRef and the claim labels).
func TestRenderPlatformExamples(t *testing.T) {
	crank(t) // Fail first, and fast, without the CLI.
	root := filepath.Join(testenv.RepoRoot(), "examples", "platform")
	p := readPlatform(t, root)

	var files []string
	for _, e := range p.instances {
		files = append(files, e.file)
	}
	want := make([]string, 0, len(renderCases))
	for f := range renderCases {
		want = append(want, f)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, files); diff != "" {
		t.Fatalf("example claims and XRs under %s: -want (render cases), +got:\n%s", root, diff)
	}

	fn := startFunction(t)
	cache := newValidateCache(t)
	functions := filepath.Join(root, "function.yaml")

	for _, e := range p.instances {
		t.Run(e.file, func(t *testing.T) {
			tc := renderCases[e.file]
			xrd := p.xrdFor(t, e.obj)
			comp := p.compositionFor(t, e.obj, xrd.obj)
			if comp.obj.GetName() != tc.composition {
				t.Errorf("the example selects Composition %q, want %q", comp.obj.GetName(), tc.composition)
			}
			xr := e.obj.DeepCopy()
			if x := decodeXRD(t, xrd.obj); x.Spec.ClaimNames != nil && x.Spec.ClaimNames.Kind == e.obj.GetKind() {
				xr = compositeOfClaim(t, e.obj, xrd.obj)
			}
			if xr.GetKind() != tc.xrKind {
				t.Fatalf("rendering a %s, want a %s", xr.GetKind(), tc.xrKind)
			}
			dir := t.TempDir()
			xrFile := writeObjects(t, filepath.Join(dir, "xr.yaml"), xr)
			r := renderer{fn: fn, xr: xrFile, composition: comp.path, functions: functions, xrd: xrd.path}

			created := r.render(t, "")
			t.Run("Created", func(t *testing.T) {
				checkComposed(t, created, xr, e.obj, tc.composed)
				checkXR(t, created, xr, wantCondition{Type: "Ready", Status: "False", Reason: "Creating", Message: "Unready resources: " + tc.unready}, "")
				if !fn.composed(xr.GetName()) {
					t.Errorf("function-clusterops logged no composition of %s: render did not reach it\n%s", xr.GetName(), fn.proc.LogTail(20))
				}
				validateRendered(t, cache, xrd.path, filepath.Join(dir, "created.yaml"), created)
			})

			t.Run("Observed", func(t *testing.T) {
				if len(created.composed) != len(tc.composed) {
					t.Fatalf("the first render composed %d resources, want %d", len(created.composed), len(tc.composed))
				}
				obs := observedFrom(t, created.composed, tc.observed)
				observed := r.render(t, writeObjects(t, filepath.Join(dir, "observed.yaml"), obs...))
				// The function still wants every resource, as it did.
				checkComposed(t, observed, xr, e.obj, tc.composed)
				checkXR(t, observed, xr, tc.ready, tc.status)
				validateRendered(t, cache, xrd.path, filepath.Join(dir, "rendered.yaml"), observed)
			})
		})
	}
}

// A platformFile is an object of a file under examples/platform.
type platformFile struct {
	file string // relative to examples/platform
	path string
	obj  *unstructured.Unstructured
}

// platformDir is what examples/platform holds.
type platformDir struct {
	instances    []platformFile // claims and namespaced XRs, by file
	xrds         []platformFile
	compositions []platformFile
}

func readPlatform(t *testing.T, root string) platformDir {
	t.Helper()
	var p platformDir
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		objs, err := testenv.ReadObjects(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, o := range objs {
			f := platformFile{file: rel, path: path, obj: o}
			switch {
			case o.GroupVersionKind().Group == platformLegacyGroup || o.GroupVersionKind().Group == platformNamespacedGroup:
				p.instances = append(p.instances, f)
			case o.GetKind() == "CompositeResourceDefinition":
				p.xrds = append(p.xrds, f)
			case o.GetKind() == "Composition":
				p.compositions = append(p.compositions, f)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(p.instances, func(a, b platformFile) int { return strings.Compare(a.file, b.file) })
	return p
}

// xrdFor returns the XRD that defines o, a claim or a namespaced XR. Its file
// must hold it alone: render's --xrd reads one object.
func (p platformDir) xrdFor(t *testing.T, o *unstructured.Unstructured) platformFile {
	t.Helper()
	gvk := o.GroupVersionKind()
	for _, f := range p.xrds {
		x := decodeXRD(t, f.obj)
		kind := x.Spec.Names.Kind
		if x.Spec.ClaimNames != nil {
			kind = x.Spec.ClaimNames.Kind
		}
		if x.Spec.Group == gvk.Group && kind == gvk.Kind {
			soleObject(t, f.path)
			return f
		}
	}
	t.Fatalf("no XRD under examples/platform defines %s", gvk)
	return platformFile{}
}

// compositionFor returns the Composition o selects: the one it names, or its
// XRD's default. Its file must hold it alone: render reads one object.
func (p platformDir) compositionFor(t *testing.T, o, xrd *unstructured.Unstructured) platformFile {
	t.Helper()
	name, _, _ := unstructured.NestedString(o.Object, "spec", "crossplane", "compositionRef", "name") // namespaced XR
	if name == "" {
		name, _, _ = unstructured.NestedString(o.Object, "spec", "compositionRef", "name") // claim
	}
	if name == "" {
		name = decodeXRD(t, xrd).Spec.DefaultCompositionRef.Name
	}
	for _, f := range p.compositions {
		if f.obj.GetName() == name {
			soleObject(t, f.path)
			return f
		}
	}
	t.Fatalf("%s %s selects Composition %q, which is not under examples/platform", o.GetKind(), o.GetName(), name)
	return platformFile{}
}

func decodeXRD(t *testing.T, u *unstructured.Unstructured) *xpv1.CompositeResourceDefinition {
	t.Helper()
	// A v2 XRD has the v1 fields, less claims: it decodes into the v1 type.
	x := &xpv1.CompositeResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, x); err != nil {
		t.Fatalf("XRD %s: %v", u.GetName(), err)
	}
	if x.Spec.DefaultCompositionRef == nil {
		t.Fatalf("XRD %s has no defaultCompositionRef", u.GetName())
	}
	return x
}

func soleObject(t *testing.T, path string) {
	t.Helper()
	objs, err := testenv.ReadObjects(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("%s holds %d objects: crossplane render reads only the first of a Composition or XRD file, so keep it alone", path, len(objs))
	}
}

// compositeOfClaim returns the legacy XR Crossplane creates for a claim (as
// test/integration/platform's compositeOf does against an API server): the
// claim's spec, less claim-only fields, with spec.claimRef, a generated name
// and the claim labels.
func compositeOfClaim(t *testing.T, claim, xrdObj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	xrd := decodeXRD(t, xrdObj)
	spec, _, err := unstructured.NestedMap(claim.Object, "spec")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"compositeDeletePolicy", "resourceRef", "writeConnectionSecretToRef"} {
		delete(spec, f)
	}
	spec["claimRef"] = map[string]any{
		"apiVersion": claim.GetAPIVersion(),
		"kind":       claim.GetKind(),
		"name":       claim.GetName(),
		"namespace":  claim.GetNamespace(),
	}
	xr := &unstructured.Unstructured{Object: map[string]any{"spec": runtime.DeepCopyJSONValue(spec)}}
	xr.SetAPIVersion(claim.GetAPIVersion())
	xr.SetKind(xrd.Spec.Names.Kind)
	xr.SetName(claim.GetName() + claimXRSuffix)
	xr.SetLabels(map[string]string{
		xcrd.LabelKeyClaimName:             claim.GetName(),
		xcrd.LabelKeyClaimNamespace:        claim.GetNamespace(),
		xcrd.LabelKeyNamePrefixForComposed: claim.GetName() + claimXRSuffix,
	})
	return xr
}

// A renderer renders one XR with its Composition, functions and XRD.
type renderer struct {
	fn                              *devFunction
	xr, composition, functions, xrd string
}

// rendered is render's output.
type rendered struct {
	raw      []byte
	xr       *unstructured.Unstructured
	composed []*unstructured.Unstructured
}

// render runs `crossplane render`, observing the composed resources of the
// file observed if it is not empty. It fails the test unless render succeeds
// with an XR and no function results: function-clusterops reports nothing
// but fatal errors, and those fail render.
func (r renderer) render(t *testing.T, observed string) rendered {
	t.Helper()
	args := []string{
		"render", r.xr, r.composition, r.functions,
		"--xrd=" + r.xrd,
		"--function-annotations=render.crossplane.io/runtime=Development",
		"--function-annotations=render.crossplane.io/runtime-development-target=" + r.fn.address,
		"--include-full-xr",
		"--include-function-results",
		"--timeout=1m",
	}
	if observed != "" {
		args = append(args, "--observed-resources="+observed)
	}
	cmd := exec.Command(crank(t), args...)
	cmd.Dir = testenv.RepoRoot()
	// The Development runtime never needs Docker: a function that fell back
	// to the Docker runtime fails here rather than using a local engine.
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+t.TempDir(), "DOCKER_HOST=unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("crossplane %s: %v\n%s%s\nfunction log:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String(), r.fn.proc.LogTail(20))
	}
	out := rendered{raw: stdout.Bytes()}
	d := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(out.raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := d.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("cannot read the output of crossplane render: %v\n%s", err, out.raw)
		}
		switch {
		case len(u.Object) == 0:
		case out.xr == nil:
			out.xr = u // render writes the XR first.
		case u.GetKind() == "Result" && u.GroupVersionKind().Group == "render.crossplane.io":
			sev, _, _ := unstructured.NestedString(u.Object, "severity")
			msg, _, _ := unstructured.NestedString(u.Object, "message")
			t.Errorf("function result %s: %s", sev, msg)
		default:
			out.composed = append(out.composed, u)
		}
	}
	if out.xr == nil {
		t.Fatalf("crossplane render wrote no XR:\n%s", out.raw)
	}
	return out
}

// checkComposed checks the composed resources render reports: each one of
// want, in order of resource name (render sorts by it), in the example's
// namespace, named by the function, labelled and owned as Crossplane composes
// it, and with the spec (or data) want says.
func checkComposed(t *testing.T, out rendered, xr, example *unstructured.Unstructured, want []composedWant) {
	t.Helper()
	got := make([]string, 0, len(out.composed))
	for _, u := range out.composed {
		got = append(got, u.GetAnnotations()["crossplane.io/composition-resource-name"])
	}
	names := make([]string, 0, len(want))
	for _, w := range want {
		names = append(names, w.resource)
	}
	if diff := cmp.Diff(names, got); diff != "" {
		t.Fatalf("composed resources by resource name: -want, +got:\n%s\n%s", diff, out.raw)
	}

	wantLabels := map[string]string{xcrd.LabelKeyNamePrefixForComposed: xr.GetName()}
	if ref, ok, _ := unstructured.NestedStringMap(xr.Object, "spec", "claimRef"); ok {
		wantLabels[xcrd.LabelKeyClaimName] = ref["name"]
		wantLabels[xcrd.LabelKeyClaimNamespace] = ref["namespace"]
	}
	for i, w := range want {
		u := out.composed[i]
		t.Run(w.resource, func(t *testing.T) {
			type id struct{ APIVersion, Kind, Namespace, Name, GenerateName string }
			if diff := cmp.Diff(id{w.apiVersion, w.kind, example.GetNamespace(), w.name, ""},
				id{u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName(), u.GetGenerateName()}); diff != "" {
				t.Errorf("composed resource: -want, +got:\n%s", diff)
			}
			if diff := cmp.Diff(wantLabels, u.GetLabels()); diff != "" {
				t.Errorf("labels: -want, +got:\n%s", diff)
			}
			type owner struct {
				APIVersion, Kind, Name string
				Controller             bool
			}
			var owners []owner
			for _, o := range u.GetOwnerReferences() {
				owners = append(owners, owner{o.APIVersion, o.Kind, o.Name, o.Controller != nil && *o.Controller})
			}
			if diff := cmp.Diff([]owner{{xr.GetAPIVersion(), xr.GetKind(), xr.GetName(), true}}, owners); diff != "" {
				t.Errorf("owner references: -want (the XR, as controller), +got:\n%s", diff)
			}

			body := u.DeepCopy().Object
			for _, k := range []string{"apiVersion", "kind", "metadata", "status"} {
				delete(body, k)
			}
			if diff := cmp.Diff(fromYAML(t, w.body), body); diff != "" {
				t.Errorf("fields: -want, +got:\n%s", diff)
			}
		})
	}
}

// checkXR checks the XR render reports: the input XR (with --include-full-xr)
// with the XRD's defaults, one Ready condition as want says and the rest of
// its status as status (YAML) says.
func checkXR(t *testing.T, out rendered, xr *unstructured.Unstructured, ready wantCondition, status string) {
	t.Helper()
	got := out.xr
	type id struct{ APIVersion, Kind, Namespace, Name string }
	if diff := cmp.Diff(id{xr.GetAPIVersion(), xr.GetKind(), xr.GetNamespace(), xr.GetName()},
		id{got.GetAPIVersion(), got.GetKind(), got.GetNamespace(), got.GetName()}); diff != "" {
		t.Errorf("rendered XR: -want, +got:\n%s", diff)
	}
	// The XRD's default, which the composed resources' providerConfigRef
	// follows; render applies it only with --xrd.
	if pc, _, _ := unstructured.NestedString(got.Object, "spec", "providerConfigName"); pc != "platform-tenants" {
		t.Errorf("rendered XR: spec.providerConfigName = %q, want the XRD's default platform-tenants", pc)
	}

	st, _, _ := unstructured.NestedMap(got.Object, "status")
	var conds []wantCondition
	if cs, ok := st["conditions"].([]any); ok {
		for _, c := range cs {
			m, _ := c.(map[string]any)
			s := func(k string) string { v, _ := m[k].(string); return v }
			conds = append(conds, wantCondition{s("type"), s("status"), s("reason"), s("message")})
		}
	}
	delete(st, "conditions")
	if diff := cmp.Diff([]wantCondition{ready}, conds); diff != "" {
		t.Errorf("rendered XR's conditions: -want, +got:\n%s", diff)
	}
	want := map[string]any{}
	if status != "" {
		want = fromYAML(t, status)
	}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("rendered XR's status (less conditions): -want, +got:\n%s", diff)
	}
}

// observedFrom returns the composed resources of a first render as
// Crossplane would observe them once created: as rendered, with the status
// (YAML) the provider reports in status, by resource name.
func observedFrom(t *testing.T, composed []*unstructured.Unstructured, status map[string]string) []*unstructured.Unstructured {
	t.Helper()
	seen := map[string]bool{}
	out := make([]*unstructured.Unstructured, 0, len(composed))
	for _, c := range composed {
		o := c.DeepCopy()
		name := o.GetAnnotations()["crossplane.io/composition-resource-name"]
		if s, ok := status[name]; ok {
			o.Object["status"] = fromYAML(t, s)
			seen[name] = true
		}
		out = append(out, o)
	}
	for name := range status {
		if !seen[name] {
			t.Fatalf("the test gives a status to %q, which was not composed", name)
		}
	}
	return out
}

// validateRendered writes render's output to path and runs `crossplane beta
// validate` of it against the provider's CRDs and the XRD: every object of a
// provider or platform kind is validated and valid.
func validateRendered(t *testing.T, cache validateCache, xrd, path string, out rendered) {
	t.Helper()
	if err := os.WriteFile(path, out.raw, 0o600); err != nil {
		t.Fatal(err)
	}
	report, err := runCrank(t, "beta", "validate", "package/crds,"+xrd, path, "--cache-dir="+cache.dir, "--crossplane-image="+cache.image)
	if err != nil {
		t.Fatalf("crossplane beta validate of render's output: %v\n%s\n%s", err, report, out.raw)
	}
	got := map[string]bool{}
	s := bufio.NewScanner(strings.NewReader(report))
	for s.Scan() {
		l := s.Text()
		if m := validated.FindStringSubmatch(l); m != nil {
			got[m[1]+" "+m[2]+" "+m[3]] = true
		}
		if failed.MatchString(l) {
			t.Errorf("render's output is invalid: %s", l)
		}
	}
	for _, u := range append([]*unstructured.Unstructured{out.xr}, out.composed...) {
		if builtIn(u.GetAPIVersion()) {
			continue
		}
		if k := u.GetAPIVersion() + " " + u.GetKind() + " " + u.GetName(); !got[k] {
			t.Errorf("%s was not validated:\n%s", k, report)
		}
	}
}

func fromYAML(t *testing.T, s string) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad YAML in the test: %v\n%s", err, s)
	}
	return m
}

// writeObjects writes objs to path as a YAML stream and returns path.
func writeObjects(t *testing.T, path string, objs ...*unstructured.Unstructured) string {
	t.Helper()
	var b bytes.Buffer
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// devFunction is function-clusterops, built from cmd/function and serving plain
// gRPC on a loopback address, as render's Development runtime expects.
type devFunction struct {
	address string
	proc    *testenv.Process
	log     string
}

// startFunction builds cmd/function and runs it until the test ends. It
// returns once the function accepts connections.
func startFunction(t *testing.T) *devFunction {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "function")
	build := exec.Command("go", "build", "-o", bin, "./cmd/function")
	build.Dir = testenv.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cannot build cmd/function: %v\n%s", err, out)
	}

	// A free port can be taken between finding it and binding it: try again
	// then, and only then.
	for attempt := 1; ; attempt++ {
		port, err := testenv.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		f := &devFunction{address: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), log: filepath.Join(dir, "function-"+strconv.Itoa(attempt)+".log")}
		f.proc, err = testenv.StartProcess(f.log, bin, []string{"--insecure", "--debug", "--address=" + f.address, "--metrics-bind-address=0"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.proc.Stop)
		err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			if !f.proc.Running() {
				return false, errors.Errorf("function exited: %v", f.proc.ExitErr())
			}
			c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", f.address)
			if err != nil {
				return false, nil //nolint:nilerr // Not listening yet: poll again.
			}
			_ = c.Close()
			return true, nil
		})
		if err == nil {
			return f
		}
		if attempt < 3 && !f.proc.Running() && strings.Contains(f.proc.LogTail(20), "address already in use") {
			continue
		}
		t.Fatalf("function-clusterops does not serve on %s: %v\n%s", f.address, err, f.proc.LogTail(20))
	}
}

// composed reports whether the function has logged that it composed the XR
// named name.
func (f *devFunction) composed(name string) bool {
	b, err := os.ReadFile(f.log)
	if err != nil {
		return false
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.Contains(l, "Composed") && strings.Contains(l, `"xr-name": "`+name+`"`) {
			return true
		}
	}
	return false
}
