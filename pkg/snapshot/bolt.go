package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
)

// bbolt's on-disk format (go.etcd.io/bbolt internal/common/{meta,page,
// bucket,inode}.go), in the host's byte order: little-endian on every
// platform etcd supports. This file reads it directly from a read-only
// memory map, with every offset checked, so that a corrupt page is an error
// and never a panic.
//
// Meta page (pages 0 and 1 alternate; the valid one with the higher txid is
// current):
//
//	offset  0  page header: id u64, flags u16, count u16, overflow u32
//	offset 16  magic u32 (0xED0CDAED), version u32 (2), pageSize u32, flags u32
//	offset 32  root bucket: root pgid u64, sequence u64
//	offset 48  freelist pgid u64 (0xFFFFFFFFFFFFFFFF: not synced, etcd's default)
//	offset 56  pgid u64: the high-water mark, pages ever allocated
//	offset 64  txid u64
//	offset 72  checksum u64: FNV-64a of offsets 16..71
//
// Branch and leaf pages: the 16-byte header, then count elements of 16
// bytes, then the keys and values they point to. The page and its overflow
// pages are one contiguous span of (1+overflow) pages.
//
//	leaf element    flags u32 (0x01: a nested bucket), pos u32, ksize u32, vsize u32
//	branch element  pos u32, ksize u32, child pgid u64
//
// pos counts from the start of the element itself. A nested bucket's value
// is {root pgid u64, sequence u64}; root 0 means an inline bucket whose leaf
// page (header included, id 0) follows in the value. A freelist page holds
// count page ids (u64); count 0xFFFF means the real count is the first u64.
const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	pgidNoFreelist  = ^uint64(0)
	metaOffset      = 16
	metaChecksumEnd = metaOffset + 56

	pageHeaderSize = 16
	elemSize       = 16

	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	metaPageFlag     = 0x04
	freelistPageFlag = 0x10

	bucketLeafFlag  = 0x01
	bucketHeaderLen = 16

	// maxTreeDepth bounds the recursion on a corrupt tree whose pages
	// point back at their ancestors; a real bbolt tree of a petabyte is
	// less than 20 levels deep.
	maxTreeDepth = 64
)

var le = binary.LittleEndian

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
	m := boltMeta{
		pageSize:  int(le.Uint32(b[metaOffset+8:])),
		root:      le.Uint64(b[metaOffset+16:]),
		freelist:  le.Uint64(b[metaOffset+32:]),
		highWater: le.Uint64(b[metaOffset+40:]),
		txid:      le.Uint64(b[metaOffset+48:]),
	}
	if m.pageSize < 512 || m.pageSize > 1<<20 || m.pageSize&(m.pageSize-1) != 0 {
		return boltMeta{}, fmt.Errorf("page size %d is not a power of two between 512 and 1 MiB", m.pageSize)
	}
	// Every later size is at most highWater·pageSize, which must fit in
	// a file size.
	if m.highWater > math.MaxInt64/uint64(m.pageSize) {
		return boltMeta{}, fmt.Errorf("high-water mark of %d pages of %d bytes overflows a file size", m.highWater, m.pageSize)
	}
	if m.highWater < 3 || m.root < 2 || m.root >= m.highWater {
		return boltMeta{}, fmt.Errorf("root page %d outside the %d allocated pages", m.root, m.highWater)
	}
	return m, nil
}

// readMeta returns the current meta page of the file f, reading it with
// pread. Errors wrap ErrNotBolt.
func readMeta(f io.ReaderAt) (boltMeta, error) {
	buf := make([]byte, metaChecksumEnd+8)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return boltMeta{}, fmt.Errorf("%w: read meta page 0: %v", ErrNotBolt, err)
	}
	m0, err0 := parseMeta(buf)
	pageSize := m0.pageSize
	if err0 != nil {
		// Meta page 1 starts one page in; without a valid page 0, try
		// the usual page sizes.
		pageSize = 0
	}
	var m1 boltMeta
	err1 := fmt.Errorf("not found")
	for _, ps := range []int{pageSize, os.Getpagesize(), 4096, 16384, 65536} {
		if ps == 0 {
			continue
		}
		if _, err := f.ReadAt(buf, int64(ps)); err == nil {
			if m1, err1 = parseMeta(buf); err1 == nil && m1.pageSize == ps {
				break
			}
		}
		if pageSize != 0 {
			break
		}
	}
	switch {
	case err0 == nil && (err1 != nil || m0.txid >= m1.txid):
		return m0, nil
	case err1 == nil:
		return m1, nil
	}
	return boltMeta{}, fmt.Errorf("%w: meta page 0: %v; meta page 1: %v", ErrNotBolt, err0, err1)
}

// page is one branch, leaf or freelist page with its overflow pages, or an
// inline bucket's page (id 0).
type page struct {
	id       uint64
	flags    uint16
	count    int
	overflow uint32
	buf      []byte
}

