package explore

import "testing"

// TestGenerateDrawsOnlyAllowed: every operation the generator draws is one
// the model allows after those before it, so that a generated sequence
// replays, and shrinks, as it was drawn.
func TestGenerateDrawsOnlyAllowed(t *testing.T) {
	for seed := range uint64(300) {
		if err := Generate(seed, 200).Check(); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
}
