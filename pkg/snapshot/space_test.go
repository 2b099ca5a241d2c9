package snapshot_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/kubestore/etcdkit/internal/etcdtest"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// TestSpace checks the quota verdict on every fixture against Status and
// Compaction of the same file: free pages and sizes agree, the free runs
// add up to the free pages, and the size after compaction and
// defragmentation is Compaction's estimate. A quota equal to the DB size
// is NOSPACE, and compaction alone never clears it.
func TestSpace(t *testing.T) {
	for _, v := range fixtureVersions {
		t.Run(v, func(t *testing.T) {
			before := sha(t, fixture(v))
			db, err := snapshot.Open(fixture(v), snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			st, _, err := db.Status(t.Context(), keyspace.Parser{})
			if err != nil {
				t.Fatal(err)
			}
			s, err := db.Space(t.Context(), snapshot.SpaceOptions{QuotaBytes: st.DBSizeBytes}, keyspace.Parser{})
			if err != nil {
				t.Fatal(err)
			}
			c, err := db.Compaction(t.Context(), st.Revision, keyspace.Parser{})
			if err != nil {
				t.Fatal(err)
			}
			var runPages, longest int64
			for _, b := range s.FreeRuns {
				runPages += b.Pages
				if b.Runs > 0 && (b.Pages < b.Runs*b.MinPages || b.Pages > b.Runs*b.MaxPages) {
					t.Errorf("bucket %+v: pages outside its run lengths", b)
				}
				if b.Runs > 0 {
					longest = b.MaxPages
				}
			}
			for _, c := range []struct {
				name      string
				got, want int64
			}{
				{"db size", s.DBSizeBytes, st.DBSizeBytes},
				{"free bytes", s.FreeBytes, st.FreeBytes},
				{"in use bytes", s.InUseBytes, st.InUseBytes},
				{"free pages", s.FreePages, st.Check.FreePages},
				{"pages in free runs", runPages, s.FreePages},
				{"revision", s.CurrentRevision, st.Revision},
				{"after compact+defrag", s.AfterCompactDefragBytes, c.EstimatedDBSizeAfterDefragBytes},
				{"quota", s.QuotaBytes, st.DBSizeBytes},
			} {
				if c.got != c.want {
					t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
				}
			}
			if s.LargestFreeRunPages > longest || (s.FreePages > 0) != (s.LargestFreeRunPages > 0) {
				t.Errorf("largest free run %d pages, histogram's longest bucket ends at %d", s.LargestFreeRunPages, longest)
			}
			if !s.OverQuota || s.CompactionClearsNoSpace || s.Why == "" {
				t.Errorf("quota = DB size: got over quota %v, compaction clears %v (%q); want NOSPACE that compaction alone does not clear",
					s.OverQuota, s.CompactionClearsNoSpace, s.Why)
			}
			if s.AfterClearsQuota != (c.EstimatedDBSizeAfterDefragBytes < st.DBSizeBytes) {
				t.Errorf("after clears quota %v with %d after vs quota %d", s.AfterClearsQuota, s.AfterCompactDefragBytes, st.DBSizeBytes)
			}
			if s.LeafPages == 0 || s.LeafFillPercent <= 0 || s.LeafFillPercent > 100 {
				t.Errorf("got %d leaf pages %.1f%% full, want some, at most 100%%", s.LeafPages, s.LeafFillPercent)
			}
			if s.SafeQuotaBytes < snapshot.DefaultQuotaBytes || s.SafeQuotaBytes > snapshot.MaxQuotaBytes {
				t.Errorf("safe quota %d outside etcd's %d-%d", s.SafeQuotaBytes, snapshot.DefaultQuotaBytes, snapshot.MaxQuotaBytes)
			}
			if sha(t, fixture(v)) != before {
				t.Errorf("fixture changed")
			}
		})
	}
}

// TestSpaceCompactedAtCurrentRevision: a file compacted at its current
// revision has nothing left to compact; Space still gives the estimate a
// defragmentation alone would leave.
func TestSpaceCompactedAtCurrentRevision(t *testing.T) {
	path := etcdtest.CreateDB(t, func(ctx context.Context, c *clientv3.Client) {
		var last int64
		for i := range 20 {
			resp, err := c.Put(ctx, fmt.Sprintf("/registry/configmaps/default/cm-%d", i%5), strings.Repeat("x", 2000))
			if err != nil {
				t.Fatal(err)
			}
			last = resp.Header.Revision
		}
		if _, err := c.Compact(ctx, last, clientv3.WithCompactPhysical()); err != nil {
			t.Fatal(err)
		}
	})
	db, err := snapshot.Open(path, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := db.Space(t.Context(), snapshot.SpaceOptions{}, keyspace.Parser{})
	if err != nil {
		t.Fatalf("Space on a file compacted at its current revision: %v", err)
	}
	if s.CompactFreesBytes != 0 || s.AfterCompactDefragBytes <= 0 || s.AfterCompactDefragBytes > s.DBSizeBytes {
		t.Errorf("got compaction frees %d, after compact+defrag %d of %d; want 0 and a positive size at most the DB size",
			s.CompactFreesBytes, s.AfterCompactDefragBytes, s.DBSizeBytes)
	}
}

// TestSpaceQuotaRule holds the verdict to etcd's rule (server/storage/quota.go
// BackendQuota.Available): a write is refused, and NOSPACE raised, when the
// DB size plus its charge reaches the quota, so a file below the quota can
// already be NOSPACE.
func TestSpaceQuotaRule(t *testing.T) {
	db, err := snapshot.Open(fixture("3.7"), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	first, err := db.Space(t.Context(), snapshot.SpaceOptions{}, keyspace.Parser{})
	if err != nil {
		t.Fatal(err)
	}
	size := first.DBSizeBytes
	for _, c := range []struct {
		name           string
		quotaBytes     int64
		wantOverQuota  bool
		wantMaxPut     int64
		wantAfterClear bool
	}{
		{"quota at the DB size", size, true, -1, true},
		{"a lease grant reaches the quota", size + 64, true, -1, true},
		{"a lease grant fits, no put does", size + 65, false, -1, true},
		{"the smallest put reaches the quota", size + 256, false, -1, true},
		{"only a put of no bytes fits", size + 257, false, 0, true},
		{"a put of one byte fits", size + 258, false, 1, true},
		{"a put of 43 bytes fits", size + 300, false, 43, true},
		{"quota below the size after defragmentation", 4096, true, -1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := db.Space(t.Context(), snapshot.SpaceOptions{QuotaBytes: c.quotaBytes}, keyspace.Parser{})
			if err != nil {
				t.Fatal(err)
			}
			if s.OverQuota != c.wantOverQuota || s.MaxPutBytes != c.wantMaxPut || s.AfterClearsQuota != c.wantAfterClear {
				t.Errorf("quota %d on a DB of %d: got over quota %v, max put %d, after clears %v; want %v, %d, %v",
					c.quotaBytes, size, s.OverQuota, s.MaxPutBytes, s.AfterClearsQuota, c.wantOverQuota, c.wantMaxPut, c.wantAfterClear)
			}
			if s.HeadroomBytes != c.quotaBytes-size {
				t.Errorf("got headroom %d, want %d", s.HeadroomBytes, c.quotaBytes-size)
			}
			if s.NoSpaceAlarm {
				t.Errorf("the fixture has no alarm, got NoSpaceAlarm")
			}
		})
	}
}

func TestQuotaAdmits(t *testing.T) {
	for _, c := range []struct {
		size, cost, quota int64
		want              bool
	}{
		{1000, 0, 1000, true}, // a delete or compaction is never refused
		{999, 1, 1000, false},
		{998, 1, 1000, true},
		{1000 - snapshot.PutCostBytes(10, 20), snapshot.PutCostBytes(10, 20), 1000, false},
		{1000 - snapshot.PutCostBytes(10, 20) - 1, snapshot.PutCostBytes(10, 20), 1000, true},
	} {
		if got := snapshot.QuotaAdmits(c.size, c.cost, c.quota); got != c.want {
			t.Errorf("QuotaAdmits(%d, %d, %d) = %v, want %v", c.size, c.cost, c.quota, got, c.want)
		}
	}
}

// TestSpaceAfterRealNoSpace fills an embedded member with a small quota
// until etcd refuses a Put, and checks that Space, at the same quota, says
// that Put is too large, finds the alarm in the file, and would say so
// even though the DB size may be below the quota.
func TestSpaceAfterRealNoSpace(t *testing.T) {
	const quota = 256 << 10
	var refused int64
	path := etcdtest.CreateDB(t, func(ctx context.Context, c *clientv3.Client) {
		value := strings.Repeat("x", 3000)
		for i := range 1000 {
			key := fmt.Sprintf("/registry/configmaps/default/cm-%d", i)
			if _, err := c.Put(ctx, key, value); err != nil {
				if !strings.Contains(err.Error(), "database space exceeded") {
					t.Fatalf("put %d: %v", i, err)
				}
				refused = int64(len(key) + len(value))
				return
			}
		}
		t.Fatalf("no put refused with a %d-byte quota", quota)
	}, etcdtest.Options{QuotaBackendBytes: quota})
	db, err := snapshot.Open(path, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := db.Space(t.Context(), snapshot.SpaceOptions{QuotaBytes: quota}, keyspace.Parser{})
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxPutBytes >= refused || !s.NoSpaceAlarm {
		t.Errorf("etcd refused a put of %d bytes on a DB of %d bytes: got max put %d, alarm %v; want below %d and the alarm",
			refused, s.DBSizeBytes, s.MaxPutBytes, s.NoSpaceAlarm, refused)
	}
	t.Logf("DB size %d of quota %d when a %d-byte put was refused; max put %d", s.DBSizeBytes, quota, refused, s.MaxPutBytes)
}

// TestMaxPutForRequestBytes checks the largest Put etcd's
// --max-request-bytes admits against the size of the real marshalled
// InternalRaftRequest: the Put of that many key and value bytes fits, one
// byte more does not.
func TestMaxPutForRequestBytes(t *testing.T) {
	request := func(n int64) int {
		return proto.Size(&etcdserverpb.InternalRaftRequest{Header: &etcdserverpb.RequestHeader{ID: math.MaxUint64},
			Put: &etcdserverpb.PutRequest{Key: []byte("/"), Value: make([]byte, n-1)}})
	}
	for _, limit := range []int64{snapshot.DefaultMaxRequestBytes, 10 << 20, 200, 128, 127, 30} {
		got := snapshot.MaxPutForRequestBytes(limit)
		if got < 1 {
			t.Errorf("MaxPutForRequestBytes(%d) = %d, want a Put to fit", limit, got)
			continue
		}
		if size := request(got); int64(size) > limit {
			t.Errorf("MaxPutForRequestBytes(%d) = %d, but that request marshals to %d bytes", limit, got, size)
		}
		if size := request(got + 1); int64(size) <= limit {
			t.Errorf("MaxPutForRequestBytes(%d) = %d, but one byte more still fits (%d bytes)", limit, got, size)
		}
	}
	if got := snapshot.MaxPutForRequestBytes(10); got != -1 {
		t.Errorf("MaxPutForRequestBytes(10) = %d, want -1: not even the header fits", got)
	}
}

// TestSpaceLargestPut checks that the largest Put admitted is the smaller
// of the quota's and --max-request-bytes' limits, and names the one that
// decides.
func TestSpaceLargestPut(t *testing.T) {
	db, err := snapshot.Open(fixture("3.7"), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, c := range []struct {
		name      string
		o         snapshot.SpaceOptions
		wantLimit string
	}{
		{"defaults: a 2 GiB quota leaves more than 1.5 MiB", snapshot.SpaceOptions{}, "max-request-bytes"},
		{"a tight quota", snapshot.SpaceOptions{QuotaBytes: 1 << 20}, "quota"},
		{"a --max-request-bytes above the headroom", snapshot.SpaceOptions{QuotaBytes: 64 << 20, MaxRequestBytes: 1 << 30}, "quota"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := db.Space(t.Context(), c.o, keyspace.Parser{})
			if err != nil {
				t.Fatal(err)
			}
			want := min(s.MaxPutBytes, snapshot.MaxPutForRequestBytes(s.MaxRequestBytes))
			if s.LargestPutBytes != want || s.LargestPutLimit != c.wantLimit {
				t.Errorf("got largest Put %d (%s), want %d (%s)", s.LargestPutBytes, s.LargestPutLimit, want, c.wantLimit)
			}
			if c.o.MaxRequestBytes == 0 && s.MaxRequestBytes != snapshot.DefaultMaxRequestBytes {
				t.Errorf("got --max-request-bytes %d, want the default %d", s.MaxRequestBytes, snapshot.DefaultMaxRequestBytes)
			}
		})
	}
}
