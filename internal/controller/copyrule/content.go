package copyrule

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/ownership"
)

// Ownership labels and annotations on copies.
const (
	// LabelRuleUID holds the UID of the rule a copy belongs to: the ownership
	// check, and how a rule lists and watches its copies.
	LabelRuleUID = "copy.clusterops.io/rule-uid"
	// AnnotationRule names the rule, namespace/name.
	AnnotationRule = "copy.clusterops.io/rule"
	// AnnotationSource names the source, namespace/name.
	AnnotationSource = "copy.clusterops.io/source"
	// AnnotationHash is the hash of the content the copy was written with.
	AnnotationHash = "copy.clusterops.io/content-hash"
	// AnnotationTakenOver marks an object the rule adopted or overwrote rather
	// than created: it is released, never deleted, when it stops being a target.
	AnnotationTakenOver = "copy.clusterops.io/taken-over"
)

// An Object is what a rule copies, as far as copying goes: a ConfigMap or a
// Secret by its data, any other kind by its body.
type Object struct {
	metav1.ObjectMeta
	// Data is a ConfigMap's data.
	Data map[string]string
	// Bytes is a ConfigMap's binaryData or a Secret's data.
	Bytes     map[string][]byte
	Type      corev1.SecretType
	Immutable bool
	// Body is what an object of another kind holds beyond its metadata and
	// status (body), as unstructured content: never modified, only copied.
	Body map[string]any
	// Summary, when set, stands for a copy's content and the rule's marks,
	// which were not read: Data, Bytes and most metadata are empty (known.go).
	Summary *Summary
}

// A Summary is what a rule needs to tell whether a copy is in sync, as it
// remembers the copy at one version: digests of its content (Hash) and of
// the marks the rule sets on it (marks).
type Summary struct{ Content, Marks string }

// FromConfigMap and FromSecret turn the API objects into Objects.
func FromConfigMap(cm *corev1.ConfigMap) Object {
	return Object{ObjectMeta: cm.ObjectMeta, Data: cm.Data, Bytes: cm.BinaryData, Immutable: ptr.Deref(cm.Immutable, false)}
}

// FromSecret turns a Secret into an Object.
func FromSecret(s *corev1.Secret) Object {
	return Object{ObjectMeta: s.ObjectMeta, Bytes: s.Data, Type: s.Type, Immutable: ptr.Deref(s.Immutable, false)}
}

// fromUnstructured turns an object of any other kind than ConfigMap and
// Secret into an Object.
func fromUnstructured(u *unstructured.Unstructured) Object {
	o := Object{Body: body(u.GroupVersionKind().GroupKind(), u.Object)}
	// Metadata is a struct's worth of known fields: converting it back
	// cannot fail for an object the API server served.
	m, _, _ := unstructured.NestedMap(u.Object, "metadata")
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &o.ObjectMeta)
	return o
}

// ToAPI turns o into an object of kind: a ConfigMap or a Secret, or an
// unstructured object of any other kind.
func (o Object) ToAPI(kind Mapping) client.Object {
	var imm *bool
	if o.Immutable {
		t := true
		imm = &t
	}
	switch {
	case !kind.typed():
		u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(o.Body)}
		if u.Object == nil {
			u.Object = map[string]any{}
		}
		if m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&o.ObjectMeta); err == nil {
			u.Object["metadata"] = m
		}
		u.SetGroupVersionKind(kind.GroupVersionKind)
		return u
	case kind.Kind == v1alpha1.KindSecret:
		return &corev1.Secret{ObjectMeta: o.ObjectMeta, Data: o.Bytes, Type: o.Type, Immutable: imm}
	}
	return &corev1.ConfigMap{ObjectMeta: o.ObjectMeta, Data: o.Data, BinaryData: o.Bytes, Immutable: imm}
}

