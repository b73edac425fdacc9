package copyrule

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// What is known of a rule's copies goes with the rule: when its deletion is
// seen to the end (drop), when it is gone without that (forget, a finalizer
// removed by hand), and when a rule of its name is made again.
func TestKnownCopiesGoWithTheRule(t *testing.T) {
	copyOf := func(r Owner, ns string) Object {
		o := Object{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one", UID: "c-" + types.UID(ns), ResourceVersion: "1"}}
		copyMark.Set(&o, r.object())
		return o
	}
	a := Owner{UID: "uid-a", Namespace: "ns", Name: "a"}
	b := Owner{UID: "uid-b", Namespace: "ns", Name: "b"}
	k := newKnownCopies()
	k.set(a, []Object{copyOf(a, "t1"), copyOf(a, "t2")})
	k.wrote(b, Ref{"t1", "one"}, new(copyOf(b, "t1")))
	if len(k.of("uid-a")) != 2 || len(k.of("uid-b")) != 1 {
		t.Fatalf("known: %v", k.byRule)
	}

	k.forget(types.NamespacedName{Namespace: "ns", Name: "a"})
	if len(k.of("uid-a")) != 0 || len(k.of("uid-b")) != 1 {
		t.Errorf("after forgetting a: %v", k.byRule)
	}

	// b made again under a new UID: the old one's copies are not its.
	b2 := Owner{UID: "uid-b2", Namespace: "ns", Name: "b"}
	k.set(b2, []Object{copyOf(b2, "t1")})
	if len(k.of("uid-b")) != 0 || len(k.of("uid-b2")) != 1 {
		t.Errorf("after b was made again: %v", k.byRule)
	}

	k.drop(b2)
	if len(k.byRule) != 0 || len(k.uids) != 0 {
		t.Errorf("after dropping b: %v, %v; want nothing", k.byRule, k.uids)
	}
}