func pageType(flags uint16) string {
	switch flags {
	case branchPageFlag:
		return "branch"
	case leafPageFlag:
		return "leaf"
	case metaPageFlag:
		return "meta"
	case freelistPageFlag:
		return "freelist"
	}
	return fmt.Sprintf("unknown<%#x>", flags)
}

// corruptf returns an error wrapping ErrCorrupt.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// pager reads pages from a memory map of the whole file.
type pager struct {
	data      []byte
	pageSize  uint64
	highWater uint64
}

// page returns page id with its overflow pages, checking that it lies below
// the high-water mark and inside the file and that its header names it.
func (p *pager) page(id uint64) (page, error) {
	if id < 2 || id >= p.highWater {
		return page{}, corruptf("page %d is outside the %d allocated pages", id, p.highWater)
	}
	off := id * p.pageSize
	if off+p.pageSize > uint64(len(p.data)) {
		return page{}, corruptf("page %d lies beyond the end of the file", id)
	}
	h := p.data[off : off+pageHeaderSize]
	pg := page{id: le.Uint64(h[0:]), flags: le.Uint16(h[8:]), count: int(le.Uint16(h[10:])), overflow: le.Uint32(h[12:])}
	if pg.id != id {
		return page{}, corruptf("page %d has id %d in its header", id, pg.id)
	}
	span := uint64(pg.overflow) + 1
	if id+span > p.highWater || off+span*p.pageSize > uint64(len(p.data)) {
		return page{}, corruptf("page %d with %d overflow pages runs past the allocated pages", id, pg.overflow)
	}
	pg.buf = p.data[off : off+span*p.pageSize]
	return pg, nil
}

// inlinePage returns the leaf page an inline bucket's value carries.
func inlinePage(v []byte) (page, error) {
	if len(v) < bucketHeaderLen+pageHeaderSize {
		return page{}, corruptf("inline bucket value of %d bytes", len(v))
	}
	b := v[bucketHeaderLen:]
	pg := page{flags: le.Uint16(b[8:]), count: int(le.Uint16(b[10:])), buf: b}
	if pg.flags != leafPageFlag {
		return page{}, corruptf("inline bucket page is a %s page", pageType(pg.flags))
	}
	return pg, nil
}

// checkCount verifies that count elements fit in the page.
func (pg page) checkCount() error {
	if pageHeaderSize+pg.count*elemSize > len(pg.buf) {
		return corruptf("page %d: %d elements do not fit in %d bytes", pg.id, pg.count, len(pg.buf))
	}
	return nil
}

// leaf returns leaf element i: its flags, key and value, as slices of the
// mapped file.
func (pg page) leaf(i int) (flags uint32, k, v []byte, err error) {
	eo := pageHeaderSize + i*elemSize
	if i < 0 || eo+elemSize > len(pg.buf) {
		return 0, nil, nil, corruptf("page %d: leaf element %d out of range", pg.id, i)
	}
	e := pg.buf[eo : eo+elemSize]
	flags = le.Uint32(e[0:])
	start := uint64(eo) + uint64(le.Uint32(e[4:]))
	ks, vs := uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
	if start+ks+vs > uint64(len(pg.buf)) {
		return 0, nil, nil, corruptf("page %d: leaf element %d (%d+%d bytes at %d) runs past the page", pg.id, i, ks, vs, start)
	}
	return flags, pg.buf[start : start+ks : start+ks], pg.buf[start+ks : start+ks+vs : start+ks+vs], nil
}

// branch returns branch element i: the first key of its child and the
// child's page id.
func (pg page) branch(i int) (k []byte, child uint64, err error) {
	eo := pageHeaderSize + i*elemSize
	if i < 0 || eo+elemSize > len(pg.buf) {
		return nil, 0, corruptf("page %d: branch element %d out of range", pg.id, i)
	}
	e := pg.buf[eo : eo+elemSize]
	start := uint64(eo) + uint64(le.Uint32(e[0:]))
	ks := uint64(le.Uint32(e[4:]))
	if start+ks > uint64(len(pg.buf)) {
		return nil, 0, corruptf("page %d: branch element %d runs past the page", pg.id, i)
	}
	return pg.buf[start : start+ks : start+ks], le.Uint64(e[8:]), nil
}

// bucket is a B+tree: a root page id, or an inline bucket's page.
type bucket struct {
	root   uint64
	inline []byte // the bucket value, when root is 0
}

// bucketValue decodes the value of a leaf element flagged as a bucket.
func bucketValue(v []byte) (bucket, error) {
	if len(v) < bucketHeaderLen {
		return bucket{}, corruptf("bucket value of %d bytes", len(v))
	}
	b := bucket{root: le.Uint64(v)}
	if b.root == 0 {
		b.inline = v
	}
	return b, nil
}

// rootPage returns the bucket's root page.
func (p *pager) rootPage(b bucket) (page, error) {
	if b.root == 0 {
		return inlinePage(b.inline)
	}
	return p.page(b.root)
}

