package snapshot

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestCRC32CCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 100, 4096, 100000} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		want := crc32.Checksum(data, castagnoli)
		for _, cut := range []int{0, n / 3, n / 2, n} {
			a := crcPart{}.update(data[:cut])
			b := crcPart{}.update(data[cut:])
			if got := a.join(b); got.crc != want || got.n != uint64(n) {
				t.Errorf("len %d cut %d: combined %#x (%d bytes), want %#x", n, cut, got.crc, got.n, want)
			}
		}
	}
}

func FuzzCRC32CCombine(f *testing.F) {
	f.Add([]byte("hello, etcd"), uint(3))
	f.Fuzz(func(t *testing.T, data []byte, cut uint) {
		c := int(cut % uint(len(data)+1))
		got := crcPart{}.update(data[:c]).join(crcPart{}.update(data[c:]))
		if want := crc32.Checksum(data, castagnoli); got.crc != want {
			t.Fatalf("combine at %d = %#x, want %#x", c, got.crc, want)
		}
	})
}
