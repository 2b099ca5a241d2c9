package revision

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Revision is one position in etcd's history: the main revision of a
// transaction and the sub revision of one change inside it. The zero value is
// revision {0, 0}, which etcd never assigns to a key (the first write gets
// main revision 2 on a fresh cluster, 1 being the empty store).
type Revision struct {
	// Main is the revision of the transaction, shared by every change it
	// made. It is what etcd reports as mod_revision and header revision.
	Main int64
	// Sub is the index of the change inside the transaction, from 0.
	Sub int64
}

// Compare orders revisions by main, then sub revision. It returns -1 when r
// comes before o, 0 when they are equal and +1 when r comes after o.
func (r Revision) Compare(o Revision) int {
	switch {
	case r.Main < o.Main:
		return -1
	case r.Main > o.Main:
		return 1
	case r.Sub < o.Sub:
		return -1
	case r.Sub > o.Sub:
		return 1
	}
	return 0
}

// String formats the revision as etcd's logs do, "main_sub".
func (r Revision) String() string { return fmt.Sprintf("%d_%d", r.Main, r.Sub) }

// Bucket key layout (server/storage/mvcc/revision.go):
//
//	byte  0..7   main revision, big-endian uint64
//	byte  8      '_' (0x5F)
//	byte  9..16  sub revision, big-endian uint64
//	byte  17     't' (0x74), present only on a tombstone
//
// Because the encoding is big-endian and fixed-width, the byte order of bucket
// keys is the commit order of the changes they name.
const (
	// BytesLen is the length of an encoded revision: 17 bytes.
	BytesLen = 8 + 1 + 8
	// TombstoneBytesLen is the length of a tombstone's bucket key: 18 bytes.
	TombstoneBytesLen = BytesLen + 1

	separator       = '_'
	tombstoneMarker = 't'
)

// BucketKey is a decoded key of etcd's "key" bucket: the revision of one
// change and whether that change deleted the key (a tombstone, whose value
// is a mvccpb.KeyValue that holds only the key).
type BucketKey struct {
	Revision
	// Tombstone is true when the change was a delete.
	Tombstone bool
}

// Bytes encodes the bucket key: 17 bytes, 18 for a tombstone. Negative main
// or sub revisions, which etcd never writes, are encoded as their two's
// complement and rejected by Decode.
func (k BucketKey) Bytes() []byte {
	return k.AppendBytes(make([]byte, 0, TombstoneBytesLen))
}

// AppendBytes appends the encoding of k to b and returns the extended slice.
func (k BucketKey) AppendBytes(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(k.Main))
	b = append(b, separator)
	b = binary.BigEndian.AppendUint64(b, uint64(k.Sub))
	if k.Tombstone {
		b = append(b, tombstoneMarker)
	}
	return b
}

// Bytes encodes r as a 17-byte revision, the form the meta bucket uses for
// scheduledCompactRev and finishedCompactRev.
func (r Revision) Bytes() []byte { return BucketKey{Revision: r}.Bytes() }

// Errors returned by Decode and DecodeRevision. Each wraps the offending
// detail; test with errors.Is.
var (
	// ErrBadLength is returned when a key is neither 17 nor 18 bytes long.
	ErrBadLength = errors.New("revision key has bad length")
	// ErrBadSeparator is returned when byte 8 is not '_'.
	ErrBadSeparator = errors.New("revision key has bad separator")
	// ErrBadMarker is returned when an 18-byte key does not end in 't'.
	ErrBadMarker = errors.New("revision key has bad tombstone marker")
	// ErrNegative is returned when the main or sub revision does not fit in
	// an int64, i.e. would be negative.
	ErrNegative = errors.New("revision key holds a negative revision")
)

// Decode parses a key of etcd's "key" bucket. Unlike etcd's own
// BytesToBucketKey, which panics, it returns an error for any malformed
// input: a length other than 17 or 18 (ErrBadLength), a missing '_'
// (ErrBadSeparator), an 18th byte other than 't' (ErrBadMarker) or a main or
// sub revision above math.MaxInt64 (ErrNegative).
func Decode(b []byte) (BucketKey, error) {
	switch len(b) {
	case BytesLen, TombstoneBytesLen:
	default:
		return BucketKey{}, fmt.Errorf("%w: %d bytes, want %d or %d", ErrBadLength, len(b), BytesLen, TombstoneBytesLen)
	}
	if b[8] != separator {
		return BucketKey{}, fmt.Errorf("%w: byte 8 is %#x, want '_'", ErrBadSeparator, b[8])
	}
	main, sub := binary.BigEndian.Uint64(b[0:8]), binary.BigEndian.Uint64(b[9:17])
	if main > math.MaxInt64 || sub > math.MaxInt64 {
		return BucketKey{}, fmt.Errorf("%w: main %d, sub %d", ErrNegative, main, sub)
	}
	k := BucketKey{Revision: Revision{Main: int64(main), Sub: int64(sub)}}
	if len(b) == TombstoneBytesLen {
		if b[17] != tombstoneMarker {
			return BucketKey{}, fmt.Errorf("%w: byte 17 is %#x, want 't'", ErrBadMarker, b[17])
		}
		k.Tombstone = true
	}
	return k, nil
}

// DecodeRevision parses a 17-byte revision as stored in the meta bucket
// (scheduledCompactRev, finishedCompactRev). An 18-byte tombstone key is
// rejected with ErrBadLength: the meta bucket never holds one.
func DecodeRevision(b []byte) (Revision, error) {
	if len(b) != BytesLen {
		return Revision{}, fmt.Errorf("%w: %d bytes, want %d", ErrBadLength, len(b), BytesLen)
	}
	k, err := Decode(b)
	return k.Revision, err
}
