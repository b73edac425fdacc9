package chaosagent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

var lorem = strings.Fields(`lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod
tempor incididunt ut labore et dolore magna aliqua enim ad minim veniam quis nostrud exercitation
ullamco laboris nisi aliquip ex ea commodo consequat duis aute irure in reprehenderit voluptate velit
esse cillum fugiat nulla pariatur excepteur sint occaecat cupidatat non proident sunt culpa qui
officia deserunt mollit anim id est laborum`)

// Ipsum is the lorem ipsum that replaces one value of a ConfigMap in a round:
// the same round, object and key always give the same text.
func Ipsum(round int64, namespace, name, key string) string {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%s\x00%s\x00%s", namespace, name, key)
	r := rand.New(rand.NewPCG(h.Sum64(), uint64(round))) //nolint:gosec // Chaos, not cryptography.
	words := make([]string, 5+r.IntN(20))
	for i := range words {
		words[i] = lorem[r.IntN(len(lorem))]
	}
	first, size := utf8.DecodeRuneInString(words[0])
	words[0] = string(unicode.ToUpper(first)) + words[0][size:]
	return strings.Join(words, " ") + "."
}

// IpsumData is the data a ConfigMap with the given keys gets in a round.
func IpsumData(round int64, namespace, name string, keys []string) map[string]string {
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		out[k] = Ipsum(round, namespace, name, k)
	}
	return out
}

// Digest describes ConfigMap data for status and events without revealing it.
func Digest(data map[string]string) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		// Lengths first, so that no two different maps hash alike.
		_, _ = fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(data[k]), data[k])
	}
	return fmt.Sprintf("sha256:%s (%d keys)", hex.EncodeToString(h.Sum(nil))[:12], len(keys))
}