// content is what a copy must equal its source in: JSON encodes maps with
// sorted keys, so the hash is the same on every run.
type content struct {
	Labels    map[string]string `json:"l,omitempty"`
	Data      map[string]string `json:"d,omitempty"`
	Bytes     map[string][]byte `json:"b,omitempty"`
	Type      corev1.SecretType `json:"t,omitempty"`
	Immutable bool              `json:"i,omitempty"`
	Body      map[string]any    `json:"o,omitempty"`
	// Raw holds the data entries that are not valid UTF-8, as bytes: JSON
	// would replace their invalid bytes, and different data would hash alike.
	// Valid data stays in Data, so its hash is what it always was.
	Raw [][2][]byte `json:"r,omitempty"`
}

// Hash is the hash of an object's content: its data, type, immutability or
// body, and labels (minus the ownership label). It is how a copy is compared with its
// source, so the content itself never needs to be logged or stored.
func Hash(o Object) string {
	l := maps.Clone(o.Labels)
	delete(l, LabelRuleUID)
	if len(l) == 0 {
		l = nil
	}
	// Maps of strings and bytes always marshal, and so does a body the API
	// server served as JSON.
	data, raw := splitUTF8(o.Data)
	b, _ := json.Marshal(content{Labels: l, Data: data, Bytes: nonEmpty(o.Bytes), Type: o.Type, Immutable: o.Immutable, Body: nonEmpty(o.Body), Raw: raw}) //nolint:errchkjson // See above.
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// splitUTF8 returns the entries of data that are valid UTF-8, and the others
// as byte pairs in key order.
func splitUTF8(data map[string]string) (map[string]string, [][2][]byte) {
	var raw [][2][]byte
	valid := data
	for k, v := range data {
		if utf8.ValidString(k) && utf8.ValidString(v) {
			continue
		}
		if len(raw) == 0 {
			valid = maps.Clone(data)
		}
		delete(valid, k)
		raw = append(raw, [2][]byte{[]byte(k), []byte(v)})
	}
	slices.SortFunc(raw, func(a, b [2][]byte) int { return bytes.Compare(a[0], b[0]) })
	return nonEmpty(valid), raw
}

func nonEmpty[V any](m map[string]V) map[string]V {
	if len(m) == 0 {
		return nil
	}
	return m
}

// An Owner is the rule copies belong to.
type Owner struct {
	UID       string
	Namespace string
	Name      string
}

// copyMark marks a copy as the rule's, by the rule's UID: copies live in other
// namespaces, where a name would be ambiguous.
var copyMark = ownership.ByUID(LabelRuleUID)

// object is the rule as the mark reads it.
func (o Owner) object() metav1.Object {
	return &metav1.ObjectMeta{UID: types.UID(o.UID), Namespace: o.Namespace, Name: o.Name}
}

// Desired is the copy in namespace ns that rule owner wants of src, the
// template Transform.Apply made of a source (a source itself when nothing is
// transformed), with hash h of src. existing, when the object is already
// there, lends its metadata: resourceVersion, and what others set.
func Desired(owner Owner, src Object, h, ns string, existing *Object, takenOver bool) Object {
	o := Object{Data: src.Data, Bytes: src.Bytes, Type: src.Type, Immutable: src.Immutable, Body: src.Body}
	if existing != nil {
		// Updates replace the whole object: keep what others set in its
		// metadata (finalizers, owner references, annotations).
		o.ObjectMeta = *existing.DeepCopy()
	}
	o.Namespace, o.Name = ns, src.Name
	o.Labels = maps.Clone(src.Labels)
	if o.Labels == nil {
		o.Labels = map[string]string{}
	}
	copyMark.Set(&o, owner.object())
	if o.Annotations == nil {
		o.Annotations = map[string]string{}
	}
	// Annotations the rule added before and adds no more go; others' stay.
	removeAdded(o.Annotations)
	add := added(src)
	maps.Copy(o.Annotations, add)
	if len(add) > 0 {
		o.Annotations[AnnotationAdded] = addedList(add)
	}
	o.Annotations[AnnotationRule] = owner.Namespace + "/" + owner.Name
	o.Annotations[AnnotationSource] = sourceOf(src)
	o.Annotations[AnnotationHash] = h
	if takenOver {
		o.Annotations[AnnotationTakenOver] = "true"
	}
	return o
}

// removeAdded deletes from annotations a those the rule added, and their list.
func removeAdded(a map[string]string) {
	if l := a[AnnotationAdded]; l != "" {
		for _, k := range strings.Split(l, ",") {
			if !ProviderKey(k) {
				delete(a, k)
			}
		}
	}
	delete(a, AnnotationAdded)
}

// InSync reports whether copy c of template src (whose hash is h) needs no
// write: equal content, the annotations the rule adds, and the rule's own
// annotations in place.
func InSync(owner Owner, src Object, h string, c Object) bool {
	if c.Summary != nil {
		// The same comparison on digests: the marks of the copy Desired
		// would write are those the checks below compare one by one.
		return c.Summary.Content == h && OwnedBy(owner, c) &&
			c.Summary.Marks == marks(Desired(owner, src, h, c.Namespace, nil, false).Annotations)
	}
	add := added(src)
	for k, v := range add {
		if c.Annotations[k] != v {
			return false
		}
	}
	return Hash(c) == h &&
		OwnedBy(owner, c) &&
		c.Annotations[AnnotationAdded] == addedList(add) &&
		c.Annotations[AnnotationRule] == owner.Namespace+"/"+owner.Name &&
		c.Annotations[AnnotationSource] == sourceOf(src) &&
		c.Annotations[AnnotationHash] == h
}

// marks is the digest of the annotations InSync compares: the rule's own, the
// list of those it added, and the added ones by that list.
func marks(a map[string]string) string {
	keys := []string{AnnotationAdded, AnnotationRule, AnnotationSource, AnnotationHash}
	if l := a[AnnotationAdded]; l != "" {
		keys = append(keys, strings.Split(l, ",")...)
	}
	kv := make([][2]string, 0, len(keys))
	for _, k := range keys {
		kv = append(kv, [2]string{k, a[k]})
	}
	b, _ := json.Marshal(kv) //nolint:errchkjson // Pairs of strings always marshal.
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// OwnedBy reports whether o is a copy of rule owner.
func OwnedBy(owner Owner, o Object) bool {
	return copyMark.On(&o, owner.object())
}

// isCopy reports whether o is any rule's copy: copies are never sources.
func isCopy(o Object) bool {
	v, _ := copyMark.Of(&o)
	return v != ""
}

// TakenOver reports whether o was adopted or overwritten rather than created.
func TakenOver(o Object) bool {
	return o.Annotations[AnnotationTakenOver] == "true"
}

// Released is o without the rule's labels and annotations: what an object
// taken over becomes when it stops being a target.
func Released(o Object) Object {
	r := o
	r.Labels = maps.Clone(o.Labels)
	r.Annotations = maps.Clone(o.Annotations)
	copyMark.Remove(&r)
	removeAdded(r.Annotations)
	for _, k := range []string{AnnotationRule, AnnotationSource, AnnotationHash, AnnotationTakenOver} {
		delete(r.Annotations, k)
	}
	return r
}

// NeedsReplace reports whether object c cannot be updated to hold d's content
// and must be deleted and created again: a Secret whose type changed, or an
// immutable object whose data (or immutability) would change. Labels and
// annotations of immutable objects can still be updated.
func NeedsReplace(c, d Object) bool {
	return c.Type != d.Type || (c.Immutable && (!d.Immutable || !SameData(c, d)))
}

// SameData reports whether a and b hold the same data and type, whatever
// their labels: an object that does may be adopted without losing anything.
func SameData(a, b Object) bool {
	strip := func(o Object) Object {
		o.Labels, o.Immutable = nil, false
		return o
	}
	return Hash(strip(a)) == Hash(strip(b))
}
