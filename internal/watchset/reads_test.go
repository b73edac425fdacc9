package watchset_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterops/provider-clusterops/internal/watchset"
)

// An owner that read an object does not hear of it again at the version it
// read: not from the initial list of the watch it starts after the read, nor
// from that of the shared watch its namespace's names coalesce into. A later
// change and a deletion reach it, and an owner that did not read hears of
// everything.
func TestReadObjectsDoNotEnqueueTheirReader(t *testing.T) {
	ctx, s, q, c := started(t)
	watchset.SetCoalesceAbove(s, 1)
	ns := env.Namespace(t, "watchset-read", nil)
	reader := types.NamespacedName{Namespace: ns, Name: "reader"}
	second := types.NamespacedName{Namespace: ns, Name: "second"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conf"}, Data: map[string]string{"a": "1"}}
	for _, o := range []*corev1.ConfigMap{cm, {ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conf2"}}} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	watch := func(name string) watchset.Watch { return nameWatch(ns, name) }

	// Read, then watched: the new watch's list shows what reader read.
	s.Read(reader, c, configMaps.Resource, ns, "conf", cm.ResourceVersion)
	if err := s.Ensure(reader, c, watch("conf")); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitSynced(ctx, reader); err != nil {
		t.Fatal(err)
	}
	if got := received(q, 500*time.Millisecond); len(got) != 0 {
		t.Errorf("the initial list of a watch of what its owner read enqueued %v", got)
	}

	// A second name in the namespace: the two share one watch of it now,
	// whose list shows conf as reader read it, and conf2, which second did
	// not read.
	if err := s.Ensure(second, c, watch("conf2")); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitSynced(ctx, second); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{second: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("the shared watch's initial list: -want +got:\n%s", diff)
	}

	// Changed: the reader hears of it.
	cm.Data["a"] = "2"
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{reader: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("a change after the read: -want +got:\n%s", diff)
	}

	// Gone: the reader hears of it, having read its last version.
	s.Read(reader, c, configMaps.Resource, ns, "conf", cm.ResourceVersion)
	if err := env.Client.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{reader: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("a deletion: -want +got:\n%s", diff)
	}
}

// An owner joining a watch that already runs, after it read the object, hears
// of a change made in between, and of an object made since it found it
// missing; an owner that read the object as the watch holds it hears nothing.
func TestJoiningARunningWatchCatchesUp(t *testing.T) {
	ctx, s, q, c := started(t)
	ns := env.Namespace(t, "watchset-join", nil)
	first := types.NamespacedName{Namespace: ns, Name: "first"}
	late, current, missing := types.NamespacedName{Namespace: ns, Name: "late"}, types.NamespacedName{Namespace: ns, Name: "current"}, types.NamespacedName{Namespace: ns, Name: "missing"}
	watch := func(name string) watchset.Watch { return nameWatch(ns, name) }
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conf"}, Data: map[string]string{"a": "1"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"conf", "later"} {
		if err := s.Join(first, c, watch(w)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WaitSynced(ctx, first); err != nil {
		t.Fatal(err)
	}
	received(q, 500*time.Millisecond)

	// late reads conf, which changes before late joins its watch.
	s.Read(late, c, configMaps.Resource, ns, "conf", cm.ResourceVersion)
	cm.Data["a"] = "2"
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{first: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("the change before late joined: -want +got:\n%s", diff)
	}
	// current reads it as it is now; missing finds "later" missing, which is
	// made before it joins.
	s.Read(current, c, configMaps.Resource, ns, "conf", cm.ResourceVersion)
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "later"}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{first: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("the create before missing joined: -want +got:\n%s", diff)
	}
	for o, w := range map[types.NamespacedName]string{late: "conf", current: "conf", missing: "later"} {
		if err := s.Ensure(o, c, watch(w)); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{late: 1, missing: 1}, count(received(q, time.Second))); diff != "" {
		t.Errorf("joining running watches: -want +got:\n%s", diff)
	}
	if err := s.Ensure(late, c, watch("conf")); err != nil {
		t.Fatal(err)
	}
	if got := received(q, 500*time.Millisecond); len(got) != 0 {
		t.Errorf("ensuring a watch owned already enqueued %v", got)
	}
}

// nameWatch is the watch of ConfigMap ns/name.
func nameWatch(ns, name string) watchset.Watch {
	w := configMaps
	w.Namespace, w.Fields = ns, "metadata.name="+name
	return w
}
