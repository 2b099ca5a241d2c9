package snapshot

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

func fixturePath(v string) string {
	return filepath.Join("..", "..", "testdata", "fixtures", "etcd-"+v+".db")
}

func copyFile(t testing.TB, from string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), filepath.Base(from))
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return to
}

// syncedFreelistCopy returns a copy of a fixture that bbolt has opened
// read-write once, which writes its freelist (etcd never does).
func syncedFreelistCopy(t *testing.T) string {
	p := copyFile(t, fixturePath("3.7"))
	db, err := bolt.Open(p, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// bboltCheck runs bbolt's own tx.Check, for comparison.
func bboltCheck(t *testing.T, path string) []string {
	t.Helper()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var errs []string
	db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			errs = append(errs, err.Error())
		}
		return nil
	})
	slices.Sort(errs)
	return errs
}

func ourCheck(t *testing.T, path string) *Check {
	t.Helper()
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.Check()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(c.Errors)
	return c
}

// readMetaFile returns the current meta page of the file at path.
func readMetaFile(path string) (boltMeta, error) {
	f, err := os.Open(path)
	if err != nil {
		return boltMeta{}, err
	}
	defer f.Close()
	return readMeta(f)
}

// patchFreelist rewrites the ids of the file's synced freelist page.
func patchFreelist(t *testing.T, path string, edit func(ids []uint64) []uint64) {
	t.Helper()
	m, err := readMetaFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := int(m.freelist) * m.pageSize
	count := int(le.Uint16(b[off+10:]))
	ids := make([]uint64, count)
	for i := range ids {
		ids[i] = le.Uint64(b[off+pageHeaderSize+8*i:])
	}
	ids = edit(ids)
	if len(ids) != count {
		t.Fatalf("edit changed the count from %d to %d", count, len(ids))
	}
	slices.Sort(ids)
	for i, id := range ids {
		le.PutUint64(b[off+pageHeaderSize+8*i:], id)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCheckAgreesWithBbolt(t *testing.T) {
	p := syncedFreelistCopy(t)
	c := ourCheck(t, p)
	if !c.OK || !c.FreelistSynced || len(bboltCheck(t, p)) != 0 {
		t.Fatalf("clean file: check %+v, bbolt %v", c, bboltCheck(t, p))
	}
	m, err := readMetaFile(p)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func([]uint64) []uint64
		want string
	}{
		{"reachable page freed", func(ids []uint64) []uint64 { ids[0] = m.root; return ids }, "reachable freed"},
		{"page freed twice", func(ids []uint64) []uint64 { ids[1] = ids[0]; return ids }, "already freed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := syncedFreelistCopy(t)
			patchFreelist(t, p, tt.edit)
			c := ourCheck(t, p)
			want := bboltCheck(t, p)
			if c.OK || !slices.Equal(c.Errors, want) || !strings.Contains(strings.Join(c.Errors, "\n"), tt.want) {
				t.Errorf("check errors %q, bbolt's %q; want %q among them", c.Errors, want, tt.want)
			}
			if c.ErrorCount != len(c.Errors) {
				t.Errorf("error count %d for %d errors", c.ErrorCount, len(c.Errors))
			}
		})
	}
}

// TestCorruptBytesAreErrors flips bytes all over a fixture and runs every
// reader on each copy: each must return (an error or a result), never
// panic or fault, and errors must name the file.
func TestCorruptBytesAreErrors(t *testing.T) {
	orig, err := os.ReadFile(fixturePath("3.6"))
	if err != nil {
		t.Fatal(err)
	}
	step := 61
	if testing.Short() {
		step = 509
	}
	dir := t.TempDir()
	var failures, successes int
	for off := 0; off < len(orig); off += step {
		b := slices.Clone(orig)
		b[off] ^= 0xa5
		p := filepath.Join(dir, "flipped.db")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		errs := readEverything(t, p)
		for _, err := range errs {
			if err == nil {
				continue
			}
			failures++
			if !strings.Contains(err.Error(), p) {
				t.Errorf("offset %d: error %q does not name the file", off, err)
			}
		}
		if len(errs) > 0 && errs[len(errs)-1] == nil {
			successes++
		}
	}
	t.Logf("%d flipped copies read without error, %d errors", successes, failures)
	if failures == 0 {
		t.Error("no flipped byte was noticed")
	}
}

