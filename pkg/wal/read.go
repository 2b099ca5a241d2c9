package wal

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap/snappb"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// Options adjust Read; the zero value is fine.
type Options struct {
	// Parser maps keys onto Kubernetes' key space; without prefixes, the
	// prefixes are detected among the keys written
	// (keyspace.DetectPrefixes).
	Parser keyspace.Parser
	// TopKeys is the number of most written keys to report; 0 means 10,
	// a negative value none.
	TopKeys int
}

// Dirs locates a member's wal and snap directories from path: a data
// directory (path/member/wal), a member directory (path/wal), a wal
// directory (it holds *.wal files) or a snap directory (its sibling wal).
// snapDir is empty when there is no snap directory. It returns an error
// wrapping ErrNoWAL when none of these holds a segment.
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
		names, _ := filepath.Glob(filepath.Join(c.wal, "*.wal"))
		if len(names) == 0 {
			continue
		}
		if fi, err := os.Stat(c.snap); err != nil || !fi.IsDir() {
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

// listSegments returns the "%016x-%016x.wal" files of dir by sequence;
// other files (the ".tmp" file being preallocated) are left out.
func listSegments(dir string) ([]segmentFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []segmentFile
	for _, e := range ents {
		var s segmentFile
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".wal") {
			continue
		}
		if _, err := fmt.Sscanf(e.Name(), "%016x-%016x.wal", &s.seq, &s.index); err != nil {
			continue
		}
		s.name = e.Name()
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b segmentFile) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	return out, nil
}

// Read reads every segment of the member's WAL (and every .snap file of
// its snap directory) under path (see Dirs), read-only, and returns what
// they hold. Damage is reported in Report.Faults, not as an error; errors
// are returned for a path without a WAL, for files that cannot be read,
// and when ctx ends.
func Read(ctx context.Context, path string, o Options) (*Report, error) {
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
		if err := readSnapFiles(snapDir, rep); err != nil {
			return nil, err
		}
	}
	a := newAggregator(rep)
	for i, s := range segs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if i > 0 && s.seq != segs[i-1].seq+1 {
			missing := fmt.Sprintf("segment %d is missing", s.seq-1)
			if s.seq-segs[i-1].seq > 2 {
				missing = fmt.Sprintf("segments %d to %d are missing", segs[i-1].seq+1, s.seq-1)
			}
			a.fault(Fault{File: s.name, Offset: 0, Kind: FaultMissingSegment,
				Message: fmt.Sprintf("%s (after %s)", missing, segs[i-1].name)})
			a.afterGap = true
		}
		if err := a.readSegment(ctx, filepath.Join(walDir, s.name), s, i == len(segs)-1); err != nil {
			return nil, err
		}
	}
	a.finish(ctx, o)
	return rep, nil
}

// readSegment reads one segment's records into the aggregator.
func (a *aggregator) readSegment(ctx context.Context, path string, s segmentFile, last bool) error {
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("open %q read-only: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %q: %w", path, err)
	}
	seg := Segment{Name: s.name, Seq: s.seq, Index: s.index, SizeBytes: fi.Size()}
	r := newSegmentReader(f, s.name, fi.Size(), last)
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		rec, err := r.next()
		if errors.Is(err, errEndOfSegment) {
			break
		}
		var fault *Fault
		if errors.As(err, &fault) {
			a.fault(*fault)
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

// readSnapFiles decodes every .snap file of dir into rep.SnapFiles, in
// name order (term, then index).
func readSnapFiles(dir string, rep *Report) error {
	names, err := filepath.Glob(filepath.Join(dir, "*.snap"))
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, path := range names {
		name := filepath.Base(path)
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %q: %w", path, err)
		}
		sf := SnapFile{Name: name, SizeBytes: int64(len(b)), Voters: []string{}}
		fail := func(format string, args ...any) {
			rep.Faults = append(rep.Faults, Fault{File: name, Kind: FaultBadSnap, Message: fmt.Sprintf(format, args...)})
			rep.SnapFiles = append(rep.SnapFiles, sf)
		}
		var ss snappb.Snapshot
		if err := proto.Unmarshal(b, &ss); err != nil {
			fail("does not decode: %v", err)
			continue
		}
		if c := crc32.Checksum(ss.GetData(), crcTable); c != ss.GetCrc() {
			fail("stored crc %08x, computed %08x", ss.GetCrc(), c)
			continue
		}
		var rs raftpb.Snapshot
		if err := proto.Unmarshal(ss.GetData(), &rs); err != nil {
			fail("raft snapshot does not decode: %v", err)
			continue
		}
		md := rs.GetMetadata()
		sf.Index, sf.Term, sf.DataBytes, sf.OK = md.GetIndex(), md.GetTerm(), int64(len(rs.GetData())), true
		for _, id := range md.GetConfState().GetVoters() {
			sf.Voters = append(sf.Voters, hexID(id))
		}
		for _, id := range md.GetConfState().GetLearners() {
			sf.Learners = append(sf.Learners, hexID(id))
		}
		rep.SnapFiles = append(rep.SnapFiles, sf)
	}
	return nil
}
