//go:build e2e

package crossplane

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

var (
	mrdGVK  = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1alpha1", Kind: "ManagedResourceDefinition"}
	mrapGVK = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1alpha1", Kind: "ManagedResourceActivationPolicy"}
)

// The managed resource kinds the platform APIs compose, which examples/platform/activation-policy.yaml
// activates, and the one kind it leaves off.
var (
	platformKinds = []string{"appbundles.workload.clusterops.io", "chaosagents.chaos.clusterops.io", "configrollouts.workload.clusterops.io", "copyrules.copy.clusterops.io"}
	otherKind     = "immortalcontainers.workload.clusterops.io"
)

// providerConfigKinds are the kinds core keeps as plain CRDs: everything else of a provider is a
// managed resource, installed as a ManagedResourceDefinition.
var providerConfigKinds = []string{"ProviderConfig", "ClusterProviderConfig", "ProviderConfigUsage", "ClusterProviderConfigUsage"}

// providerCRDs returns the names of the package's CRDs, split into managed resource kinds and the
// others.
func providerCRDs(root string) (managed, other []string, err error) {
	files, err := filepath.Glob(filepath.Join(root, "package", "crds", "*.yaml"))
	if err != nil {
		return nil, nil, err
	}
	for _, f := range files {
		objs, err := testenv.ReadObjects(f)
		if err != nil {
			return nil, nil, err
		}
		for _, o := range objs {
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			if slices.Contains(providerConfigKinds, kind) {
				other = append(other, o.GetName())
			} else {
				managed = append(managed, o.GetName())
			}
		}
	}
	slices.Sort(managed)
	return managed, other, nil
}

// removeManagedResourceCRDs deletes the provider's managed resource CRDs and every activation
// policy: what the plain e2e tier or an earlier run left behind. Objects of those kinds lose their
// finalizers first, since no provider runs to remove them.
func removeManagedResourceCRDs(ctx context.Context, c client.Client, root string) error {
	names, _, err := providerCRDs(root)
	if err != nil {
		return err
	}
	for _, n := range names {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, types.NamespacedName{Name: n}, crd); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return err
		}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: crd.Spec.Versions[0].Name, Kind: crd.Spec.Names.ListKind})
		if err := c.List(ctx, l); err != nil {
			return err
		}
		for i := range l.Items {
			o := &l.Items[i]
			if len(o.GetFinalizers()) > 0 {
				if err := c.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); client.IgnoreNotFound(err) != nil {
					return err
				}
			}
		}
		if err := c.Delete(ctx, crd); client.IgnoreNotFound(err) != nil {
			return err
		}
		if err := waitFor(ctx, time.Minute, "CRD "+n+" deleted", func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(c.Get(ctx, types.NamespacedName{Name: n}, &apiextensionsv1.CustomResourceDefinition{})), nil
		}); err != nil {
			return err
		}
	}
	policies := &unstructured.UnstructuredList{}
	policies.SetGroupVersionKind(mrapGVK.GroupVersion().WithKind(mrapGVK.Kind + "List"))
	if err := c.List(ctx, policies); err != nil && !isNoMatch(err) {
		return err
	}
	for i := range policies.Items {
		if err := c.Delete(ctx, &policies.Items[i]); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// isNoMatch reports whether err says the API server does not serve the kind (Crossplane's CRDs
// are not installed yet).
func isNoMatch(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "no matches for kind") || apierrors.IsNotFound(err))
}

// checkAwaitingActivation checks the state right after the configuration package is installed,
// before any activation policy exists: every managed resource kind of the provider is an inactive
// ManagedResourceDefinition its revision controls, with no CRD (so nothing of it can be created
// or reconciled); the provider's runtime is scaled to zero, awaiting activation, while the
// provider config kinds are plain CRDs already.
func checkAwaitingActivation(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	rev := activeRevision(t)
	managed, other, err := providerCRDs(s.root)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range managed {
		eventually(t, "ManagedResourceDefinition "+n+" inactive under "+rev.GetName(), func(ctx context.Context) (bool, string, error) {
			mrd, err := get(ctx, mrdGVK, "", n)
			if err != nil {
				return false, "", err
			}
			ref := metav1.GetControllerOf(mrd)
			state, _, _ := unstructured.NestedString(mrd.Object, "spec", "state")
			return ref != nil && ref.Name == rev.GetName() && state == "Inactive", fmt.Sprintf("state %s, controlled by %v", state, ref), nil
		})
		if crdExists(ctx, t, n) {
			t.Errorf("CRD %s exists before any activation policy", n)
		}
	}
	for _, n := range other {
		eventually(t, "CRD "+n+" controlled by "+rev.GetName(), func(ctx context.Context) (bool, string, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := s.c.Get(ctx, types.NamespacedName{Name: n}, crd); err != nil {
				return false, "", err
			}
			ref := metav1.GetControllerOf(crd)
			return ref != nil && ref.Name == rev.GetName(), fmt.Sprintf("controlled by %v", ref), nil
		})
	}
	eventually(t, "provider revision "+rev.GetName()+" awaiting activation", func(ctx context.Context) (bool, string, error) {
		r, err := get(ctx, providerRevs.GroupVersion().WithKind("ProviderRevision"), "", rev.GetName())
		if err != nil {
			return false, "", err
		}
		st, msg := condition(r, string(pkgv1.TypeRuntimeActive))
		_, running := s.runtime.provider(rev.GetName())
		reason := conditionReason(r, string(pkgv1.TypeRuntimeActive))
		return st == "False" && reason == string(pkgv1.ReasonAwaitingActivation) && !running,
			fmt.Sprintf("RuntimeActive=%s (%s) %q, process running=%t", st, reason, msg, running), nil
	})
}

