package watchset

import (
	"testing"
	"unique"

	"k8s.io/apimachinery/pkg/types"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
)

// TestSyncedMissingWatch checks that an owner naming a watch that is not
// running counts as not synced rather than dereferencing nothing.
func TestSyncedMissingWatch(t *testing.T) {
	s := New(logging.NewNopLogger())
	o := types.NamespacedName{Namespace: "ns", Name: "o"}
	s.owners[o] = map[unique.Handle[key]]struct{}{unique.Make(key{cluster: "c", Watch: Watch{Namespace: "ns"}}): {}}
	if s.Synced(o) {
		t.Error("Synced(o) = true for a watch that is not running, want false")
	}
}
