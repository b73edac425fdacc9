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
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	rbacv1 "k8s.io/api/rbac/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	pkgmetav1 "github.com/crossplane/crossplane/apis/v2/pkg/meta/v1"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser"
	xpkgyaml "github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser/yaml"
)

const (
	repoPackage         = "../../package"
	repoFunctionPackage = "../../package-function"
	testVersion         = "v0.0.0-test.1"
)

// repository is the default repository of a package kind.
func repository(kind string) string { return repositoryPrefix + kinds[kind].name }

const fixtureCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: fixtures.test.clusterops.io
spec:
  group: test.clusterops.io
  names:
    kind: Fixture
    listKind: FixtureList
    plural: fixtures
    singular: fixture
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
`

const fixtureExample = `apiVersion: workload.clusterops.io/v1alpha1
kind: ImmortalContainer
metadata:
  name: example
  namespace: default
spec:
  forProvider:
    image: nginx
`

// An entry is the part of a tar header the runtime layer is judged by.
type entry struct {
	Name string
	Type byte
	Mode int64
}

// wantPlatforms are the platforms of every provider and function package, in
// index order, and the ELF machine of the binary each must run.
var wantPlatforms = []struct { // Test table.
	platform string
	machine  elf.Machine
}{
	{"linux/amd64", elf.EM_X86_64},
	{"linux/arm64", elf.EM_AARCH64},
}

func TestBuildMakesValidPackages(t *testing.T) {
	bins := staticBinaries(t)

	cases := map[string]struct {
		reason   string
		kind     string
		root     func(t *testing.T) string
		examples bool
	}{
		"RepositoryPackage": {
			reason: "The repository's package root (or its crossplane.yaml with a fixture CRD while package/crds is empty) should build into a valid provider package for both platforms.",
			kind:   "provider",
			root:   repoPackageRoot,
		},
		"WithExamples": {
			reason:   "Examples should go into their own annotated layer and not into the package.",
			kind:     "provider",
			root:     fixturePackageRoot,
			examples: true,
		},
		"FunctionPackage": {
			reason: "The repository's function package root should build into a valid function package for both platforms.",
			kind:   "function",
			root:   func(*testing.T) string { return repoFunctionPackage },
		},
		"FunctionWithExamples": {
			reason:   "A function package takes examples like a provider package.",
			kind:     "function",
			root:     func(*testing.T) string { return repoFunctionPackage },
			examples: true,
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := tc.root(t)
			dir := t.TempDir()
			o := options{
				Kind:        tc.kind,
				PackageRoot: root,
				Binaries:    []string{bins["arm64"], bins["amd64"]}, // Any order.
				Version:     testVersion,
				OutputDir:   filepath.Join(dir, "out"),
				Repository:  repository(tc.kind),
			}
			if tc.examples {
				o.ExamplesRoot = filepath.Join(dir, "examples")
				writeFile(t, filepath.Join(o.ExamplesRoot, "immortalcontainer.yaml"), fixtureExample)
			}

			r, err := build(context.Background(), o)
			if err != nil {
				t.Fatalf("\n%s\nbuild(...): %v", tc.reason, err)
			}

			base := kinds[tc.kind].name + "-" + testVersion
			wantResult := result{
				Layout: filepath.Join(o.OutputDir, base),
				Digest: r.Digest,
				Tarballs: map[string]string{
					"linux/amd64": filepath.Join(o.OutputDir, base+"-linux_amd64.xpkg"),
					"linux/arm64": filepath.Join(o.OutputDir, base+"-linux_arm64.xpkg"),
				},
			}
			if diff := cmp.Diff(wantResult, r); diff != "" {
				t.Errorf("\n%s\nbuild(...) result: -want, +got:\n%s", tc.reason, diff)
			}

			images := checkIndex(t, r, tc.kind)
			var pkgLayers []v1.Hash
			for i, img := range images {
				want := wantPlatforms[i]
				arch := strings.TrimPrefix(want.platform, "linux/")
				checkRuntimeConfig(t, img, tc.kind, arch)
				bin := checkLayers(t, img, tc.kind, tc.examples)
				checkBinaryContent(t, bin, bins[arch], want.machine)
				pkgLayers = append(pkgLayers, checkPackage(t, img, root, tc.kind))
			}
			if pkgLayers[0] != pkgLayers[1] {
				t.Errorf("\n%s\npackage layers differ between platforms: %v", tc.reason, pkgLayers)
			}
			checkTarballs(t, r, tc.kind, images)
		})
	}
}

func TestConfigurationBuildsWithItsExamples(t *testing.T) {
	const root = "../../package-configuration"
	dir := t.TempDir()
	o := options{
		Kind:         "configuration",
		PackageRoot:  root,
		ExamplesRoot: "../../examples/platform",
		Version:      testVersion,
		OutputDir:    filepath.Join(dir, "out"),
		Repository:   repository("configuration"),
	}
	r, err := build(context.Background(), o)
	if err != nil {
		t.Fatalf("build(...): %v", err)
	}
	base := kinds["configuration"].name + "-" + testVersion
	wantResult := result{
		Layout:   filepath.Join(o.OutputDir, base),
		Digest:   r.Digest,
		Tarballs: map[string]string{"": filepath.Join(o.OutputDir, base+".xpkg")},
	}
	if diff := cmp.Diff(wantResult, r); diff != "" {
		t.Errorf("build(...) result: -want, +got:\n%s", diff)
	}

	// The layout holds the package image itself: a configuration has no
	// runtime, hence no platform and no index.
	l, err := layout.ImageIndexFromPath(r.Layout)
	if err != nil {
		t.Fatal(err)
	}
	top, err := l.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || !top.Manifests[0].MediaType.IsImage() || top.Manifests[0].Digest != r.Digest {
		t.Fatalf("layout index.json: got %+v, want the package image %s alone", top.Manifests, r.Digest)
	}
	img, err := l.Image(r.Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range m.Layers {
		got = append(got, l.Annotations[xpkg.AnnotationKey])
	}
	if diff := cmp.Diff([]string{xpkg.PackageAnnotation, xpkg.ExamplesAnnotation}, got); diff != "" {
		t.Errorf("layer %s annotations: -want, +got:\n%s", xpkg.AnnotationKey, diff)
	}
	checkPackage(t, img, root, "configuration")

	// The tarball pushes as the same image.
	annotated, err := xpkg.AnnotateLayers(loadPackage(t, r.Tarballs[""], "configuration"))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := annotated.Digest(); err != nil || d != r.Digest {
		t.Errorf("tarball pushes as %s (%v), want the layout's %s", d, err, r.Digest)
	}
}

func TestBuildsOfTheSameInputsAreIdentical(t *testing.T) {
	bins := staticBinaries(t)
	root := fixturePackageRoot(t)
	dir := t.TempDir()

	digests := make([]v1.Hash, 2)
	for i := range digests {
		r, err := build(context.Background(), options{
			Kind:        "provider",
			PackageRoot: root,
			Binaries:    []string{bins["amd64"], bins["arm64"]},
			Version:     testVersion,
			OutputDir:   dir,
			Repository:  repository("provider"),
		})
		if err != nil {
			t.Fatalf("build(...): %v", err)
		}
		digests[i] = r.Digest
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds of the same inputs: got index digests %s and %s, want equal", digests[0], digests[1])
	}
}

func TestFailedBuildsSayWhyAndLeaveNothing(t *testing.T) {
	bins := staticBinaries(t)
	both := []string{bins["amd64"], bins["arm64"]}
	placeholder := filepath.Join(t.TempDir(), "provider")
	writeFile(t, placeholder, "#!/bin/sh\n")
	arm32 := crossBinary(t, "arm")

	meta, err := os.ReadFile(filepath.Join(repoPackage, metaFile))
	if err != nil {
		t.Fatal(err)
	}

	functionMeta, err := os.ReadFile(filepath.Join(repoFunctionPackage, metaFile))
	if err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		reason   string
		kind     string
		binaries []string
		version  string
		files    map[string]string
		want     string
	}{
		"ProviderMetaAsFunction": {
			reason:   "The builder lints by the metadata's kind: a provider's crossplane.yaml must not become a function package.",
			kind:     "function",
			binaries: both,
			files:    map[string]string{metaFile: string(meta)},
			want:     "is a meta.pkg.crossplane.io/v1 Provider, want a meta.pkg.crossplane.io/v1 Function for a function-clusterops package",
		},
		"FunctionMetaAsProvider": {
			reason:   "Nor the other way round.",
			kind:     "provider",
			binaries: both,
			files:    map[string]string{metaFile: string(functionMeta), "crds/fixture.yaml": fixtureCRD},
			want:     "is a meta.pkg.crossplane.io/v1 Function, want a meta.pkg.crossplane.io/v1 Provider for a provider-clusterops package",
		},
		"FunctionUnknownField": {
			reason:   "Function metadata is decoded strictly too.",
			kind:     "function",
			binaries: both,
			files:    map[string]string{metaFile: string(functionMeta) + "  permissionRequests: []\n"},
			want:     `unknown field "permissionRequests"`,
		},
		"FunctionWithProviderObject": {
			reason:   "The function linter must reject objects a function package may not carry.",
			kind:     "function",
			binaries: both,
			files: map[string]string{
				metaFile:     string(functionMeta),
				"extra.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nope\n",
			},
			want: "cannot build",
		},
		"NestedPackage": {
			reason:   "A second crossplane.yaml below the package root fails the build, as it fails `crossplane xpkg build`: each package has a directory of its own.",
			binaries: both,
			files:    map[string]string{metaFile: string(meta), "crds/fixture.yaml": fixtureCRD, "function/" + metaFile: string(functionMeta)},
			want:     "not exactly one package meta type",
		},
		"NotELF": {
			reason:   "A placeholder or non-Linux binary cannot run in the runtime image.",
			binaries: []string{placeholder, bins["arm64"]},
			files:    map[string]string{metaFile: string(meta), "crds/fixture.yaml": fixtureCRD},
			want:     "as an ELF executable",
		},
		"UnsupportedArchitecture": {
			reason:   "A binary for a platform the package does not carry is refused, not mislabelled.",
			binaries: []string{bins["amd64"], bins["arm64"], arm32},
			files:    map[string]string{metaFile: string(meta), "crds/fixture.yaml": fixtureCRD},
			want:     "want one of linux/amd64, linux/arm64",
		},
		"MissingPlatform": {
			reason:   "Every package carries both platforms: arm64 nodes must be able to run it.",
			binaries: []string{bins["amd64"]},
			files:    map[string]string{metaFile: string(meta), "crds/fixture.yaml": fixtureCRD},
			want:     "no binary for linux/arm64",
		},
		"TwoBinariesOnePlatform": {
			reason:   "Two binaries for one platform are ambiguous.",
			binaries: []string{bins["amd64"], bins["amd64"], bins["arm64"]},
			files:    map[string]string{metaFile: string(meta), "crds/fixture.yaml": fixtureCRD},
			want:     "are both built for linux/amd64",
		},
		"MissingMeta": {
			reason:   "A package root without crossplane.yaml is not a package.",
			binaries: both,
			files:    map[string]string{"crds/fixture.yaml": fixtureCRD},
			want:     "cannot read package metadata",
		},
		"PermissionRequests": {
			reason:   "Crossplane v2 ignores spec.controller.permissionRequests; the build must refuse it rather than drop it silently.",
			binaries: both,
			files: map[string]string{
				metaFile:            string(meta) + "  controller:\n    permissionRequests:\n    - apiGroups: ['*']\n      resources: ['*']\n      verbs: ['*']\n",
				"crds/fixture.yaml": fixtureCRD,
			},
			want: `unknown field "controller"`,
		},
		"SpecPermissionRequests": {
			reason:   "Package metadata has no spec.permissionRequests either.",
			binaries: both,
			files: map[string]string{
				metaFile:            string(meta) + "  permissionRequests:\n  - apiGroups: ['']\n    resources: [pods]\n    verbs: [get]\n",
				"crds/fixture.yaml": fixtureCRD,
			},
			want: `unknown field "permissionRequests"`,
		},
		"NotAProviderObject": {
			reason:   "The provider linter must reject objects a provider package may not carry.",
			binaries: both,
			files: map[string]string{
				metaFile:            string(meta),
				"crds/fixture.yaml": fixtureCRD,
				"extra.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nope\n",
			},
			want: "cannot build",
		},
		"InvalidTag": {
			reason:   "The version must be usable as an image tag.",
			binaries: both,
			version:  "v1.0.0+dirty",
			files:    map[string]string{metaFile: string(meta), "crds/fixture.yaml": fixtureCRD},
			want:     "cannot make an image tag",
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			for p, content := range tc.files {
				writeFile(t, filepath.Join(root, p), content)
			}
			version := tc.version
			if version == "" {
				version = testVersion
			}
			kind := tc.kind
			if kind == "" {
				kind = "provider"
			}
			out := filepath.Join(t.TempDir(), "out")

			_, err := build(context.Background(), options{
				Kind:        kind,
				PackageRoot: root,
				Binaries:    tc.binaries,
				Version:     version,
				OutputDir:   out,
				Repository:  repository(kind),
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("\n%s\nbuild(...): got error %v, want one containing %q", tc.reason, err, tc.want)
			}
			if left, err := os.ReadDir(out); err == nil && len(left) > 0 {
				t.Errorf("\n%s\nfailed build left output behind: %v", tc.reason, left)
			}
		})
	}
}

func TestFlagsParseIntoBuildOptions(t *testing.T) {
	out := filepath.Join("_output", "xpkg")
	cases := map[string]struct {
		args    []string
		want    options
		wantErr string
	}{
		"Defaults": {
			args: []string{"--binary=bin/linux_amd64/provider,bin/linux_arm64/provider", "--version=v0.1.0"},
			want: options{
				Kind:        "provider",
				PackageRoot: "package",
				Binaries:    []string{"bin/linux_amd64/provider", "bin/linux_arm64/provider"},
				Version:     "v0.1.0",
				OutputDir:   out,
				Repository:  "xpkg.crossplane.io/clusterops/provider-clusterops",
			},
		},
		"FunctionDefaults": {
			args: []string{"--kind=function", "--binary=bin/linux_amd64/function", "--binary=bin/linux_arm64/function", "--version=v0.1.0"},
			want: options{
				Kind:        "function",
				PackageRoot: "package-function",
				Binaries:    []string{"bin/linux_amd64/function", "bin/linux_arm64/function"},
				Version:     "v0.1.0",
				OutputDir:   out,
				Repository:  "xpkg.crossplane.io/clusterops/function-clusterops",
			},
		},
		"ConfigurationDefaults": {
			args: []string{"--kind=configuration", "--version=v0.1.0"},
			want: options{
				Kind:        "configuration",
				PackageRoot: "package-configuration",
				Version:     "v0.1.0",
				OutputDir:   out,
				Repository:  "xpkg.crossplane.io/clusterops/configuration-clusterops-platform",
			},
		},
		"ConfigurationWithBinary": {
			args:    []string{"--kind=configuration", "--binary=b", "--version=v0.1.0"},
			wantErr: "a configuration package has no runtime: --binary is not for it",
		},
		"AllFlags": {
			args: []string{
				"--kind=function", "--package-root=p", "--examples-root=e", "--binary=a", "--binary=b, c", "--version=v1",
				"--output-dir=o", "--repository=example.org/p",
			},
			want: options{Kind: "function", PackageRoot: "p", ExamplesRoot: "e", Binaries: []string{"a", "b", "c"}, Version: "v1", OutputDir: "o", Repository: "example.org/p"},
		},
		"UnknownKind": {
			args:    []string{"--kind=composition", "--binary=b", "--version=v1"},
			wantErr: `--kind must be provider, function or configuration, not "composition"`,
		},
		"MissingBinary": {
			args:    []string{"--version=v0.1.0"},
			wantErr: "a provider package needs --binary, one static binary per platform (linux/amd64, linux/arm64)",
		},
		"MissingVersion": {
			args:    []string{"--binary=b"},
			wantErr: "--version is required",
		},
		"StrayArgument": {
			args:    []string{"--binary=b", "--version=v1", "extra"},
			wantErr: "unexpected arguments: extra",
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseFlags(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("parseFlags(%v): got error %v, want %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseFlags(%v): %v", tc.args, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseFlags(%v): -want, +got:\n%s", tc.args, diff)
			}
		})
	}
}

// TestProviderRBAC checks the RBAC that stands in for the permission requests
// Crossplane v2 no longer supports.
func TestProviderRBAC(t *testing.T) {
	docs := splitYAML(t, filepath.Join("..", "..", "cluster", "rbac", "provider-rbac.yaml"))

	var (
		role    rbacv1.ClusterRole
		binding rbacv1.ClusterRoleBinding
		drc     pkgv1beta1.DeploymentRuntimeConfig
	)
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(d, u); err != nil {
			t.Fatal(err)
		}
		var into any
		switch u.GetKind() {
		case "ClusterRole":
			into = &role
		case "ClusterRoleBinding":
			into = &binding
		case "DeploymentRuntimeConfig":
			into = &drc
		default:
			t.Fatalf("unexpected kind %q", u.GetKind())
		}
		if err := yaml.UnmarshalStrict(d, into); err != nil {
			t.Fatalf("%s: %v", u.GetKind(), err)
		}
	}

	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	read := []string{"get", "list", "watch"}
	want := []rbacv1.PolicyRule{
		// CopyRule (no patch: copies are created, updated, deleted), ChaosAgent's ipsum and backups.
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
		// AppBundle: server-side apply (patch, and create when it creates) and delete; never update.
		{APIGroups: []string{""}, Resources: []string{"services", "persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: all},
		// ConfigRollout only applies and merge-patches workloads it does not own.
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets", "daemonsets"}, Verbs: []string{"get", "list", "watch", "patch"}},
		// ConfigRollout rolls CronJobs through their job templates; Jobs are never touched.
		{APIGroups: []string{"batch"}, Resources: []string{"cronjobs"}, Verbs: []string{"get", "list", "watch", "patch"}},
		// AppBundle gets one StorageClass by name, never lists.
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get"}},
		// Leader election reads, creates and renews its Lease; a sharded
		// replica also lists the provider's Leases and deletes its own.
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
	}
	if diff := cmp.Diff(want, role.Rules); diff != "" {
		t.Errorf("ClusterRole rules: -want, +got:\n%s", diff)
	}
	if role.AggregationRule != nil {
		t.Errorf("ClusterRole must not aggregate other roles")
	}
	for _, r := range role.Rules {
		for _, s := range slices.Concat(r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, r.NonResourceURLs) {
			if strings.Contains(s, "*") {
				t.Errorf("rule %+v has wildcard %q", r, s)
			}
		}
	}

	wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.GetName()}
	if diff := cmp.Diff(wantRef, binding.RoleRef); diff != "" {
		t.Errorf("ClusterRoleBinding roleRef: -want, +got:\n%s", diff)
	}
	sa := drc.Spec.ServiceAccountTemplate
	if sa == nil || sa.Metadata == nil || sa.Metadata.Name == nil {
		t.Fatal("DeploymentRuntimeConfig must name the provider's ServiceAccount")
	}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: *sa.Metadata.Name, Namespace: "crossplane-system"}}
	if diff := cmp.Diff(wantSubjects, binding.Subjects); diff != "" {
		t.Errorf("ClusterRoleBinding subjects: -want, +got:\n%s", diff)
	}
}

// checkIndex checks the OCI image layout build wrote: it holds one image
// index, tagged with the package's reference, whose digest build reported,
// over one image per platform, each described by the platform its config
// names. It returns the images in platform order.
func checkIndex(t *testing.T, r result, kind string) []v1.Image {
	t.Helper()
	l, err := layout.ImageIndexFromPath(r.Layout)
	if err != nil {
		t.Fatal(err)
	}
	top, err := l.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 {
		t.Fatalf("layout index.json has %d entries, want the package's index alone", len(top.Manifests))
	}
	d := top.Manifests[0]
	if !d.MediaType.IsIndex() || d.Digest != r.Digest {
		t.Errorf("layout entry: %s %s, want an image index %s", d.MediaType, d.Digest, r.Digest)
	}
	if got, want := d.Annotations[refNameAnnotation], repository(kind)+":"+testVersion; got != want {
		t.Errorf("layout entry %s: got %q, want %q", refNameAnnotation, got, want)
	}
	idx, err := l.ImageIndex(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var (
		got    []string
		images []v1.Image
	)
	for _, desc := range m.Manifests {
		if desc.Platform == nil {
			t.Fatalf("index entry %s has no platform", desc.Digest)
		}
		got = append(got, desc.Platform.String())
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if p := cfg.OS + "/" + cfg.Architecture; p != desc.Platform.String() {
			t.Errorf("index entry for %s holds an image whose config says %s", desc.Platform, p)
		}
		images = append(images, img)
	}
	want := make([]string, 0, len(wantPlatforms))
	for _, p := range wantPlatforms {
		want = append(want, p.platform)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("index platforms: -want, +got:\n%s", diff)
	}
	return images
}

// checkTarballs checks the image tarballs: each records the package's tag and
// holds the image of its platform in the index (once its layers are
// annotated, as a push does), and the index `crossplane xpkg push -f
// <amd64>,<arm64>` makes of them is the one in the layout.
func checkTarballs(t *testing.T, r result, kind string, images []v1.Image) {
	t.Helper()
	// What crank's pushImages (cmd/crank/xpkg/push.go) does with several
	// package files.
	var adds []mutate.IndexAddendum
	for i, p := range wantPlatforms {
		img := loadPackage(t, r.Tarballs[p.platform], kind)
		annotated, err := xpkg.AnnotateLayers(img)
		if err != nil {
			t.Fatal(err)
		}
		got, err := annotated.Digest()
		if err != nil {
			t.Fatal(err)
		}
		want, err := images[i].Digest()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s tarball pushes as %s, want the index's %s", p.platform, got, want)
		}
		mt, err := annotated.MediaType()
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := annotated.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: annotated, Descriptor: v1.Descriptor{
			MediaType: mt,
			Platform:  &v1.Platform{Architecture: cfg.Architecture, OS: cfg.OS, OSVersion: cfg.OSVersion},
		}})
	}
	d, err := mutate.AppendManifests(empty.Index, adds...).Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d != r.Digest {
		t.Errorf("crossplane xpkg push -f of the tarballs makes index %s, want the layout's %s", d, r.Digest)
	}
}

