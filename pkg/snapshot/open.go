package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"
	"unsafe"
)

// Bucket names of etcd's backend (server/storage/schema/bucket.go; the same
// names since etcd 3.0).
var (
	bucketKey            = []byte("key")
	bucketMeta           = []byte("meta")
	bucketLease          = []byte("lease")
	bucketAlarm          = []byte("alarm")
	bucketAuth           = []byte("auth")
	bucketAuthUsers      = []byte("authUsers")
	bucketAuthRoles      = []byte("authRoles")
	bucketMembers        = []byte("members")
	bucketMembersRemoved = []byte("members_removed")
	bucketCluster        = []byte("cluster")
)

// Errors returned by Open and by the reads that follow. Each is wrapped
// with the file's path.
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
	// ErrChanged is returned when the path named another file after the
	// wait for the lock (a defragmentation renames a new file over the
	// db) more often than Open follows such renames, or vanished.
	ErrChanged = errors.New("file changed while waiting for its lock")
	// ErrTruncated is returned when the file is shorter than the pages its
	// meta page says were allocated.
	ErrTruncated = errors.New("file is truncated")
	// ErrCorrupt is returned when a page or an entry is malformed, or when
	// reading the mapped file faults; the message names the page or entry.
	ErrCorrupt = errors.New("corrupt database")
	// ErrCompacted is returned by Get and Compaction for a revision below
	// the compact revision: its history is gone.
	ErrCompacted = errors.New("revision has been compacted")
	// ErrFutureRevision is returned for a revision above the current one.
	ErrFutureRevision = errors.New("revision is in the future")
	// ErrKeyNotFound is returned by Get and History for a key without an
	// entry (at the requested revision).
	ErrKeyNotFound = errors.New("key not found")
)

// Options control Open.
type Options struct {
	// LockTimeout bounds the wait for the shared file lock; a running etcd
	// member holds an exclusive one. 0 means 2 seconds. Open never waits
	// forever.
	LockTimeout time.Duration
	// Workers is how many goroutines a scan of the key bucket uses; 0 means
	// GOMAXPROCS.
	Workers int
	// Progress, when set, is advanced by every scan so that a caller can
	// draw a progress bar.
	Progress *Progress
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
// member/snap/db or the output of `etcdctl snapshot save`. The file is
// opened O_RDONLY under a shared lock and mapped with PROT_READ; no bbolt
// transaction is ever begun, so nothing can be written back. Methods may be
// called concurrently.
type DB struct {
	path string
	size int64
	file *os.File
	meta boltMeta
	pg   *pager
	opts Options
}

// Open is OpenContext without a context: its lock wait ends only at
// Options.LockTimeout.
func Open(path string, opts Options) (*DB, error) {
	return OpenContext(context.Background(), path, opts)
}

// maxReopens bounds how often OpenContext follows a path that another file
// was renamed over while it waited for the lock.
const maxReopens = 3

// OpenContext opens path read-only. path may be a db file or an etcd data
// directory (then DIR/member/snap/db is opened). It takes the shared lock
// first, waiting up to Options.LockTimeout or until ctx ends, and reads the
// meta pages only then: a member that committed, stopped or defragmented
// while it waited has finished writing, so the pages read agree with each
// other. etcd's defragmentation renames a new file over the old one
// (server/storage/backend/backend.go defrag); when the path names another
// file after the wait, that file is opened instead, at most maxReopens
// times. Errors name the path and wrap ErrEmpty, ErrNotBolt, ErrTruncated,
// ErrNotEtcd, ErrLocked, ErrChanged, ErrCorrupt, ctx's error or the
// operating system's error.
func OpenContext(ctx context.Context, path string, opts Options) (*DB, error) {
	path, err := dbFile(path)
	if err != nil {
		return nil, err
	}
	timeout := opts.LockTimeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for reopen := 0; ; reopen++ {
		// Only a regular file is opened: opening a FIFO would block.
		fi, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file", path)
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		if err := lockShared(ctx, f, deadline); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		held, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		now, err := os.Stat(path)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w while waiting for its lock: %w", path, ErrChanged, err)
		}
		if !os.SameFile(held, now) {
			f.Close()
			if reopen == maxReopens {
				return nil, fmt.Errorf("%s: %w: another file was renamed over it %d times while waiting for its lock", path, ErrChanged, reopen+1)
			}
			continue
		}
		db, err := openLocked(path, f, held.Size(), opts)
		if err != nil {
			f.Close()
			return nil, err
		}
		return db, nil
	}
}

