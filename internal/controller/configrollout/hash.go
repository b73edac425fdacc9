package configrollout

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Source kinds.
const (
	KindConfigMap = "ConfigMap"
	KindSecret    = "Secret"
)

// Content is what one source holds, as far as a rollout cares.
type Content struct {
	Kind string
	Name string
	// Keys limits the hash to these keys; empty means every key.
	Keys []string
	// Missing is true when the source does not exist: that hashes differently
	// from an existing, empty source.
	Missing bool
	// Data holds the source's values by key; a ConfigMap's data and binaryData
	// together (the API server keeps their keys apart).
	Data map[string][]byte
}

// ConfigMapContent is the content of a ConfigMap.
func ConfigMapContent(cm *corev1.ConfigMap, keys []string) Content {
	d := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		d[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		d[k] = v
	}
	return Content{Kind: KindConfigMap, Name: cm.Name, Keys: keys, Data: d}
}

// SecretContent is the content of a Secret. Its bytes go into the hash and
// nowhere else.
func SecretContent(s *corev1.Secret, keys []string) Content {
	return Content{Kind: KindSecret, Name: s.Name, Keys: keys, Data: s.Data}
}

// Hash is a deterministic digest of one source: the same content gives the
// same hash in any process, whatever the order of keys, so that a restart or
// a new leader rolls nothing that did not change. Every field is length
// prefixed, so no two different contents run together into the same bytes.
func Hash(c Content) string {
	h := sha256.New()
	write(h, []byte(c.Kind))
	write(h, []byte(c.Name))
	if c.Missing {
		write(h, []byte("\x00missing"))
		return hex.EncodeToString(h.Sum(nil))
	}
	keys := c.Keys
	if len(keys) == 0 {
		keys = make([]string, 0, len(c.Data))
		for k := range c.Data {
			keys = append(keys, k)
		}
	}
	keys = slices.Clone(keys)
	sort.Strings(keys)
	keys = slices.Compact(keys)
	for _, k := range keys {
		v, ok := c.Data[k]
		write(h, []byte(k))
		if !ok {
			// A listed key that is absent differs from one that is empty.
			write(h, []byte("\x00absent"))
			continue
		}
		write(h, v)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Combined is the digest of several sources' hashes, independent of the order
// they are listed in: the value written into pod templates.
func Combined(hashes []string) string {
	s := slices.Clone(hashes)
	sort.Strings(s)
	h := sha256.New()
	for _, x := range s {
		write(h, []byte(x))
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// ReadKeys narrows a source's key filter (empty: every key) to what a pod
// template reads of the source, and reports whether it reads any key that
// counts. A pod that reads the whole source sees every key the filter lets
// through; one that reads single keys sees only those.
func ReadKeys(filter []string, u Use) ([]string, bool) {
	switch {
	case u.Whole:
		return filter, true
	case len(filter) == 0:
		return sets.List(u.Keys), u.Keys.Len() > 0
	default:
		keys := sets.List(u.Keys.Intersection(sets.New(filter...)))
		return keys, len(keys) > 0
	}
}

// WorkloadHash is the hash for a workload whose pods read the sources as uses
// says: each source it reads hashed over the keys it reads (ReadKeys), the
// ones it does not read left out, so that only a change the pods can see
// rolls them. A workload that reads every source whole gets Combined of the
// sources' own hashes: what every workload carried before keys were told
// apart, so an upgrade rolls none of those.
func WorkloadHash(contents []Content, uses Uses) string {
	hashes := make([]string, 0, len(contents))
	for _, c := range contents {
		m := uses.ConfigMaps
		if c.Kind == KindSecret {
			m = uses.Secrets
		}
		u, ok := m[c.Name]
		if !ok {
			continue
		}
		keys, reads := ReadKeys(c.Keys, u)
		if !reads {
			continue
		}
		c.Keys = keys
		hashes = append(hashes, Hash(c))
	}
	return Combined(hashes)
}

func write(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}
