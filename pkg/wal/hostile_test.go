package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/kubestore/etcdkit/internal/filetest"
)

// hugeBytes is the size of the sparse files the hostile inputs are made
// of: far beyond any limit, and beyond the machine's memory.
const hugeBytes = 20 << 30

// hostileDir copies the 3.7 fixture (six segments, sequence 0 to 5; two
// .snap files) to a temporary directory and returns it with its wal and
// snap directories.
func hostileDir(t *testing.T) (dir, walDir, snapDir string) {
	t.Helper()
	dir = filetest.CopyTree(t, fixtureDir("3.7"))
	return dir, filepath.Join(dir, "member", "wal"), filepath.Join(dir, "member", "snap")
}

// sparse creates path as a sparse file of size bytes holding head at
// offset 0.
func sparse(t *testing.T, path string, size int64, head []byte) {
	t.Helper()
	if err := os.WriteFile(path, head, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// lengthField is a frame's length field for a record of n bytes, no
// padding.
func lengthField(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }

// appendFrame appends rec framed as etcd's encoder frames it: the
// length field, the record, padding to 8 bytes
// (server/storage/wal/encoder.go).
func appendFrame(t testing.TB, b []byte, rec *walpb.Record) []byte {
	data, err := proto.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(len(data))
	pad := (8 - n%8) % 8
	if pad != 0 {
		n |= (0x80 | pad) << 56
	}
	b = binary.LittleEndian.AppendUint64(b, n)
	b = append(b, data...)
	return append(b, make([]byte, pad)...)
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// readWithin runs Read and fails the test when it does not return within
// d (the open of a FIFO blocking forever, a read of /dev/zero); the
// goroutine is then left behind.
func readWithin(t *testing.T, ctx context.Context, d time.Duration, dir string, o Options) (*Report, error) {
	t.Helper()
	type result struct {
		rep *Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := Read(ctx, dir, o)
		done <- result{rep, err}
	}()
	select {
	case r := <-done:
		return r.rep, r.err
	case <-time.After(d):
		t.Fatalf("Read(%s) did not return within %v", dir, d)
		return nil, nil
	}
}

// TestReadHostileFiles puts one hostile file into a copy of the 3.7
// fixture: each is one fault that names the file and what is wrong (or
// none, for a link followed to a regular file, which is reported as a
// link), read within 2 s, and every entry of the WAL is still read.
func TestReadHostileFiles(t *testing.T) {
	intact, err := Read(t.Context(), fixtureDir("3.7"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	const (
		nextSeg  = "0000000000000006-0000000000000010.wal" // after the last segment
		lastSeg  = "0000000000000005-000000000000000f.wal"
		lastSnap = "0000000000000002-0000000000000016.snap"
		newSnap  = "0000000000000003-0000000000000020.snap"
	)
	cases := []struct {
		name  string
		setup func(t *testing.T, walDir, snapDir string)
		// wantKind is the one fault's kind ("" for none); it is in file
		// wantFile and its message holds wantMessage.
		wantKind    FaultKind
		wantFile    string
		wantMessage []string
		// wantLink names the one file reported as a symbolic link.
		wantLink string
	}{
		{"snap is /dev/zero", func(t *testing.T, _, snapDir string) {
			symlink(t, "/dev/zero", filepath.Join(snapDir, newSnap))
		}, FaultUnreadable, newSnap, []string{"symbolic link to /dev/zero", "is a character device"}, ""},
		{"snap is a 20 GiB sparse file", func(t *testing.T, _, snapDir string) {
			sparse(t, filepath.Join(snapDir, newSnap), hugeBytes, nil)
		}, FaultTooLarge, newSnap, []string{fmt.Sprint(hugeBytes), fmt.Sprint(DefaultMaxSnapBytes)}, ""},
		{"snap is a FIFO", func(t *testing.T, _, snapDir string) {
			mkfifo(t, filepath.Join(snapDir, newSnap))
		}, FaultUnreadable, newSnap, []string{"is a FIFO"}, ""},
		{"snap is a directory", func(t *testing.T, _, snapDir string) {
			if err := os.Mkdir(filepath.Join(snapDir, newSnap), 0o755); err != nil {
				t.Fatal(err)
			}
		}, FaultUnreadable, newSnap, []string{"is a directory"}, ""},
		{"snap is empty", func(t *testing.T, _, snapDir string) {
			if err := os.Truncate(filepath.Join(snapDir, lastSnap), 0); err != nil {
				t.Fatal(err)
			}
		}, FaultBadSnap, lastSnap, []string{"empty"}, ""},
		{"snap holds an empty snapshot", func(t *testing.T, _, snapDir string) {
			// snappb.Snapshot{crc: 0, data: empty}: what etcd calls an
			// empty snapshot too.
			if err := os.WriteFile(filepath.Join(snapDir, newSnap), []byte{0x08, 0x00, 0x12, 0x00}, 0o600); err != nil {
				t.Fatal(err)
			}
		}, FaultBadSnap, newSnap, []string{"no snapshot data"}, ""},
		{"snap is a symbolic link to a regular file", func(t *testing.T, _, snapDir string) {
			moveAndLink(t, filepath.Join(snapDir, lastSnap))
		}, "", "", nil, lastSnap},
		{"segment is /dev/zero", func(t *testing.T, walDir, _ string) {
			symlink(t, "/dev/zero", filepath.Join(walDir, nextSeg))
		}, FaultUnreadable, nextSeg, []string{"symbolic link to /dev/zero", "is a character device"}, ""},
		{"segment is a FIFO", func(t *testing.T, walDir, _ string) {
			mkfifo(t, filepath.Join(walDir, nextSeg))
		}, FaultUnreadable, nextSeg, []string{"is a FIFO"}, ""},
		{"segment is a directory", func(t *testing.T, walDir, _ string) {
			if err := os.Mkdir(filepath.Join(walDir, nextSeg), 0o755); err != nil {
				t.Fatal(err)
			}
		}, FaultUnreadable, nextSeg, []string{"is a directory"}, ""},
		{"segment is a dangling symbolic link", func(t *testing.T, walDir, _ string) {
			symlink(t, "gone.wal", filepath.Join(walDir, nextSeg))
		}, FaultUnreadable, nextSeg, []string{"symbolic link to gone.wal", "no such file"}, ""},
		{"segment is a symbolic link to a regular file", func(t *testing.T, walDir, _ string) {
			moveAndLink(t, filepath.Join(walDir, lastSeg))
		}, "", "", nil, lastSeg},
		{"20 GiB segment with a 19 GiB frame", func(t *testing.T, walDir, _ string) {
			sparse(t, filepath.Join(walDir, nextSeg), hugeBytes, lengthField(19<<30))
		}, FaultTooLarge, nextSeg, []string{"offset 0:", fmt.Sprint(19 << 30), fmt.Sprint(DefaultMaxRecordBytes)}, ""},
		{"20 GiB segment of zeros", func(t *testing.T, walDir, _ string) {
			// Preallocated space: the end of the segment, at once.
			sparse(t, filepath.Join(walDir, nextSeg), hugeBytes, nil)
		}, "", "", nil, ""},
		{"duplicate sequence number", func(t *testing.T, walDir, _ string) {
			copyFile(t, filepath.Join(walDir, "0000000000000002-0000000000000008.wal"), filepath.Join(walDir, "0000000000000002-0000000000000009.wal"))
		}, FaultDuplicateSegment, "0000000000000002-0000000000000009.wal", []string{"0000000000000002-0000000000000008.wal"}, ""},
		{"duplicate sequence number 0", func(t *testing.T, walDir, _ string) {
			copyFile(t, filepath.Join(walDir, "0000000000000000-0000000000000000.wal"), filepath.Join(walDir, "0000000000000000-0000000000000001.wal"))
		}, FaultDuplicateSegment, "0000000000000000-0000000000000001.wal", []string{"0000000000000000-0000000000000000.wal"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, walDir, snapDir := hostileDir(t)
			c.setup(t, walDir, snapDir)
			start := time.Now()
			rep, err := readWithin(t, t.Context(), 10*time.Second, dir, Options{})
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Read took %v, want at most 2s", d)
			}
			var want int
			if c.wantKind != "" {
				want = 1
			}
			if len(rep.Faults) != want {
				t.Fatalf("got %d faults, want %d: %+v", len(rep.Faults), want, rep.Faults)
			}
			if want == 1 {
				f := rep.Faults[0]
				t.Logf("fault: %s", f.Error())
				if f.Kind != c.wantKind || f.File != c.wantFile {
					t.Errorf("got fault %q, want kind %s in %s", f.Error(), c.wantKind, c.wantFile)
				}
				for _, m := range c.wantMessage {
					if !strings.Contains(f.Error(), m) {
						t.Errorf("fault %q does not say %q", f.Error(), m)
					}
				}
			}
			gotLinks := links(rep)
			for name := range gotLinks {
				if name != c.wantLink {
					t.Errorf("%s: got a symbolic link to %s reported, want none", name, gotLinks[name])
				}
			}
			if l := gotLinks[c.wantLink]; c.wantLink != "" && !strings.HasSuffix(l, string(filepath.Separator)+c.wantLink) {
				t.Errorf("%s: got link %q reported, want the path it was moved to", c.wantLink, l)
			}
			if rep.Entries != intact.Entries || rep.Total.RequestedWrites != intact.Total.RequestedWrites {
				t.Errorf("got %d entries and %d writes, want %d and %d as in the intact WAL", rep.Entries, rep.Total.RequestedWrites, intact.Entries, intact.Total.RequestedWrites)
			}
		})
	}
}

// moveAndLink moves the file path to a directory outside the member and
// puts a symbolic link to it in its place: Read follows it and says so.
func moveAndLink(t *testing.T, path string) {
	t.Helper()
	target := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.Rename(path, target); err != nil {
		t.Fatal(err)
	}
	symlink(t, target, path)
}

// links returns the Link of every segment and .snap file of rep, by name.
func links(rep *Report) map[string]string {
	m := map[string]string{}
	for _, s := range rep.Segments {
		if s.Link != "" {
			m[s.Name] = s.Link
		}
	}
	for _, s := range rep.SnapFiles {
		if s.Link != "" {
			m[s.Name] = s.Link
		}
	}
	return m
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReadPermissionDenied makes a directory or file of a copy of the 3.7
// fixture unreadable (mode 000, as nobody: root passes over modes):
// member or member/wal is an error saying permission denied, not "no WAL
// segments"; member/snap, a segment or a .snap file is a fault saying so,
// and the rest is read.
func TestReadPermissionDenied(t *testing.T) {
	cases := []struct {
		name string
		path string // under the data directory
		// wantFault is the fault's file, "" when Read must fail.
		wantFault string
	}{
		{"member dir", "member", ""},
		{"wal dir", "member/wal", ""},
		{"snap dir", "member/snap", "snap"},
		{"segment", "member/wal/0000000000000005-000000000000000f.wal", "0000000000000005-000000000000000f.wal"},
		{"snap file", "member/snap/0000000000000002-0000000000000016.snap", "0000000000000002-0000000000000016.snap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			filetest.Unprivileged(t, func(t *testing.T) {
				dir, _, _ := hostileDir(t)
				p := filepath.Join(dir, filepath.FromSlash(c.path))
				if err := os.Chmod(p, 0); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Chmod(p, 0o755) }) // for t.TempDir's removal
				rep, err := Read(t.Context(), dir, Options{})
				if c.wantFault == "" {
					if !errors.Is(err, fs.ErrPermission) || errors.Is(err, ErrNoWAL) || !strings.Contains(fmt.Sprint(err), "permission denied") {
						t.Fatalf("Read: got %v, want an error saying permission denied", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				if len(rep.Faults) != 1 || rep.Faults[0].File != c.wantFault || rep.Faults[0].Kind != FaultUnreadable ||
					!strings.Contains(rep.Faults[0].Message, "permission denied") {
					t.Fatalf("got faults %+v, want one unreadable fault in %s saying permission denied", rep.Faults, c.wantFault)
				}
				if rep.Entries == 0 {
					t.Errorf("got no entries, want the rest of the WAL read")
				}
			})
		})
	}
}

// TestDirsListError: a wal directory that exists but cannot be listed is
// the operating system's error, not "no WAL segments" (here a symbolic
// link loop, which root meets too).
func TestDirsListError(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "member"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(t, "wal", filepath.Join(dir, "member", "wal"))
	_, _, err := Dirs(dir)
	if !errors.Is(err, syscall.ELOOP) || errors.Is(err, ErrNoWAL) {
		t.Errorf("Dirs: got %v, want ELOOP, not ErrNoWAL", err)
	}
}

// checksAfter is a context whose Err reports context.Canceled from its
// n-th call on, as if SIGINT landed there: it shows that a long read
// checks ctx as it goes, whatever the machine's speed.
type checksAfter struct {
	context.Context
	left atomic.Int64
}

func cancelAfterChecks(n int64) *checksAfter {
	c := &checksAfter{Context: context.Background()}
	c.left.Store(n)
	return c
}

func (c *checksAfter) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// crcRecordsSegment writes a segment of n crc records of crc 0 (16 bytes
// each), the longest scan for its size: every record is valid.
func crcRecordsSegment(t testing.TB, path string, n int) {
	t.Helper()
	frame := appendFrame(t, nil, &walpb.Record{Type: proto.Int64(crcType)})
	b := make([]byte, 0, n*len(frame))
	for range n {
		b = append(b, frame...)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReadInterrupted cancels Read in each of its long reads: a segment
// scan, a .snap read (under the limit), the loops over segments and over
// .snap files. Read returns context.Canceled, within 2 s.
func TestReadInterrupted(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(t *testing.T) string
		checks int64
	}{
		{"segment scan", func(t *testing.T) string {
			dir := t.TempDir()
			crcRecordsSegment(t, filepath.Join(dir, "0000000000000000-0000000000000000.wal"), 1<<20)
			return dir
		}, 1000},
		{".snap read", func(t *testing.T) string {
			dir, _, snapDir := hostileDir(t)
			sparse(t, filepath.Join(snapDir, "0000000000000003-0000000000000020.snap"), 256<<20, nil)
			return dir
		}, 8},
		{"segments", func(t *testing.T) string {
			dir, _, _ := hostileDir(t)
			return dir
		}, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.setup(t)
			ctx := cancelAfterChecks(c.checks)
			start := time.Now()
			_, err := readWithin(t, ctx, 10*time.Second, dir, Options{})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Read: got %v, want context.Canceled", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Read returned after %v, want within 2s", d)
			}
		})
	}
}

// TestReadMemoryBounded reads a member whose files are each as hostile
// as can be, together: a 20 GiB sparse .snap, /dev/zero as a .snap and as
// a segment, a 20 GiB segment whose frame claims 19 GiB, a 20 GiB segment
// whose first frame is a record at the limit (all zeros), and a segment
// holding one valid entry of the largest size. Read must finish within
// 2 s and allocate no more than a few copies of the largest record plus a
// constant, as Read's doc comment states.
func TestReadMemoryBounded(t *testing.T) {
	dir, walDir, snapDir := hostileDir(t)
	sparse(t, filepath.Join(snapDir, "0000000000000003-0000000000000020.snap"), hugeBytes, nil)
	symlink(t, "/dev/zero", filepath.Join(snapDir, "0000000000000003-0000000000000021.snap"))
	symlink(t, "/dev/zero", filepath.Join(walDir, "0000000000000006-0000000000000010.wal"))
	sparse(t, filepath.Join(walDir, "0000000000000007-0000000000000010.wal"), hugeBytes, lengthField(19<<30))
	sparse(t, filepath.Join(walDir, "0000000000000008-0000000000000010.wal"), hugeBytes, lengthField(DefaultMaxRecordBytes))
	// A put of the largest value a record holds, after the last entry.
	intact, err := Read(t.Context(), fixtureDir("3.7"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	req, err := proto.Marshal(&etcdserverpb.InternalRaftRequest{ID: 1, Put: &etcdserverpb.PutRequest{
		Key: []byte("/registry/configmaps/default/large"), Value: make([]byte, DefaultMaxRecordBytes-1024)}})
	if err != nil {
		t.Fatal(err)
	}
	entry, err := proto.Marshal(&raftpb.Entry{Term: proto.Uint64(intact.LastTerm), Index: proto.Uint64(intact.LastIndex + 1), Data: req})
	if err != nil {
		t.Fatal(err)
	}
	// The segment opens with a crc record, as etcd's do; the chain
	// restarts after the damaged segment before it.
	seg := appendFrame(t, nil, &walpb.Record{Type: proto.Int64(crcType), Crc: proto.Uint32(0)})
	seg = appendFrame(t, seg, &walpb.Record{Type: proto.Int64(entryType), Data: entry, Crc: proto.Uint32(crc32.Checksum(entry, crcTable))})
	if len(seg) > DefaultMaxRecordBytes+64 || len(entry) < DefaultMaxRecordBytes-1024 {
		t.Fatalf("made a segment of %d bytes holding an entry of %d, want an entry just under the limit of %d", len(seg), len(entry), DefaultMaxRecordBytes)
	}
	if err := os.WriteFile(filepath.Join(walDir, "0000000000000009-0000000000000030.wal"), seg, 0o600); err != nil {
		t.Fatal(err)
	}

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	rep, err := readWithin(t, t.Context(), 10*time.Second, dir, Options{})
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("Read took %v, want at most 2s", elapsed)
	}
	var kinds []FaultKind
	for _, f := range rep.Faults {
		kinds = append(kinds, f.Kind)
	}
	slices.Sort(kinds)
	wantKinds := []FaultKind{FaultCorruptFrame, FaultTooLarge, FaultTooLarge, FaultUnreadable, FaultUnreadable}
	if !slices.Equal(kinds, wantKinds) {
		t.Errorf("got faults %+v, want kinds %v", rep.Faults, wantKinds)
	}
	if rep.Total.RequestedWrites != intact.Total.RequestedWrites+1 {
		t.Errorf("got %d writes, want %d: the fixture's and the large put", rep.Total.RequestedWrites, intact.Total.RequestedWrites+1)
	}
	// Read's doc: four copies of a record, the read buffer; and some room.
	const bound = 5*DefaultMaxRecordBytes + 8<<20
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d bytes (%.1f records of the largest size), heap in use %d bytes", allocated, float64(allocated)/DefaultMaxRecordBytes, after.HeapInuse)
	if allocated > bound {
		t.Errorf("allocated %d bytes, want at most %d", allocated, bound)
	}
}

// uncommittedSegment writes a segment of n entries (indexes 1 to n, term
// 1), each a put of a value of valueBytes, and no state record: nothing
// commits them. It returns the size of one entry's data.
func uncommittedSegment(t *testing.T, path string, n, valueBytes int) int {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(appendFrame(t, nil, &walpb.Record{Type: proto.Int64(crcType), Crc: proto.Uint32(0)})); err != nil {
		t.Fatal(err)
	}
	req, err := proto.Marshal(&etcdserverpb.InternalRaftRequest{ID: 1, Put: &etcdserverpb.PutRequest{
		Key: []byte("/registry/configmaps/default/large"), Value: make([]byte, valueBytes)}})
	if err != nil {
		t.Fatal(err)
	}
	crc := uint32(0)
	var frame []byte
	for i := range n {
		entry, err := proto.Marshal(&raftpb.Entry{Term: proto.Uint64(1), Index: proto.Uint64(uint64(i + 1)), Data: req})
		if err != nil {
			t.Fatal(err)
		}
		crc = crc32.Update(crc, crcTable, entry)
		frame = appendFrame(t, frame[:0], &walpb.Record{Type: proto.Int64(entryType), Data: entry, Crc: proto.Uint32(crc)})
		if _, err := f.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return len(req)
}

// TestReadUncommittedBounded reads a WAL of 256 entries of 1 MiB that no
// HardState commits: Read holds at most MaxPendingBytes of them (plus
// one record's copies and a constant, as its doc states), counts the rest
// as kind notCounted with one FaultNotCounted, and counts every entry.
// The heap is sampled while Read runs, with the collector set to run at
// 10% growth so that the peak follows what is held.
func TestReadUncommittedBounded(t *testing.T) {
	const n, valueBytes = 256, 1 << 20
	dir := t.TempDir()
	dataBytes := uncommittedSegment(t, filepath.Join(dir, "0000000000000000-0000000000000000.wal"), n, valueBytes)
	wantHeld := int64(MaxPendingBytes / (dataBytes + pendingEntryOverhead))

	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	rep, err := readWithin(t, t.Context(), 30*time.Second, dir, Options{})
	close(stop)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}

	// Held entries, the copies of one record in flight, the read buffer
	// and the collector's 10%.
	const bound = MaxPendingBytes + 5*DefaultMaxRecordBytes + 16<<20
	grew := int64(peak.Load()) - int64(base.HeapAlloc)
	t.Logf("heap grew by at most %d bytes (%.1f MiB) reading %d MiB of uncommitted entries", grew, float64(grew)/(1<<20), n*dataBytes>>20)
	if grew > bound {
		t.Errorf("heap grew by %d bytes, want at most %d (MaxPendingBytes plus a few records)", grew, bound)
	}
	if rep.Entries != n || rep.UncommittedEntries != n || rep.LastIndex != n {
		t.Errorf("got %d entries, %d uncommitted, last index %d, want %d, %d, %d", rep.Entries, rep.UncommittedEntries, rep.LastIndex, n, n, n)
	}
	if got := kind(rep, "put"); got != wantHeld {
		t.Errorf("got %d put entries counted, want %d: those MaxPendingBytes holds", got, wantHeld)
	}
	if got := kind(rep, "notCounted"); got != n-wantHeld {
		t.Errorf("got %d notCounted entries, want %d", got, n-wantHeld)
	}
	var notCounted []Fault
	for _, f := range rep.Faults {
		if f.Kind == FaultNotCounted {
			notCounted = append(notCounted, f)
		}
	}
	if len(notCounted) != 1 || !strings.Contains(notCounted[0].Message, fmt.Sprintf("entry %d ", wantHeld+1)) {
		t.Errorf("got faults %+v, want one %s naming entry %d", rep.Faults, FaultNotCounted, wantHeld+1)
	}
}

// TestNotCountedEntriesCommitted follows entries read past
// MaxPendingBytes through a commit that covers part of them, an
// overwrite of their tail by a new leader, and a last commit: every entry
// is counted once, as put while held or as notCounted, and the replay
// stops at the first one not kept.
func TestNotCountedEntriesCommitted(t *testing.T) {
	req, err := proto.Marshal(&etcdserverpb.InternalRaftRequest{ID: 1, Put: &etcdserverpb.PutRequest{
		Key: []byte("/registry/configmaps/default/large"), Value: make([]byte, 1<<20)}})
	if err != nil {
		t.Fatal(err)
	}
	held := uint64(MaxPendingBytes / (len(req) + pendingEntryOverhead))
	entry := func(idx, term uint64) *raftpb.Entry {
		return &raftpb.Entry{Index: proto.Uint64(idx), Term: proto.Uint64(term), Data: req}
	}
	rep := &Report{}
	a := newAggregator(rep)
	const n, firstCommit, overwriteAt = 100, 80, 90
	for i := uint64(1); i <= n; i++ {
		a.entry("wal", int64(i), entry(i, 1))
	}
	a.state(&raftpb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(firstCommit)})
	a.entry("wal", 1000, entry(overwriteAt, 2))
	a.state(&raftpb.HardState{Term: proto.Uint64(2), Commit: proto.Uint64(overwriteAt)})
	a.finish(t.Context(), Options{})

	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"entries", rep.Entries, overwriteAt},
		{"uncommitted entries", rep.UncommittedEntries, 0},
		{"overwritten entries", rep.OverwrittenEntries, n - overwriteAt + 1},
		{"put entries", kind(rep, "put"), int64(held)},
		{"notCounted entries", kind(rep, "notCounted"), overwriteAt - int64(held)},
		{"last index", int64(rep.LastIndex), overwriteAt},
		{"last term", int64(rep.LastTerm), 2},
		{"requested writes", rep.Total.RequestedWrites, int64(held)},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
		}
	}
	if a.rp.lostAt != held+1 || !strings.Contains(a.rp.why, "was read while") {
		t.Errorf("got the replay lost at entry %d (%s), want at entry %d, the first not kept", a.rp.lostAt, a.rp.why, held+1)
	}
}