// checkRuntimeConfig checks the package image still runs the binary the way
// the runtime image said to, on its platform.
func checkRuntimeConfig(t *testing.T, img v1.Image, kind, arch string) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	type runtimeConfig struct {
		OS, Architecture, User string
		Entrypoint             []string
		Title, Version         string
	}
	want := runtimeConfig{
		OS: "linux", Architecture: arch, User: "65532:65532",
		Entrypoint: []string{"/usr/local/bin/" + kind},
		Title:      kinds[kind].name, Version: testVersion,
	}
	got := runtimeConfig{
		OS: cfg.OS, Architecture: cfg.Architecture, User: cfg.Config.User,
		Entrypoint: cfg.Config.Entrypoint,
		Title:      cfg.Config.Labels["org.opencontainers.image.title"],
		Version:    cfg.Config.Labels["org.opencontainers.image.version"],
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s runtime config: -want, +got:\n%s", arch, diff)
	}
}

// checkLayers checks the layer annotations, which the tarball keeps as config
// labels until xpkg.AnnotateLayers (as run by a push) restores them, and the
// entries of the runtime layer, and returns the binary in it.
func checkLayers(t *testing.T, img v1.Image, kind string, examples bool) []byte {
	t.Helper()
	annotated, err := xpkg.AnnotateLayers(img)
	if err != nil {
		t.Fatal(err)
	}
	m, err := annotated.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, 0, len(m.Layers))
	for _, l := range m.Layers {
		got = append(got, l.Annotations[xpkg.AnnotationKey])
	}
	want := []string{"", xpkg.PackageAnnotation}
	if examples {
		want = append(want, xpkg.ExamplesAnnotation)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layer %s annotations (runtime layer first): -want, +got:\n%s", xpkg.AnnotationKey, diff)
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	binaryPath := "usr/local/bin/" + kind
	entries, content := readLayer(t, layers[0], binaryPath)
	wantEntries := []entry{
		{Name: "tmp/", Type: tar.TypeDir, Mode: 0o1777},
		{Name: "usr/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/local/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/local/bin/", Type: tar.TypeDir, Mode: 0o755},
		{Name: binaryPath, Type: tar.TypeReg, Mode: 0o755},
	}
	if diff := cmp.Diff(wantEntries, entries); diff != "" {
		t.Errorf("runtime layer entries: -want, +got:\n%s", diff)
	}
	return content
}

