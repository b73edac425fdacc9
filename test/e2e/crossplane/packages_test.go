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

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// A pkg is a Crossplane package the suite built and pushed, with the binary that the External
// runtime (the suite) runs for it.
type pkg struct {
	image  string // As Crossplane resolves it: <registry>/<repository>:<version>.
	binary string
}

// Versions of the provider package: the suite installs the first and upgrades to the second.
const (
	providerV1 = "v0.1.0"
	providerV2 = "v0.2.0"
	functionV1 = "v0.1.0"
)

// serveRegistry serves an in-memory OCI registry on loopback. Crossplane pulls from it over
// plain HTTP because the host is a loopback address; the host has no dot, which is why it is an
// IP and not "localhost".
func serveRegistry() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	quiet := log.New(io.Discard, "", 0)
	go func() { _ = http.Serve(l, registry.New(registry.Logger(quiet))) }() //nolint:gosec // Loopback test registry.
	return l.Addr().String(), nil
}

// buildPackages builds the provider (two versions) and function binaries and packages, and
// pushes the packages to the registry at host.
func buildPackages(root, out, host string) (map[string]pkg, error) {
	xpkgTool := filepath.Join(out, "xpkg")
	if err := run(root, "go", "build", "-o", xpkgTool, "./hack/xpkg"); err != nil {
		return nil, err
	}
	type want struct {
		key, kind, cmd, pkgRoot, repo, version string
	}
	wants := []want{
		{"provider-" + providerV1, "provider", "./cmd/provider", "package", "clusterops/provider-clusterops", providerV1},
		{"provider-" + providerV2, "provider", "./cmd/provider", "package", "clusterops/provider-clusterops", providerV2},
		{"function-" + functionV1, "function", "./cmd/function", "package/function", "clusterops/function-clusterops", functionV1},
	}
	pkgs := map[string]pkg{}
	for _, w := range wants {
		bin := filepath.Join(out, w.key)
		ldflags := "-s -w -X github.com/clusterops/provider-clusterops/internal/version.Version=" + w.version
		if err := runEnv(root, []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64"}, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, w.cmd); err != nil {
			return nil, err
		}
		file := filepath.Join(out, w.key+".xpkg")
		args := []string{"--package-root=" + w.pkgRoot, "--binary=" + bin, "--version=" + w.version, "--output=" + file}
		if w.kind == "provider" {
			args = append(args, "--examples-root=examples")
		} else {
			args = append(args, "--kind="+w.kind)
		}
		if err := run(root, xpkgTool, args...); err != nil {
			return nil, err
		}
		image := host + "/" + w.repo + ":" + w.version
		if err := push(file, image); err != nil {
			return nil, err
		}
		pkgs[w.key] = pkg{image: image, binary: bin}
	}
	return pkgs, nil
}

func push(file, image string) error {
	img, err := tarball.ImageFromPath(file, nil)
	if err != nil {
		return fmt.Errorf("cannot read package %s: %w", file, err)
	}
	ref, err := name.ParseReference(image)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img); err != nil {
		return fmt.Errorf("cannot push %s: %w", image, err)
	}
	return nil
}

func run(dir, bin string, args ...string) error { return runEnv(dir, nil, bin, args...) }

func runEnv(dir string, env []string, bin string, args ...string) error {
	cmd := exec.Command(bin, args...) //nolint:gosec // The suite's own build steps.
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %w\n%s", bin, args, err, b)
	}
	return nil
}
