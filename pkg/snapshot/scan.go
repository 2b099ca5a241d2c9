package snapshot

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"github.com/kubestore/etcdkit/pkg/revision"
)

// Entry is one entry of etcd's "key" bucket: one revision of one key.
type Entry struct {
	// Key is the decoded bucket key: the revision and the tombstone flag.
	Key revision.BucketKey
	// KV is the stored mvccpb.KeyValue. A tombstone's holds only the key; an
	// entry written by `etcdutl snapshot restore --bump-revision` is empty.
	// The pointer is reused for the next entry: copy what must outlive the
	// callback.
	KV *mvccpb.KeyValue
	// Bytes is what bbolt stores for the entry: the bucket key plus the
	// marshalled KeyValue, without page overhead.
	Bytes int64
}

// ForEachRevision calls fn for every entry of the key bucket in revision
// order (the bucket's byte order, which is commit order), in one read
// transaction. It stops at the first error from fn, at a malformed bucket
// key or value (an error naming the entry's position), when ctx ends, or on
// a corrupt page (ErrCorrupt).
func (db *DB) ForEachRevision(ctx context.Context, fn func(Entry) error) error {
	return db.view("scan the key bucket", func(tx *bolt.Tx) error {
		var kv mvccpb.KeyValue
		e := Entry{KV: &kv}
		c := tx.Bucket(bucketKey).Cursor()
		n := 0
		for k, v := c.First(); k != nil; k, v = c.Next() {
			n++
			if n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			bk, err := revision.Decode(k)
			if err != nil {
				return fmt.Errorf("%s: key bucket entry %d (key %x): %w", db.path, n, k, err)
			}
			kv.Reset()
			if err := proto.Unmarshal(v, &kv); err != nil {
				return fmt.Errorf("%s: key bucket entry at revision %s: value is not a mvccpb.KeyValue: %w", db.path, bk.Revision, err)
			}
			e.Key = bk
			e.Bytes = int64(len(k) + len(v))
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	})
}

// LastRevision returns the last entry's main revision, 0 for an empty key
// bucket, without scanning (etcdutl snapshot status reports this as the
// snapshot's revision).
func (db *DB) LastRevision() (int64, error) {
	var last int64
	err := db.view("read the last key bucket entry", func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketKey).Cursor().Last()
		if k == nil {
			return nil
		}
		bk, err := revision.Decode(k)
		if err != nil {
			return fmt.Errorf("%s: last key bucket entry (key %x): %w", db.path, k, err)
		}
		last = bk.Main
		return nil
	})
	return last, err
}