// dbFile returns path, or for a directory its member/snap/db.
func dbFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return path, nil
	}
	inner := filepath.Join(path, "member", "snap", "db")
	if _, err := os.Stat(inner); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: a directory without member/snap/db", path)
	} else if err != nil {
		// Permission denied, a symlink loop, member/ not a directory: say
		// so, the directory may well hold a db.
		return "", fmt.Errorf("%s: a data directory whose member/snap/db cannot be read: %w", path, err)
	}
	return inner, nil
}

// openLocked reads the meta pages of f, which holds the shared lock and is
// size bytes long, maps it and finds etcd's buckets. The caller closes f
// on error.
func openLocked(path string, f *os.File, size int64, opts Options) (*DB, error) {
	if size == 0 {
		return nil, fmt.Errorf("%s: %w", path, ErrEmpty)
	}
	if size < 1024 {
		return nil, fmt.Errorf("%s: %w: %d bytes is shorter than two meta pages", path, ErrNotBolt, size)
	}
	m, err := readMeta(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// parseMeta bounds highWater·pageSize by MaxInt64.
	if want := int64(m.highWater) * int64(m.pageSize); size < want {
		return nil, fmt.Errorf("%s: %w: %d bytes, but its meta page counts %d pages of %d bytes (%d bytes)",
			path, ErrTruncated, size, m.highWater, m.pageSize, want)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("%s: %d bytes cannot be mapped on this platform", path, size)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: map read-only: %w", path, err)
	}
	db := &DB{path: path, size: size, file: f, meta: m, opts: opts,
		pg: &pager{data: data, pageSize: uint64(m.pageSize), highWater: m.highWater}}
	err = db.guard("find etcd's buckets", func() error {
		for _, name := range [][]byte{bucketKey, bucketMeta} {
			if _, ok, err := db.bucket(name); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("%s: %w", path, ErrNotEtcd)
			}
		}
		return nil
	})
	if err != nil {
		syscall.Munmap(data)
		return nil, err
	}
	return db, nil
}

// lockShared takes a shared flock on f, as bbolt's read-only mode does,
// polling until deadline or until ctx ends; a running etcd member holds an
// exclusive one.
func lockShared(ctx context.Context, f *os.File, deadline time.Time) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if err != syscall.EWOULDBLOCK {
			return fmt.Errorf("lock: %w", err)
		}
		if time.Now().After(deadline) {
			return ErrLocked
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the lock: %w", context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Path returns the file that was opened (for a data directory, its
// member/snap/db).
func (db *DB) Path() string { return db.path }

// SizeBytes returns the file's size when it was opened.
func (db *DB) SizeBytes() int64 { return db.size }

// Close unmaps and releases the file; it is safe to call once.
func (db *DB) Close() error {
	err := syscall.Munmap(db.pg.data)
	if cerr := db.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// bucket looks up a top-level bucket.
func (db *DB) bucket(name []byte) (bucket, bool, error) {
	flags, v, ok, err := db.pg.get(bucket{root: db.meta.root}, name)
	if err != nil || !ok {
		return bucket{}, false, err
	}
	if flags&bucketLeafFlag == 0 {
		return bucket{}, false, corruptf("root entry %q is not a bucket", name)
	}
	b, err := bucketValue(v)
	return b, err == nil, err
}

// forEach calls fn for every entry of a top-level bucket in key order; a
// missing bucket has none.
func (db *DB) forEach(name []byte, fn func(k, v []byte) error) error {
	b, ok, err := db.bucket(name)
	if err != nil || !ok {
		return err
	}
	root, err := db.pg.rootPage(b)
	if err != nil {
		return err
	}
	return db.pg.walk(root, false, newPageSet(db.meta.highWater), func(_ uint32, k, v []byte) error { return fn(k, v) })
}

// guard runs fn, converting a panic or a fault on the memory-mapped file
// (a file truncated while open) into an ErrCorrupt error naming the file
// and the operation, and prefixing other errors with the path when they
// do not already name it.
func (db *DB) guard(what string, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			err = db.recovered("trying to "+what, r)
		}
	}()
	return db.named(fn())
}

