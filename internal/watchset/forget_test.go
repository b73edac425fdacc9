package watchset

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	"github.com/clusterops/provider-clusterops/internal/target"
)

// An owner's own writes whose events never came are forgotten with the owner,
// and only its: a fleet of rules deleted by hand must not leave their writes
// behind until the bound forgets everyone's (TestFilterTakesOnlyOwnWritesEventsForOwn's ForgetOwner, in
// internal/ownwrite, has the rest).
func TestForgetForgetsTheOwnersWrites(t *testing.T) {
	s := New(logging.NewNopLogger())
	c := &target.Cluster{ID: "c"}
	cm := corev1.SchemeGroupVersion.WithResource("configmaps")
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	s.Writing(a, c, cm, "t1", "x", "")
	s.Writing(a, c, cm, "t2", "x", "7")
	s.Writing(b, c, cm, "t3", "x", "")
	// b writes over what a wrote last: the write is b's now.
	s.Writing(b, c, cm, "t2", "x", "8")
	// A failed write is forgotten at once.
	s.Writing(a, c, cm, "t4", "x", "")("", errors.New("conflict"))

	var forgotten []types.NamespacedName
	s.OnForget(func(n types.NamespacedName) { forgotten = append(forgotten, n) })
	s.Forget(a)

	if n := s.writes.Len(); n != 2 {
		t.Errorf("after forgetting a, %d objects have own writes, want b's two", n)
	}
	if len(forgotten) != 1 || forgotten[0] != a {
		t.Errorf("OnForget's function was called with %v, want [%v]", forgotten, a)
	}

	// b's create is seen, by b only.
	k := key{cluster: "c", Watch: Watch{Resource: cm}}
	created := []any{&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "t3", Name: "x", ResourceVersion: "9"}}}
	if s.isOwnWrite(a, k, created) {
		t.Error("b's create was a's own write")
	}
	if !s.isOwnWrite(b, k, created) {
		t.Fatal("b's create was not its own write")
	}
	s.Forget(b)
	if n := s.writes.Len(); n != 0 {
		t.Errorf("after forgetting b, %d objects have own writes, want none", n)
	}
}
