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

// Command xpkg builds the Crossplane packages (.xpkg) of this repository
// without a container engine: the provider, provider-clusterops (--kind=provider,
// the default), and the composition function, function-clusterops
// (--kind=function).
//
// It wraps a prebuilt static linux/amd64 binary in a single-layer runtime
// image, then builds the package on top of it with crossplane-runtime's xpkg
// builder, the builder behind `crossplane xpkg build --embed-runtime-image`.
// The result is written as an image tarball that `crossplane xpkg push -f`
// accepts.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	pkgmetav1 "github.com/crossplane/crossplane/apis/v2/pkg/meta/v1"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/spf13/afero"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser/examples"
	xpkgyaml "github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser/yaml"
)

const (
	repositoryPrefix = "xpkg.crossplane.io/clusterops/"
	sourceURL        = "https://github.com/clusterops/provider-clusterops"

	metaFile    = "crossplane.yaml"
	runtimeUser = "65532:65532"
)

// A packageKind is what differs between the packages this command builds.
type packageKind struct {
	// name of the package, and the title of its runtime image.
	name string
	// packageRoot is the default --package-root.
	packageRoot string
	// binaryPath is where the binary goes in the runtime image, which runs it
	// as its entrypoint.
	binaryPath string
	// metaKind is the kind of crossplane.yaml, and meta returns the type it
	// must decode into strictly.
	metaKind string
	meta     func() any
}

// Package kinds, by --kind.
var kinds = map[string]packageKind{ //nolint:gochecknoglobals // A constant in spirit.
	"provider": {
		name:        "provider-clusterops",
		packageRoot: "package",
		binaryPath:  "usr/local/bin/provider",
		metaKind:    pkgmetav1.ProviderKind,
		meta:        func() any { return &pkgmetav1.Provider{} },
	},
	"function": {
		name:        "function-clusterops",
		packageRoot: filepath.Join("package", "function"),
		binaryPath:  "usr/local/bin/function",
		metaKind:    pkgmetav1.FunctionKind,
		meta:        func() any { return &pkgmetav1.Function{} },
	},
}

// epoch is the timestamp of everything in the runtime image, so the same
// binary always yields the same image.
var epoch = time.Unix(0, 0).UTC() //nolint:gochecknoglobals // A constant in spirit.

// options are the command line flags.
type options struct {
	Kind         string
	PackageRoot  string
	ExamplesRoot string
	Binary       string
	Version      string
	Output       string
	Repository   string
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fail(err)
	}

	if _, err := build(context.Background(), o); err != nil {
		fail(err)
	}

	fmt.Fprintln(os.Stdout, "wrote", o.Output)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "xpkg:", err)
	os.Exit(1)
}

// parseFlags parses and validates the command line.
func parseFlags(args []string) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("xpkg", flag.ContinueOnError)
	fs.StringVar(&o.Kind, "kind", "provider", "package to build: provider or function")
	fs.StringVar(&o.PackageRoot, "package-root", "", "directory holding crossplane.yaml and crds/ (default package for a provider, package/function for a function)")
	fs.StringVar(&o.ExamplesRoot, "examples-root", "", "optional directory of example manifests to embed")
	fs.StringVar(&o.Binary, "binary", "", "static linux/amd64 binary (CGO_ENABLED=0), the runtime image's entrypoint")
	fs.StringVar(&o.Version, "version", "", "package version, used as the image tag")
	fs.StringVar(&o.Output, "output", "", "output .xpkg path (default _output/xpkg/<package>-<version>.xpkg)")
	fs.StringVar(&o.Repository, "repository", "", "repository recorded with the tag in the tarball (default "+repositoryPrefix+"<package>)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, errors.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	k, ok := kinds[o.Kind]
	if !ok {
		return o, errors.Errorf("--kind must be provider or function, not %q", o.Kind)
	}
	if o.Binary == "" || o.Version == "" {
		return o, errors.New("--binary and --version are required")
	}
	if o.PackageRoot == "" {
		o.PackageRoot = k.packageRoot
	}
	if o.Output == "" {
		o.Output = filepath.Join("_output", "xpkg", k.name+"-"+o.Version+".xpkg")
	}
	if o.Repository == "" {
		o.Repository = repositoryPrefix + k.name
	}
	return o, nil
}

