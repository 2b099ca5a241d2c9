package wal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	etcdwal "go.etcd.io/etcd/server/v3/storage/wal"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/internal/filetest"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// written is what writeLoad wrote, to compare Read's counts with.
type written struct {
	podPuts, podDeletes, podValueBytes int64
	configMapPuts, eventPuts           int64
	outsidePuts                        int64
	txns, puts                         int64
	compactRevision                    int64
}

// writeLoad writes Kubernetes-shaped keys the way kube-apiserver does
// (creates and updates as transactions comparing mod_revision), plus plain
// puts, a leased event pair, a lease revoke and a compaction.
func writeLoad(t *testing.T, ctx context.Context, c *clientv3.Client) written {
	t.Helper()
	codec, err := keyspace.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	gen := keyspace.NewGenerator(7)
	var w written
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		key := fmt.Sprintf("/registry/pods/default/web-%d", i)
		b, err := codec.Encode(gen.Pod("default", fmt.Sprintf("web-%d", i), 0))
		must(err)
		_, err = c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).Then(clientv3.OpPut(key, string(b))).Commit()
		must(err)
		w.podPuts++
		w.podValueBytes += int64(len(b))
		w.txns++
	}
	for gen2 := 1; gen2 <= 3; gen2++ {
		key := "/registry/pods/default/web-0"
		cur, err := c.Get(ctx, key)
		must(err)
		b, err := codec.Encode(gen.Pod("default", "web-0", gen2))
		must(err)
		_, err = c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", cur.Kvs[0].ModRevision)).
			Then(clientv3.OpPut(key, string(b))).Else(clientv3.OpGet(key)).Commit()
		must(err)
		w.podPuts++
		w.podValueBytes += int64(len(b))
		w.txns++
	}
	key := "/registry/pods/default/web-4"
	cur, err := c.Get(ctx, key)
	must(err)
	_, err = c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", cur.Kvs[0].ModRevision)).
		Then(clientv3.OpDelete(key)).Else(clientv3.OpGet(key)).Commit()
	must(err)
	w.podDeletes++
	w.txns++
	for i := range 2 {
		b, err := codec.Encode(gen.ConfigMap("kube-system", fmt.Sprintf("cm-%d", i), 0, 100))
		must(err)
		_, err = c.Put(ctx, fmt.Sprintf("/registry/configmaps/kube-system/cm-%d", i), string(b))
		must(err)
		w.configMapPuts++
		w.puts++
	}
	lease, err := c.Grant(ctx, 3600)
	must(err)
	for i := range 2 {
		b, err := codec.Encode(gen.Event("default", fmt.Sprintf("web-0.%d", i), "web-0", 1))
		must(err)
		_, err = c.Put(ctx, fmt.Sprintf("/registry/events/default/web-0.%d", i), string(b), clientv3.WithLease(lease.ID))
		must(err)
		w.eventPuts++
		w.puts++
	}
	_, err = c.Revoke(ctx, lease.ID)
	must(err)
	// Auth requests, as an operator adds a read-only backup user.
	_, err = c.RoleAdd(ctx, "registry-reader")
	must(err)
	_, err = c.UserAdd(ctx, "backup", "secret")
	must(err)
	resp, err := c.Put(ctx, "/other/key", "v")
	must(err)
	w.outsidePuts++
	w.puts++
	w.compactRevision = resp.Header.Revision
	_, err = c.Compact(ctx, w.compactRevision)
	must(err)
	return w
}

// makeDataDir runs an embedded member with small WAL segments, writes the
// load and stops the member; it returns the data directory.
func makeDataDir(t *testing.T) (string, written) {
	t.Helper()
	old := etcdwal.SegmentSizeBytes
	etcdwal.SegmentSizeBytes = 4 << 10 // several segments from a small load
	t.Cleanup(func() { etcdwal.SegmentSizeBytes = old })
	srv := etcdtest.RunEtcd(t, etcdtest.Options{SnapshotCount: 10})
	c := etcdtest.NewClient(t, srv)
	w := writeLoad(t, t.Context(), c)
	c.Close()
	srv.Close()
	return srv.Dir, w
}

func kind(r *Report, k string) int64 {
	for _, row := range r.Kinds {
		if row.Kind == k {
			return row.Entries
		}
	}
	return 0
}

func row(r *Report, dim snapshot.Dimension, match func(WriteRow) bool) WriteRow {
	for _, w := range r.By(dim) {
		if match(w) {
			return w
		}
	}
	return WriteRow{}
}

