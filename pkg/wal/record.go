package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
)

// Record types (server/storage/wal/wal.go).
const (
	metadataType int64 = iota + 1
	entryType
	stateType
	crcType
	snapshotType
)

// frameSizeBytes is the size of a frame's length field.
const frameSizeBytes = 8

// minSectorSize is the sector size torn writes are detected on: a torn
// write leaves whole sectors zeroed (server/storage/wal/decoder.go).
const minSectorSize = 512

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// decodeFrameSize splits a frame's length field into the record's length
// and the padding after it: the low 56 bits are the length; a set top bit
// says the low 3 bits of the top byte count padding bytes.
func decodeFrameSize(lenField uint64) (recBytes, padBytes int64) {
	recBytes = int64(lenField &^ (uint64(0xff) << 56))
	if lenField>>63 == 1 {
		padBytes = int64((lenField >> 56) & 0x7)
	}
	return recBytes, padBytes
}

// hasZeroSector reports whether data, read from file offset off, holds a
// 512-byte sector (or the part of one it covers) that is all zeros: the
// mark of a torn write.
func hasZeroSector(data []byte, off int64) bool {
	for len(data) > 0 {
		n := int(minSectorSize - off%minSectorSize)
		n = min(n, len(data))
		zero := true
		for _, b := range data[:n] {
			if b != 0 {
				zero = false
				break
			}
		}
		if zero {
			return true
		}
		data, off = data[n:], off+int64(n)
	}
	return false
}

// record is one decoded frame.
type record struct {
	rec    *walpb.Record
	offset int64 // of the frame's length field
}

// readBufferBytes is the size of the buffer a segment is read through.
const readBufferBytes = 1 << 20

// segmentReader reads the frames of one segment in order. It holds the
// read buffer and one record's bytes: at most readBufferBytes plus
// maxRecordBytes (plus padding), however large the segment; reset reuses
// both for the next segment.
type segmentReader struct {
	name           string
	size           int64
	maxRecordBytes int64
	r              *bufio.Reader
	off            int64
	last           bool // the last segment: damage at its end is a torn tail
	buf            []byte
}

// newSegmentReader reads the segment f of size bytes; a frame whose record
// is longer than maxRecordBytes is a FaultTooLarge.
func newSegmentReader(f io.Reader, name string, size, maxRecordBytes int64, last bool) *segmentReader {
	return &segmentReader{name: name, size: size, maxRecordBytes: maxRecordBytes, r: bufio.NewReaderSize(f, readBufferBytes), last: last}
}

// reset makes s read the segment f from its start, keeping its buffers.
func (s *segmentReader) reset(f io.Reader, name string, size int64, last bool) {
	s.r.Reset(f)
	s.name, s.size, s.off, s.last = name, size, 0, last
}

// errEndOfSegment ends a segment normally: end of file or preallocated
// zeros.
var errEndOfSegment = errors.New("end of segment")

// next returns the next record, errEndOfSegment at the end, or a *Fault
// when the frame cannot be decoded; after a fault the rest of the segment
// cannot be framed and must be skipped.
func (s *segmentReader) next() (record, error) {
	start := s.off
	var lenBuf [frameSizeBytes]byte
	n, err := io.ReadFull(s.r, lenBuf[:])
	if err == io.EOF {
		return record{}, errEndOfSegment
	}
	if err != nil {
		return record{}, s.fault(start, FaultTornTail, FaultCorruptFrame, "length field cut short after %d of 8 bytes", n)
	}
	lenField := binary.LittleEndian.Uint64(lenBuf[:])
	if lenField == 0 {
		return record{}, errEndOfSegment
	}
	recBytes, padBytes := decodeFrameSize(lenField)
	if recBytes+padBytes > s.size-start-frameSizeBytes {
		return record{}, s.fault(start, FaultTornTail, FaultCorruptFrame,
			"frame of %d bytes (+%d padding) runs past the end of the %d-byte file", recBytes, padBytes, s.size)
	}
	if recBytes > s.maxRecordBytes {
		// etcd 3.4 capped a record at 10 MiB; 3.5 and later only at the
		// rest of the file (server/storage/wal/decoder.go), which lets a
		// damaged length field allocate gigabytes.
		return record{}, &Fault{File: s.name, Offset: start, Kind: FaultTooLarge, Message: fmt.Sprintf(
			"frame claims a record of %d bytes, over the limit of %d bytes per record; the rest of the segment is skipped", recBytes, s.maxRecordBytes)}
	}
	total := int(recBytes + padBytes)
	if cap(s.buf) < total {
		s.buf = make([]byte, total)
	}
	data := s.buf[:total]
	if _, err := io.ReadFull(s.r, data); err != nil {
		return record{}, fmt.Errorf("read %s at offset %d: %w", s.name, start, err)
	}
	s.off = start + frameSizeBytes + int64(total)
	rec := &walpb.Record{}
	if err := proto.Unmarshal(data[:recBytes], rec); err != nil {
		if hasZeroSector(data, start+frameSizeBytes) {
			return record{}, s.fault(start, FaultTornTail, FaultCorruptFrame, "record of %d bytes holds a zeroed sector: %v", recBytes, err)
		}
		return record{}, s.fault(start, FaultCorruptFrame, FaultCorruptFrame, "record of %d bytes does not decode: %v", recBytes, err)
	}
	return record{rec: rec, offset: start}, nil
}

// torn reports whether the record at offset, whose crc failed, was cut
// short by a torn write.
func (s *segmentReader) torn(rec record) bool {
	// Only the data can be checked here: the frame was already consumed.
	return s.last && hasZeroSector(rec.rec.GetData(), rec.offset+frameSizeBytes)
}

// fault builds the fault of a frame at offset: lastKind in the last
// segment when the frame shows a torn write, otherwise kind.
func (s *segmentReader) fault(offset int64, lastKind, kind FaultKind, format string, args ...any) *Fault {
	k := kind
	if s.last {
		k = lastKind
	}
	return &Fault{File: s.name, Offset: offset, Kind: k, Message: fmt.Sprintf(format, args...)}
}