// recovered turns a panic or a fault that interrupted doing what into an
// error naming the file: ErrTruncated when the file is now shorter than
// when it was opened (another process truncated or rewrote it: the pages
// beyond its new end fault), ErrCorrupt otherwise.
func (db *DB) recovered(what string, r any) error {
	if err := db.shrunk(what); err != nil {
		return err
	}
	if f, ok := r.(interface{ Addr() uintptr }); ok && len(db.pg.data) > 0 {
		base := uintptr(unsafe.Pointer(&db.pg.data[0]))
		if a := f.Addr(); a >= base && a < base+uintptr(len(db.pg.data)) {
			return fmt.Errorf("%s: %w while %s: reading the mapped file faulted at offset %d", db.path, ErrCorrupt, what, a-base)
		}
		return fmt.Errorf("%s: %w while %s: a read faulted at address %#x", db.path, ErrCorrupt, what, f.Addr())
	}
	return fmt.Errorf("%s: %w while %s: %v", db.path, ErrCorrupt, what, r)
}

// shrunk returns an ErrTruncated error naming what was interrupted when
// the file is now shorter than when it was opened, nil otherwise.
func (db *DB) shrunk(what string) error {
	fi, err := db.file.Stat()
	if err != nil || fi.Size() >= db.size {
		return nil
	}
	return fmt.Errorf("%s: %w while %s: it shrank from %d to %d bytes since it was opened (another process is writing it?)",
		db.path, ErrTruncated, what, db.size, fi.Size())
}

// named prefixes err with the path unless it already starts with it.
func (db *DB) named(err error) error {
	if err == nil || len(err.Error()) >= len(db.path) && err.Error()[:len(db.path)] == db.path {
		return err
	}
	return fmt.Errorf("%s: %w", db.path, err)
}

// VerifyTrailer reports whether the file ends with a snapshot checksum and,
// if so, whether it matches. It reads the whole file once.
func (db *DB) VerifyTrailer() (Trailer, error) { return db.verifyTrailer(context.Background()) }

// hashChunkBytes is how much verifyTrailer hashes between looks at its
// context.
const hashChunkBytes = 1 << 20

// verifyTrailer is VerifyTrailer, stopping with ctx's error when ctx ends.
func (db *DB) verifyTrailer(ctx context.Context) (Trailer, error) {
	if db.size%512 != sha256.Size {
		return TrailerAbsent, nil
	}
	// The open file, not the path: another file may have been renamed
	// over it since.
	f := io.NewSectionReader(db.file, 0, db.size)
	h := sha256.New()
	buf := make([]byte, hashChunkBytes)
	for left := db.size - sha256.Size; left > 0; {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("%s: hash: %w", db.path, err)
		}
		n, err := io.ReadFull(f, buf[:min(left, int64(len(buf)))])
		if err != nil {
			if serr := db.shrunk("hashing it"); serr != nil {
				return "", serr
			}
			return "", fmt.Errorf("%s: read: %w", db.path, err)
		}
		h.Write(buf[:n])
		left -= int64(n)
	}
	want := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, want); err != nil {
		if serr := db.shrunk("reading its trailer"); serr != nil {
			return "", serr
		}
		return "", fmt.Errorf("%s: read trailer: %w", db.path, err)
	}
	if bytes.Equal(h.Sum(nil), want) {
		return TrailerValid, nil
	}
	return TrailerInvalid, nil
}

// SameFile reports whether db and other are one file opened twice (under
// two names: a data directory and its member/snap/db, a hard link, a
// symbolic link), as os.SameFile tells from the open files.
func (db *DB) SameFile(other *DB) bool {
	a, err := db.file.Stat()
	if err != nil {
		return false
	}
	b, err := other.file.Stat()
	return err == nil && os.SameFile(a, b)
}
