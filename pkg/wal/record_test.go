package wal

import (
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
	var seeds []string
	for _, v := range fixtureVersions {
		names, _ := filepath.Glob(filepath.Join(fixtureDir(v.minor), "member", "wal", "*.wal"))
		seeds = append(seeds, names[:min(2, len(names))]...)
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
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
