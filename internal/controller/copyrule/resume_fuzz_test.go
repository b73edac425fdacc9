package copyrule

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// FuzzInputsDigest builds inputs from bytes and checks that the digest
// ignores the order of every list and tells any one version apart.
func FuzzInputsDigest(f *testing.F) {
	f.Add([]byte{3, 1, 4, 1, 5, 9, 2, 6}, uint64(7))
	f.Add([]byte{0}, uint64(0))
	f.Fuzz(func(t *testing.T, world []byte, seed uint64) {
		next := byteReader(world)
		in := Inputs{Generation: int64(next()), Clusters: []string{"local", "local"}}
		for i := range int(next() % 6) {
			in.Sources = append(in.Sources, Version{"src", fmt.Sprintf("s%d", i), fmt.Sprintf("u%d", next()), fmt.Sprint(next())})
		}
		for i := range int(next() % 8) {
			in.Copies = append(in.Copies, Version{fmt.Sprintf("t%d", next()%3), fmt.Sprintf("c%d", i), fmt.Sprintf("u%d", next()), fmt.Sprint(next())})
		}
		for i := range int(next() % 4) {
			in.Targets.Namespaces = append(in.Targets.Namespaces, fmt.Sprintf("t%d", i))
		}
		want := in.Digest()

		shuffled := in
		r := rand.New(rand.NewPCG(seed, seed))
		shuffled.Sources, shuffled.Copies = append([]Version(nil), in.Sources...), append([]Version(nil), in.Copies...)
		shuffled.Targets.Namespaces = append([]string(nil), in.Targets.Namespaces...)
		r.Shuffle(len(shuffled.Sources), func(i, j int) { shuffled.Sources[i], shuffled.Sources[j] = shuffled.Sources[j], shuffled.Sources[i] })
		r.Shuffle(len(shuffled.Copies), func(i, j int) { shuffled.Copies[i], shuffled.Copies[j] = shuffled.Copies[j], shuffled.Copies[i] })
		r.Shuffle(len(shuffled.Targets.Namespaces), func(i, j int) {
			shuffled.Targets.Namespaces[i], shuffled.Targets.Namespaces[j] = shuffled.Targets.Namespaces[j], shuffled.Targets.Namespaces[i]
		})
		if got := shuffled.Digest(); got != want {
			t.Fatalf("the same inputs in another order digest to %s, want %s", got, want)
		}
		if in.Digest() != want {
			t.Fatal("Digest changed its inputs' order")
		}
		// Each version written since, a source's or a copy's, moves the digest.
		for what, list := range map[string]func(*Inputs) *[]Version{
			"copy":   func(in *Inputs) *[]Version { return &in.Copies },
			"source": func(in *Inputs) *[]Version { return &in.Sources },
		} {
			for i := range *list(&in) {
				moved := in
				vs := list(&moved)
				*vs = append([]Version(nil), *vs...)
				(*vs)[i].ResourceVersion += "0"
				if moved.Digest() == want {
					t.Fatalf("%s %d written since digests the same", what, i)
				}
			}
		}
	})
}
