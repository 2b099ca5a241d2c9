package snapshot_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// writeHistory writes 150 pods with three status updates each, deletes
// every tenth, and attaches events to a lease. It returns the revision of
// the last delete.
func writeHistory(t testing.TB, ctx context.Context, c *clientv3.Client) int64 {
	t.Helper()
	codec, err := keyspace.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	gen := keyspace.NewGenerator(3)
	key := func(i int) string { return fmt.Sprintf("/registry/pods/ns-%d/pod-%03d", i%4, i) }
	for g := range 4 {
		for i := range 150 {
			b, err := codec.Encode(gen.Pod(fmt.Sprintf("ns-%d", i%4), fmt.Sprintf("pod-%03d", i), g))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Put(ctx, key(i), string(b)); err != nil {
				t.Fatal(err)
			}
		}
	}
	lease, err := c.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := c.Put(ctx, fmt.Sprintf("/registry/events/ns-0/ev-%d", i), "event", clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	var last int64
	for i := 0; i < 150; i += 10 {
		resp, err := c.Delete(ctx, key(i))
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	return last
}

func makeHistoryDB(t testing.TB) string {
	return etcdtest.CreateDB(t, func(ctx context.Context, c *clientv3.Client) { writeHistory(t, ctx, c) })
}

func saveSnapshot(t *testing.T, c *clientv3.Client, name string) string {
	t.Helper()
	rc, err := c.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func status(t *testing.T, path string) *snapshot.Status {
	t.Helper()
	db, err := snapshot.Open(path, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, _, err := db.Status(t.Context(), keyspace.Parser{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestCompactionMatchesEtcd predicts a compaction on a snapshot, then has
// the real etcd compact and defragment, and compares: the entries removed
// must match exactly (a tombstone at the compact revision included), the
// defragmented size within 10 %.
func TestCompactionMatchesEtcd(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	at := writeHistory(t, t.Context(), c)
	// More history above the compact revision.
	for i := range 5 {
		if _, err := c.Put(t.Context(), fmt.Sprintf("/registry/configmaps/ns-0/cm-%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	before := saveSnapshot(t, c, "before.db")
	db, err := snapshot.Open(before, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := db.Compaction(t.Context(), at, keyspace.Parser{})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	stBefore := status(t, before)
	if _, err := c.Compact(t.Context(), at, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Defragment(t.Context(), srv.Endpoints[0]); err != nil {
		t.Fatal(err)
	}
	after := status(t, saveSnapshot(t, c, "after.db"))
	if got := stBefore.Revisions - rep.Total.RemovedRevisions; got != after.Revisions {
		t.Errorf("predicted %d entries after compacting at %d, etcd left %d", got, at, after.Revisions)
	}
	if got := stBefore.Tombstones - rep.Total.RemovedTombstones; got != after.Tombstones {
		t.Errorf("predicted %d tombstones after compacting, etcd left %d", got, after.Tombstones)
	}
	if after.CompactRevision != at || rep.Total.RemovedRevisions == 0 {
		t.Errorf("compact revision %d, removed %d", after.CompactRevision, rep.Total.RemovedRevisions)
	}
	est, real := float64(rep.EstimatedDBSizeAfterDefragBytes), float64(after.DBSizeBytes)
	t.Logf("defragmented size: estimated %.0f, etcd %.0f bytes (was %d)", est, real, stBefore.DBSizeBytes)
	if math.Abs(est-real)/real > 0.10 {
		t.Errorf("estimated %.0f bytes after defrag, etcd has %.0f", est, real)
	}
}

// TestGetAndDiffAcrossSnapshots reads one key at every revision it went
// through and diffs two snapshots with known changes.
func TestGetAndDiffAcrossSnapshots(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx := t.Context()
	put := func(k, v string) int64 {
		r, err := c.Put(ctx, k, v)
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	for i := range 10 {
		put(fmt.Sprintf("/registry/configmaps/a/cm-%d", i), "one")
	}
	r1 := put("/registry/configmaps/a/cm-0", "two")
	r2 := put("/registry/configmaps/a/cm-0", "three")
	first := saveSnapshot(t, c, "first.db")
	put("/registry/configmaps/b/new-1", "x")
	put("/registry/secrets/b/new-2", "y")
	put("/registry/configmaps/a/cm-1", "changed")
	del, err := c.Delete(ctx, "/registry/configmaps/a/cm-2")
	if err != nil {
		t.Fatal(err)
	}
	second := saveSnapshot(t, c, "second.db")

	db, err := snapshot.Open(second, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for rev, want := range map[int64]string{r1: "two", r1 + 1: "three", r2 - 1: "two", 0: "three"} {
		o, err := db.Get(ctx, "/registry/configmaps/a/cm-0", snapshot.GetOptions{Revision: rev})
		if err != nil || string(o.Value) != want {
			t.Errorf("Get at %d = %v, %v; want %q", rev, o, err, want)
		}
	}
	h, err := db.History(ctx, "/registry/configmaps/a/cm-0")
	if err != nil || len(h) != 3 || h[2].Main != r2 || h[2].Version != 3 {
		t.Errorf("History = %+v, %v; want 3 entries ending at %d, version 3", h, err, r2)
	}

	old, err := snapshot.Open(first, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	d, err := old.Diff(ctx, db, keyspace.Parser{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Total.Added != 2 || d.Total.Modified != 1 || d.Total.Deleted != 1 || d.Total.Unchanged != 8 {
		t.Errorf("diff total %+v, want 2 added, 1 modified, 1 deleted, 8 unchanged", d.Total)
	}
	if d.To.Revision != del.Header.Revision || d.RevisionsBetween != 4 || len(d.Changes) != 4 {
		t.Errorf("diff revisions %d -> %d (%d), %d changes", d.From.Revision, d.To.Revision, d.RevisionsBetween, len(d.Changes))
	}
	// A file against itself has no change.
	same, err := db.Diff(ctx, db, keyspace.Parser{})
	if err != nil || same.Total.Added+same.Total.Modified+same.Total.Deleted != 0 {
		t.Errorf("self diff %+v, %v", same.Total, err)
	}
}

// TestHistoryTombstoneModRevision holds History against etcd's own watch:
// each entry's ModRevision, a delete's included, is the mod_revision of the
// event etcd sends for it.
func TestHistoryTombstoneModRevision(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx := t.Context()
	const key = "/registry/pods/default/web-0"
	for _, op := range []clientv3.Op{clientv3.OpPut(key, "a"), clientv3.OpPut(key, "b"), clientv3.OpDelete(key), clientv3.OpPut(key, "c"), clientv3.OpDelete(key)} {
		if _, err := c.Do(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var want []int64
	for resp := range c.Watch(wctx, key, clientv3.WithRev(1)) {
		for _, ev := range resp.Events {
			want = append(want, ev.Kv.ModRevision)
		}
		if len(want) >= 5 {
			break
		}
	}
	db, err := snapshot.Open(saveSnapshot(t, c, "history.db"), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h, err := db.History(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != len(want) {
		t.Fatalf("got %d history entries, want %d (the watch's events)", len(h), len(want))
	}
	for i, e := range h {
		if e.ModRevision != want[i] {
			t.Errorf("entry %d (main %d, tombstone %v): got mod revision %d, want %d as etcd's watch event", i, e.Main, e.Tombstone, e.ModRevision, want[i])
		}
	}
}
