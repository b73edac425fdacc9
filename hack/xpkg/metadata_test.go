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
	"encoding/base64"
	"encoding/xml"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	pkgmetav1 "github.com/crossplane/crossplane/apis/v2/pkg/meta/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg"
)

// Package annotations: those of Crossplane's xpkg specification
// (contributing/specifications/xpkg.md) and of its package annotations design
// (design/one-pager-package-annotations.md), which registries and
// marketplaces show.
const (
	annotationMaintainer  = "meta.crossplane.io/maintainer"
	annotationSource      = "meta.crossplane.io/source"
	annotationLicense     = "meta.crossplane.io/license"
	annotationDescription = "meta.crossplane.io/description"
	annotationReadme      = "meta.crossplane.io/readme"
	annotationIcon        = "meta.crossplane.io/iconURI"
	annotationName        = "friendly-name.meta.crossplane.io"
	prefixGroupName       = "friendly-group-name.meta.crossplane.io/"
	prefixKindName        = "friendly-kind-name.meta.crossplane.io/"
)

// requiredAnnotations are the annotations every package carries.
var requiredAnnotations = []string{ // Test table.
	annotationMaintainer, annotationSource, annotationLicense, annotationDescription,
	annotationReadme, annotationIcon, annotationName,
}

// maintainerContact is "Name <contact>", the form of the specification's example.
var maintainerContact = regexp.MustCompile(`^[^<>]+ <[^<>\s]+>$`)

// TestEveryPackageCarriesWhatARegistryShows lints the crossplane.yaml of every package of the
// repository for what a registry or marketplace shows: a maintainer with a
// contact, the source as a URL, an SPDX license, a description and a readme,
// an SVG icon, a friendly name, and a friendly name for every API group and
// kind the package defines (and for none it does not).
func TestEveryPackageCarriesWhatARegistryShows(t *testing.T) {
	for kind, k := range kinds {
		t.Run(kind, func(t *testing.T) {
			root := filepath.Join("..", "..", k.packageRoot)
			b, err := os.ReadFile(filepath.Join(root, metaFile))
			if err != nil {
				t.Fatal(err)
			}
			meta := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(b, meta); err != nil {
				t.Fatal(err)
			}
			a := meta.GetAnnotations()
			for _, key := range requiredAnnotations {
				if strings.TrimSpace(a[key]) == "" {
					t.Errorf("annotation %s is missing or empty", key)
				}
			}
			if m := a[annotationMaintainer]; !maintainerContact.MatchString(m) {
				t.Errorf("%s %q: want a name and a contact, as in Name <contact>", annotationMaintainer, m)
			}
			if u, err := url.Parse(a[annotationSource]); err != nil || u.Scheme != "https" || u.Host == "" {
				t.Errorf("%s %q: want the https URL of the source", annotationSource, a[annotationSource])
			}
			// The license of the source files (hack/boilerplate.go.txt).
			if l := a[annotationLicense]; l != "Apache-2.0" {
				t.Errorf("%s %q: want the SPDX identifier Apache-2.0", annotationLicense, l)
			}
			checkIcon(t, a[annotationIcon])

			want := friendlyNames(t, root)
			got := []string{}
			for key := range a {
				if strings.HasPrefix(key, prefixGroupName) || strings.HasPrefix(key, prefixKindName) {
					got = append(got, key)
					if strings.TrimSpace(a[key]) == "" {
						t.Errorf("annotation %s is empty", key)
					}
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("friendly group and kind names: -want (one for each API group and kind %s defines), +got:\n%s", k.packageRoot, diff)
			}
		})
	}
}

// checkIcon checks an icon URI is an SVG image in a data URI.
func checkIcon(t *testing.T, uri string) {
	t.Helper()
	data, ok := strings.CutPrefix(uri, "data:image/svg+xml;base64,")
	if !ok {
		t.Errorf("%s %.40q...: want an SVG data URI (data:image/svg+xml;base64,...)", annotationIcon, uri)
		return
	}
	svg, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		t.Errorf("%s: %v", annotationIcon, err)
		return
	}
	root := struct {
		XMLName xml.Name
		ViewBox string `xml:"viewBox,attr"`
	}{}
	if err := xml.Unmarshal(svg, &root); err != nil {
		t.Errorf("%s is not XML: %v", annotationIcon, err)
		return
	}
	if root.XMLName.Space != "http://www.w3.org/2000/svg" || root.XMLName.Local != "svg" || root.ViewBox == "" {
		t.Errorf("%s: root element %v viewBox %q, want an SVG with a viewBox, to scale", annotationIcon, root.XMLName, root.ViewBox)
	}
}

