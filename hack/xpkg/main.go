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
// the default), the composition function, function-clusterops
// (--kind=function), and the platform APIs, configuration-clusterops-platform
// (--kind=configuration).
//
// For the provider and the function it wraps each prebuilt static binary
// (--binary, one for linux/amd64 and one for linux/arm64) in a single-layer
// runtime image and builds the package on top of it with crossplane-runtime's
// xpkg builder, the builder behind `crossplane xpkg build
// --embed-runtime-image`. It writes, under --output-dir:
//
//   - <package>-<version>-linux_<arch>.xpkg: one image tarball per platform, as
//     `crossplane xpkg build` writes them; `crossplane xpkg push -f
//     <amd64>.xpkg,<arm64>.xpkg <ref>` pushes both and the index over them.
//   - <package>-<version>/: an OCI image layout holding that same image index,
//     its layers annotated as a push annotates them (`crane push` pushes it).
//
// A configuration has no runtime and no platform: one <package>-<version>.xpkg
// and a layout holding its image.
package main

import (
	"context"
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	pkgmetav1 "github.com/crossplane/crossplane/apis/v2/pkg/meta/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg"
)

const (
	repositoryPrefix = "xpkg.crossplane.io/clusterops/"
	sourceURL        = "https://github.com/clusterops/provider-clusterops"

	metaFile    = "crossplane.yaml"
	runtimeUser = "65532:65532"

	// refNameAnnotation names the package in the layout's index.json.
	refNameAnnotation = "org.opencontainers.image.ref.name"
)

// A packageKind is what differs between the packages this command builds.
type packageKind struct {
	// name of the package, and the title of its runtime image.
	name string
	// packageRoot is the default --package-root.
	packageRoot string
	// binaryPath is where the binary goes in the runtime image, which runs it
	// as its entrypoint; empty for a package without a runtime.
	binaryPath string
	// metaKind is the kind of crossplane.yaml, and meta returns the type it
	// must decode into strictly.
	metaKind string
	meta     func() any
}

// Package kinds, by --kind.
var kinds = map[string]packageKind{ // A constant in spirit.
	"provider": {
		name:        "provider-clusterops",
		packageRoot: "package",
		binaryPath:  "usr/local/bin/provider",
		metaKind:    pkgmetav1.ProviderKind,
		meta:        func() any { return &pkgmetav1.Provider{} },
	},
	"function": {
		name:        "function-clusterops",
		packageRoot: "package-function",
		binaryPath:  "usr/local/bin/function",
		metaKind:    pkgmetav1.FunctionKind,
		meta:        func() any { return &pkgmetav1.Function{} },
	},
	"configuration": {
		name:        "configuration-clusterops-platform",
		packageRoot: "package-configuration",
		metaKind:    pkgmetav1.ConfigurationKind,
		meta:        func() any { return &pkgmetav1.Configuration{} },
	},
}

// A platform a runtime image is built for, and the ELF machine of the
// binaries that run on it.
type platform struct {
	os, arch string
	machine  elf.Machine
}

func (p platform) String() string { return p.os + "/" + p.arch }

// platforms are those of every provider and function package, in index order.
var platforms = []platform{ // A constant in spirit.
	{os: "linux", arch: "amd64", machine: elf.EM_X86_64},
	{os: "linux", arch: "arm64", machine: elf.EM_AARCH64},
}

// epoch is the timestamp of everything in the runtime image, so the same
// binary always yields the same image.
var epoch = time.Unix(0, 0).UTC() // A constant in spirit.

// options are the command line flags.
type options struct {
	Kind         string
	PackageRoot  string
	ExamplesRoot string
	Binaries     []string
	Version      string
	OutputDir    string
	Repository   string
}

// A result is what build wrote.
type result struct {
	// Layout is the OCI image layout holding the package: the image index
	// of a provider or function, the image of a configuration.
	Layout string
	// Digest is the digest of that index or image: what a registry serves
	// for the package's tag once the layout is pushed.
	Digest v1.Hash
	// Tarballs are the image tarballs for `crossplane xpkg push -f`, by
	// platform (linux/amd64), or under "" for a configuration.
	Tarballs map[string]string
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fail(err)
	}

	r, err := build(context.Background(), o)
	if err != nil {
		fail(err)
	}

	fmt.Fprintf(os.Stdout, "wrote %s (%s)\n", r.Layout, r.Digest)
	for _, p := range sortedKeys(r.Tarballs) {
		fmt.Fprintln(os.Stdout, "wrote", r.Tarballs[p])
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "xpkg:", err)
	os.Exit(1)
}

