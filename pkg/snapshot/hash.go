package snapshot

import (
	"hash/crc32"
)

// castagnoli is the CRC-32C table etcd hashes with.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcPart is the CRC-32C of a run of bytes and the run's length, so that
// runs hashed in parallel can be joined in order with crc32cCombine.
type crcPart struct {
	crc uint32
	n   uint64
}

// castagnoliReflected is the CRC-32C polynomial in the bit-reflected form
// hash/crc32 computes with.
const castagnoliReflected = 0x82F63B78

// gf2MultModP multiplies a and b, two polynomials over GF(2) in reflected
// bit order (bit 31 is x^0), modulo the CRC-32C polynomial.
func gf2MultModP(a, b uint32) uint32 {
	var prod uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			prod ^= b
		}
		// b *= x
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
	return prod
}

// xPow8n returns x^(8n) modulo the CRC-32C polynomial, by square and
// multiply.
func xPow8n(n uint64) uint32 {
	result := uint32(1) << 31 // x^0
	sq := uint32(1) << 23     // x^8
	for ; n != 0; n >>= 1 {
		if n&1 != 0 {
			result = gf2MultModP(result, sq)
		}
		sq = gf2MultModP(sq, sq)
	}
	return result
}

// crc32cCombine returns the CRC-32C (as hash/crc32 computes it, with its
// pre- and post-inversion) of A followed by B, given crcA, crcB and B's
// length. Appending n zero bytes to A multiplies its register by x^(8n);
// the inversions cancel out, so CRC(A||B) = CRC(A)·x^(8·len B) ⊕ CRC(B).
func crc32cCombine(crcA, crcB uint32, lenB uint64) uint32 {
	return gf2MultModP(crcA, xPow8n(lenB)) ^ crcB
}

// join appends part to p.
func (p crcPart) join(q crcPart) crcPart {
	return crcPart{crc: crc32cCombine(p.crc, q.crc, q.n), n: p.n + q.n}
}

// update hashes b onto p.
func (p crcPart) update(b []byte) crcPart {
	return crcPart{crc: crc32.Update(p.crc, castagnoli, b), n: p.n + uint64(len(b))}
}

// etcdutlHash computes the hash `etcdutl snapshot status` prints
// (etcdutl/snapshot/v3_snapshot.go Status): CRC-32C over every top-level
// bucket's name followed by each of its keys and values, buckets and
// entries in cursor (byte) order. keyBucket is the hash of the key
// bucket's entries, computed by a parallel scan.
func (db *DB) etcdutlHash(keyBucket crcPart) (uint32, error) {
	var h crcPart
	seen := newPageSet(db.meta.highWater)
	err := db.pg.walk(mustRoot(db), false, seen, func(flags uint32, name, v []byte) error {
		h = h.update(name)
		if string(name) == string(bucketKey) {
			h = h.join(keyBucket)
			return nil
		}
		if flags&bucketLeafFlag == 0 {
			return corruptf("root entry %q is not a bucket", name)
		}
		b, err := bucketValue(v)
		if err != nil {
			return err
		}
		root, err := db.pg.rootPage(b)
		if err != nil {
			return err
		}
		return db.pg.walk(root, false, seen, func(_ uint32, k, v []byte) error {
			h = h.update(k).update(v)
			return nil
		})
	})
	return h.crc, err
}

// mustRoot returns the root bucket's page; Open has already read it.
func mustRoot(db *DB) page {
	pg, err := db.pg.page(db.meta.root)
	if err != nil {
		return page{id: db.meta.root} // walk reports the bad page
	}
	return pg
}
