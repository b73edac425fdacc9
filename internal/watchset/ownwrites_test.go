package watchset_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestOwnWritesDoNotEnqueueTheirOwner: an owner's own create and update of an
// object it watches do not enqueue it, yet enqueue another owner of the same
// watch; a later edit by somebody else, one that races the owner's update,
// and a deletion, enqueue it again.
func TestOwnWritesDoNotEnqueueTheirOwner(t *testing.T) {
	ctx, s, q, c := started(t)
	ns := env.Namespace(t, "watchset-own", nil)
	w := configMaps
	w.Namespace = ns
	writer := types.NamespacedName{Namespace: ns, Name: "writer"}
	other := types.NamespacedName{Namespace: ns, Name: "other"}
	for _, o := range []types.NamespacedName{writer, other} {
		if err := s.Ensure(o, c, w); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitSynced(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "copy"}, Data: map[string]string{"k": "1"}}
	steps := []struct {
		name  string
		write func() error
		want  map[types.NamespacedName]int
	}{
		{"the writer creates it", func() error {
			done := s.Writing(writer, c, w.Resource, ns, cm.Name, "")
			err := env.Client.Create(ctx, cm)
			done(cm.ResourceVersion, err)
			return err
		}, map[types.NamespacedName]int{other: 1}},
		{"the writer updates it", func() error {
			done := s.Writing(writer, c, w.Resource, ns, cm.Name, cm.ResourceVersion)
			cm.Data["k"] = "2"
			err := env.Client.Update(ctx, cm)
			done(cm.ResourceVersion, err)
			return err
		}, map[types.NamespacedName]int{other: 1}},
		{"the writer fails to update it from an old version", func() error {
			stale := cm.DeepCopy()
			stale.ResourceVersion = "1"
			done := s.Writing(writer, c, w.Resource, ns, cm.Name, stale.ResourceVersion)
			err := env.Client.Update(ctx, stale)
			done(stale.ResourceVersion, err)
			if err == nil {
				t.Error("an update from version 1 succeeded")
			}
			return nil
		}, map[types.NamespacedName]int{}},
		{"somebody else edits it", func() error {
			cm.Data["k"] = "3"
			return env.Client.Update(ctx, cm)
		}, map[types.NamespacedName]int{writer: 1, other: 1}},
		{"somebody else's patch races the writer's update", func() error {
			// The patch's event, from the version the writer's update is
			// from, is taken for the writer's, whose update then fails: the
			// answer tells, and enqueues the writer.
			done := s.Writing(writer, c, w.Resource, ns, cm.Name, cm.ResourceVersion)
			p := client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"4"}}`))
			if err := env.Client.Patch(ctx, cm.DeepCopy(), p); err != nil {
				return err
			}
			if diff := cmp.Diff(map[types.NamespacedName]int{other: 1}, count(received(q, time.Second))); diff != "" {
				t.Errorf("the patch racing the writer's update: requests, -want +got:\n%s", diff)
			}
			cm.Data["k"] = "5"
			err := env.Client.Update(ctx, cm)
			done(cm.ResourceVersion, err)
			if !kerrors.IsConflict(err) {
				t.Errorf("the writer's update after the patch: %v, want a conflict", err)
			}
			return nil
		}, map[types.NamespacedName]int{writer: 1}},
		{"it is deleted while a write of the writer is pending", func() error {
			// A write whose event never came: the deletion is still a change.
			s.Writing(writer, c, w.Resource, ns, cm.Name, cm.ResourceVersion)
			return env.Client.Delete(ctx, cm)
		}, map[types.NamespacedName]int{writer: 1, other: 1}},
	}
	for _, st := range steps {
		if err := st.write(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if diff := cmp.Diff(st.want, count(received(q, time.Second))); diff != "" {
			t.Errorf("%s: requests, -want +got:\n%s", st.name, diff)
		}
	}
}
