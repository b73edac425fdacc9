package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/spf13/afero"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser/examples"
	xpkgyaml "github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser/yaml"
)

// The images a package is made of: the runtime image of each platform and
// its binary layer, the package builder, and the tarball written.

// runtimeImage returns a single-layer image for platform p that runs the
// binary as a non-root user.
func runtimeImage(k packageKind, binary, version string, p platform) (v1.Image, error) {
	l, err := binaryLayer(binary, k.binaryPath)
	if err != nil {
		return nil, err
	}

	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, errors.Wrap(err, "cannot add binary layer to runtime image")
	}

	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, errors.Wrap(err, "cannot get runtime image config")
	}
	cfg = cfg.DeepCopy()
	cfg.Created = v1.Time{Time: epoch}
	cfg.OS = p.os
	cfg.Architecture = p.arch
	cfg.Config.Entrypoint = []string{"/" + k.binaryPath}
	cfg.Config.User = runtimeUser
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   k.name,
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  sourceURL,
	}

	img, err = mutate.ConfigFile(img, cfg)
	return img, errors.Wrap(err, "cannot set runtime image config")
}

// binaryLayer returns a layer holding the binary at binaryPath (under
// usr/local/bin/), plus the directories leading to it and a world-writable
// /tmp.
func binaryLayer(binary, binaryPath string) (v1.Layer, error) {
	data, err := os.ReadFile(filepath.Clean(binary))
	if err != nil {
		return nil, errors.Wrap(err, "cannot read binary")
	}

	hdrs := []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: epoch},
		{Typeflag: tar.TypeDir, Name: "usr/", Mode: 0o755, ModTime: epoch},
		{Typeflag: tar.TypeDir, Name: "usr/local/", Mode: 0o755, ModTime: epoch},
		{Typeflag: tar.TypeDir, Name: "usr/local/bin/", Mode: 0o755, ModTime: epoch},
		{Typeflag: tar.TypeReg, Name: binaryPath, Mode: 0o755, ModTime: epoch, Size: int64(len(data))},
	}

	buf := &bytes.Buffer{}
	tw := tar.NewWriter(buf)
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			return nil, errors.Wrap(err, "cannot write runtime layer")
		}
	}
	if _, err := tw.Write(data); err != nil {
		return nil, errors.Wrap(err, "cannot write runtime layer")
	}
	if err := tw.Close(); err != nil {
		return nil, errors.Wrap(err, "cannot write runtime layer")
	}

	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	})
	return l, errors.Wrap(err, "cannot make runtime layer")
}

// checkBinary returns the platform a binary runs on, and rejects binaries
// that cannot run in an empty image of one of platforms: anything but a
// statically linked 64-bit Linux ELF executable for one of their machines.
func checkBinary(path string) (platform, error) {
	f, err := elf.Open(filepath.Clean(path))
	if err != nil {
		return platform{}, errors.Wrapf(err, "cannot read binary %s as an ELF executable", path)
	}
	defer func() { _ = f.Close() }()

	i := slices.IndexFunc(platforms, func(p platform) bool { return p.machine == f.Machine })
	if f.Class != elf.ELFCLASS64 || i < 0 {
		return platform{}, errors.Errorf("binary %s is built for %s %s, want one of %s", path, f.Class, f.Machine, platformList())
	}
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return platform{}, errors.Errorf("binary %s is built for %s, want linux", path, f.OSABI)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return platform{}, errors.Errorf("binary %s is a %s, want an executable", path, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return platform{}, errors.Errorf("binary %s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	return platforms[i], nil
}

// newBuilder returns an xpkg builder configured like `crossplane xpkg build`:
// every non-empty YAML file under the package root (except the examples
// directory) goes into the package, examples go into their own layer. A
// second crossplane.yaml below the root fails the build, as it fails
// `crossplane xpkg build`: each package has a directory of its own.
func newBuilder(packageRoot, examplesRoot string) (*xpkg.Builder, error) {
	fs := afero.NewOsFs()

	root, err := filepath.Abs(packageRoot)
	if err != nil {
		return nil, errors.Wrap(err, "cannot resolve package root")
	}

	pp, err := xpkgyaml.New()
	if err != nil {
		return nil, errors.Wrap(err, "cannot make package parser")
	}

	filters := yamlFilters()
	var ex parser.Backend = noExamples{}
	if examplesRoot != "" {
		exRoot, err := filepath.Abs(examplesRoot)
		if err != nil {
			return nil, errors.Wrap(err, "cannot resolve examples root")
		}
		filters = append(filters, xpkg.SkipContains(exRoot))
		ex = parser.NewFsBackend(fs, parser.FsDir(exRoot), parser.FsFilters(yamlFilters()...))
	}

	pkg := parser.NewFsBackend(fs, parser.FsDir(root), parser.FsFilters(filters...))
	return xpkg.New(pkg, ex, pp, examples.New()), nil
}

// yamlFilters are the filters `crossplane xpkg build` applies by default.
func yamlFilters() []parser.FilterFn {
	return []parser.FilterFn{parser.SkipDirs(), parser.SkipNotYAML(), parser.SkipEmpty()}
}

// noExamples is the examples backend when there are none. The xpkg builder
// treats a not-exist error from the examples backend as "no examples layer",
// but it closes the returned reader either way, so that must not be nil.
type noExamples struct{}

func (noExamples) Init(context.Context, ...parser.BackendOption) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader("")), os.ErrNotExist
}

// writeTarball writes img as an image tarball tagged tag, the format
// `crossplane xpkg build` writes.
func writeTarball(path string, tag name.Tag, img v1.Image) error {
	f, err := os.OpenFile(filepath.Clean(path), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return errors.Wrap(err, "cannot create package tarball")
	}
	if err := tarball.Write(tag, img, f); err != nil {
		_ = f.Close()
		return errors.Wrap(err, "cannot write package tarball")
	}
	return errors.Wrap(f.Close(), "cannot write package tarball")
}
