package wal

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/kubestore/etcdkit/internal/inputfile"
)

// readSnapFiles decodes every .snap entry of dir into rep.SnapFiles, in
// name order (term, then index), one file in memory at a time. A file
// that cannot be read, is empty, larger than maxSnapBytes or damaged is
// listed (OK false) with a Fault; a snap directory that cannot be listed
// is a FaultUnreadable. It returns only ctx's error.
func readSnapFiles(ctx context.Context, dir string, maxSnapBytes int64, rep *Report) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		msg := err.Error()
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			msg = pe.Op + ": " + pe.Err.Error()
		}
		rep.Faults = append(rep.Faults, Fault{File: filepath.Base(dir), Kind: FaultUnreadable,
			Message: "the snap directory cannot be listed, its .snap files are not read: " + msg})
		return nil
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".snap") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		sf, f, err := readSnapFile(ctx, filepath.Join(dir, name), maxSnapBytes)
		if err != nil {
			return err
		}
		if f != nil {
			rep.Faults = append(rep.Faults, *f)
		}
		rep.SnapFiles = append(rep.SnapFiles, sf)
	}
	return nil
}

// readSnapFile reads and decodes one .snap file: a snappb.Snapshot
//
//	field 1 crc  (varint): CRC-32 (Castagnoli) of data
//	field 2 data (bytes):  a raftpb.Snapshot
//	                         field 1 data (bytes): the v2 store, JSON
//	                         field 2 metadata (bytes): raftpb.SnapshotMetadata
//
// (server/etcdserver/api/snap/snapshotter.go). The fields are walked in
// place, so the file's bytes are held once, not copied per level. It
// returns the file's description and its fault, if any; the error is
// only ctx's.
func readSnapFile(ctx context.Context, path string, maxSnapBytes int64) (SnapFile, *Fault, error) {
	name := filepath.Base(path)
	sf := SnapFile{Name: name, Voters: []string{}}
	fault := func(kind FaultKind, format string, args ...any) (SnapFile, *Fault, error) {
		return sf, &Fault{File: name, Kind: kind, Message: fmt.Sprintf(format, args...)}, nil
	}
	f, err := inputfile.Open(path, maxSnapBytes)
	if errors.Is(err, inputfile.ErrTooLarge) {
		if fi, serr := os.Stat(path); serr == nil {
			sf.SizeBytes = fi.Size()
		}
		return fault(FaultTooLarge, "%d bytes, over the limit of %d bytes for a .snap file; not read", sf.SizeBytes, maxSnapBytes)
	}
	if err != nil {
		return fault(FaultUnreadable, "%s", openMessage(path, err))
	}
	defer f.Close()
	sf.SizeBytes = f.Info.Size()
	if f.Symlink {
		sf.Link = linkTarget(path)
	}
	b, err := readAll(ctx, f, f.Info.Size(), maxSnapBytes)
	if err != nil {
		if ctx.Err() != nil {
			return sf, nil, err
		}
		if errors.Is(err, inputfile.ErrTooLarge) {
			return fault(FaultTooLarge, "grew past the limit of %d bytes for a .snap file while read", maxSnapBytes)
		}
		return fault(FaultUnreadable, "read: %v", err)
	}
	return sf, decodeSnap(&sf, b), nil
}

// decodeSnap decodes b, the bytes of the .snap file sf names, into sf
// (SizeBytes, Index, Term, Voters, Learners, DataBytes, OK) and returns
// its fault, nil when etcd would load it.
func decodeSnap(sf *SnapFile, b []byte) *Fault {
	fault := func(format string, args ...any) *Fault {
		return &Fault{File: sf.Name, Kind: FaultBadSnap, Message: fmt.Sprintf(format, args...)}
	}
	sf.SizeBytes = int64(len(b))
	if len(b) == 0 {
		return fault("empty file: etcd refuses it (snap: empty snapshot)")
	}
	crc, data, err := snapFields(b)
	if err != nil {
		return fault("does not decode: %v", err)
	}
	if len(data) == 0 || crc == 0 {
		return fault("holds no snapshot data: etcd refuses it (snap: empty snapshot)")
	}
	if c := crc32.Checksum(data, crcTable); c != crc {
		return fault("stored crc %08x, computed %08x", crc, c)
	}
	v2Bytes, mdBytes, err := raftSnapshotFields(data)
	if err != nil {
		return fault("raft snapshot does not decode: %v", err)
	}
	var md raftpb.SnapshotMetadata
	if err := proto.Unmarshal(mdBytes, &md); err != nil {
		return fault("raft snapshot metadata does not decode: %v", err)
	}
	sf.Index, sf.Term, sf.DataBytes, sf.OK = md.GetIndex(), md.GetTerm(), int64(v2Bytes), true
	for _, id := range md.GetConfState().GetVoters() {
		sf.Voters = append(sf.Voters, hexID(id))
	}
	for _, id := range md.GetConfState().GetLearners() {
		sf.Learners = append(sf.Learners, hexID(id))
	}
	return nil
}

// readAll reads r, of size bytes when it was opened, whole, in chunks
// of readBufferBytes with ctx checked between them. More than maxBytes is
// inputfile.ErrTooLarge.
func readAll(ctx context.Context, r io.Reader, size, maxBytes int64) ([]byte, error) {
	b := make([]byte, 0, min(size, maxBytes)+1)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if int64(len(b)) > maxBytes {
			return nil, inputfile.ErrTooLarge
		}
		if len(b) == cap(b) {
			b = slices.Grow(b, readBufferBytes)
		}
		n, err := r.Read(b[len(b):min(cap(b), len(b)+readBufferBytes)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// snapFields returns the crc and data fields of a marshalled
// snappb.Snapshot; data aliases b. Unknown fields are skipped, as
// proto.Unmarshal does.
func snapFields(b []byte) (crc uint32, data []byte, err error) {
	err = protoFields(b, func(num protowire.Number, typ protowire.Type, v uint64, bytes []byte) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			crc = uint32(v)
		case num == 2 && typ == protowire.BytesType:
			data = bytes
		case num == 1 || num == 2:
			return fmt.Errorf("field %d has wire type %d", num, typ)
		}
		return nil
	})
	return crc, data, err
}

// raftSnapshotFields returns the size of the data field (the v2 store)
// and the metadata field of a marshalled raftpb.Snapshot; metadata
// aliases b.
func raftSnapshotFields(b []byte) (dataBytes int, metadata []byte, err error) {
	err = protoFields(b, func(num protowire.Number, typ protowire.Type, _ uint64, bytes []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			dataBytes = len(bytes)
		case num == 2 && typ == protowire.BytesType:
			metadata = bytes
		case num == 1 || num == 2:
			return fmt.Errorf("field %d has wire type %d", num, typ)
		}
		return nil
	})
	return dataBytes, metadata, err
}

// protoFields calls f for every field of the marshalled message b, in
// order: its number, wire type, value (varint and fixed types) or bytes
// (bytes type, aliasing b). A later field of the same number overrides an
// earlier one in the callers, as in proto.Unmarshal.
func protoFields(b []byte, f func(num protowire.Number, typ protowire.Type, v uint64, bytes []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v uint64
		var bytes []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(b)
			v = uint64(v32)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			bytes, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, v, bytes); err != nil {
			return err
		}
	}
	return nil
}