func TestReadCountsWhatWasWritten(t *testing.T) {
	dir, w := makeDataDir(t)
	defer filetest.Unchanged(t, dir)()
	rep, err := Read(t.Context(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, rep, w)
	if len(rep.SnapFiles) == 0 || rep.LastSnapshot == nil {
		t.Errorf("got %d snap files and last snapshot %v, want some with --snapshot-count 10", len(rep.SnapFiles), rep.LastSnapshot)
	}
	for _, s := range rep.SnapFiles {
		if !s.OK || s.Index == 0 || len(s.Voters) != 1 || s.Voters[0] != rep.NodeID {
			t.Errorf("snap file %+v: want ok, an index, and this member as the one voter %s", s, rep.NodeID)
		}
	}
	if len(rep.Segments) < 3 {
		t.Errorf("got %d segments, want at least 3 with 4 KiB segments", len(rep.Segments))
	}
}

// checkCounts compares a report with what writeLoad wrote.
func checkCounts(t *testing.T, rep *Report, w written) {
	t.Helper()
	if len(rep.Faults) != 0 {
		t.Fatalf("faults on an intact WAL: %+v", rep.Faults)
	}
	if k := kind(rep, "undecodable") + kind(rep, "unknown"); k != 0 {
		t.Errorf("got %d undecodable or unknown entries, want none: %+v", k, rep.Kinds)
	}
	pods := row(rep, snapshot.ByResource, func(w WriteRow) bool { return w.Resource == "pods" })
	cms := row(rep, snapshot.ByResource, func(w WriteRow) bool { return w.Resource == "configmaps" })
	events := row(rep, snapshot.ByResource, func(w WriteRow) bool { return w.Resource == "events" })
	outside := row(rep, snapshot.ByResource, func(w WriteRow) bool { return w.Class == keyspace.ClassOutside })
	kubeSystem := row(rep, snapshot.ByNamespace, func(w WriteRow) bool { return w.Namespace == "kube-system" })
	compactions := int64(len(rep.Compactions))
	var compactRev int64
	if compactions > 0 {
		compactRev = rep.Compactions[0].Revision
	}
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"pod puts", pods.RequestedPuts, w.podPuts},
		{"pod deletes", pods.RequestedDeletes, w.podDeletes},
		{"pod keys", pods.Keys, 5},
		{"pod value bytes", pods.ValueBytes, w.podValueBytes},
		{"configmap puts", cms.RequestedPuts, w.configMapPuts},
		{"kube-system writes", kubeSystem.RequestedWrites, w.configMapPuts},
		{"event puts", events.RequestedPuts, w.eventPuts},
		{"outside puts", outside.RequestedWrites, w.outsidePuts},
		{"txn entries", kind(rep, "txn"), w.txns},
		{"txns", rep.Txn.Txns, w.txns},
		{"mod compares", rep.Txn.Compares["mod"], w.txns},
		{"failure writes", rep.Txn.FailureWrites, 0},
		{"put entries", kind(rep, "put"), w.puts},
		{"authRoleAdd entries", kind(rep, "authRoleAdd"), 1},
		{"authUserAdd entries", kind(rep, "authUserAdd"), 1},
		{"compactions", compactions, 1},
		{"compact revision", compactRev, w.compactRevision},
		{"lease grants", rep.Leases.Grants, 1},
		{"lease revokes", rep.Leases.Revokes, 1},
		{"revokes of granted leases", rep.Leases.RevokedGranted, 1},
		{"puts with lease", rep.Leases.PutsWithLease, w.eventPuts},
		{"total writes", rep.Total.RequestedWrites, w.podPuts + w.podDeletes + w.configMapPuts + w.eventPuts + w.outsidePuts},
		// writeLoad's writes all succeed, and the replay decides each.
		{"pod applied puts", pods.AppliedPuts, w.podPuts},
		{"pod applied deletes", pods.AppliedDeletes, w.podDeletes},
		{"applied writes", rep.Total.AppliedWrites, rep.Total.RequestedWrites},
		{"failed writes", rep.Total.FailedWrites, 0},
		{"writes not decided", rep.Total.NotDecidedWrites, 0},
		{"entries decided", int64(rep.Replay.DecidedThroughIndex), int64(rep.LastIndex)},
		{"replay revision at the db's consistent index", rep.Replay.ReplayRevision, rep.Replay.DBRevision},
		{"entries", rep.Entries, int64(rep.LastIndex - rep.FirstIndex + 1)},
		{"commit index", int64(rep.HardState.Commit), int64(rep.LastIndex)},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
		}
	}
	if rep.Replay.NotDecided != "" {
		t.Errorf("got outcomes not decided: %s", rep.Replay.NotDecided)
	}
	if rep.NodeID == "" || rep.HardState.Term == 0 {
		t.Errorf("got node ID %q term %d, want both set", rep.NodeID, rep.HardState.Term)
	}
	if len(rep.TopKeys) == 0 || rep.TopKeys[0].Key != "/registry/pods/default/web-0" || rep.TopKeys[0].RequestedWrites != 4 {
		t.Errorf("got top keys %+v, want web-0 first with 4 writes", rep.TopKeys)
	}
}

// frame is a record's place in a segment.
type frame struct {
	offset, dataEnd int64
	typ             int64
}

// frames lists the records of a segment.
func frames(t *testing.T, path string) []frame {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	r := newSegmentReader(f, filepath.Base(path), fi.Size(), DefaultMaxRecordBytes, false)
	var out []frame
	for {
		start := r.off
		rec, err := r.next()
		if errors.Is(err, errEndOfSegment) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, frame{offset: start, dataEnd: dataEnd(t, f, start), typ: rec.rec.GetType()})
	}
}

