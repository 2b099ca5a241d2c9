package wal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/kubestore/etcdkit/internal/inputfile"
	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// DefaultMaxRecordBytes (10.5 MiB) is the largest WAL record Read
// decodes when Options.MaxRecordBytes is 0. etcd refuses a request whose
// marshalled InternalRaftRequest, an entry's data, is larger than
// --max-request-bytes (server/etcdserver/v3_server.go), and warns when
// that flag is above 10 MiB (server/etcdserver/server.go
// recommendedMaxRequestBytes); the other 512 KiB (the overhead etcd's
// gRPC server allows over it, server/config/config.go grpcOverheadBytes)
// cover the entry's and the record's own fields. etcd 3.4's decoder
// capped a record at 10 MiB (maxWALEntrySizeLimit); 3.5 to 3.7 cap it
// only at the rest of the segment file (server/storage/wal/decoder.go).
const DefaultMaxRecordBytes = 10<<20 + 512<<10

// DefaultMaxSnapBytes is the largest .snap file Read reads when
// Options.MaxSnapBytes is 0. A .snap holds the v2 store (since etcd 3.5
// only the membership, a few KiB; more on a 3.4 member that served the
// v2 API), which etcd reads whole without a limit
// (server/etcdserver/api/snap/snapshotter.go Read).
const DefaultMaxSnapBytes = 512 << 20

// maxSegmentFaults bounds the faults reported per segment: after as many,
// the rest of the segment is skipped (a segment of 8-byte garbage frames
// would otherwise make millions).
const maxSegmentFaults = 100

// Options adjust Read; the zero value is fine.
type Options struct {
	// Parser maps keys onto Kubernetes' key space; without prefixes, the
	// prefixes are detected among the keys written
	// (keyspace.DetectPrefixes).
	Parser keyspace.Parser
	// TopKeys is the number of most written keys to report; 0 means 10,
	// a negative value none, math.MaxInt every key.
	TopKeys int
	// MaxRecordBytes is the largest record a frame may hold; a larger one
	// is a FaultTooLarge and ends its segment. 0 (or less) means
	// DefaultMaxRecordBytes; raise it for a member that ran with
	// --max-request-bytes above 10 MiB.
	MaxRecordBytes int64
	// MaxSnapBytes is the largest .snap file read; a larger one is a
	// FaultTooLarge. 0 (or less) means DefaultMaxSnapBytes.
	MaxSnapBytes int64
}

// Dirs locates a member's wal and snap directories from path: a data
// directory (path/member/wal), a member directory (path/wal), a wal
// directory (it holds *.wal entries) or a snap directory (its sibling
// wal). snapDir is empty when there is no snap directory. It returns an
// error wrapping ErrNoWAL when none of these holds a segment, and the
// operating system's error (fs.ErrPermission...) for a candidate that
// exists but cannot be listed: an unreadable member or member/wal is not
// a directory without a WAL.
func Dirs(path string) (walDir, snapDir string, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", "", err
	}
	if !fi.IsDir() {
		return "", "", fmt.Errorf("%q is not a directory", path)
	}
	candidates := []struct{ wal, snap string }{
		{filepath.Join(path, "member", "wal"), filepath.Join(path, "member", "snap")},
		{filepath.Join(path, "wal"), filepath.Join(path, "snap")},
		{path, filepath.Join(filepath.Dir(path), "snap")},
		{filepath.Join(filepath.Dir(path), "wal"), path},
	}
	for _, c := range candidates {
		ents, err := os.ReadDir(c.wal)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue
		}
		if err != nil {
			return "", "", fmt.Errorf("look for WAL segments: %w", err)
		}
		if !slices.ContainsFunc(ents, func(e fs.DirEntry) bool { return strings.HasSuffix(e.Name(), ".wal") }) {
			continue
		}
		// A snap directory that exists but cannot be read is kept: Read
		// reports it.
		if fi, err := os.Stat(c.snap); errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.IsDir()) {
			c.snap = ""
		}
		return c.wal, c.snap, nil
	}
	return "", "", fmt.Errorf("%q: %w", path, ErrNoWAL)
}

// segmentFile is a segment's name parsed.
type segmentFile struct {
	name       string
	seq, index uint64
}

// listSegments returns the "%016x-%016x.wal" entries of dir by sequence,
// then index, whatever their type (readSegment refuses what is not a
// regular file, or a link to one); other names (the ".tmp" file being
// preallocated) are left out.
func listSegments(dir string) ([]segmentFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []segmentFile
	for _, e := range ents {
		var s segmentFile
		if !strings.HasSuffix(e.Name(), ".wal") {
			continue
		}
		if _, err := fmt.Sscanf(e.Name(), "%016x-%016x.wal", &s.seq, &s.index); err != nil {
			continue
		}
		s.name = e.Name()
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b segmentFile) int {
		return cmp.Or(cmp.Compare(a.seq, b.seq), cmp.Compare(a.index, b.index), cmp.Compare(a.name, b.name))
	})
	return out, nil
}

