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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// These tests run the Crossplane CLI as users run it (`crossplane xpkg build`,
// `crossplane beta validate`): crank, which cluster/local/build-tools.sh
// builds from source into the tools cache (`make tools` and `make test` build
// it).

// crank returns the crank binary in the tools cache. Without it the test
// fails, saying how to build it: make test and make test-unit build it first,
// as they build the API server the other tests need, so a missing binary is a
// broken build, never a reason to pass.
func crank(t *testing.T) string {
	t.Helper()
	script := filepath.Join(testenv.RepoRoot(), "cluster", "local", "build-tools.sh")
	out, err := exec.Command(script, "crank-dir").Output()
	if err != nil {
		t.Fatalf("cannot locate the crank build: %s crank-dir: %v", script, err)
	}
	dir := strings.TrimSpace(string(out))
	bin := filepath.Join(dir, "crank")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	msg := fmt.Sprintf("the Crossplane CLI (crank) is not in the tools cache: no %s; build it with cluster/local/build-tools.sh crank (make tools and make test do)", bin)
	if _, err := os.Stat(dir + ".tmp"); err == nil {
		msg += fmt.Sprintf(". Its last build failed: %s.tmp is what it left behind", dir)
	}
	t.Fatal(msg)
	return ""
}

// runCrank runs crank in the repository root and returns its combined output.
func runCrank(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(crank(t), args...)
	cmd.Dir = testenv.RepoRoot()
	// No registry is ever needed: keep the CLI away from the user's docker config.
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+t.TempDir())
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// TestCrankBuildsEachPackage runs `crossplane xpkg build` on each package
// directory with nothing but the directory and an output file: each holds one
// package and builds, and the package holds the directory's metadata and
// objects, lints as its kind, and carries the examples.
func TestCrankBuildsEachPackage(t *testing.T) {
	for _, kind := range []string{"provider", "function", "configuration"} {
		t.Run(kind, func(t *testing.T) {
			dir := kinds[kind].packageRoot
			out := filepath.Join(t.TempDir(), kind+".xpkg")
			if b, err := runCrank(t, "xpkg", "build", "--package-root="+dir, "--package-file="+out); err != nil {
				t.Fatalf("crossplane xpkg build --package-root=%s: %v\n%s", dir, err, b)
			}
			img, err := tarball.ImageFromPath(out, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkPackage(t, img, filepath.Join(testenv.RepoRoot(), dir), kind)
		})
	}
}

// Lines of `crossplane beta validate`'s report.
var (
	validated     = regexp.MustCompile(`^\[✓\] (.*), Kind=(\S+), (\S+) validated successfully$`)
	missingSchema = regexp.MustCompile(`^\[!\] could not find CRD/XRD for: (.*), Kind=(\S+)$`)
	failed        = regexp.MustCompile(`^\[x\] `)
)

// TestCrankValidatesExamples runs `crossplane beta validate` of every file
// under examples/ against the provider's CRDs, the platform APIs' XRDs (from
// the configuration's package directory) and Crossplane core's CRDs: every
// object of a Crossplane or provider kind is validated and valid; the only
// schemas missing are Kubernetes' built-in kinds. An invalid managed resource
// fails it, so a pass means something.
func TestCrankValidatesExamples(t *testing.T) {
	cache := newValidateCache(t)
	root := testenv.RepoRoot()
	extensions := strings.Join([]string{
		"package/crds",
		filepath.Join(kinds["configuration"].packageRoot, "legacy"),
		filepath.Join(kinds["configuration"].packageRoot, "namespaced"),
	}, ",")
	validate := func(resources string) (string, error) {
		return runCrank(t, "beta", "validate", extensions, resources, "--cache-dir="+cache.dir, "--crossplane-image="+cache.image)
	}

	t.Run("Examples", func(t *testing.T) {
		out, err := validate("examples")
		if err != nil {
			t.Fatalf("crossplane beta validate ... examples: %v\n%s", err, out)
		}
		got := map[string]bool{}
		s := bufio.NewScanner(strings.NewReader(out))
		for s.Scan() {
			l := s.Text()
			if m := validated.FindStringSubmatch(l); m != nil {
				got[m[1]+" "+m[2]+" "+m[3]] = true
			}
			if m := missingSchema.FindStringSubmatch(l); m != nil && !unvalidated(m[1]) {
				t.Errorf("no schema for %s %s: every kind of the provider, the platform APIs and Crossplane must be validated", m[1], m[2])
			}
			if failed.MatchString(l) {
				t.Errorf("invalid example: %s", l)
			}
		}
		want := exampleObjects(t, filepath.Join(root, "examples"))
		if len(want) == 0 {
			t.Fatal("no objects of Crossplane or provider kinds under examples/")
		}
		for _, o := range want {
			if !got[o] {
				t.Errorf("%s was not validated", o)
			}
		}
		if t.Failed() {
			t.Logf("crossplane beta validate output:\n%s", out)
		}
	})

	t.Run("InvalidExampleFails", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(root, "examples", "workload", "example-immortalcontainer.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		bad := bytes.Replace(b, []byte("image: nginx:latest"), []byte("image: 42"), 1)
		if bytes.Equal(bad, b) {
			t.Fatal("examples/workload/example-immortalcontainer.yaml no longer sets image: nginx:latest; update this test")
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), bad, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := validate(dir)
		if err == nil || !strings.Contains(out, "spec.forProvider.image") {
			t.Errorf("crossplane beta validate of an ImmortalContainer whose image is a number: got error %v, want a failure naming spec.forProvider.image\n%s", err, out)
		}
	})
}

// A validateCache is a `crossplane beta validate` cache directory seeded with
// Crossplane core's CRDs under the name of the core image they come from: the
// CLI would download that image, and the tests have no registry.
type validateCache struct{ dir, image string }

func newValidateCache(t *testing.T) validateCache {
	t.Helper()
	crds, err := testenv.CrossplaneCRDs()
	if err != nil {
		t.Fatal(err)
	}
	c := validateCache{dir: t.TempDir(), image: "xpkg.crossplane.io/crossplane/crossplane:" + crossplaneVersion(t)}
	// The CLI's cache layout: the image reference with ':' as '@'.
	dst := filepath.Join(c.dir, strings.ReplaceAll(c.image, ":", "@"))
	if err := os.MkdirAll(dst, 0o750); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(crds, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Crossplane CRDs in %s: %v", crds, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// crossplaneVersion is the version of Crossplane core in cluster/local/versions.env.
func crossplaneVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "cluster", "local", "versions.env"))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "CROSSPLANE_VERSION="); ok {
			return v
		}
	}
	t.Fatal("no CROSSPLANE_VERSION in cluster/local/versions.env")
	return ""
}

// builtIn reports whether a group/version is one of Kubernetes' built-in APIs,
// whose schemas `crossplane beta validate` does not have.
func builtIn(groupVersion string) bool {
	group, _, found := strings.Cut(groupVersion, "/")
	if !found || group == "" {
		return true // The core group: "/v1" or "v1".
	}
	return !strings.Contains(group, ".") || strings.HasSuffix(group, ".k8s.io")
}

// unvalidated reports whether crossplane beta validate has no schema of
// groupVersion here: Kubernetes' built-in kinds, and the Prometheus Operator's
// of examples/monitoring, whose CRDs are not in this repository
// (hack/monitoring generates those files from the operator's Go types).
func unvalidated(groupVersion string) bool {
	return builtIn(groupVersion) || strings.HasPrefix(groupVersion, "monitoring.coreos.com/")
}

// exampleObjects returns the objects under dir of Crossplane's and the
// provider's kinds, as `crossplane beta validate` reports them: group/version,
// kind and name.
func exampleObjects(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		for _, doc := range splitYAML(t, p) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, u); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if unvalidated(u.GetAPIVersion()) {
				continue
			}
			out = append(out, u.GetAPIVersion()+" "+u.GetKind()+" "+u.GetName())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