// listFlag is a flag that may be repeated or given a comma-separated list.
type listFlag struct{ values *[]string }

func (l listFlag) String() string {
	if l.values == nil {
		return ""
	}
	return strings.Join(*l.values, ",")
}

func (l listFlag) Set(s string) error {
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l.values = append(*l.values, v)
		}
	}
	return nil
}

// parseFlags parses and validates the command line.
func parseFlags(args []string) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("xpkg", flag.ContinueOnError)
	fs.StringVar(&o.Kind, "kind", "provider", "package to build: provider, function or configuration")
	fs.StringVar(&o.PackageRoot, "package-root", "", "directory holding crossplane.yaml and the package's objects (default package, package-function or package-configuration)")
	fs.StringVar(&o.ExamplesRoot, "examples-root", "", "optional directory of example manifests to embed")
	fs.Var(listFlag{&o.Binaries}, "binary", "static binary (CGO_ENABLED=0) to run in the runtime image, one per platform ("+platformList()+"): repeat the flag or separate them with commas; the platform is read from the binary. Not for a configuration")
	fs.StringVar(&o.Version, "version", "", "package version, used as the image tag")
	fs.StringVar(&o.OutputDir, "output-dir", filepath.Join("_output", "xpkg"), "directory the package is written to, as <package>-<version>[-<os>_<arch>].xpkg and the OCI image layout <package>-<version>/")
	fs.StringVar(&o.Repository, "repository", "", "repository recorded with the tag (default "+repositoryPrefix+"<package>)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, errors.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	k, ok := kinds[o.Kind]
	if !ok {
		return o, errors.Errorf("--kind must be provider, function or configuration, not %q", o.Kind)
	}
	if o.Version == "" {
		return o, errors.New("--version is required")
	}
	switch {
	case k.binaryPath == "" && len(o.Binaries) > 0:
		return o, errors.Errorf("a %s package has no runtime: --binary is not for it", o.Kind)
	case k.binaryPath != "" && len(o.Binaries) == 0:
		return o, errors.Errorf("a %s package needs --binary, one static binary per platform (%s)", o.Kind, platformList())
	}
	if o.PackageRoot == "" {
		o.PackageRoot = k.packageRoot
	}
	if o.Repository == "" {
		o.Repository = repositoryPrefix + k.name
	}
	return o, nil
}

func platformList() string {
	s := make([]string, 0, len(platforms))
	for _, p := range platforms {
		s = append(s, p.String())
	}
	return strings.Join(s, ", ")
}

// build builds the package described by o and writes it under o.OutputDir.
// Nothing is written unless everything is: a failed build leaves no output.
func build(ctx context.Context, o options) (result, error) {
	tag, err := name.NewTag(o.Repository + ":" + o.Version)
	if err != nil {
		return result{}, errors.Wrap(err, "cannot make an image tag from --repository and --version")
	}

	k, ok := kinds[o.Kind]
	if !ok {
		return result{}, errors.Errorf("unknown package kind %q", o.Kind)
	}

	if err := checkMeta(filepath.Join(o.PackageRoot, metaFile), k); err != nil {
		return result{}, err
	}

	b, err := newBuilder(o.PackageRoot, o.ExamplesRoot)
	if err != nil {
		return result{}, err
	}

	// The images to write, by platform ("" for a configuration's).
	images := map[string]v1.Image{}
	if k.binaryPath == "" {
		img, _, err := b.Build(ctx)
		if err != nil {
			return result{}, errors.Wrap(err, "cannot build package")
		}
		images[""] = img
	} else {
		byPlatform, err := platformBinaries(o.Binaries)
		if err != nil {
			return result{}, err
		}
		for _, p := range platforms {
			rt, err := runtimeImage(k, byPlatform[p], o.Version, p)
			if err != nil {
				return result{}, err
			}
			img, _, err := b.Build(ctx, xpkg.WithBase(rt))
			if err != nil {
				return result{}, errors.Wrapf(err, "cannot build %s package", p)
			}
			images[p.String()] = img
		}
	}

	return write(o, k, tag, images)
}

