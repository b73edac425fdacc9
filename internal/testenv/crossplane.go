package testenv

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// crossplaneModule is the module whose cluster/crds are Crossplane core's CRDs.
const crossplaneModule = "github.com/crossplane/crossplane/v2"

// CrossplaneCRDs returns a directory holding the CRDs of Crossplane core at
// the version of cluster/local/versions.env (XRDs, Compositions, Functions,
// ...). It looks, in order, where cluster/local/build-tools.sh puts them, in
// the Go module cache, and finally downloads the module through the Go module
// proxy, which takes seconds, where building Crossplane takes minutes.
func CrossplaneCRDs() (string, error) {
	v, err := toolVersion("CROSSPLANE_VERSION")
	if err != nil {
		return "", err
	}
	var candidates []string
	if out, err := exec.Command(filepath.Join(RepoRoot(), "cluster", "local", "build-tools.sh"), "crossplane-dir").Output(); err == nil {
		candidates = append(candidates, filepath.Join(strings.TrimSpace(string(out)), "crds"))
	}
	if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil {
		candidates = append(candidates, filepath.Join(strings.TrimSpace(string(out)), crossplaneModule+"@"+v, "cluster", "crds"))
	}
	for _, d := range candidates {
		if hasYAML(d) {
			return d, nil
		}
	}

	// Outside any module, so that this module's go.mod and go.sum stay as they are.
	cmd := exec.Command("go", "mod", "download", "-json", crossplaneModule+"@"+v)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		return "", errors.Wrapf(err, "cannot download %s@%s for its CRDs (or run cluster/local/build-tools.sh crossplane)", crossplaneModule, v)
	}
	m := struct{ Dir string }{}
	if err := json.Unmarshal(out, &m); err != nil {
		return "", errors.Wrap(err, "cannot read go mod download output")
	}
	d := filepath.Join(m.Dir, "cluster", "crds")
	if !hasYAML(d) {
		return "", errors.Errorf("no CRDs in %s", d)
	}
	return d, nil
}

// toolVersion reads a version from cluster/local/versions.env.
func toolVersion(key string) (string, error) {
	f, err := os.Open(filepath.Join(RepoRoot(), "cluster", "local", "versions.env"))
	if err != nil {
		return "", errors.Wrap(err, "cannot read tool versions")
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), key+"="); ok {
			return v, nil
		}
	}
	return "", errors.Errorf("no %s in cluster/local/versions.env", key)
}

func hasYAML(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	return len(m) > 0
}
