package copyrule

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
)

// AnnotationAdded lists, comma-separated, the annotation keys the rule added
// to a copy (spec.forProvider.metadata.annotations), so that one removed from
// the rule is removed from its copies too, and nothing else is.
const AnnotationAdded = "copy.clusterops.io/added-annotations"

// A Transform is what a rule changes between a source and its copies: which
// keys, under which names, the copy's name and kind, and its labels and
// annotations. The zero Transform copies everything as it is.
type Transform struct {
	// Include, when not nil, are the only keys copied.
	Include map[string]bool
	Exclude map[string]bool
	// Rename maps a source's key to the copy's.
	Rename map[string]string
	// CopyName, when set, is the name of every copy.
	CopyName string
	// IntoConfigMap copies Secrets into ConfigMaps.
	IntoConfigMap bool

	DropLabels        map[string]bool
	DropLabelPrefixes []string
	Labels            map[string]string
	Annotations       map[string]string
}

// NewTransform is the Transform of rule p.
func NewTransform(p v1alpha1.CopyRuleParameters) Transform {
	t := Transform{CopyName: p.CopyName, IntoConfigMap: p.Kind == v1alpha1.KindSecret && p.Into == v1alpha1.KindConfigMap}
	if k := p.Keys; k != nil {
		if k.Include != nil {
			t.Include = set(k.Include)
		}
		t.Exclude = set(k.Exclude)
		t.Rename = plain(k.Rename)
	}
	if m := p.Metadata; m != nil {
		t.DropLabels = set(m.DropLabels)
		t.DropLabelPrefixes = slices.Clone(m.DropLabelPrefixes)
		t.Labels = plain(m.Labels)
		t.Annotations = plain(m.Annotations)
	}
	return t
}

// plain is m with plain string values.
func plain[V ~string](m map[string]V) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

func set(l []string) map[string]bool {
	s := make(map[string]bool, len(l))
	for _, v := range l {
		s[v] = true
	}
	return s
}

// Name is the name of the copies of src.
func (t Transform) Name(src Object) string {
	if t.CopyName != "" {
		return t.CopyName
	}
	return src.Name
}

// Apply returns what the copies of src hold: the source's content with the
// rule's keys, name, kind, labels and the annotations it adds, and the
// source's identity in the copy.clusterops.io/source annotation. It is what
// a copy is compared with, and what its content hash is taken of. An error
// (keys that would collide) names keys, never values; the returned object
// still carries the copies' name, so that their copies are kept, not pruned.
func (t Transform) Apply(src Object) (Object, error) {
	o := Object{Type: src.Type, Immutable: src.Immutable, Body: src.Body}
	o.Namespace, o.Name = src.Namespace, t.Name(src)
	o.Labels = t.CopyLabels(src.Labels)
	o.Annotations = maps.Clone(t.Annotations)
	if o.Annotations == nil {
		o.Annotations = map[string]string{}
	}
	// The annotations in the provider's domains are its own: admission
	// refuses them in the spec, and they are never taken from it here.
	for k := range o.Annotations {
		if ProviderKey(k) {
			delete(o.Annotations, k)
		}
	}
	o.Annotations[AnnotationSource] = src.Namespace + "/" + src.Name

	data, bytes, err := t.keys(src)
	if err != nil {
		return o, err
	}
	if t.IntoConfigMap {
		o.Type = ""
		// A ConfigMap's data holds text: what is not valid UTF-8 goes to
		// binaryData, byte for byte.
		for k, v := range bytes {
			if utf8.Valid(v) {
				if data == nil {
					data = map[string]string{}
				}
				data[k] = string(v)
				delete(bytes, k)
			}
		}
	}
	o.Data, o.Bytes = nonEmpty(data), nonEmpty(bytes)
	return o, nil
}

// keys returns the keys of src the copy gets, renamed: Include, then
// Exclude, then Rename. Two keys that would end up with one name are an
// error: which one wins is not for the provider to guess.
func (t Transform) keys(src Object) (map[string]string, map[string][]byte, error) {
	if t.Include == nil && len(t.Exclude) == 0 && len(t.Rename) == 0 {
		return maps.Clone(src.Data), maps.Clone(src.Bytes), nil
	}
	from := map[string]string{} // copy's key → source's key
	var collisions []string
	add := func(k string) bool {
		if (t.Include != nil && !t.Include[k]) || t.Exclude[k] {
			return false
		}
		n, renamed := t.Rename[k]
		if !renamed {
			n = k
		}
		if prev, taken := from[n]; taken {
			a, b := min(prev, k), max(prev, k)
			collisions = append(collisions, fmt.Sprintf("%q and %q would both be copied as %q", a, b, n))
			return false
		}
		from[n] = k
		return true
	}
	var data map[string]string
	var bytes map[string][]byte
	// Sorted, so that the same source always gives the same answer.
	for _, k := range slices.Sorted(maps.Keys(src.Data)) {
		if add(k) {
			if data == nil {
				data = map[string]string{}
			}
			data[t.rename(k)] = src.Data[k]
		}
	}
	for _, k := range slices.Sorted(maps.Keys(src.Bytes)) {
		if add(k) {
			if bytes == nil {
				bytes = map[string][]byte{}
			}
			bytes[t.rename(k)] = src.Bytes[k]
		}
	}
	if len(collisions) > 0 {
		slices.Sort(collisions)
		return nil, nil, fmt.Errorf("not copied: keys %s; rename or exclude one of them (spec.forProvider.keys)", strings.Join(collisions, ", "))
	}
	return data, bytes, nil
}

func (t Transform) rename(k string) string {
	if n, ok := t.Rename[k]; ok {
		return n
	}
	return k
}

// CopyLabels are the labels of a copy of a source labelled l: the source's,
// but those the rule drops, and the rule's own on top. None is in the
// provider's domains: each of its marks belongs to the object it made it for
// (a ChaosAgent's backup, an AppBundle's object), not to a copy of it, and
// the copy gets its ownership label from the rule, whatever the source and
// the spec say.
func (t Transform) CopyLabels(l map[string]string) map[string]string {
	out := make(map[string]string, len(l)+len(t.Labels))
	for k, v := range l {
		if ProviderKey(k) || t.DropLabels[k] || slices.ContainsFunc(t.DropLabelPrefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
			continue
		}
		out[k] = v
	}
	for k, v := range t.Labels {
		if !ProviderKey(k) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// ProviderKey reports whether a label or annotation key is in the
// provider's domains (clusterops.io and its subdomains): the provider's own
// marks, which a rule can neither set nor drop.
func ProviderKey(k string) bool {
	prefix, _, ok := strings.Cut(k, "/")
	return ok && (prefix == "clusterops.io" || strings.HasSuffix(prefix, ".clusterops.io"))
}

// added returns the annotations template d adds to its copies: all of its
// annotations but the provider's own.
func added(d Object) map[string]string {
	out := map[string]string{}
	for k, v := range d.Annotations {
		if !ProviderKey(k) {
			out[k] = v
		}
	}
	return out
}

// addedList is the value of AnnotationAdded for the added annotations a.
func addedList(a map[string]string) string {
	return strings.Join(slices.Sorted(maps.Keys(a)), ",")
}

// sourceOf names the source a template d was made from.
func sourceOf(d Object) string {
	if s, ok := d.Annotations[AnnotationSource]; ok {
		return s
	}
	return d.Namespace + "/" + d.Name
}
