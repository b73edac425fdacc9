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
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pkgmetav1 "github.com/crossplane/crossplane/apis/v2/pkg/meta/v1"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	rbacv1 "k8s.io/api/rbac/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser"
	xpkgyaml "github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser/yaml"
)

const (
	repoPackage         = "../../package"
	repoFunctionPackage = "../../package/function"
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

func TestBuild(t *testing.T) {
	bin := staticBinary(t)

	cases := map[string]struct {
		reason   string
		kind     string
		root     func(t *testing.T) string
		examples bool
	}{
		"RepositoryPackage": {
			reason: "The repository's package root (or its crossplane.yaml with a fixture CRD while package/crds is empty) should build into a valid provider package, without the function package nested in it.",
			kind:   "provider",
			root:   repoPackageRoot,
		},
		"WithExamples": {
			reason:   "Examples should go into their own annotated layer and not into the package.",
			kind:     "provider",
			root:     fixturePackageRoot,
			examples: true,
		},
		"NestedPackage": {
			reason: "A directory under the package root with its own crossplane.yaml is another package and stays out.",
			kind:   "provider",
			root: func(t *testing.T) string {
				t.Helper()
				root := fixturePackageRoot(t)
				meta, err := os.ReadFile(filepath.Join(repoFunctionPackage, metaFile))
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(root, "function", metaFile), string(meta))
				return root
			},
		},
		"FunctionPackage": {
			reason: "The repository's function package root should build into a valid function package.",
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
				Binary:      bin,
				Version:     testVersion,
				Output:      filepath.Join(dir, "out", tc.kind+".xpkg"),
				Repository:  repository(tc.kind),
			}
			if tc.examples {
				o.ExamplesRoot = filepath.Join(dir, "examples")
				writeFile(t, filepath.Join(o.ExamplesRoot, "immortalcontainer.yaml"), fixtureExample)
			}

			digest, err := build(context.Background(), o)
			if err != nil {
				t.Fatalf("\n%s\nbuild(...): %v", tc.reason, err)
			}

			img := loadPackage(t, o.Output, tc.kind)
			if got, err := img.Digest(); err != nil || got != digest {
				t.Errorf("\n%s\nloaded package digest: got %s (%v), want %s", tc.reason, got, err, digest)
			}

			checkRuntimeConfig(t, img, tc.kind)
			checkLayers(t, img, bin, tc.kind, tc.examples)
			checkPackage(t, img, root, tc.kind)
		})
	}
}

func TestBuildReproducible(t *testing.T) {
	bin := staticBinary(t)
	root := fixturePackageRoot(t)
	dir := t.TempDir()

	digests := make([]v1.Hash, 2)
	for i := range digests {
		d, err := build(context.Background(), options{
			Kind:        "provider",
			PackageRoot: root,
			Binary:      bin,
			Version:     testVersion,
			Output:      filepath.Join(dir, "provider.xpkg"),
			Repository:  repository("provider"),
		})
		if err != nil {
			t.Fatalf("build(...): %v", err)
		}
		digests[i] = d
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds of the same inputs: got digests %s and %s, want equal", digests[0], digests[1])
	}
}