// checkBinaryContent checks the binary in a runtime layer is an ELF executable
// for machine, byte for byte the one given to build.
func checkBinaryContent(t *testing.T, content []byte, path string, machine elf.Machine) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(content))
	if err != nil {
		t.Fatalf("runtime layer binary is not ELF: %v", err)
	}
	if f.Machine != machine {
		t.Errorf("runtime layer binary is for ELF machine %s, want %s", f.Machine, machine)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(content) != sha256.Sum256(want) {
		t.Errorf("runtime layer binary differs from %s", path)
	}
}

// checkPackage parses and lints package.yaml from the annotated package layer,
// checks it against the package root it was built from, and returns the
// package layer's digest.
func checkPackage(t *testing.T, img v1.Image, root, kind string) v1.Hash {
	t.Helper()
	annotated, err := xpkg.AnnotateLayers(img)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := xpkg.ExtractPackageYAML(annotated)
	if err != nil {
		t.Fatal(err)
	}
	pp, err := xpkgyaml.New()
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := pp.Parse(context.Background(), rc)
	if err != nil {
		t.Fatalf("parse package.yaml: %v", err)
	}
	linter := map[string]parser.Linter{
		"provider":      xpkg.NewProviderLinter(),
		"function":      xpkg.NewFunctionLinter(),
		"configuration": xpkg.NewConfigurationLinter(),
	}[kind]
	if err := linter.Lint(pkg); err != nil {
		t.Fatalf("lint package.yaml: %v", err)
	}

	checkMetaObject(t, pkg, kind)

	got := make([]string, 0, len(pkg.GetObjects()))
	for _, o := range pkg.GetObjects() {
		u := &unstructured.Unstructured{}
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, u); err != nil {
			t.Fatal(err)
		}
		if _, ok := o.(*extv1.CustomResourceDefinition); kind != "configuration" && !ok {
			t.Errorf("package object %T is not a v1 CustomResourceDefinition", o)
			continue
		}
		got = append(got, objectKey(u))
	}
	slices.Sort(got)
	want := sourceObjects(t, root)
	if kind != "function" && len(want) == 0 {
		t.Fatalf("no objects under %s", root)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects in package: -want (from %s), +got:\n%s", root, diff)
	}

	l, err := packageLayer(annotated)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// packageLayer returns the digest of the layer annotated as the package.