// friendlyNames returns the friendly group and kind name annotations a
// package root needs, sorted: one per API group and one per kind (singular,
// lower case, with its group) of its CRDs, and of its XRDs' composite
// resources and claims.
func friendlyNames(t *testing.T, root string) []string {
	t.Helper()
	set := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		for _, doc := range splitYAML(t, p) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, u); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if u.GetKind() != "CustomResourceDefinition" && u.GetKind() != "CompositeResourceDefinition" {
				continue
			}
			group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
			set[prefixGroupName+group] = true
			for _, names := range []string{"names", "claimNames"} {
				if k, _, _ := unstructured.NestedString(u.Object, "spec", names, "kind"); k != "" {
					set[prefixKindName+strings.ToLower(k)+"."+group] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestConfigurationDependsOnWhatTheE2EInstalls checks what the configuration asks of
// Crossplane's package manager: the provider and the function, from the
// repositories their packages are built for, at versions that include those
// the Crossplane e2e installs and upgrades to; and Compositions that name the
// function by the name the package manager gives the Function it installs as
// a dependency (its repository as a DNS label).
func TestConfigurationDependsOnWhatTheE2EInstalls(t *testing.T) {
	root := filepath.Join("..", "..", kinds["configuration"].packageRoot)
	b, err := os.ReadFile(filepath.Join(root, metaFile))
	if err != nil {
		t.Fatal(err)
	}
	c := &pkgmetav1.Configuration{}
	if err := yaml.UnmarshalStrict(b, c); err != nil {
		t.Fatal(err)
	}

	type dep struct{ APIVersion, Kind, Package string }
	want := []dep{
		{"pkg.crossplane.io/v1", "Provider", repository("provider")},
		{"pkg.crossplane.io/v1", "Function", repository("function")},
	}
	var got []dep
	for _, d := range c.Spec.DependsOn {
		got = append(got, dep{ptr.Deref(d.APIVersion, ""), ptr.Deref(d.Kind, ""), ptr.Deref(d.Package, "")})
		con, err := semver.NewConstraint(d.Version)
		if err != nil {
			t.Errorf("dependency %s: version %q: %v", ptr.Deref(d.Package, ""), d.Version, err)
			continue
		}
		for _, v := range []string{"v0.1.0", "v0.2.0"} {
			if !con.Check(semver.MustParse(v)) {
				t.Errorf("dependency %s: version constraint %q refuses %s", ptr.Deref(d.Package, ""), d.Version, v)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dependsOn: -want, +got:\n%s", diff)
	}

	ref, err := name.ParseReference(repository("function"))
	if err != nil {
		t.Fatal(err)
	}
	function := xpkg.ToDNSLabel(ref.Context().RepositoryStr())
	compositions := 0
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		for _, doc := range splitYAML(t, p) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, u); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if u.GetKind() != "Composition" {
				continue
			}
			compositions++
			steps, _, _ := unstructured.NestedSlice(u.Object, "spec", "pipeline")
			for _, st := range steps {
				fn, _, _ := unstructured.NestedString(st.(map[string]any), "functionRef", "name")
				if fn != function {
					t.Errorf("%s: Composition %s step names function %q, want %q, the Function the package manager installs", p, u.GetName(), fn, function)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if compositions != 4 {
		t.Errorf("%d Compositions under %s, want the 4 of examples/platform (Tenant and WebApp, legacy and namespaced)", compositions, root)
	}
	// The Function installed by hand (examples/platform/function.yaml) has
	// the same name, so the Compositions work either way.
	fb, err := os.ReadFile(filepath.Join("..", "..", "examples", "platform", "function.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(fb, f); err != nil {
		t.Fatal(err)
	}
	if f.GetName() != function {
		t.Errorf("examples/platform/function.yaml names the Function %q, want %q", f.GetName(), function)
	}
}