// readEverything runs every reader; the last element is the error of
// Status.
func readEverything(t *testing.T, p string) []error {
	ctx := context.Background()
	db, err := Open(p, Options{Workers: 2})
	if err != nil {
		return []error{err}
	}
	defer db.Close()
	var errs []error
	_, err = db.Keys(ctx, keyspace.Parser{}, KeyFilter{})
	errs = append(errs, err)
	_, err = db.Leases(ctx, keyspace.Parser{})
	errs = append(errs, err)
	_, err = db.ClusterInfo()
	errs = append(errs, err)
	_, err = db.History(ctx, "/registry/pods/default/web-0")
	if errors.Is(err, ErrKeyNotFound) {
		err = nil
	}
	errs = append(errs, err)
	_, err = db.Compaction(ctx, 27, keyspace.Parser{})
	if errors.Is(err, ErrCompacted) || errors.Is(err, ErrFutureRevision) {
		err = nil
	}
	errs = append(errs, err)
	_, err = db.Get(ctx, "/registry/pods/default/web-1", GetOptions{})
	if errors.Is(err, ErrKeyNotFound) {
		err = nil
	}
	errs = append(errs, err)
	_, _, err = db.Status(ctx, keyspace.Parser{})
	return append(errs, err)
}

// FuzzOpen feeds arbitrary files to Open and every reader.
func FuzzOpen(f *testing.F) {
	orig, err := os.ReadFile(fixturePath("3.7"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(orig)
	f.Add(orig[:8192])
	f.Add([]byte("not a database"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "fuzz.db")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		readEverything(t, p)
	})
}

// etcdShaped writes a bbolt file with etcd's key and meta buckets and the
// given page size.
func etcdShaped(t *testing.T, pageSize int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), fmt.Sprintf("etcd-%d.db", pageSize))
	db, err := bolt.Open(p, 0o600, &bolt.Options{PageSize: pageSize})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketKey, bucketMeta} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// setHighWater rewrites the high-water mark of both meta pages of the
// file at p, with valid checksums.
func setHighWater(t *testing.T, p string, pageSize int, highWater uint64) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int{0, pageSize} {
		m := b[off:]
		le.PutUint64(m[metaOffset+40:], highWater)
		h := fnv.New64a()
		h.Write(m[metaOffset:metaChecksumEnd])
		le.PutUint64(m[metaChecksumEnd:], h.Sum64())
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestHighWaterOverflowIsAnError gives both meta pages a high-water mark
// whose product with the page size overflows int64 and wraps to 0 or to a
// negative size, which a truncation check passes: Open must refuse the
// file in one line, not size a page set from it (out of memory, or
// makeslice: len out of range).
func TestHighWaterOverflowIsAnError(t *testing.T) {
	for _, ps := range []int{4096, 8192, 16384, 32768, 65536} {
		for _, hw := range []uint64{math.MaxUint64/uint64(ps) + 1, math.MaxInt64/uint64(ps) + 1, math.MaxUint64} {
			t.Run(fmt.Sprintf("page size %d, high water %d", ps, hw), func(t *testing.T) {
				p := etcdShaped(t, ps)
				if _, err := readMetaFile(p); err != nil {
					t.Fatalf("the unpatched file: %v", err)
				}
				setHighWater(t, p, ps, hw)
				before, _ := os.ReadFile(p)
				db, err := Open(p, Options{})
				if err == nil {
					db.Close()
					t.Fatal("Open succeeded")
				}
				if !errors.Is(err, ErrNotBolt) || !strings.Contains(err.Error(), "overflows") ||
					!strings.Contains(err.Error(), p) || strings.Contains(err.Error(), "\n") {
					t.Errorf("error %q: want one line naming the file and the overflow (ErrNotBolt)", err)
				}
				if after, _ := os.ReadFile(p); !slices.Equal(before, after) {
					t.Error("the file changed")
				}
			})
		}
	}
}

// FuzzParseMeta feeds arbitrary meta pages to parseMeta: a page it accepts
// must describe a file size that fits in int64, so that no later size or
// offset derived from it overflows.
func FuzzParseMeta(f *testing.F) {
	orig, err := os.ReadFile(fixturePath("3.7"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(orig[:metaChecksumEnd+8])
	f.Add(orig[4096 : 4096+metaChecksumEnd+8])
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= metaChecksumEnd+8 {
			// Most mutations break the checksum; fix it so that the
			// fields themselves are tried.
			h := fnv.New64a()
			h.Write(b[metaOffset:metaChecksumEnd])
			le.PutUint64(b[metaChecksumEnd:], h.Sum64())
		}
		m, err := parseMeta(b)
		if err != nil {
			return
		}
		if m.highWater > math.MaxInt64/uint64(m.pageSize) || m.root >= m.highWater {
			t.Fatalf("accepted %d pages of %d bytes, root %d", m.highWater, m.pageSize, m.root)
		}
	})
}