// pageSet is a set of page ids, so that a walk of a corrupt tree whose
// pages reference each other visits each page once instead of looping or
// exploding.
type pageSet []uint64

func newPageSet(highWater uint64) pageSet { return make(pageSet, highWater/64+1) }

// add inserts id and reports whether it was absent.
func (s pageSet) add(id uint64) bool {
	if id/64 >= uint64(len(s)) {
		return false
	}
	if s[id/64]&(1<<(id%64)) != 0 {
		return false
	}
	s[id/64] |= 1 << (id % 64)
	return true
}

// visitFunc receives one leaf element; returning errStop ends a walk
// early without an error.
type visitFunc func(flags uint32, k, v []byte) error

// walk calls fn for every leaf element of the tree under pg in key order,
// or in reverse key order when reverse is set. seen holds the pages
// walked so far; a page met twice is an error.
func (p *pager) walk(pg page, reverse bool, seen pageSet, fn visitFunc) error {
	if pg.id != 0 && !seen.add(pg.id) {
		return corruptf("page %d is referenced twice", pg.id)
	}
	if err := pg.checkCount(); err != nil {
		return err
	}
	for j := range pg.count {
		i := j
		if reverse {
			i = pg.count - 1 - j
		}
		switch pg.flags {
		case leafPageFlag:
			flags, k, v, err := pg.leaf(i)
			if err != nil {
				return err
			}
			if err := fn(flags, k, v); err != nil {
				return err
			}
		case branchPageFlag:
			_, child, err := pg.branch(i)
			if err != nil {
				return err
			}
			cp, err := p.page(child)
			if err != nil {
				return err
			}
			if err := p.walk(cp, reverse, seen, fn); err != nil {
				return err
			}
		default:
			return corruptf("page %d: a %s page inside a B+tree", pg.id, pageType(pg.flags))
		}
	}
	return nil
}

// get returns the value of key in bucket b, and whether it exists.
func (p *pager) get(b bucket, key []byte) (flags uint32, v []byte, ok bool, err error) {
	pg, err := p.rootPage(b)
	if err != nil {
		return 0, nil, false, err
	}
	for depth := 0; ; depth++ {
		if depth > maxTreeDepth {
			return 0, nil, false, corruptf("page %d: tree deeper than %d levels (a cycle?)", pg.id, maxTreeDepth)
		}
		if err := pg.checkCount(); err != nil {
			return 0, nil, false, err
		}
		switch pg.flags {
		case leafPageFlag:
			lo, hi := 0, pg.count
			for lo < hi {
				m := int(uint(lo+hi) >> 1)
				fl, k, v, err := pg.leaf(m)
				if err != nil {
					return 0, nil, false, err
				}
				switch c := bytes.Compare(k, key); {
				case c == 0:
					return fl, v, true, nil
				case c < 0:
					lo = m + 1
				default:
					hi = m
				}
			}
			return 0, nil, false, nil
		case branchPageFlag:
			// The last child whose first key is <= key.
			lo, hi := 0, pg.count
			for lo < hi {
				m := int(uint(lo+hi) >> 1)
				k, _, err := pg.branch(m)
				if err != nil {
					return 0, nil, false, err
				}
				if bytes.Compare(k, key) <= 0 {
					lo = m + 1
				} else {
					hi = m
				}
			}
			idx := max(lo-1, 0)
			if pg.count == 0 {
				return 0, nil, false, nil
			}
			_, child, err := pg.branch(idx)
			if err != nil {
				return 0, nil, false, err
			}
			if pg, err = p.page(child); err != nil {
				return 0, nil, false, err
			}
		default:
			return 0, nil, false, corruptf("page %d: a %s page inside a B+tree", pg.id, pageType(pg.flags))
		}
	}
}

// subtrees splits bucket b into at least want contiguous subtrees, in key
// order, by descending from the root while there are too few, for scans
// that give each worker a range of them. A tree of one leaf is one
// subtree.
func (p *pager) subtrees(b bucket, want int) ([]page, error) {
	root, err := p.rootPage(b)
	if err != nil {
		return nil, err
	}
	level := []page{root}
	for depth := 0; len(level) < want; depth++ {
		if depth > maxTreeDepth {
			return nil, corruptf("tree deeper than %d levels (a cycle?)", maxTreeDepth)
		}
		var next []page
		for _, pg := range level {
			if pg.flags != branchPageFlag {
				return level, nil // leaves reached: no finer split
			}
			if err := pg.checkCount(); err != nil {
				return nil, err
			}
			for i := range pg.count {
				_, child, err := pg.branch(i)
				if err != nil {
					return nil, err
				}
				cp, err := p.page(child)
				if err != nil {
					return nil, err
				}
				next = append(next, cp)
			}
		}
		if len(next) == 0 {
			return level, nil
		}
		level = next
	}
	return level, nil
}
