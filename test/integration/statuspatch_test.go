package integration

import (
	"context"
	"encoding/json"
	"testing"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestStatusPatchIsConditional pins what the provider's status writes rely on
// (managedkind's statusPatch): a JSON patch of the status that sets the
// resourceVersion it was made from is refused as a conflict, as an update of
// that version would be, once the resource moved on; at the current version
// it replaces the whole status, fields it leaves out included.
func TestStatusPatchIsConditional(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "statuspatch", nil)
	cr := &copyv1alpha1.CopyRule{
		// Paused: the provider leaves its status to the test.
		ObjectMeta: metav1.ObjectMeta{Name: "paused", Namespace: ns, Annotations: map[string]string{meta.AnnotationKeyReconciliationPaused: "true"}},
		Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
			Kind: copyv1alpha1.KindConfigMap, Names: []string{"conf"}, Namespaces: []string{ns},
		}},
	}
	if err := env.Client.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	// The provider writes the paused resource's condition and finalizer:
	// the version read may move on before a write.
	testenv.Eventually(t, wait, "a status to replace", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return false, err
		}
		cr.Status.AtProvider.SyncedDigest = "before"
		err := env.Client.Status().Update(ctx, cr)
		return err == nil, ignoreConflict(err)
	})
	patch := func(rv string, status any) error {
		b, err := json.Marshal([]map[string]any{
			{"op": "replace", "path": "/metadata/resourceVersion", "value": rv},
			{"op": "add", "path": "/status", "value": status},
		})
		if err != nil {
			t.Fatal(err)
		}
		return env.Client.Status().Patch(ctx, cr.DeepCopy(), client.RawPatch(types.JSONPatchType, b))
	}
	made := cr.GetResourceVersion()
	env.Update(t, cr, func() { cr.Labels = map[string]string{"moved": "on"} })
	if err := patch(made, map[string]any{}); !kerrors.IsConflict(err) {
		t.Fatalf("a status patch of an older version: want a conflict, got %v", err)
	}
	testenv.Eventually(t, wait, "a status patch of the current version", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return false, err
		}
		err := patch(cr.GetResourceVersion(), map[string]any{"atProvider": map[string]any{}})
		return err == nil, client.IgnoreNotFound(ignoreConflict(err))
	})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
		t.Fatal(err)
	}
	if d := cr.Status.AtProvider.SyncedDigest; d != "" {
		t.Errorf("the status was merged, not replaced: syncedDigest %q is still stored", d)
	}
}

func ignoreConflict(err error) error {
	if kerrors.IsConflict(err) {
		return nil
	}
	return err
}
