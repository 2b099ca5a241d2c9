package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// maxCheckErrors bounds the messages a Check keeps; ErrorCount counts all.
const maxCheckErrors = 20

// Check is the result of a bbolt consistency check, the checks of bbolt's
// tx.Check (go.etcd.io/bbolt tx_check.go) done in the caller's goroutine.
// bbolt runs its own in a goroutine of its own, where a panic on a corrupt
// page cannot be recovered and would end the process; this one reads every
// page through bounds-checked accessors and returns errors instead.
type Check struct {
	// OK is true when no error was found.
	OK bool `json:"ok"`
	// ErrorCount counts every problem; Errors holds the first 20, in the
	// words of bbolt check ("page 12: multiple references").
	ErrorCount int `json:"errorCount"`
	// Errors holds the first 20 problems (see ErrorCount).
	Errors []string `json:"errors"`
	// FreelistSynced is false for etcd's default, a freelist rebuilt on
	// open (NoFreelistSync): then no page can be "unreachable unfreed",
	// every unreachable page being free by definition.
	FreelistSynced bool `json:"freelistSynced"`
	// ReachablePages counts the two meta pages, every branch, leaf and
	// overflow page of every bucket, and the synced freelist's pages.
	ReachablePages int64 `json:"reachablePages"`
	// FreePages counts the pages below the high-water mark that nothing
	// references: bbolt reuses them, a defragmentation returns them.
	FreePages int64 `json:"freePages"`
}

// checker holds the state of one Check.
type checker struct {
	ctx       context.Context
	pg        *pager
	reachable []uint64 // bitset over page ids below the high-water mark
	res       *Check
	nodes     int   // pages visited, to look at ctx every ctxEvery
	err       error // ctx's error once it ended; the walk unwinds
}

// ctxEvery is how many pages a check visits between looks at its context.
const ctxEvery = 256

// stopped reports whether the check's context has ended, recording why.
func (c *checker) stopped() bool {
	if c.err == nil {
		c.nodes++
		if c.nodes%ctxEvery == 0 {
			c.err = c.ctx.Err()
		}
	}
	return c.err != nil
}

func (c *checker) errorf(format string, args ...any) {
	c.res.ErrorCount++
	if len(c.res.Errors) < maxCheckErrors {
		c.res.Errors = append(c.res.Errors, fmt.Sprintf(format, args...))
	}
}

func (c *checker) marked(id uint64) bool { return c.reachable[id/64]&(1<<(id%64)) != 0 }
func (c *checker) mark(id uint64)        { c.reachable[id/64] |= 1 << (id % 64) }

// claim marks a page and its overflow pages reachable, reporting pages
// referenced twice.
func (c *checker) claim(pg page) bool {
	ok := true
	for id := pg.id; id <= pg.id+uint64(pg.overflow); id++ {
		if c.marked(id) {
			c.errorf("page %d: multiple references", id)
			ok = false
			continue
		}
		c.mark(id)
		c.res.ReachablePages++
	}
	return ok
}

// Check walks every page reachable from the current meta page and
// verifies what bbolt's tx.Check does: pages within the high-water mark
// and the file, referenced once, of the right type (branch or leaf inside
// a tree), keys strictly ordered within and across pages, branch keys
// bounding their subtrees, nested buckets well formed, and, when the
// freelist is synced, that free and reachable pages partition the file
// ("already freed", "reachable freed", "unreachable unfreed"). It also
// counts free pages. Errors in the file are reported in the result; the
// returned error is for a failure to read the file at all.
func (db *DB) Check() (*Check, error) { return db.check(context.Background()) }

