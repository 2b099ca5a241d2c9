package snapshot

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Bucket names of etcd's backend (server/storage/schema/bucket.go).
var (
	bucketKey   = []byte("key")
	bucketMeta  = []byte("meta")
	bucketLease = []byte("lease")
)

// Errors returned by Open. Each is wrapped with the file's path.
var (
	// ErrEmpty is returned for a zero-length file.
	ErrEmpty = errors.New("file is empty, not an etcd database")
	// ErrNotBolt is returned when the file is not a bbolt database
	// (bad magic, version or meta checksum on both meta pages, or too short).
	ErrNotBolt = errors.New("not a bbolt database")
	// ErrNotEtcd is returned for a bbolt database without etcd's "key" and
	// "meta" buckets.
	ErrNotEtcd = errors.New("bbolt database without etcd's key and meta buckets")
	// ErrLocked is returned when another process holds the file's exclusive
	// lock (a running etcd member) for longer than Options.LockTimeout.
	ErrLocked = errors.New("locked by another process (a running etcd member?); inspect a copy made with `etcdctl snapshot save` instead")
	// ErrTruncated is returned when the file is shorter than the pages its
	// meta page says were allocated.
	ErrTruncated = errors.New("file is truncated")
	// ErrCorrupt is returned when reading the file faults or bbolt panics on
	// a corrupt page; the message names what was being read.
	ErrCorrupt = errors.New("corrupt database")
)

// Options control Open.
type Options struct {
	// LockTimeout bounds the wait for the shared file lock; a running etcd
	// member holds an exclusive one. 0 means 2 seconds. Open never waits
	// forever.
	LockTimeout time.Duration
}

// Trailer says whether a file ends with the SHA-256 checksum that
// `etcdctl snapshot save` appends (etcdutl/snapshot/v3_snapshot.go
// hasChecksum: the file size modulo 512 is 32).
type Trailer string

// The trailer states.
const (
	TrailerAbsent  Trailer = "absent"  // a member's own db file, or a copy of one
	TrailerValid   Trailer = "valid"   // the checksum matches the bytes before it
	TrailerInvalid Trailer = "invalid" // the file was modified or truncated after it was saved
)

// DB is an etcd backend database opened read-only: a member's
// member/snap/db or the output of `etcdctl snapshot save`. Nothing in this
// package writes to it: the file is opened O_RDONLY, mapped read-only, and
// bbolt's read-only mode never commits.
type DB struct {
	path string
	size int64
	bolt *bolt.DB
}

// Open opens path read-only. path may be a db file or an etcd data
// directory (then DIR/member/snap/db is opened). Errors name the path and
// wrap ErrEmpty, ErrNotBolt, ErrNotEtcd, ErrLocked, ErrCorrupt or the
// operating system's error.
func Open(path string, opts Options) (db *DB, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		inner := filepath.Join(path, "member", "snap", "db")
		if fi, err = os.Stat(inner); err != nil {
			return nil, fmt.Errorf("%s: a directory without member/snap/db", path)
		}
		path = inner
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if fi.Size() == 0 {
		return nil, fmt.Errorf("%s: %w", path, ErrEmpty)
	}
	if fi.Size() < 2*1024 {
		return nil, fmt.Errorf("%s: %w: %d bytes is shorter than two meta pages", path, ErrNotBolt, fi.Size())
	}
	m, err := readMeta(path)
	if err != nil {
		return nil, err
	}
	if want := int64(m.highWater) * int64(m.pageSize); fi.Size() < want {
		return nil, fmt.Errorf("%s: %w: %d bytes, but its meta page counts %d pages of %d bytes (%d bytes)",
			path, ErrTruncated, fi.Size(), m.highWater, m.pageSize, want)
	}
	timeout := opts.LockTimeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	var bdb *bolt.DB
	err = guard(path, "open", func() error {
		var err error
		bdb, err = bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: timeout})
		return err
	})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("%s: %w", path, ErrLocked)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrChecksum):
		return nil, fmt.Errorf("%s: %w: %v", path, ErrNotBolt, err)
	case err != nil:
		return nil, err
	}
	db = &DB{path: path, size: fi.Size(), bolt: bdb}
	err = db.view("check buckets", func(tx *bolt.Tx) error {
		if tx.Bucket(bucketKey) == nil || tx.Bucket(bucketMeta) == nil {
			return fmt.Errorf("%s: %w", path, ErrNotEtcd)
		}
		return nil
	})
	if err != nil {
		bdb.Close()
		return nil, err
	}
	return db, nil
}

// Path returns the file that was opened (for a data directory, its
// member/snap/db).
func (db *DB) Path() string { return db.path }

// Close releases the file.
func (db *DB) Close() error { return db.bolt.Close() }

// view runs fn in a read transaction, turning panics and memory faults
// into ErrCorrupt.
func (db *DB) view(what string, fn func(*bolt.Tx) error) error {
	return guard(db.path, what, func() error { return db.bolt.View(fn) })
}

// guard runs fn, converting a panic (bbolt panics on some corrupt pages) or
// a fault on the memory-mapped file (a truncated file) into an error naming
// the file and the operation.
func guard(path, what string, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: %w while trying to %s: %v", path, ErrCorrupt, what, r)
		}
	}()
	return fn()
}

// VerifyTrailer reports whether the file ends with a snapshot checksum and,
// if so, whether it matches. It reads the whole file once.
func (db *DB) VerifyTrailer() (Trailer, error) {
	if db.size%512 != sha256.Size {
		return TrailerAbsent, nil
	}
	f, err := os.Open(db.path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, db.size-sha256.Size); err != nil {
		return "", fmt.Errorf("%s: read: %w", db.path, err)
	}
	want := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, want); err != nil {
		return "", fmt.Errorf("%s: read trailer: %w", db.path, err)
	}
	if bytes.Equal(h.Sum(nil), want) {
		return TrailerValid, nil
	}
	return TrailerInvalid, nil
}