// testActivation applies the platform's activation policy: exactly the kinds the platform APIs
// compose become active (CRDs under the provider's revision, established), the provider's
// runtime starts and runs their controllers, and ImmortalContainer stays off. Activating it
// later starts its controller in the same provider process.
func testActivation(t *testing.T) {
	ctx := context.Background()
	checkAwaitingActivation(t)
	rev := activeRevision(t).GetName()

	apply(t, "examples/platform/activation-policy.yaml", nil)
	for _, n := range platformKinds {
		waitActive(t, n, rev)
	}
	waitTrue(t, mrapGVK, "", "clusterops-platform", "Healthy")
	var p *revisionProcess
	eventually(t, "the provider's runtime started", func(context.Context) (bool, string, error) {
		var ok bool
		p, ok = s.runtime.provider(rev)
		return ok, "no process", nil
	})
	pid := p.proc.cmd.Process.Pid
	// The provider starts a kind's controller once its CRD is there (safe-start): the four
	// activated kinds have one, ImmortalContainer none.
	eventually(t, "controllers of the activated kinds running", func(ctx context.Context) (bool, string, error) {
		running, err := controllers(ctx, p)
		if err != nil {
			return false, "", err
		}
		for _, n := range platformKinds {
			if !running[n] {
				return false, fmt.Sprintf("running %v", running), nil
			}
		}
		return true, "", nil
	})
	running, err := controllers(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if running[otherKind] {
		t.Errorf("the provider runs a controller of %s, which no policy activates", otherKind)
	}
	if mrd, err := get(ctx, mrdGVK, "", otherKind); err != nil {
		t.Fatal(err)
	} else if st, _, _ := unstructured.NestedString(mrd.Object, "spec", "state"); st != "Inactive" {
		t.Errorf("%s is %s, want Inactive: the platform's policy does not name it", otherKind, st)
	}
	if crdExists(ctx, t, otherKind) {
		t.Errorf("CRD %s exists, but no policy activates it", otherKind)
	}

	// A second policy, the provider's own example, activates every kind of the provider: the
	// inactive one comes on in the running process.
	apply(t, "examples/crossplane/activation-policy.yaml", nil)
	waitActive(t, otherKind, rev)
	eventually(t, "the "+otherKind+" controller started without a restart", func(ctx context.Context) (bool, string, error) {
		q, ok := s.runtime.provider(rev)
		if !ok || q.proc.cmd.Process.Pid != pid {
			return false, "", fmt.Errorf("the provider process changed: pid %d → %v", pid, q)
		}
		running, err := controllers(ctx, q)
		return err == nil && running[otherKind], fmt.Sprintf("running %v", running), err
	})
}

// waitActive waits until a kind's ManagedResourceDefinition is active and established, and its CRD
// exists under the provider's revision.
func waitActive(t *testing.T, name, rev string) {
	t.Helper()
	waitTrue(t, mrdGVK, "", name, "Established")
	eventually(t, "CRD "+name+" established under "+rev, func(ctx context.Context) (bool, string, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := s.c.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
			return false, "", err
		}
		ref := metav1.GetControllerOf(crd)
		established := false
		for _, c := range crd.Status.Conditions {
			established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
		}
		return established && ref != nil && ref.Name == rev, fmt.Sprintf("established=%t controlled by %v", established, ref), nil
	})
}

func crdExists(ctx context.Context, t *testing.T, name string) bool {
	t.Helper()
	err := s.c.Get(ctx, types.NamespacedName{Name: name}, &apiextensionsv1.CustomResourceDefinition{})
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	return err == nil
}

// conditionReason returns the reason of a status condition of u.
func conditionReason(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			r, _ := m["reason"].(string)
			return r
		}
	}
	return ""
}

// controllers returns the managed resource kinds (as CRD names) whose controllers run in the
// provider process, from the workers controller-runtime reports per controller
// (controller_runtime_max_concurrent_reconciles{controller="managed/<kind>.<group>"}).
func controllers(ctx context.Context, p *revisionProcess) (map[string]bool, error) {
	out := map[string]bool{}
	const metric = `controller_runtime_max_concurrent_reconciles{controller="managed/`
	err := scrape(ctx, p, func(line string) {
		rest, ok := strings.CutPrefix(line, metric)
		if !ok {
			return
		}
		if kind, _, ok := strings.Cut(rest, `"`); ok {
			// The controller is named for the kind, singular: appbundle.workload.clusterops.io.
			singular, group, _ := strings.Cut(kind, ".")
			out[singular+"s."+group] = true
		}
	})
	return out, err
}

// scrape hands each line of the provider process's metrics to line.
func scrape(ctx context.Context, p *revisionProcess, line func(string)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", p.metrics), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("metrics: %s: %s", resp.Status, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line(sc.Text())
	}
	return sc.Err()
}