// Read reads every segment of the member's WAL (and every .snap file of
// its snap directory) under path (see Dirs), read-only, and returns what
// they hold. Damage is reported in Report.Faults, not as an error: a
// segment or .snap file that cannot be read (not a regular file,
// permission denied, too large) too. Errors are returned for a path
// without a WAL or whose WAL directory cannot be listed, and when ctx
// ends (wrapping ctx.Err()).
//
// Memory: Read holds one record at a time, in about four copies (the
// frame's bytes, and its data decoded as a record, an entry and a
// request: at most 4 × MaxRecordBytes), or one .snap file (at most
// MaxSnapBytes, walked in place), plus a 1 MiB read buffer. What it keeps
// is the aggregate, which grows with the distinct keys written, the
// entries not yet committed and the faults (at most 100 per segment), not
// with the size of the files.
func Read(ctx context.Context, path string, o Options) (*Report, error) {
	if o.MaxRecordBytes <= 0 {
		o.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if o.MaxSnapBytes <= 0 {
		o.MaxSnapBytes = DefaultMaxSnapBytes
	}
	walDir, snapDir, err := Dirs(path)
	if err != nil {
		return nil, err
	}
	segs, err := listSegments(walDir)
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", walDir, err)
	}
	rep := &Report{SchemaVersion: ReportSchemaVersion, WALDir: walDir, SnapDir: snapDir,
		Segments: []Segment{}, SnapFiles: []SnapFile{}, Faults: []Fault{}}
	if snapDir != "" {
		if err := readSnapFiles(ctx, snapDir, o.MaxSnapBytes, rep); err != nil {
			return nil, err
		}
	}
	a := newAggregator(rep)
	r := newSegmentReader(nil, "", 0, o.MaxRecordBytes, false)
	prev := -1 // the last segment read
	for i, s := range segs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if prev >= 0 {
			p := segs[prev]
			switch {
			case s.seq == p.seq:
				a.fault(Fault{File: s.name, Offset: 0, Kind: FaultDuplicateSegment,
					Message: fmt.Sprintf("sequence number %d is also %s's; this segment is not read", s.seq, p.name)})
				continue
			case s.seq == p.seq+2:
				a.fault(Fault{File: s.name, Offset: 0, Kind: FaultMissingSegment,
					Message: fmt.Sprintf("segment %d is missing (after %s)", p.seq+1, p.name)})
				a.afterGap = true
			case s.seq > p.seq+2:
				a.fault(Fault{File: s.name, Offset: 0, Kind: FaultMissingSegment,
					Message: fmt.Sprintf("segments %d to %d are missing (after %s)", p.seq+1, s.seq-1, p.name)})
				a.afterGap = true
			}
		}
		prev = i
		if err := a.readSegment(ctx, r, walDir, s, i == len(segs)-1); err != nil {
			return nil, err
		}
	}
	a.finish(ctx, o)
	return rep, nil
}

// readSegment reads one segment's records into the aggregator with r. A
// segment that cannot be opened is a FaultUnreadable; the crc chain and
// the index sequence then restart after it.
func (a *aggregator) readSegment(ctx context.Context, r *segmentReader, walDir string, s segmentFile, last bool) error {
	path := filepath.Join(walDir, s.name)
	f, err := inputfile.Open(path, -1) // streamed: memory follows the record, not the file
	if err != nil {
		a.fault(Fault{File: s.name, Kind: FaultUnreadable, Message: openMessage(path, err)})
		a.afterGap = true
		return nil
	}
	defer f.Close()
	seg := Segment{Name: s.name, Seq: s.seq, Index: s.index, SizeBytes: f.Info.Size()}
	if f.Symlink {
		seg.Link = linkTarget(path)
	}
	firstFault := len(a.rep.Faults)
	r.reset(f, s.name, f.Info.Size(), last)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(a.rep.Faults)-firstFault >= maxSegmentFaults {
			a.fault(Fault{File: s.name, Offset: r.off, Kind: FaultCorruptFrame,
				Message: fmt.Sprintf("%d faults in this segment; the rest of it is skipped", maxSegmentFaults)})
			a.afterGap = true
			break
		}
		rec, err := r.next()
		if errors.Is(err, errEndOfSegment) {
			break
		}
		var fault *Fault
		if errors.As(err, &fault) {
			// The rest of the segment is skipped: the crc chain and the
			// indexes restart after it.
			a.fault(*fault)
			a.afterGap = true
			break
		}
		if err != nil {
			return err
		}
		seg.Records++
		seg.UsedBytes = r.off
		if !a.checkCRC(r, rec) {
			continue
		}
		idx := a.record(s.name, rec)
		if idx > 0 {
			if seg.FirstEntry == 0 {
				seg.FirstEntry = idx
			}
			seg.LastEntry = idx
		}
	}
	a.rep.Segments = append(a.rep.Segments, seg)
	return nil
}