func packageLayer(img v1.Image) (v1.Hash, error) {
	m, err := img.Manifest()
	if err != nil {
		return v1.Hash{}, err
	}
	for _, l := range m.Layers {
		if l.Annotations[xpkg.AnnotationKey] == xpkg.PackageAnnotation {
			return l.Digest, nil
		}
	}
	return v1.Hash{}, errors.New("no package layer")
}

func checkMetaObject(t *testing.T, pkg *parser.Package, kind string) {
	t.Helper()
	metas := pkg.GetMeta()
	if len(metas) != 1 {
		t.Fatalf("package has %d meta objects, want 1", len(metas))
	}
	var (
		p          pkgmetav1.Pkg
		capability string
	)
	switch m := metas[0].(type) {
	case *pkgmetav1.Provider:
		p, capability = m, pkgmetav1.ProviderCapabilitySafeStart
	case *pkgmetav1.Function:
		// A FunctionRevision without it cannot be used by a Composition.
		p, capability = m, pkgmetav1.FunctionCapabilityComposition
	case *pkgmetav1.Configuration:
		p = m
	default:
		t.Fatalf("package meta is %T, want a Provider, Function or Configuration", metas[0])
	}
	if got := metas[0].GetObjectKind().GroupVersionKind().Kind; got != kinds[kind].metaKind {
		t.Errorf("package meta kind: got %s, want %s", got, kinds[kind].metaKind)
	}
	if p.GetName() != kinds[kind].name {
		t.Errorf("package name: got %q, want %q", p.GetName(), kinds[kind].name)
	}
	if capability != "" && !pkgmetav1.CapabilitiesContainFuzzyMatch(p.GetCapabilities(), capability) {
		t.Errorf("capabilities %v lack %q", p.GetCapabilities(), capability)
	}
	if c := p.GetCrossplaneConstraints(); c == nil || c.Version != ">=v2.0.0" {
		t.Errorf("crossplane constraints: got %+v, want version >=v2.0.0", c)
	}
	for _, a := range requiredAnnotations {
		if p.GetAnnotations()[a] == "" {
			t.Errorf("annotation %s is missing from the package", a)
		}
	}
}

