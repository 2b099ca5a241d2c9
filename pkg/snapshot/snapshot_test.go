package snapshot_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// filled describes what fillCluster wrote, to compare with what the
// inspection finds.
type filled struct {
	lastRevision    int64
	compactRevision int64
	livePods        int64
	podRevisions    int64
	podTombstones   int64
	liveConfigMaps  int64
}

// fillCluster writes pods and configmaps the way kube-apiserver stores them,
// updates and deletes some, writes compact_rev_key and compacts.
func fillCluster(t *testing.T, ctx context.Context, c *clientv3.Client) filled {
	t.Helper()
	codec, err := keyspace.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	gen := keyspace.NewGenerator(1)
	put := func(key string, val []byte) int64 {
		resp, err := c.Put(ctx, key, string(val))
		if err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		return resp.Header.Revision
	}
	var f filled
	for i := range 20 {
		ns := fmt.Sprintf("ns-%d", i%3)
		name := fmt.Sprintf("pod-%d", i)
		b, err := codec.Encode(gen.Pod(ns, name, 0))
		if err != nil {
			t.Fatal(err)
		}
		put(keyspace.Build(keyspace.Key{Prefix: "/registry", Resource: "pods", Namespace: ns, Name: name}), b)
		f.podRevisions++
	}
	for i := range 5 {
		b, err := codec.Encode(gen.ConfigMap("ns-0", fmt.Sprintf("cm-%d", i), 0, 1000))
		if err != nil {
			t.Fatal(err)
		}
		put(keyspace.Build(keyspace.Key{Prefix: "/registry", Resource: "configmaps", Namespace: "ns-0", Name: fmt.Sprintf("cm-%d", i)}), b)
	}
	f.liveConfigMaps = 5
	// Three status updates of pod-0 and pod-1.
	for gen2 := 1; gen2 <= 3; gen2++ {
		for i := range 2 {
			ns, name := fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("pod-%d", i)
			b, err := codec.Encode(gen.Pod(ns, name, gen2))
			if err != nil {
				t.Fatal(err)
			}
			put(keyspace.Build(keyspace.Key{Prefix: "/registry", Resource: "pods", Namespace: ns, Name: name}), b)
			f.podRevisions++
		}
	}
	// Delete pod-19 and pod-18.
	for _, i := range []int{19, 18} {
		key := keyspace.Build(keyspace.Key{Prefix: "/registry", Resource: "pods", Namespace: fmt.Sprintf("ns-%d", i%3), Name: fmt.Sprintf("pod-%d", i)})
		if _, err := c.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		f.podRevisions++
		f.podTombstones++
	}
	f.livePods = 18
	put(keyspace.CompactRevKey, []byte("3"))
	resp, err := c.Compact(ctx, 3, clientv3.WithCompactPhysical())
	if err != nil {
		t.Fatal(err)
	}
	_ = resp
	f.compactRevision = 3
	// Revisions 2 and 3 were pod creations that are still live: compaction
	// keeps them.
	st, err := c.Status(ctx, c.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	f.lastRevision = st.Header.Revision
	return f
}

func sha(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func TestUsageAndStatusOfRealDB(t *testing.T) {
	var f filled
	path := etcdtest.CreateDB(t, func(ctx context.Context, c *clientv3.Client) { f = fillCluster(t, ctx, c) })
	before := sha(t, path)
	info, _ := os.Stat(path)
	modBefore := info.ModTime()

	db, err := snapshot.Open(path, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := db.Usage(t.Context(), keyspace.Parser{})
	if err != nil {
		t.Fatal(err)
	}
	var pods, cms *snapshot.UsageRow
	rows := u.By(snapshot.ByResource)
	for i := range rows {
		switch rows[i].Resource {
		case "pods":
			pods = &rows[i]
		case "configmaps":
			cms = &rows[i]
		}
	}
	if pods == nil || cms == nil {
		t.Fatalf("no pods or configmaps row in %+v", rows)
	}
	if pods.Objects != f.livePods || pods.Revisions != f.podRevisions || pods.Tombstones != f.podTombstones {
		t.Errorf("pods row = %d objects, %d revisions, %d tombstones; want %d, %d, %d",
			pods.Objects, pods.Revisions, pods.Tombstones, f.livePods, f.podRevisions, f.podTombstones)
	}
	if pods.HistoryEntryBytes <= 0 || pods.LiveEntryBytes <= pods.HistoryEntryBytes {
		t.Errorf("pods live %d / history %d bytes: want both positive, live larger", pods.LiveEntryBytes, pods.HistoryEntryBytes)
	}
	if cms.Objects != f.liveConfigMaps || cms.HistoryEntryBytes != 0 {
		t.Errorf("configmaps row = %+v, want %d objects and no history", *cms, f.liveConfigMaps)
	}
	byNS := u.By(snapshot.ByNamespace)
	var sum int64
	for _, r := range byNS {
		sum += r.Objects
	}
	if sum != u.Total.Objects {
		t.Errorf("namespace rows sum to %d objects, total is %d", sum, u.Total.Objects)
	}

	st, _, err := db.Status(t.Context(), keyspace.Parser{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Revision != f.lastRevision || st.CompactRevision != f.compactRevision {
		t.Errorf("status revision %d compact %d, want %d and %d", st.Revision, st.CompactRevision, f.lastRevision, f.compactRevision)
	}
	wantLive := f.livePods + f.liveConfigMaps + 1 // + compact_rev_key
	if st.LiveKeys != wantLive {
		t.Errorf("liveKeys = %d, want %d", st.LiveKeys, wantLive)
	}
	if st.StorageVersion != "3.7.0" {
		t.Errorf("storageVersion = %q, want 3.7.0 from the embedded 3.7 server", st.StorageVersion)
	}
	if st.SnapshotTrailer != snapshot.TrailerAbsent {
		t.Errorf("member db trailer = %q, want absent", st.SnapshotTrailer)
	}
	if st.InUseBytes <= 0 || st.InUseBytes > st.SizeBytes || st.PageSize != os.Getpagesize() {
		t.Errorf("sizes: in use %d of %d, page size %d", st.InUseBytes, st.SizeBytes, st.PageSize)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if after := sha(t, path); after != before {
		t.Fatal("the inspected file changed")
	}
	info, _ = os.Stat(path)
	if !info.ModTime().Equal(modBefore) {
		t.Fatal("the inspected file's mtime changed")
	}
}

func TestSnapshotTrailer(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	if _, err := c.Put(t.Context(), "/registry/namespaces/default", "x"); err != nil {
		t.Fatal(err)
	}
	rc, err := c.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	os.WriteFile(good, data, 0o600)
	bad := filepath.Join(dir, "bad.db")
	flipped := bytes.Clone(data)
	flipped[len(flipped)-1] ^= 0xff
	os.WriteFile(bad, flipped, 0o600)

	for _, tt := range []struct {
		path string
		want snapshot.Trailer
	}{{good, snapshot.TrailerValid}, {bad, snapshot.TrailerInvalid}} {
		db, err := snapshot.Open(tt.path, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := db.VerifyTrailer()
		db.Close()
		if err != nil || got != tt.want {
			t.Errorf("%s: trailer %q, %v; want %q", filepath.Base(tt.path), got, err, tt.want)
		}
	}
}

func TestOpenBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	garbage := make([]byte, 64*1024)
	for i := range garbage {
		garbage[i] = byte(i*7 + 3)
	}
	otherBolt := filepath.Join(dir, "other.db")
	bdb, err := bolt.Open(otherBolt, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	bdb.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("widgets")); return err })
	bdb.Close()

	tests := []struct {
		name    string
		path    string
		wantErr error
	}{
		{"missing", filepath.Join(dir, "nope"), os.ErrNotExist},
		{"empty", write("empty", nil), snapshot.ErrEmpty},
		{"tiny", write("tiny", []byte("hello")), snapshot.ErrNotBolt},
		{"garbage", write("garbage", garbage), snapshot.ErrNotBolt},
		{"bbolt but not etcd", otherBolt, snapshot.ErrNotEtcd},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before [32]byte
			if _, err := os.Stat(tt.path); err == nil {
				before = sha(t, tt.path)
			}
			db, err := snapshot.Open(tt.path, snapshot.Options{})
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Open error = %v, want %v", err, tt.wantErr)
			}
			if !bytes.Contains([]byte(err.Error()), []byte(filepath.Base(tt.path))) {
				t.Errorf("error %q does not name the file", err)
			}
			if _, err := os.Stat(tt.path); err == nil && sha(t, tt.path) != before {
				t.Error("file changed")
			}
		})
	}
}

func TestOpenTruncatedDB(t *testing.T) {
	path := etcdtest.CreateDB(t, func(ctx context.Context, c *clientv3.Client) {
		val := bytes.Repeat([]byte("v"), 2000)
		for i := range 2000 {
			if _, err := c.Put(ctx, fmt.Sprintf("/registry/configmaps/ns/cm-%d", i), string(val)); err != nil {
				t.Fatal(err)
			}
		}
	})
	data, _ := os.ReadFile(path)
	for _, keep := range []int{len(data) / 2, len(data) / 8, 3 * 4096} {
		t.Run(fmt.Sprint(keep), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "db")
			os.WriteFile(p, data[:keep], 0o600)
			db, err := snapshot.Open(p, snapshot.Options{})
			if err != nil {
				t.Logf("open: %v", err)
				return // a clear error at open is fine
			}
			defer db.Close()
			_, err = db.Usage(t.Context(), keyspace.Parser{})
			if err == nil {
				t.Fatal("scanning a truncated file succeeded")
			}
			t.Logf("scan: %v", err)
		})
	}
}

// TestOpenLockedByRunningMember opens the db of a running member: Open
// gives up with ErrLocked after the lock timeout, or with ctx's error as
// soon as ctx ends, never later.
func TestOpenLockedByRunningMember(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	tests := []struct {
		name        string
		lockTimeout time.Duration
		cancelAfter time.Duration // 0: never
		want        error
	}{
		{"lock timeout", 200 * time.Millisecond, 0, snapshot.ErrLocked},
		{"cancelled", time.Minute, 200 * time.Millisecond, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tt.cancelAfter > 0 {
				time.AfterFunc(tt.cancelAfter, cancel)
			}
			start := time.Now()
			db, err := snapshot.OpenContext(ctx, srv.DBPath(), snapshot.Options{LockTimeout: tt.lockTimeout})
			if err == nil {
				db.Close()
				t.Fatal("opened a db held by a running member")
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("error = %v, want %v", err, tt.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("Open took %v to give up", d)
			}
		})
	}
}

func TestOpenDataDir(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	srv.Close()
	db, err := snapshot.Open(srv.Dir, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Path() != srv.DBPath() {
		t.Fatalf("Path() = %q, want %q", db.Path(), srv.DBPath())
	}
}
