package snapshot

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestRandomMutations overwrites a fixture with small integers and random
// bytes at random offsets, the kind of damage that hits page headers and
// element offsets, and checks that every reader returns within a few
// seconds (a corrupt tree may point pages at each other) without
// crashing the process.
func TestRandomMutations(t *testing.T) {
	orig, err := os.ReadFile(fixturePath("3.7"))
	if err != nil {
		t.Fatal(err)
	}
	n := 1500
	if testing.Short() {
		n = 200
	}
	r := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	for i := range n {
		b := slices.Clone(orig)
		for range 1 + r.IntN(4) {
			switch r.IntN(3) {
			case 0:
				b[r.IntN(len(b))] = byte(r.Uint32())
			case 1:
				le.PutUint64(b[r.IntN(len(b)-8):], uint64(r.IntN(40)))
			case 2:
				le.PutUint16(b[r.IntN(len(b)-2):], uint16(r.IntN(70000)))
			}
		}
		p := filepath.Join(dir, "mutated.db")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { readEverything(t, p); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("mutation %d: readers still running after 10s", i)
		}
	}
}