// check is Check, stopping with ctx's error when ctx ends.
func (db *DB) check(ctx context.Context) (*Check, error) {
	res := &Check{Errors: []string{}}
	err := db.guard("check the page tree", func() error {
		c := &checker{ctx: ctx, pg: db.pg, reachable: make([]uint64, db.meta.highWater/64+1), res: res}
		c.mark(0)
		c.mark(1)
		res.ReachablePages = 2
		var freeIDs []uint64
		if db.meta.freelist != pgidNoFreelist {
			res.FreelistSynced = true
			ids, err := c.freelist(db.meta.freelist)
			if err != nil {
				c.errorf("%v", err)
			}
			freeIDs = ids
		}
		c.tree(db.meta.root, nil, 0)
		if c.err != nil {
			return fmt.Errorf("check the page tree: %w", c.err)
		}
		free := make([]uint64, len(c.reachable))
		for _, id := range freeIDs {
			switch {
			case id < 2 || id >= db.meta.highWater:
				c.errorf("page %d: out of bounds: %d (freelist)", id, db.meta.highWater)
			case free[id/64]&(1<<(id%64)) != 0:
				c.errorf("page %d: already freed", id)
			case c.marked(id):
				c.errorf("page %d: reachable freed", id)
			default:
				free[id/64] |= 1 << (id % 64)
			}
		}
		for id := uint64(2); id < db.meta.highWater; id++ {
			if c.marked(id) {
				continue
			}
			res.FreePages++
			if res.FreelistSynced && free[id/64]&(1<<(id%64)) == 0 {
				c.errorf("page %d: unreachable unfreed", id)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return nil, err
	}
	if err != nil {
		res.ErrorCount++
		res.Errors = append(res.Errors, err.Error())
	}
	res.OK = res.ErrorCount == 0
	return res, nil
}

// freelist reads a synced freelist page and claims it.
func (c *checker) freelist(id uint64) ([]uint64, error) {
	pg, err := c.pg.page(id)
	if err != nil {
		return nil, fmt.Errorf("freelist %v", err)
	}
	if pg.flags != freelistPageFlag {
		return nil, fmt.Errorf("page %d: invalid type: %s (want freelist)", id, pageType(pg.flags))
	}
	c.claim(pg)
	count, start := pg.count, pageHeaderSize
	if count == 0xFFFF {
		if len(pg.buf) < pageHeaderSize+8 {
			return nil, fmt.Errorf("page %d: freelist count missing", id)
		}
		n := le.Uint64(pg.buf[pageHeaderSize:])
		if n > uint64(len(pg.buf)) {
			return nil, fmt.Errorf("page %d: freelist of %d ids does not fit", id, n)
		}
		count, start = int(n), pageHeaderSize+8
	}
	if start+count*8 > len(pg.buf) {
		return nil, fmt.Errorf("page %d: freelist of %d ids does not fit", id, count)
	}
	ids := make([]uint64, count)
	for i := range ids {
		ids[i] = le.Uint64(pg.buf[start+8*i:])
	}
	return ids, nil
}

// tree checks the B+tree rooted at page id (or, for id 0, the inline page
// in inline), whose keys must lie in [lo, hi) (nil: unbounded).
func (c *checker) tree(id uint64, inline []byte, depth int) {
	var last []byte
	c.node(id, inline, nil, nil, &last, depth)
}

func (c *checker) node(id uint64, inline []byte, lo, hi []byte, last *[]byte, depth int) {
	if c.stopped() {
		return
	}
	if depth > maxTreeDepth {
		c.errorf("page %d: tree deeper than %d levels", id, maxTreeDepth)
		return
	}
	var pg page
	var err error
	if id == 0 {
		pg, err = inlinePage(inline)
	} else {
		if id >= c.pg.highWater || id < 2 {
			c.errorf("page %d: out of bounds: %d", id, c.pg.highWater)
			return
		}
		pg, err = c.pg.page(id)
	}
	if err != nil {
		c.errorf("%v", err)
		return
	}
	if id != 0 && !c.claim(pg) {
		return // do not walk a subtree twice
	}
	if pg.flags != branchPageFlag && pg.flags != leafPageFlag {
		c.errorf("page %d: invalid type: %s", pg.id, pageType(pg.flags))
		return
	}
	if err := pg.checkCount(); err != nil {
		c.errorf("%v", err)
		return
	}
	for i := range pg.count {
		var k []byte
		var child uint64
		var flags uint32
		var v []byte
		if pg.flags == branchPageFlag {
			k, child, err = pg.branch(i)
		} else {
			flags, k, v, err = pg.leaf(i)
		}
		if err != nil {
			c.errorf("%v", err)
			return
		}
		if lo != nil && bytes.Compare(k, lo) < 0 {
			c.errorf("key order violation: page %d key[%d]=%x is below its parent's key %x", pg.id, i, k, lo)
		}
		if hi != nil && bytes.Compare(k, hi) >= 0 {
			c.errorf("key order violation: page %d key[%d]=%x is not below the next parent key %x", pg.id, i, k, hi)
		}
		if pg.flags == leafPageFlag {
			if *last != nil && bytes.Compare(*last, k) >= 0 {
				c.errorf("key order violation: page %d key[%d]=%x does not follow %x", pg.id, i, k, *last)
			}
			*last = k
			if flags&bucketLeafFlag != 0 {
				b, err := bucketValue(v)
				if err != nil {
					c.errorf("page %d: bucket %q: %v", pg.id, k, err)
					continue
				}
				c.tree(b.root, b.inline, depth+1)
			}
			continue
		}
		var next []byte
		if i+1 < pg.count {
			next, _, err = pg.branch(i + 1)
			if err != nil {
				c.errorf("%v", err)
				return
			}
			if bytes.Compare(k, next) >= 0 {
				c.errorf("key order violation: branch page %d key[%d]=%x does not precede key[%d]=%x", pg.id, i, k, i+1, next)
			}
		} else {
			next = hi
		}
		c.node(child, nil, k, next, last, depth+1)
	}
}
