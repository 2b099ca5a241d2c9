package snapshot

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"

	bolt "go.etcd.io/bbolt"
)

// bbolt meta page layout (go.etcd.io/bbolt internal/common/meta.go, page.go),
// in the host's byte order (little-endian on every platform etcd supports):
//
//	offset  0  page header: id u64, flags u16, count u16, overflow u32
//	offset 16  magic u32 (0xED0CDAED), version u32 (2), pageSize u32, flags u32
//	offset 32  root bucket: root pgid u64, sequence u64
//	offset 48  freelist pgid u64 (0xFFFFFFFFFFFFFFFF: not synced, etcd's default)
//	offset 56  pgid u64: the high-water mark, pages ever allocated
//	offset 64  txid u64
//	offset 72  checksum u64: FNV-64a of offsets 16..71
//
// Meta pages 0 and 1 alternate; the valid one with the higher txid is
// current.
const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	pgidNoFreelist  = ^uint64(0)
	metaOffset      = 16
	metaChecksumEnd = metaOffset + 56
)

// boltMeta is the current meta page of a bbolt file.
type boltMeta struct {
	pageSize  int
	root      uint64
	freelist  uint64
	highWater uint64
	txid      uint64
}

func parseMeta(b []byte) (boltMeta, error) {
	if len(b) < metaChecksumEnd+8 {
		return boltMeta{}, fmt.Errorf("meta page is %d bytes", len(b))
	}
	le := binary.LittleEndian
	if le.Uint32(b[metaOffset:]) != boltMagic {
		return boltMeta{}, fmt.Errorf("bad magic %#x", le.Uint32(b[metaOffset:]))
	}
	if v := le.Uint32(b[metaOffset+4:]); v != boltVersion {
		return boltMeta{}, fmt.Errorf("bbolt format version %d, want %d", v, boltVersion)
	}
	h := fnv.New64a()
	h.Write(b[metaOffset:metaChecksumEnd])
	if sum := le.Uint64(b[metaChecksumEnd:]); sum != h.Sum64() {
		return boltMeta{}, fmt.Errorf("meta checksum %#x, computed %#x", sum, h.Sum64())
	}
	return boltMeta{
		pageSize:  int(le.Uint32(b[metaOffset+8:])),
		root:      le.Uint64(b[metaOffset+16:]),
		freelist:  le.Uint64(b[metaOffset+32:]),
		highWater: le.Uint64(b[metaOffset+40:]),
		txid:      le.Uint64(b[metaOffset+48:]),
	}, nil
}

// readMeta returns the current meta page of the file at path, reading it
// with pread, never through bbolt.
func readMeta(path string) (boltMeta, error) {
	f, err := os.Open(path)
	if err != nil {
		return boltMeta{}, err
	}
	defer f.Close()
	buf := make([]byte, metaChecksumEnd+8)
	if _, err := io.ReadFull(f, buf); err != nil {
		return boltMeta{}, fmt.Errorf("%s: read meta page 0: %w", path, err)
	}
	m0, err0 := parseMeta(buf)
	pageSize := m0.pageSize
	if err0 != nil {
		pageSize = os.Getpagesize()
	}
	var m1 boltMeta
	err1 := fmt.Errorf("not read")
	if _, err := f.ReadAt(buf, int64(pageSize)); err == nil {
		m1, err1 = parseMeta(buf)
	}
	switch {
	case err0 == nil && (err1 != nil || m0.txid >= m1.txid):
		return m0, nil
	case err1 == nil:
		return m1, nil
	}
	return boltMeta{}, fmt.Errorf("%s: %w: meta page 0: %v; meta page 1: %v", path, ErrNotBolt, err0, err1)
}

// PageStats counts the pages of the file as etcd and bbolt see them.
type PageStats struct {
	PageSize int
	// HighWaterPages is the number of pages ever allocated; times PageSize
	// it is bbolt's tx.Size(), what etcd reports as the db size.
	HighWaterPages int64
	// ReachablePages are the two meta pages, every branch, leaf and
	// overflow page of the B+trees, and the synced freelist's pages.
	ReachablePages int64
	// FreePages are the pages below the high-water mark that nothing
	// references: bbolt reuses them, a defragmentation returns them.
	FreePages int64
}

// PageStats walks every bucket's B+tree in this goroutine (bbolt's own
// free-page scan runs in a goroutine of its own, where a panic on a corrupt
// page could not be recovered) and counts reachable and free pages.
func (db *DB) PageStats() (PageStats, error) {
	m, err := readMeta(db.path)
	if err != nil {
		return PageStats{}, err
	}
	ps := PageStats{PageSize: m.pageSize, HighWaterPages: int64(m.highWater), ReachablePages: 2}
	err = db.view("count pages", func(tx *bolt.Tx) error {
		s := tx.Cursor().Bucket().Stats()
		ps.ReachablePages += int64(s.BranchPageN + s.BranchOverflowN + s.LeafPageN + s.LeafOverflowN)
		if m.freelist != pgidNoFreelist {
			info, err := tx.Page(int(m.freelist))
			if err != nil {
				return fmt.Errorf("%s: freelist page %d: %w", db.path, m.freelist, err)
			}
			if info != nil {
				ps.ReachablePages += 1 + int64(info.OverflowCount)
			}
		}
		return nil
	})
	if err != nil {
		return PageStats{}, err
	}
	ps.FreePages = ps.HighWaterPages - ps.ReachablePages
	if ps.FreePages < 0 {
		return ps, fmt.Errorf("%s: %w: %d reachable pages above the high-water mark of %d", db.path, ErrCorrupt, ps.ReachablePages, ps.HighWaterPages)
	}
	return ps, nil
}