// platformBinaries checks every binary and returns them by platform: exactly
// one for each of platforms.
func platformBinaries(binaries []string) (map[platform]string, error) {
	out := map[platform]string{}
	for _, bin := range binaries {
		p, err := checkBinary(bin)
		if err != nil {
			return nil, err
		}
		if prev, ok := out[p]; ok {
			return nil, errors.Errorf("binaries %s and %s are both built for %s: want one per platform", prev, bin, p)
		}
		out[p] = bin
	}
	var missing []string
	for _, p := range platforms {
		if _, ok := out[p]; !ok {
			missing = append(missing, p.String())
		}
	}
	if len(missing) > 0 {
		return nil, errors.Errorf("no binary for %s: a package carries %s (build each with CGO_ENABLED=0 GOOS=linux GOARCH=<arch>)", strings.Join(missing, ", "), platformList())
	}
	return out, nil
}

// write writes the package's images as tarballs, and as an OCI image layout
// holding the image index over them (or the one image of a configuration).
// Everything is staged in a temporary directory next to the output, then
// moved into place.
func write(o options, k packageKind, tag name.Tag, images map[string]v1.Image) (result, error) {
	if err := os.MkdirAll(o.OutputDir, 0o750); err != nil {
		return result{}, errors.Wrap(err, "cannot create output directory")
	}
	stage, err := os.MkdirTemp(o.OutputDir, ".xpkg-")
	if err != nil {
		return result{}, errors.Wrap(err, "cannot create staging directory")
	}
	defer func() { _ = os.RemoveAll(stage) }()

	base := k.name + "-" + o.Version
	r := result{Layout: filepath.Join(o.OutputDir, base), Tarballs: map[string]string{}}
	moves := map[string]string{filepath.Join(stage, base): r.Layout}

	var (
		adds  []mutate.IndexAddendum
		image v1.Image
	)
	for _, p := range sortedKeys(images) {
		img := images[p]
		file := base + ".xpkg"
		if p != "" {
			file = base + "-" + strings.ReplaceAll(p, "/", "_") + ".xpkg"
		}
		if err := writeTarball(filepath.Join(stage, file), tag, img); err != nil {
			return result{}, err
		}
		r.Tarballs[p] = filepath.Join(o.OutputDir, file)
		moves[filepath.Join(stage, file)] = r.Tarballs[p]

		// As `crossplane xpkg push` does before it pushes: the tarball keeps
		// the layer annotations as config labels, a registry in the manifest.
		annotated, err := xpkg.AnnotateLayers(img)
		if err != nil {
			return result{}, errors.Wrap(err, "cannot annotate package layers")
		}
		image = annotated
		if p != "" {
			add, err := indexAddendum(annotated)
			if err != nil {
				return result{}, err
			}
			adds = append(adds, add)
		}
	}

	l, err := layout.Write(filepath.Join(stage, base), empty.Index)
	if err != nil {
		return result{}, errors.Wrap(err, "cannot write OCI image layout")
	}
	ref := layout.WithAnnotations(map[string]string{refNameAnnotation: tag.String()})
	if len(adds) > 0 {
		// The index `crossplane xpkg push -f a.xpkg,b.xpkg` makes.
		idx := mutate.AppendManifests(empty.Index, adds...)
		if err := l.AppendIndex(idx, ref); err != nil {
			return result{}, errors.Wrap(err, "cannot write image index")
		}
		if r.Digest, err = idx.Digest(); err != nil {
			return result{}, errors.Wrap(err, "cannot compute image index digest")
		}
	} else {
		if err := l.AppendImage(image, ref); err != nil {
			return result{}, errors.Wrap(err, "cannot write image")
		}
		if r.Digest, err = image.Digest(); err != nil {
			return result{}, errors.Wrap(err, "cannot compute image digest")
		}
	}
	for _, from := range sortedKeys(moves) {
		to := moves[from]
		if err := os.RemoveAll(to); err != nil {
			return result{}, errors.Wrapf(err, "cannot replace %s", to)
		}
		if err := os.Rename(from, to); err != nil {
			return result{}, errors.Wrapf(err, "cannot move %s into place", to)
		}
	}
	return r, nil
}

// indexAddendum describes a package image in an image index by the platform
// its config names, as `crossplane xpkg push` does.
func indexAddendum(img v1.Image) (mutate.IndexAddendum, error) {
	mt, err := img.MediaType()
	if err != nil {
		return mutate.IndexAddendum{}, errors.Wrap(err, "cannot get package media type")
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return mutate.IndexAddendum{}, errors.Wrap(err, "cannot get package config")
	}
	return mutate.IndexAddendum{
		Add: img,
		Descriptor: v1.Descriptor{
			MediaType: mt,
			Platform:  &v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture, OSVersion: cfg.OSVersion},
		},
	}, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
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
