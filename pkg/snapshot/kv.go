package snapshot

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// KeyValue is a decoded mvccpb.KeyValue, the value of every entry of the
// key bucket (api/mvccpb/kv.proto; mvcc/mvccpb/kv.proto in etcd 3.4):
//
//	field 1  key              bytes
//	field 2  create_revision  int64 (varint)
//	field 3  mod_revision     int64 (varint)
//	field 4  version          int64 (varint)
//	field 5  value            bytes
//	field 6  lease            int64 (varint)
//
// Key and Value alias the mapped file (or the buffer decoded): copy them to
// keep them past the scan callback. A tombstone's KeyValue holds only the
// key (server/storage/mvcc/kvstore_txn.go delete); an entry written by
// `etcdutl snapshot restore --bump-revision` is empty.
type KeyValue struct {
	// Key is the etcd key.
	Key []byte
	// CreateRevision is the main revision that created the key (0 in a tombstone).
	CreateRevision int64
	// ModRevision is the main revision of this change (0 in a tombstone).
	ModRevision int64
	// Version counts the changes since creation, from 1 (0 in a tombstone).
	Version int64
	// Value is the stored bytes.
	Value []byte
	// Lease is the ID of the lease the key is attached to, 0 for none.
	Lease int64
}

// DecodeKeyValue parses the protobuf wire format of mvccpb.KeyValue with
// protowire, without copying: about ten times faster than proto.Unmarshal
// into the generated type, which copies the key and value. Unknown fields
// are skipped, as protobuf requires. It returns an error (never panics) for
// a truncated or malformed message or a field of the wrong wire type.
func DecodeKeyValue(b []byte) (KeyValue, error) {
	var kv KeyValue
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return KeyValue{}, fmt.Errorf("mvccpb.KeyValue: bad tag: %w", protowire.ParseError(n))
		}
		if !num.IsValid() {
			return KeyValue{}, fmt.Errorf("mvccpb.KeyValue: invalid field number %d", num)
		}
		b = b[n:]
		switch {
		case (num == 1 || num == 5) && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return KeyValue{}, fmt.Errorf("mvccpb.KeyValue field %d: %w", num, protowire.ParseError(n))
			}
			if num == 1 {
				kv.Key = v
			} else {
				kv.Value = v
			}
			b = b[n:]
		case num >= 2 && num <= 6 && num != 5 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return KeyValue{}, fmt.Errorf("mvccpb.KeyValue field %d: %w", num, protowire.ParseError(n))
			}
			switch num {
			case 2:
				kv.CreateRevision = int64(v)
			case 3:
				kv.ModRevision = int64(v)
			case 4:
				kv.Version = int64(v)
			case 6:
				kv.Lease = int64(v)
			}
			b = b[n:]
		case num >= 1 && num <= 6:
			return KeyValue{}, fmt.Errorf("mvccpb.KeyValue field %d has wire type %d", num, typ)
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return KeyValue{}, fmt.Errorf("mvccpb.KeyValue field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	return kv, nil
}

// AppendKeyValue appends the wire encoding of kv to b, omitting zero
// fields as protobuf does. It is the inverse of DecodeKeyValue.
func AppendKeyValue(b []byte, kv KeyValue) []byte {
	if len(kv.Key) > 0 {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, kv.Key)
	}
	for _, f := range []struct {
		num protowire.Number
		v   int64
	}{{2, kv.CreateRevision}, {3, kv.ModRevision}, {4, kv.Version}} {
		if f.v != 0 {
			b = protowire.AppendTag(b, f.num, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(f.v))
		}
	}
	if len(kv.Value) > 0 {
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendBytes(b, kv.Value)
	}
	if kv.Lease != 0 {
		b = protowire.AppendTag(b, 6, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(kv.Lease))
	}
	return b
}