// openMessage is a fault's message for a file inputfile.Open refused,
// without the path, which the fault's file and the report's directories
// name: "open: permission denied", "is a FIFO, not a regular file", "is
// a symbolic link to /dev/zero: is a character device, not a regular
// file".
func openMessage(path string, err error) string {
	msg := strings.TrimPrefix(err.Error(), path+": ")
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) && pe.Path == path {
		msg = pe.Op + ": " + pe.Err.Error()
	}
	if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		msg = fmt.Sprintf("is a symbolic link to %s: %s", linkTarget(path), msg)
	}
	return msg
}

// linkTarget returns the target of the symbolic link path, or "?" when it
// cannot be read.
func linkTarget(path string) string {
	t, err := os.Readlink(path)
	if err != nil {
		return "?"
	}
	return t
}

// checkCRC continues the crc chain over rec and reports whether rec can
// be used. A mismatch is a fault (a torn tail when the data shows a
// zeroed sector in the last segment); the chain then continues from the
// stored crc, or from the computed one if the next record matches that
// instead (the stored crc itself was damaged).
func (a *aggregator) checkCRC(r *segmentReader, rec record) bool {
	if rec.rec.GetType() == crcType {
		stored := rec.rec.GetCrc()
		// After a missing segment the chain cannot continue: that fault
		// was reported already.
		if a.crc != 0 && stored != a.crc && !(a.altValid && stored == a.altCRC) && !a.afterGap {
			a.fault(Fault{File: r.name, Offset: rec.offset, Kind: FaultCRCChain,
				Message: fmt.Sprintf("segment opens with crc %08x, the previous segment's chain ends at %08x", stored, a.crc)})
		}
		a.crc, a.altValid = stored, false
		return true
	}
	computed := crc32.Update(a.crc, crcTable, rec.rec.GetData())
	stored := rec.rec.GetCrc()
	if stored == computed {
		a.crc, a.altValid = computed, false
		return true
	}
	if a.altValid {
		if alt := crc32.Update(a.altCRC, crcTable, rec.rec.GetData()); alt == stored {
			a.crc, a.altValid = alt, false
			return true
		}
	}
	kind, msg := FaultCRCMismatch, "record skipped"
	if r.torn(rec) {
		kind, msg = FaultTornTail, "the record holds a zeroed sector"
	}
	a.fault(Fault{File: r.name, Offset: rec.offset, Kind: kind,
		Message: fmt.Sprintf("%s record: stored crc %08x, computed %08x; %s", recordTypeName(rec.rec.GetType()), stored, computed, msg)})
	a.crc, a.altCRC, a.altValid = stored, computed, true
	a.afterGap = true
	return false
}

func recordTypeName(t int64) string {
	switch t {
	case metadataType:
		return "metadata"
	case entryType:
		return "entry"
	case stateType:
		return "state"
	case crcType:
		return "crc"
	case snapshotType:
		return "snapshot"
	}
	return fmt.Sprintf("type-%d", t)
}

// record applies one crc-checked record and returns the index of the
// entry it holds (0 for other records).
func (a *aggregator) record(file string, rec record) uint64 {
	data := rec.rec.GetData()
	bad := func(what string, err error) {
		a.fault(Fault{File: file, Offset: rec.offset, Kind: FaultBadEntry, Message: fmt.Sprintf("%s record does not decode: %v", what, err)})
	}
	switch rec.rec.GetType() {
	case crcType: // checked by checkCRC
	case metadataType:
		var m etcdserverpb.Metadata
		if err := proto.Unmarshal(data, &m); err != nil {
			bad("metadata", err)
			return 0
		}
		a.rep.NodeID, a.rep.ClusterID = hexID(m.GetNodeID()), hexID(m.GetClusterID())
	case stateType:
		var hs raftpb.HardState
		if err := proto.Unmarshal(data, &hs); err != nil {
			bad("state", err)
			return 0
		}
		a.state(&hs)
	case snapshotType:
		var s walpb.Snapshot
		if err := proto.Unmarshal(data, &s); err != nil {
			bad("snapshot", err)
			return 0
		}
		a.snapshot(&s)
	case entryType:
		e := &raftpb.Entry{}
		if err := proto.Unmarshal(data, e); err != nil {
			bad("entry", err)
			return 0
		}
		a.entry(file, rec.offset, e)
		return e.GetIndex()
	default:
		a.fault(Fault{File: file, Offset: rec.offset, Kind: FaultBadEntry, Message: fmt.Sprintf("unknown record type %d", rec.rec.GetType())})
	}
	return 0
}

// hexID formats a member or cluster ID as etcdctl does.
func hexID(id uint64) string { return fmt.Sprintf("%x", id) }