// dataEnd returns the offset after the record (before padding) of the
// frame at off.
func dataEnd(t *testing.T, f *os.File, off int64) int64 {
	t.Helper()
	var b [8]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	var lenField uint64
	for i := 7; i >= 0; i-- {
		lenField = lenField<<8 | uint64(b[i])
	}
	recBytes, _ := decodeFrameSize(lenField)
	return off + frameSizeBytes + recBytes
}

func TestReadDamaged(t *testing.T) {
	dir, _ := makeDataDir(t)
	intact, err := Read(t.Context(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	walDir := filepath.Join(dir, "member", "wal")
	segs, err := listSegments(walDir)
	if err != nil || len(segs) < 3 {
		t.Fatalf("got %d segments (%v), want at least 3", len(segs), err)
	}
	// The second entry record of the first middle segment that holds two
	// (how many a segment holds follows the objects' sizes).
	var victim frame
	k := 0
	for i := 1; i < len(segs)-1 && k == 0; i++ {
		n := 0
		for _, f := range frames(t, filepath.Join(walDir, segs[i].name)) {
			if f.typ == entryType {
				if n++; n == 2 {
					victim, k = f, i
					break
				}
			}
		}
	}
	if k == 0 {
		t.Fatalf("no segment between the first and the last of %d holds two entry records", len(segs))
	}
	mid, last := segs[k].name, segs[len(segs)-1].name
	lastFrames := frames(t, filepath.Join(walDir, last))
	tail := lastFrames[len(lastFrames)-1]

	cases := []struct {
		name        string
		damage      func(t *testing.T, walDir string)
		wantKind    FaultKind
		wantFile    string
		wantOffset  int64
		wantEntries int64 // entries lost at most
	}{
		{"torn tail", func(t *testing.T, walDir string) {
			// Zero the last record's bytes and cut the file after them,
			// as a crash mid-write leaves it.
			p := filepath.Join(walDir, last)
			if err := os.Truncate(p, tail.dataEnd-3); err != nil {
				t.Fatal(err)
			}
		}, FaultTornTail, last, tail.offset, 1},
		{"zeroed tail sector", func(t *testing.T, walDir string) {
			p := filepath.Join(walDir, last)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			clear(b[tail.offset+frameSizeBytes : tail.dataEnd])
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, FaultTornTail, last, tail.offset, 1},
		{"flipped data byte", func(t *testing.T, walDir string) {
			flip(t, filepath.Join(walDir, mid), victim.dataEnd-1)
		}, FaultCRCMismatch, mid, victim.offset, 1},
		{"flipped crc byte", func(t *testing.T, walDir string) {
			// type tag, type, crc tag, then the crc varint's first byte.
			flip(t, filepath.Join(walDir, mid), victim.offset+frameSizeBytes+3)
		}, FaultCRCMismatch, mid, victim.offset, 1},
		{"missing segment", func(t *testing.T, walDir string) {
			if err := os.Remove(filepath.Join(walDir, mid)); err != nil {
				t.Fatal(err)
			}
		}, FaultMissingSegment, segs[k+1].name, 0, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := filetest.CopyTree(t, dir)
			c.damage(t, filepath.Join(d, "member", "wal"))
			defer filetest.Unchanged(t, d)()
			rep, err := Read(t.Context(), d, Options{})
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if len(rep.Faults) != 1 {
				t.Fatalf("got %d faults, want 1: %+v", len(rep.Faults), rep.Faults)
			}
			f := rep.Faults[0]
			if f.Kind != c.wantKind || f.File != c.wantFile || f.Offset != c.wantOffset {
				t.Errorf("got fault %s, want kind %s in %s at offset %d", f.Error(), c.wantKind, c.wantFile, c.wantOffset)
			}
			if strings.Contains(f.Error(), "\n") {
				t.Errorf("fault %q spans lines", f.Error())
			}
			if c.wantEntries >= 0 && rep.Entries < intact.Entries-c.wantEntries {
				t.Errorf("got %d entries, want at least %d of %d", rep.Entries, intact.Entries-c.wantEntries, intact.Entries)
			}
			if c.wantEntries < 0 && rep.Entries >= intact.Entries {
				t.Errorf("got %d entries without a segment, want fewer than %d", rep.Entries, intact.Entries)
			}
		})
	}
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x01
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDirs(t *testing.T) {
	dir, _ := makeDataDir(t)
	wantWAL, wantSnap := filepath.Join(dir, "member", "wal"), filepath.Join(dir, "member", "snap")
	for _, p := range []string{dir, filepath.Join(dir, "member"), wantWAL, wantSnap} {
		gotWAL, gotSnap, err := Dirs(p)
		if err != nil || gotWAL != wantWAL || gotSnap != wantSnap {
			t.Errorf("Dirs(%q): got %q, %q, %v; want %q, %q", p, gotWAL, gotSnap, err, wantWAL, wantSnap)
		}
	}
	if _, _, err := Dirs(t.TempDir()); !errors.Is(err, ErrNoWAL) {
		t.Errorf("Dirs(empty dir): got %v, want ErrNoWAL", err)
	}
}