// build builds the package described by o, writes it to o.Output and returns
// the package image's digest. A push reports a different digest: it moves the
// layer annotations the tarball keeps as config labels into the manifest.
func build(ctx context.Context, o options) (v1.Hash, error) {
	tag, err := name.NewTag(o.Repository + ":" + o.Version)
	if err != nil {
		return v1.Hash{}, errors.Wrap(err, "cannot make an image tag from --repository and --version")
	}

	k, ok := kinds[o.Kind]
	if !ok {
		return v1.Hash{}, errors.Errorf("unknown package kind %q", o.Kind)
	}

	if err := checkMeta(filepath.Join(o.PackageRoot, metaFile), k); err != nil {
		return v1.Hash{}, err
	}

	rt, err := runtimeImage(k, o.Binary, o.Version)
	if err != nil {
		return v1.Hash{}, err
	}

	b, err := newBuilder(o.PackageRoot, o.ExamplesRoot)
	if err != nil {
		return v1.Hash{}, err
	}

	img, _, err := b.Build(ctx, xpkg.WithBase(rt))
	if err != nil {
		return v1.Hash{}, errors.Wrap(err, "cannot build package")
	}

	if err := writeTarball(o.Output, tag, img); err != nil {
		return v1.Hash{}, err
	}

	d, err := img.Digest()
	return d, errors.Wrap(err, "cannot compute package digest")
}

// checkMeta strictly decodes the package metadata into the kind's type. The xpkg parser silently
// drops fields its schema does not know, such as the permissionRequests that
// Crossplane v2 removed, so a typo or a stale field would otherwise vanish from
// the package without a trace.
// The builder picks its linter by the metadata's kind, so a provider's
// crossplane.yaml under --kind=function would build a provider package: the
// kind is checked too.
func checkMeta(path string, k packageKind) error {
	b, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return errors.Wrap(err, "cannot read package metadata")
	}
	tm := metav1.TypeMeta{}
	if err := yaml.Unmarshal(b, &tm); err != nil {
		return errors.Wrapf(err, "invalid package metadata %s", path)
	}
	if want := pkgmetav1.SchemeGroupVersion.WithKind(k.metaKind); tm.GroupVersionKind() != want {
		return errors.Errorf("package metadata %s is a %s %s, want a %s %s for a %s package", path, tm.APIVersion, tm.Kind, want.GroupVersion(), want.Kind, k.name)
	}
	if err := yaml.UnmarshalStrict(b, k.meta()); err != nil {
		return errors.Wrapf(err, "invalid package metadata %s", path)
	}
	return nil
}

// runtimeImage returns a single-layer image that runs the binary as a
// non-root user.
func runtimeImage(k packageKind, binary, version string) (v1.Image, error) {
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
	cfg.OS = "linux"
	cfg.Architecture = "amd64"
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
	if err := checkBinary(binary); err != nil {
		return nil, err
	}
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

// checkBinary rejects binaries that cannot run in an empty linux/amd64 image:
// anything but a statically linked x86-64 ELF executable.
func checkBinary(path string) error {
	f, err := elf.Open(filepath.Clean(path))
	if err != nil {
		return errors.Wrapf(err, "cannot read binary %s as an ELF executable", path)
	}
	defer func() { _ = f.Close() }()

	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 {
		return errors.Errorf("binary %s is built for %s, want amd64", path, f.Machine)
	}
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return errors.Errorf("binary %s is built for %s, want linux", path, f.OSABI)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return errors.Errorf("binary %s is a %s, want an executable", path, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.Errorf("binary %s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// newBuilder returns an xpkg builder configured like `crossplane xpkg build`:
// every non-empty YAML file under the package root (except the examples
// directory and nested packages) goes into the package, examples go into their
// own layer.
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
	nested, err := nestedPackages(root)
	if err != nil {
		return nil, err
	}
	for _, d := range nested {
		filters = append(filters, xpkg.SkipContains(d+string(filepath.Separator)))
	}
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

// nestedPackages returns the directories under root, root excluded, that hold
// a crossplane.yaml of their own: other packages, such as package/function in
// the provider's package root.
func nestedPackages(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == metaFile && filepath.Dir(p) != root {
			dirs = append(dirs, filepath.Dir(p))
		}
		return nil
	})
	return dirs, errors.Wrap(err, "cannot look for nested packages")
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
// `crossplane xpkg build` writes, replacing path atomically.
func writeTarball(path string, tag name.Tag, img v1.Image) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return errors.Wrap(err, "cannot create output directory")
	}

	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return errors.Wrap(err, "cannot create output file")
	}
	defer func() { _ = os.Remove(f.Name()) }()

	if err := tarball.Write(tag, img, f); err != nil {
		_ = f.Close()
		return errors.Wrap(err, "cannot write package tarball")
	}
	if err := f.Close(); err != nil {
		return errors.Wrap(err, "cannot write package tarball")
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil { //nolint:gosec // A package is not a secret.
		return errors.Wrap(err, "cannot set output file mode")
	}
	return errors.Wrap(os.Rename(f.Name(), path), "cannot move package tarball into place")
}
