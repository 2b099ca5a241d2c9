package revision

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestBucketKeyRoundTrip(t *testing.T) {
	tests := []struct {
		name      string
		key       BucketKey
		wantBytes []byte
	}{
		{
			name:      "first write",
			key:       BucketKey{Revision: Revision{Main: 2}},
			wantBytes: []byte{0, 0, 0, 0, 0, 0, 0, 2, '_', 0, 0, 0, 0, 0, 0, 0, 0},
		},
		{
			name:      "sub revision",
			key:       BucketKey{Revision: Revision{Main: 0x0102, Sub: 3}},
			wantBytes: []byte{0, 0, 0, 0, 0, 0, 1, 2, '_', 0, 0, 0, 0, 0, 0, 0, 3},
		},
		{
			name:      "tombstone",
			key:       BucketKey{Revision: Revision{Main: 9, Sub: 1}, Tombstone: true},
			wantBytes: []byte{0, 0, 0, 0, 0, 0, 0, 9, '_', 0, 0, 0, 0, 0, 0, 0, 1, 't'},
		},
		{
			name:      "largest",
			key:       BucketKey{Revision: Revision{Main: math.MaxInt64, Sub: math.MaxInt64}},
			wantBytes: []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '_', 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.key.Bytes()
			if !bytes.Equal(got, tt.wantBytes) {
				t.Fatalf("Bytes() = %x, want %x", got, tt.wantBytes)
			}
			back, err := Decode(got)
			if err != nil {
				t.Fatalf("Decode(%x): %v", got, err)
			}
			if back != tt.key {
				t.Fatalf("Decode(Bytes()) = %+v, want %+v", back, tt.key)
			}
		})
	}
}

func TestDecodeMalformed(t *testing.T) {
	valid := BucketKey{Revision: Revision{Main: 5, Sub: 1}}.Bytes()
	withByte := func(i int, v byte) []byte {
		b := bytes.Clone(valid)
		b[i] = v
		return b
	}
	tests := []struct {
		name    string
		in      []byte
		wantErr error
	}{
		{"nil", nil, ErrBadLength},
		{"16 bytes", valid[:16], ErrBadLength},
		{"19 bytes", append(bytes.Clone(valid), 't', 't'), ErrBadLength},
		{"bad separator", withByte(8, '-'), ErrBadSeparator},
		{"bad marker", append(bytes.Clone(valid), 'x'), ErrBadMarker},
		{"negative main", withByte(0, 0x80), ErrNegative},
		{"negative sub", withByte(9, 0xff), ErrNegative},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.in)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Decode(%x) error = %v, want %v", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestDecodeRevisionRejectsTombstone(t *testing.T) {
	b := BucketKey{Revision: Revision{Main: 7}, Tombstone: true}.Bytes()
	if _, err := DecodeRevision(b); !errors.Is(err, ErrBadLength) {
		t.Fatalf("DecodeRevision(tombstone) error = %v, want ErrBadLength", err)
	}
	got, err := DecodeRevision(Revision{Main: 7, Sub: 2}.Bytes())
	if err != nil || got != (Revision{Main: 7, Sub: 2}) {
		t.Fatalf("DecodeRevision = %v, %v; want 7_2, nil", got, err)
	}
}

func TestBucketKeyOrderIsCommitOrder(t *testing.T) {
	revs := []BucketKey{
		{Revision: Revision{Main: 1}},
		{Revision: Revision{Main: 1, Sub: 1}},
		{Revision: Revision{Main: 1, Sub: 1}, Tombstone: true},
		{Revision: Revision{Main: 2}},
		{Revision: Revision{Main: 256}},
		{Revision: Revision{Main: 1 << 40}},
	}
	for i := 1; i < len(revs); i++ {
		a, b := revs[i-1].Bytes(), revs[i].Bytes()
		if bytes.Compare(a, b) >= 0 {
			t.Errorf("bytes of %v (%x) do not sort before %v (%x)", revs[i-1], a, revs[i], b)
		}
		if revs[i-1].Compare(revs[i].Revision) > 0 {
			t.Errorf("Compare(%v, %v) > 0", revs[i-1], revs[i])
		}
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		a, b Revision
		want int
	}{
		{Revision{1, 0}, Revision{1, 0}, 0},
		{Revision{1, 0}, Revision{1, 1}, -1},
		{Revision{2, 0}, Revision{1, 9}, 1},
		{Revision{1, 9}, Revision{2, 0}, -1},
	}
	for _, tt := range tests {
		if got := tt.a.Compare(tt.b); got != tt.want {
			t.Errorf("%v.Compare(%v) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(BucketKey{Revision: Revision{Main: 3}}.Bytes())
	f.Add(BucketKey{Revision: Revision{Main: 3, Sub: 4}, Tombstone: true}.Bytes())
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := Decode(b)
		if err != nil {
			return
		}
		if got := k.Bytes(); !bytes.Equal(got, b) {
			t.Fatalf("Decode(%x) = %+v re-encodes to %x", b, k, got)
		}
	})
}