// loadPackage reads the tarball the way `crossplane xpkg push -f` does and
// checks it records the expected tag.
func loadPackage(t *testing.T, path, kind string) v1.Image {
	t.Helper()
	opener := func() (io.ReadCloser, error) { return os.Open(path) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(repository(kind) + ":" + testVersion)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{tag.String()}) {
		t.Errorf("tarball manifest: got %+v, want one image tagged %s", m, tag)
	}
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// readLayer lists a layer's entries and returns the content of file.
func readLayer(t *testing.T, l v1.Layer, file string) ([]entry, []byte) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()

	var (
		entries []entry
		content []byte
	)
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries, content
		}
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, entry{Name: h.Name, Type: h.Typeflag, Mode: h.Mode})
		if h.Name == file {
			if content, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// objectKey names an object by kind and name.
func objectKey(u *unstructured.Unstructured) string { return u.GetKind() + "/" + u.GetName() }

// sourceObjects returns the objects of the YAML files under root, its
// crossplane.yaml excepted, as kind/name, sorted; a function package may have
// none.
func sourceObjects(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") && p != filepath.Join(root, metaFile) {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	objs := []string{}
	for _, f := range files {
		for _, d := range splitYAML(t, f) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(d, u); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			objs = append(objs, objectKey(u))
		}
	}
	slices.Sort(objs)
	return objs
}

