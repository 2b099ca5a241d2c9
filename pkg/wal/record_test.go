package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestDecodeFrameSize(t *testing.T) {
	for _, c := range []struct {
		lenField         uint64
		wantRec, wantPad int64
	}{
		{8, 8, 0},
		{13 | (0x80|3)<<56, 13, 3},
		{1 | (0x80|7)<<56, 1, 7},
		{1 << 40, 1 << 40, 0},
	} {
		rec, pad := decodeFrameSize(c.lenField)
		if rec != c.wantRec || pad != c.wantPad {
			t.Errorf("decodeFrameSize(%#x): got %d, %d; want %d, %d", c.lenField, rec, pad, c.wantRec, c.wantPad)
		}
	}
}

func TestV2Method(t *testing.T) {
	// An etcd 3.5 v2 Request: ID 1, Method 2, Path 3.
	var req []byte
	req = protowire.AppendTag(req, 1, protowire.VarintType)
	req = protowire.AppendVarint(req, 42)
	req = protowire.AppendTag(req, 2, protowire.BytesType)
	req = protowire.AppendString(req, "PUT")
	req = protowire.AppendTag(req, 3, protowire.BytesType)
	req = protowire.AppendString(req, "/0/version")
	var wrapped []byte
	wrapped = protowire.AppendTag(wrapped, 2, protowire.BytesType)
	wrapped = protowire.AppendBytes(wrapped, req)

	if m, ok := v2Method(req); !ok || m != "PUT" {
		t.Errorf("v2Method(bare request): got %q, %v; want PUT, true", m, ok)
	}
	if m, ok := v2Field(wrapped); !ok || m != "PUT" {
		t.Errorf("v2Field(InternalRaftRequest.v2): got %q, %v; want PUT, true", m, ok)
	}
	if _, ok := v2Method([]byte{0xff, 0xff}); ok {
		t.Errorf("v2Method(garbage): got ok, want not")
	}
}

// FuzzRead feeds arbitrary bytes as the only WAL segment: Read must report
// faults, never panic.
func FuzzRead(f *testing.F) {
	for _, b := range fixtureFiles(f, "wal/*.wal", 2) {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "0000000000000000-0000000000000000.wal"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(t.Context(), dir, Options{}); err != nil {
			t.Fatalf("Read: %v", err)
		}
	})
}

// fixtureFiles returns the files matching pattern (under member/) of every
// fixture version, at most n of each.
func fixtureFiles(t testing.TB, pattern string, n int) [][]byte {
	var out [][]byte
	for _, v := range fixtureVersions {
		names, _ := filepath.Glob(filepath.Join(fixtureDir(v.minor), "member", pattern))
		for _, name := range names[:min(n, len(names))] {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
	}
	return out
}

// FuzzSegmentReader feeds arbitrary bytes to the frame reader with a
// 64 KiB record limit: it must end with the end of the segment or a
// fault, never panic, never hold a buffer over the limit, and advance
// within the segment.
func FuzzSegmentReader(f *testing.F) {
	for _, b := range fixtureFiles(f, "wal/*.wal", 2) {
		f.Add(b)
	}
	f.Add(binary.LittleEndian.AppendUint64(nil, 19<<30))
	f.Add(binary.LittleEndian.AppendUint64(nil, 1<<63))
	const maxRecordBytes = 64 << 10
	f.Fuzz(func(t *testing.T, b []byte) {
		r := newSegmentReader(bytes.NewReader(b), "fuzz.wal", int64(len(b)), maxRecordBytes, true)
		for {
			prev := r.off
			_, err := r.next()
			if cap(r.buf) > maxRecordBytes+7 {
				t.Fatalf("holds a buffer of %d bytes, over the limit of %d plus padding", cap(r.buf), maxRecordBytes)
			}
			if err != nil {
				var fault *Fault
				if !errors.Is(err, errEndOfSegment) && !errors.As(err, &fault) {
					t.Fatalf("got %v, want the end of the segment or a fault", err)
				}
				return
			}
			if r.off <= prev || r.off > int64(len(b)) {
				t.Fatalf("offset went from %d to %d in a %d-byte segment", prev, r.off, len(b))
			}
		}
	})
}

// FuzzDecodeSnap feeds arbitrary bytes as a .snap file: decodeSnap must
// never panic, and a snapshot it accepts carries its v2 store inside the
// file.
func FuzzDecodeSnap(f *testing.F) {
	for _, b := range fixtureFiles(f, "snap/*.snap", 2) {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x08, 0x00, 0x12, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		sf := SnapFile{Name: "fuzz.snap"}
		fault := decodeSnap(&sf, b)
		if (fault == nil) != sf.OK {
			t.Fatalf("got fault %v and OK %v, want exactly one", fault, sf.OK)
		}
		if sf.SizeBytes != int64(len(b)) || sf.DataBytes > sf.SizeBytes {
			t.Fatalf("got size %d and data %d bytes from %d bytes", sf.SizeBytes, sf.DataBytes, len(b))
		}
	})
}
