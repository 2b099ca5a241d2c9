package snapshot

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/kubestore/etcdkit/pkg/revision"
)

// Entry is one entry of etcd's "key" bucket: one revision of one key.
type Entry struct {
	// Key is the decoded bucket key: the revision and the tombstone flag.
	Key revision.BucketKey
	// KV is the stored mvccpb.KeyValue; its Key and Value alias the mapped
	// file and are valid only during the callback.
	KV KeyValue
	// Bytes is what bbolt stores for the entry: the bucket key plus the
	// marshalled KeyValue, without page overhead.
	Bytes int64
}

// Progress reports how far the scans of a DB have gone, for a progress
// bar. The zero value is ready; its methods may be called from any
// goroutine while a scan runs.
type Progress struct {
	done, total atomic.Int64
}

// Load returns the parts of the key bucket scanned so far and in all. A
// part is a subtree of the bucket's B+tree; there are at least 64 per
// worker on a large file. total is 0 before the first scan starts.
func (p *Progress) Load() (done, total int64) { return p.done.Load(), p.total.Load() }

// errStop ends a walk early without an error.
var errStop = errors.New("stop")

// workers returns the number of goroutines a scan uses.
func (db *DB) workers() int {
	if db.opts.Workers > 0 {
		return db.opts.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// scanFunc receives the entries of one worker's range, in revision order.
type scanFunc func(worker int, e *Entry, k, v []byte) error

// scan reads the whole key bucket with n workers (see workers), each on a
// contiguous range of subtrees in revision order: worker 0 gets the
// oldest entries. fn is called concurrently from different workers, but
// never concurrently for the same worker. It stops at the first error, at
// a malformed bucket key or value, at entries out of revision order, when
// ctx ends, or on a fault (all ErrCorrupt but ctx's).
func (db *DB) scan(ctx context.Context, n int, fn scanFunc) error {
	return db.guard("scan the key bucket", func() error {
		b, _, err := db.bucket(bucketKey)
		if err != nil {
			return err
		}
		parts, err := db.pg.subtrees(b, 64*n)
		if err != nil {
			return err
		}
		if p := db.opts.Progress; p != nil {
			p.total.Add(int64(len(parts)))
		}
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		var wg sync.WaitGroup
		for w := range n {
			lo, hi := w*len(parts)/n, (w+1)*len(parts)/n
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := db.scanRange(ctx, w, parts[lo:hi], fn); err != nil {
					cancel(err)
				}
			}()
		}
		wg.Wait()
		if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return ctx.Err()
	})
}

// scanRange walks parts in order for worker w, in its own goroutine with
// its own fault guard.
func (db *DB) scanRange(ctx context.Context, w int, parts []page, fn scanFunc) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			err = db.recovered("scanning the key bucket", r)
		}
	}()
	var e Entry
	var prev revision.BucketKey
	first := true
	count := 0
	seen := newPageSet(db.meta.highWater)
	for _, pg := range parts {
		err := db.pg.walk(pg, false, seen, func(_ uint32, k, v []byte) error {
			count++
			if count%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			bk, err := revision.Decode(k)
			if err != nil {
				return fmt.Errorf("%s: %w: key bucket entry (key %x): %v", db.path, ErrCorrupt, k, err)
			}
			if !first && bk.Compare(prev.Revision) <= 0 && !(bk.Revision == prev.Revision && bk.Tombstone && !prev.Tombstone) {
				return fmt.Errorf("%s: %w: key bucket entry %s follows %s", db.path, ErrCorrupt, bk.Revision, prev.Revision)
			}
			first, prev = false, bk
			kv, err := DecodeKeyValue(v)
			if err != nil {
				return fmt.Errorf("%s: %w: key bucket entry at revision %s: %v", db.path, ErrCorrupt, bk.Revision, err)
			}
			e.Key, e.KV, e.Bytes = bk, kv, int64(len(k)+len(v))
			return fn(w, &e, k, v)
		})
		if err != nil {
			return err
		}
		if p := db.opts.Progress; p != nil {
			p.done.Add(1)
		}
	}
	return nil
}

// ForEachRevision calls fn for every entry of the key bucket in revision
// order (the bucket's byte order, which is commit order), from one
// goroutine. It stops at the first error from fn, at a malformed bucket
// key or value (ErrCorrupt, naming the entry), when ctx ends, or on a
// corrupt page (ErrCorrupt).
func (db *DB) ForEachRevision(ctx context.Context, fn func(Entry) error) error {
	return db.scan(ctx, 1, func(_ int, e *Entry, _, _ []byte) error { return fn(*e) })
}

// reverseScan calls fn for the entries of the key bucket from the newest
// to the oldest, in this goroutine, until fn returns errStop.
func (db *DB) reverseScan(ctx context.Context, fn func(e *Entry) error) error {
	return db.guard("scan the key bucket backwards", func() error {
		b, _, err := db.bucket(bucketKey)
		if err != nil {
			return err
		}
		root, err := db.pg.rootPage(b)
		if err != nil {
			return err
		}
		var e Entry
		count := 0
		err = db.pg.walk(root, true, newPageSet(db.meta.highWater), func(_ uint32, k, v []byte) error {
			count++
			if count%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			bk, err := revision.Decode(k)
			if err != nil {
				return fmt.Errorf("%w: key bucket entry (key %x): %v", ErrCorrupt, k, err)
			}
			kv, err := DecodeKeyValue(v)
			if err != nil {
				return fmt.Errorf("%w: key bucket entry at revision %s: %v", ErrCorrupt, bk.Revision, err)
			}
			e.Key, e.KV, e.Bytes = bk, kv, int64(len(k)+len(v))
			return fn(&e)
		})
		if errors.Is(err, errStop) {
			return nil
		}
		return err
	})
}

// entryAt returns the entry at exactly rev (a live entry or a tombstone),
// with its key and value copied.
func (db *DB) entryAt(rev revision.Revision) (Entry, bool, error) {
	var e Entry
	var found bool
	err := db.guard("read revision "+rev.String(), func() error {
		b, _, err := db.bucket(bucketKey)
		if err != nil {
			return err
		}
		for _, tomb := range []bool{false, true} {
			bk := revision.BucketKey{Revision: rev, Tombstone: tomb}
			_, v, ok, err := db.pg.get(b, bk.Bytes())
			if err != nil || !ok {
				if err != nil {
					return err
				}
				continue
			}
			kv, err := DecodeKeyValue(v)
			if err != nil {
				return fmt.Errorf("%w: key bucket entry at revision %s: %v", ErrCorrupt, rev, err)
			}
			kv.Key, kv.Value = append([]byte(nil), kv.Key...), append([]byte(nil), kv.Value...)
			e = Entry{Key: bk, KV: kv, Bytes: int64(len(bk.Bytes()) + len(v))}
			found = true
			return nil
		}
		return nil
	})
	return e, found, err
}

// LastRevision returns the last entry's main revision, 0 for an empty key
// bucket, without scanning (etcdutl snapshot status reports this as the
// snapshot's revision).
func (db *DB) LastRevision(ctx context.Context) (int64, error) {
	var last int64
	err := db.reverseScan(ctx, func(e *Entry) error {
		last = e.Key.Main
		return errStop
	})
	return last, err
}
