package snapshot_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/revision"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// TestHashKVMatchesEtcdutl holds HashKV against the real `etcdutl hashkv`
// (run on a copy: it opens the file read-write) on every fixture, at the
// current revision, at the compact revision and between.
func TestHashKVMatchesEtcdutl(t *testing.T) {
	bin := etcdtest.EtcdBinaries(t, "3.7.3")
	for _, v := range fixtureVersions {
		t.Run(v, func(t *testing.T) {
			db, err := snapshot.Open(fixture(v), snapshot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			st, _, err := db.Status(t.Context(), keyspace.Parser{})
			if err != nil {
				t.Fatal(err)
			}
			for _, rev := range []int64{0, st.CompactRevision, (st.CompactRevision + st.Revision) / 2, st.Revision} {
				got, _, err := db.HashKV(t.Context(), rev)
				if err != nil {
					t.Fatalf("HashKV(%d): %v", rev, err)
				}
				b, err := os.ReadFile(fixture(v))
				if err != nil {
					t.Fatal(err)
				}
				cp := filepath.Join(t.TempDir(), "db")
				if err := os.WriteFile(cp, b, 0o600); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command(filepath.Join(bin, "etcdutl"), "hashkv", cp, "--rev", fmt.Sprint(rev), "-w", "json").Output()
				if err != nil {
					t.Fatalf("etcdutl hashkv: %v", err)
				}
				var want struct {
					Hash uint32 `json:"hash"`
				}
				if err := json.Unmarshal(out, &want); err != nil {
					t.Fatalf("etcdutl hashkv output %q: %v", out, err)
				}
				if got != want.Hash {
					t.Errorf("rev %d: got hash %d, etcdutl hashkv %d", rev, got, want.Hash)
				}
			}
			if _, _, err := db.HashKV(t.Context(), st.CompactRevision-1); !errors.Is(err, snapshot.ErrCompacted) {
				t.Errorf("HashKV below the compact revision: got %v, want ErrCompacted", err)
			}
		})
	}
}

// membersLoad writes the same 10 configmaps to every member; diverge
// changes the value of the 6th write.
func membersLoad(t *testing.T, diverge bool, opts ...etcdtest.Options) (string, int64) {
	var divergentRev int64
	path := etcdtest.CreateDB(t, func(ctx context.Context, c *clientv3.Client) {
		for i := range 10 {
			val := fmt.Sprintf("v%d", i)
			if diverge && i == 5 {
				val = "corrupted"
			}
			resp, err := c.Put(ctx, fmt.Sprintf("/registry/configmaps/default/cm-%d", i%4), val)
			if err != nil {
				t.Fatal(err)
			}
			if i == 5 {
				divergentRev = resp.Header.Revision
			}
		}
	}, opts...)
	return path, divergentRev
}

// clusterSnapshots runs one embedded member, puts writes configmaps (4
// keys, overwritten in turn) and saves a snapshot through the client
// (`etcdctl snapshot save`) after each count of writes in at; it returns
// the snapshot paths, in at's order, and the revision of the 6th write.
func clusterSnapshots(t *testing.T, writes int, at ...int) ([]string, int64) {
	t.Helper()
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	var paths []string
	var sixth int64
	save := func(n int) {
		rc, err := c.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		path := filepath.Join(t.TempDir(), fmt.Sprintf("after-%d.db", n))
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, rc); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	for i := range writes {
		resp, err := c.Put(t.Context(), fmt.Sprintf("/registry/configmaps/default/cm-%d", i%4), fmt.Sprintf("v%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if i == 5 {
			sixth = resp.Header.Revision
		}
		for _, n := range at {
			if n == i+1 {
				save(n)
			}
		}
	}
	return paths, sixth
}

// tamper copies path and rewrites, in the copy, the value of the entry at
// revision rev: a member whose data diverged there.
func tamper(t *testing.T, path string, rev int64) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "tampered.db")
	if err := os.WriteFile(out, data[:len(data)-len(data)%512], 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(out, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		return b.ForEach(func(k, v []byte) error {
			r, err := revision.Decode(k)
			if err != nil || r.Main != rev {
				return err
			}
			var kv mvccpb.KeyValue
			if err := proto.Unmarshal(v, &kv); err != nil {
				return err
			}
			kv.Value = []byte("corrupted")
			nv, err := proto.Marshal(&kv)
			if err != nil {
				return err
			}
			return b.Put(append([]byte(nil), k...), nv)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func openAll(t *testing.T, paths ...string) []snapshot.MemberInput {
	t.Helper()
	var in []snapshot.MemberInput
	for _, p := range paths {
		db, err := snapshot.Open(p, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		in = append(in, snapshot.MemberInput{DB: db})
	}
	return in
}

// TestCompareMembers compares two snapshots of one cluster saved at the
// same point and a copy of one whose 6th write was changed: one cluster,
// a majority, the first divergent revision, the last common revision and
// its hash, and a restore source among the majority.
func TestCompareMembers(t *testing.T) {
	snaps, rev := clusterSnapshots(t, 10, 10, 10)
	a, b := snaps[0], snaps[1]
	c := tamper(t, a, rev)
	rep, err := snapshot.CompareMembers(t.Context(), openAll(t, a, b, c))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Clusters != 1 {
		t.Errorf("got %d clusters, want 1: the three files come from one member", rep.Clusters)
	}
	if rep.HashesAgree || rep.CommonRevision == 0 || !rep.Majority {
		t.Errorf("got hashes agree %v, majority %v at common revision %d, want a majority's disagreement", rep.HashesAgree, rep.Majority, rep.CommonRevision)
	}
	if rep.FirstDivergentRevision != rev {
		t.Errorf("got first divergent revision %d, want %d (the changed write)", rep.FirstDivergentRevision, rev)
	}
	if len(rep.DivergentKeys) != 1 || rep.DivergentKeys[0].Key != "/registry/configmaps/default/cm-1" {
		t.Errorf("got divergent keys %+v, want cm-1 alone", rep.DivergentKeys)
	}
	if got := []bool{rep.Members[0].Agrees, rep.Members[1].Agrees, rep.Members[2].Agrees}; !got[0] || !got[1] || got[2] {
		t.Errorf("got agrees %v, want the two identical members to agree and the third not", got)
	}
	if rep.RestoreFrom != a && rep.RestoreFrom != b {
		t.Errorf("got restore from %q, want one of the agreeing members", rep.RestoreFrom)
	}
	if rep.LastCommonRevision != rev-1 {
		t.Errorf("got last common revision %d, want %d", rep.LastCommonRevision, rev-1)
	}
	want, _, err := openAll(t, a)[0].DB.HashKV(t.Context(), rev-1)
	if err != nil {
		t.Fatal(err)
	}
	if rep.LastCommonHash != want {
		t.Errorf("got last common hash %08x, want %08x", rep.LastCommonHash, want)
	}

	same, err := snapshot.CompareMembers(t.Context(), openAll(t, a, b))
	if err != nil {
		t.Fatal(err)
	}
	if !same.HashesAgree || same.FirstDivergentRevision != 0 || len(same.DivergentKeys) != 0 || same.LastCommonRevision != same.CommonRevision {
		t.Errorf("two identical members: got agree %v, divergence at %d, keys %v, last common %d; want agreement at %d",
			same.HashesAgree, same.FirstDivergentRevision, same.DivergentKeys, same.LastCommonRevision, same.CommonRevision)
	}
}

// TestCompareMembersWithoutMajority compares two members of one cluster
// with one hash each, in both orders: no majority, no restore source, and
// the same verdict whatever the order.
func TestCompareMembersWithoutMajority(t *testing.T) {
	snaps, rev := clusterSnapshots(t, 10, 10)
	a, c := snaps[0], tamper(t, snaps[0], rev)
	for _, order := range [][]string{{a, c}, {c, a}} {
		rep, err := snapshot.CompareMembers(t.Context(), openAll(t, order...))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Majority || rep.RestoreFrom != "" || !strings.Contains(rep.Rule, "no hash is held by more than half") {
			t.Errorf("order %v: got majority %v, restore from %q, rule %q; want no majority, no restore source, and what decides",
				order, rep.Majority, rep.RestoreFrom, rep.Rule)
		}
		for _, m := range rep.Members {
			if m.Agrees {
				t.Errorf("order %v: %s marked as agreeing with a majority that does not exist", order, m.Path)
			}
		}
	}
}

// TestCompareMembersLag compares a snapshot taken after 5 writes with one
// taken after 305 of the same member: the hashes agree at the common
// revision, and the lag is reported in revisions and raft entries.
func TestCompareMembersLag(t *testing.T) {
	snaps, _ := clusterSnapshots(t, 305, 5, 305)
	rep, err := snapshot.CompareMembers(t.Context(), openAll(t, snaps...))
	if err != nil {
		t.Fatal(err)
	}
	early, late := rep.Members[0], rep.Members[1]
	if !rep.HashesAgree {
		t.Errorf("got hashes differ at %d, want agreement: the early snapshot is a prefix of the late one", rep.CommonRevision)
	}
	if early.RevisionsBehind != 300 || late.RevisionsBehind != 0 {
		t.Errorf("got revisions behind %d and %d, want 300 and 0", early.RevisionsBehind, late.RevisionsBehind)
	}
	if early.IndexBehind != late.ConsistentIndex-early.ConsistentIndex || early.IndexBehind < 300 {
		t.Errorf("got index behind %d (consistent indexes %d, %d), want the difference, at least 300",
			early.IndexBehind, early.ConsistentIndex, late.ConsistentIndex)
	}
	if rep.LastCommonRevision != early.Revision || rep.LastCommonHash != early.Hash {
		t.Errorf("got last common revision %d hash %08x, want %d %08x", rep.LastCommonRevision, rep.LastCommonHash, early.Revision, early.Hash)
	}
	if rep.RestoreFrom != late.Path {
		t.Errorf("got restore from %q, want the newest member %q", rep.RestoreFrom, late.Path)
	}
}

// TestCompareMembersDifferentClusters compares the dbs of two embedded
// members that each bootstrapped a cluster of their own (another
// --initial-cluster-token, as a restore with a new token does), with the
// same writes: two clusters, no restore source, however alike the data.
func TestCompareMembersDifferentClusters(t *testing.T) {
	a, _ := membersLoad(t, false, etcdtest.Options{ClusterToken: "cluster-a"})
	b, _ := membersLoad(t, false, etcdtest.Options{ClusterToken: "cluster-b"})
	rep, err := snapshot.CompareMembers(t.Context(), openAll(t, a, b))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Clusters != 2 || rep.RestoreFrom != "" || rep.Majority || rep.Members[1].Cluster != 2 {
		t.Errorf("got %d clusters (second member in %d), restore from %q, majority %v; want 2 clusters and no restore source",
			rep.Clusters, rep.Members[1].Cluster, rep.RestoreFrom, rep.Majority)
	}
	if rep.Members[0].MemberIDs[0] == rep.Members[1].MemberIDs[0] {
		t.Errorf("both members have ID %s, want different IDs", rep.Members[0].MemberIDs[0])
	}
}