func splitYAML(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs [][]byte
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !blankYAML(d) {
			docs = append(docs, d)
		}
	}
}

// blankYAML reports whether a YAML document holds only separators and comments.
func blankYAML(d []byte) bool {
	for l := range strings.SplitSeq(string(d), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && l != "---" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// repoPackageRoot returns the repository's package root if it has generated
// CRDs, otherwise a copy of its crossplane.yaml next to a fixture CRD.
func repoPackageRoot(t *testing.T) string {
	t.Helper()
	crds, err := filepath.Glob(filepath.Join(repoPackage, "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) > 0 {
		return repoPackage
	}
	t.Logf("%s/crds has no CRDs; using a fixture CRD", repoPackage)
	return fixturePackageRoot(t)
}

// fixturePackageRoot returns a package root with the repository's
// crossplane.yaml and one fixture CRD.
func fixturePackageRoot(t *testing.T) string {
	t.Helper()
	meta, err := os.ReadFile(filepath.Join(repoPackage, metaFile))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	writeFile(t, filepath.Join(root, metaFile), string(meta))
	writeFile(t, filepath.Join(root, "crds", "test.clusterops.io_fixtures.yaml"), fixtureCRD)
	return root
}

// staticBinaries builds a trivial static binary for each platform to stand in
// for the provider, by architecture.
func staticBinaries(t *testing.T) map[string]string {
	t.Helper()
	return map[string]string{"amd64": crossBinary(t, "amd64"), "arm64": crossBinary(t, "arm64")}
}

// crossBinary builds a trivial static linux binary for GOARCH arch.
func crossBinary(t *testing.T, arch string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to build a stand-in provider binary: %v", err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "go.mod"), "module stub\n\ngo 1.25\n")
	writeFile(t, filepath.Join(dir, "main.go"), "package main\n\nfunc main() {}\n")

	out := filepath.Join(dir, "provider-"+arch)
	cmd := exec.Command(gobin, "build", "-trimpath", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build for %s: %v\n%s", arch, err, b)
	}
	return out
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