func TestBuildErrors(t *testing.T) {
	bin := staticBinary(t)
	placeholder := filepath.Join(t.TempDir(), "provider")
	writeFile(t, placeholder, "#!/bin/sh\n")

	meta, err := os.ReadFile(filepath.Join(repoPackage, metaFile))
	if err != nil {
		t.Fatal(err)
	}

	functionMeta, err := os.ReadFile(filepath.Join(repoFunctionPackage, metaFile))
	if err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		reason  string
		kind    string
		binary  string
		version string
		files   map[string]string
		want    string
	}{
		"ProviderMetaAsFunction": {
			reason: "The builder lints by the metadata's kind: a provider's crossplane.yaml must not become a function package.",
			kind:   "function",
			binary: bin,
			files:  map[string]string{metaFile: string(meta)},
			want:   "is a meta.pkg.crossplane.io/v1 Provider, want a meta.pkg.crossplane.io/v1 Function for a function-clusterops package",
		},
		"FunctionMetaAsProvider": {
			reason: "Nor the other way round.",
			kind:   "provider",
			binary: bin,
			files:  map[string]string{metaFile: string(functionMeta), "crds/fixture.yaml": fixtureCRD},
			want:   "is a meta.pkg.crossplane.io/v1 Function, want a meta.pkg.crossplane.io/v1 Provider for a provider-clusterops package",
		},
		"FunctionUnknownField": {
			reason: "Function metadata is decoded strictly too.",
			kind:   "function",
			binary: bin,
			files:  map[string]string{metaFile: string(functionMeta) + "  permissionRequests: []\n"},
			want:   `unknown field "permissionRequests"`,
		},
		"FunctionWithProviderObject": {
			reason: "The function linter must reject objects a function package may not carry.",
			kind:   "function",
			binary: bin,
			files: map[string]string{
				metaFile:     string(functionMeta),
				"extra.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nope\n",
			},
			want: "cannot build package",
		},
		"NotELF": {
			reason: "A placeholder or non-Linux binary cannot run in the runtime image.",
			binary: placeholder,
			files:  map[string]string{metaFile: string(meta), "crds/fixture.yaml": fixtureCRD},
			want:   "as an ELF executable",
		},
		"MissingMeta": {
			reason: "A package root without crossplane.yaml is not a package.",
			binary: bin,
			files:  map[string]string{"crds/fixture.yaml": fixtureCRD},
			want:   "cannot read package metadata",
		},
		"PermissionRequests": {
			reason: "Crossplane v2 ignores spec.controller.permissionRequests; the build must refuse it rather than drop it silently.",
			binary: bin,
			files: map[string]string{
				metaFile:            string(meta) + "  controller:\n    permissionRequests:\n    - apiGroups: ['*']\n      resources: ['*']\n      verbs: ['*']\n",
				"crds/fixture.yaml": fixtureCRD,
			},
			want: `unknown field "controller"`,
		},
		"SpecPermissionRequests": {
			reason: "Package metadata has no spec.permissionRequests either.",
			binary: bin,
			files: map[string]string{
				metaFile:            string(meta) + "  permissionRequests:\n  - apiGroups: ['']\n    resources: [pods]\n    verbs: [get]\n",
				"crds/fixture.yaml": fixtureCRD,
			},
			want: `unknown field "permissionRequests"`,
		},
		"NotAProviderObject": {
			reason: "The provider linter must reject objects a provider package may not carry.",
			binary: bin,
			files: map[string]string{
				metaFile:            string(meta),
				"crds/fixture.yaml": fixtureCRD,
				"extra.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nope\n",
			},
			want: "cannot build package",
		},
		"InvalidTag": {
			reason:  "The version must be usable as an image tag.",
			binary:  bin,
			version: "v1.0.0+dirty",
			files:   map[string]string{metaFile: string(meta), "crds/fixture.yaml": fixtureCRD},
			want:    "cannot make an image tag",
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
			out := filepath.Join(t.TempDir(), kind+".xpkg")

			_, err := build(context.Background(), options{
				Kind:        kind,
				PackageRoot: root,
				Binary:      tc.binary,
				Version:     version,
				Output:      out,
				Repository:  repository(kind),
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("\n%s\nbuild(...): got error %v, want one containing %q", tc.reason, err, tc.want)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("\n%s\nfailed build left output behind: %v", tc.reason, err)
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	cases := map[string]struct {
		args    []string
		want    options
		wantErr string
	}{
		"Defaults": {
			args: []string{"--binary=bin/provider", "--version=v0.1.0"},
			want: options{
				Kind:        "provider",
				PackageRoot: "package",
				Binary:      "bin/provider",
				Version:     "v0.1.0",
				Output:      filepath.Join("_output", "xpkg", "provider-clusterops-v0.1.0.xpkg"),
				Repository:  "xpkg.crossplane.io/clusterops/provider-clusterops",
			},
		},
		"FunctionDefaults": {
			args: []string{"--kind=function", "--binary=bin/linux_amd64/function", "--version=v0.1.0"},
			want: options{
				Kind:        "function",
				PackageRoot: filepath.Join("package", "function"),
				Binary:      "bin/linux_amd64/function",
				Version:     "v0.1.0",
				Output:      filepath.Join("_output", "xpkg", "function-clusterops-v0.1.0.xpkg"),
				Repository:  "xpkg.crossplane.io/clusterops/function-clusterops",
			},
		},
		"AllFlags": {
			args: []string{
				"--kind=function", "--package-root=p", "--examples-root=e", "--binary=b", "--version=v1",
				"--output=o.xpkg", "--repository=example.org/p",
			},
			want: options{Kind: "function", PackageRoot: "p", ExamplesRoot: "e", Binary: "b", Version: "v1", Output: "o.xpkg", Repository: "example.org/p"},
		},
		"UnknownKind": {
			args:    []string{"--kind=configuration", "--binary=b", "--version=v1"},
			wantErr: `--kind must be provider or function, not "configuration"`,
		},
		"MissingBinary": {
			args:    []string{"--version=v0.1.0"},
			wantErr: "--binary and --version are required",
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
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
		// AppBundle: server-side apply (patch, and create when it creates) and delete; never update.
		{APIGroups: []string{""}, Resources: []string{"services", "persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: all},
		// ConfigRollout only applies and merge-patches workloads it does not own.
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets", "daemonsets"}, Verbs: []string{"get", "list", "watch", "patch"}},
		// AppBundle gets one StorageClass by name, never lists.
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get"}},
		// Leader election reads, creates and renews its Lease.
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
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

// checkRuntimeConfig checks the package image still runs the binary the way
// the runtime image said to.
func checkRuntimeConfig(t *testing.T, img v1.Image, kind string) {
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
		OS: "linux", Architecture: "amd64", User: "65532:65532",
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
		t.Errorf("runtime config: -want, +got:\n%s", diff)
	}
}

// checkLayers checks the layer annotations, which the tarball keeps as config
// labels until xpkg.AnnotateLayers (as run by a push) restores them, and the
// contents of the runtime layer.
func checkLayers(t *testing.T, img v1.Image, bin, kind string, examples bool) {
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
	wantContent, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(content) != sha256.Sum256(wantContent) {
		t.Errorf("runtime layer %s differs from the binary", binaryPath)
	}
}

// checkPackage parses and lints package.yaml from the annotated package layer
// and checks it against the package root it was built from.
func checkPackage(t *testing.T, img v1.Image, root, kind string) {
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
	linter := xpkg.NewProviderLinter()
	if kind == "function" {
		linter = xpkg.NewFunctionLinter()
	}
	if err := linter.Lint(pkg); err != nil {
		t.Fatalf("lint package.yaml: %v", err)
	}

	checkMetaObject(t, pkg, kind)

	got := make([]string, 0, len(pkg.GetObjects()))
	for _, o := range pkg.GetObjects() {
		crd, ok := o.(*extv1.CustomResourceDefinition)
		if !ok {
			t.Errorf("package object %T is not a v1 CustomResourceDefinition", o)
			continue
		}
		got = append(got, crd.GetName())
	}
	slices.Sort(got)
	want := sourceCRDNames(t, root)
	if kind == "provider" && len(want) == 0 {
		t.Fatalf("no CRDs under %s", root)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CRDs in package: -want (from %s), +got:\n%s", root, diff)
	}
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
	default:
		t.Fatalf("package meta is %T, want a Provider or Function", metas[0])
	}
	if got := metas[0].GetObjectKind().GroupVersionKind().Kind; got != kinds[kind].metaKind {
		t.Errorf("package meta kind: got %s, want %s", got, kinds[kind].metaKind)
	}
	if p.GetName() != kinds[kind].name {
		t.Errorf("package name: got %q, want %q", p.GetName(), kinds[kind].name)
	}
	if !pkgmetav1.CapabilitiesContainFuzzyMatch(p.GetCapabilities(), capability) {
		t.Errorf("capabilities %v lack %q", p.GetCapabilities(), capability)
	}
	if c := p.GetCrossplaneConstraints(); c == nil || c.Version != ">=v2.0.0" {
		t.Errorf("crossplane constraints: got %+v, want version >=v2.0.0", c)
	}
	for _, a := range []string{"maintainer", "source", "description", "readme"} {
		if p.GetAnnotations()["meta.crossplane.io/"+a] == "" {
			t.Errorf("annotation meta.crossplane.io/%s is missing", a)
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

// sourceCRDNames returns the names of the CRDs under root/crds, sorted; a
// function package may have none.
func sourceCRDNames(t *testing.T, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, f := range files {
		for _, d := range splitYAML(t, f) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(d, u); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if u.GetKind() == "CustomResourceDefinition" {
				names = append(names, u.GetName())
			}
		}
	}
	slices.Sort(names)
	return names
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

// staticBinary builds a trivial static linux/amd64 binary to stand in for the
// provider.
func staticBinary(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to build a stand-in provider binary: %v", err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "go.mod"), "module stub\n\ngo 1.25\n")
	writeFile(t, filepath.Join(dir, "main.go"), "package main\n\nfunc main() {}\n")

	out := filepath.Join(dir, "provider")
	cmd := exec.Command(gobin, "build", "-trimpath", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
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
