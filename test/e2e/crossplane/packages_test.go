//go:build e2e

package crossplane

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// A pkg is a Crossplane package the suite built, as hack/xpkg (make xpkg) builds it, and pushes.
type pkg struct {
	// source is what Crossplane and the configuration's dependencies name the package by:
	// xpkg.crossplane.io/clusterops/<package>:<version>, which an ImageConfig rewrites to image.
	source string
	// image is where the suite pushes it: <registry>/clusterops/<package>:<version>.
	image string
	// binary is the linux/amd64 binary that the External runtime (the suite) runs for a
	// provider or function; empty for the configuration.
	binary string
	// layout is the OCI image layout hack/xpkg wrote, holding the image index of a provider or
	// function (linux/amd64 and linux/arm64), the image of the configuration.
	layout string
	// platforms are the digests of the images in the index, by platform (linux/amd64).
	platforms map[string]v1.Hash
}

// Versions of the packages: the suite installs the first of each and upgrades the provider to
// the second, which it pushes (releases) only then, as the configuration's dependency would
// otherwise resolve to it.
const (
	providerV1      = "v0.1.0"
	providerV2      = "v0.2.0"
	functionV1      = "v0.1.0"
	configurationV1 = "v0.1.0"
)

// canonicalPrefix is where the packages say they live (hack/xpkg's default repositories and the
// configuration's dependsOn); an ImageConfig points it at the suite's registry.
const canonicalPrefix = "xpkg.crossplane.io/clusterops/"

// A registryLog records the manifests the registry served: what Crossplane pulled.
type registryLog struct {
	mu        sync.Mutex
	manifests []string // Method and path, e.g. "GET /v2/clusterops/function-clusterops/manifests/sha256:...".
}

func (l *registryLog) served(method, path string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.manifests {
		if m == method+" "+path {
			return true
		}
	}
	return false
}

// serveRegistry serves an in-memory OCI registry on loopback, recording the manifests it serves.
// Crossplane pulls from it over plain HTTP because the host is a loopback address; the host has
// no dot, which is why it is an IP and not "localhost".
func serveRegistry(rl *registryLog) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	quiet := log.New(io.Discard, "", 0)
	reg := registry.New(registry.Logger(quiet))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/manifests/") {
			rl.mu.Lock()
			rl.manifests = append(rl.manifests, r.Method+" "+r.URL.Path)
			rl.mu.Unlock()
		}
		reg.ServeHTTP(w, r)
	})
	go func() { _ = http.Serve(l, h) }()
	return l.Addr().String(), nil
}

// buildPackages builds, with hack/xpkg as `make xpkg` does, the provider (two versions) and the
// function for linux/amd64 and linux/arm64, and the configuration, and pushes all but the
// provider's second version to the registry at host.
func buildPackages(root, out, host string) (map[string]pkg, error) {
	xpkgTool := filepath.Join(out, "xpkg")
	if err := run(root, "go", "build", "-o", xpkgTool, "./hack/xpkg"); err != nil {
		return nil, err
	}
	type want struct {
		key, kind, cmd, pkgRoot, examples, name, version string
	}
	wants := []want{
		{"provider-" + providerV1, "provider", "./cmd/provider", "package", "examples", "provider-clusterops", providerV1},
		{"provider-" + providerV2, "provider", "./cmd/provider", "package", "examples", "provider-clusterops", providerV2},
		{"function-" + functionV1, "function", "./cmd/function", "package-function", "examples/platform", "function-clusterops", functionV1},
		{"configuration-" + configurationV1, "configuration", "", "package-configuration", "examples/platform", "configuration-clusterops-platform", configurationV1},
	}
	pkgs := map[string]pkg{}
	for _, w := range wants {
		dir := filepath.Join(out, w.key)
		p := pkg{
			source: canonicalPrefix + w.name + ":" + w.version,
			image:  host + "/clusterops/" + w.name + ":" + w.version,
			layout: filepath.Join(dir, w.name+"-"+w.version),
		}
		args := []string{"--kind=" + w.kind, "--package-root=" + w.pkgRoot, "--examples-root=" + w.examples,
			"--version=" + w.version, "--output-dir=" + dir}
		if w.cmd != "" {
			ldflags := "-s -w -X github.com/clusterops/provider-clusterops/internal/version.Version=" + w.version
			for _, arch := range []string{"amd64", "arm64"} {
				bin := filepath.Join(dir, "linux_"+arch, w.kind)
				if err := runEnv(root, []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + arch}, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, w.cmd); err != nil {
					return nil, err
				}
				args = append(args, "--binary="+bin)
				if arch == "amd64" {
					p.binary = bin
				}
			}
		}
		if err := run(root, xpkgTool, args...); err != nil {
			return nil, err
		}
		if w.key != "provider-"+providerV2 {
			if err := push(&p); err != nil {
				return nil, err
			}
		}
		pkgs[w.key] = p
	}
	return pkgs, nil
}

// push pushes the package in p's layout to p.image, as `crane push <layout> <image>` would: the
// image index of a provider or function (each platform's image by digest, then the index under
// the tag), the image of a configuration. It records the digests of the index's images.
func push(p *pkg) error {
	l, err := layout.ImageIndexFromPath(p.layout)
	if err != nil {
		return fmt.Errorf("cannot read package layout %s: %w", p.layout, err)
	}
	m, err := l.IndexManifest()
	if err != nil {
		return err
	}
	if len(m.Manifests) != 1 {
		return fmt.Errorf("package layout %s holds %d packages, want 1", p.layout, len(m.Manifests))
	}
	ref, err := name.ParseReference(p.image)
	if err != nil {
		return err
	}
	d := m.Manifests[0]
	switch {
	case d.MediaType.IsIndex():
		idx, err := l.ImageIndex(d.Digest)
		if err != nil {
			return err
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return err
		}
		p.platforms = map[string]v1.Hash{}
		for _, c := range im.Manifests {
			if c.Platform != nil {
				p.platforms[c.Platform.String()] = c.Digest
			}
		}
		err = remote.WriteIndex(ref, idx)
		if err != nil {
			return fmt.Errorf("cannot push %s: %w", p.image, err)
		}
	case d.MediaType.IsImage():
		img, err := l.Image(d.Digest)
		if err != nil {
			return err
		}
		if err := remote.Write(ref, img); err != nil {
			return fmt.Errorf("cannot push %s: %w", p.image, err)
		}
	default:
		return fmt.Errorf("package layout %s holds a %s", p.layout, d.MediaType)
	}
	return nil
}

func run(dir, bin string, args ...string) error { return runEnv(dir, nil, bin, args...) }

func runEnv(dir string, env []string, bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %w\n%s", bin, args, err, b)
	}
	return nil
}
