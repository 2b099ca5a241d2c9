package snapshot_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/keyspace"
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
func membersLoad(t *testing.T, diverge bool) (string, int64) {
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
	})
	return path, divergentRev
}

func TestCompareMembers(t *testing.T) {
	a, _ := membersLoad(t, false)
	b, _ := membersLoad(t, false)
	c, rev := membersLoad(t, true)
	var dbs []*snapshot.DB
	for _, p := range []string{a, b, c} {
		db, err := snapshot.Open(p, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		dbs = append(dbs, db)
	}
	rep, err := snapshot.CompareMembers(t.Context(), dbs)
	if err != nil {
		t.Fatal(err)
	}
	if rep.HashesAgree || rep.CommonRevision == 0 {
		t.Errorf("got hashes agree %v at common revision %d, want disagreement at a common revision", rep.HashesAgree, rep.CommonRevision)
	}
	if rep.FirstDivergentRevision != rev {
		t.Errorf("got first divergent revision %d, want %d (the changed write)", rep.FirstDivergentRevision, rev)
	}
	if len(rep.DivergentKeys) != 1 || rep.DivergentKeys[0].Key != "/registry/configmaps/default/cm-1" {
		t.Errorf("got divergent keys %+v, want cm-1 alone", rep.DivergentKeys)
	}
	if got := []bool{rep.Members[0].Agrees, rep.Members[1].Agrees, rep.Members[2].Agrees}; got[0] != true || got[1] != true || got[2] != false {
		t.Errorf("got agrees %v, want the two identical members to agree and the third not", got)
	}
	if rep.RestoreFrom != a && rep.RestoreFrom != b {
		t.Errorf("got restore from %q, want one of the agreeing members", rep.RestoreFrom)
	}

	same, err := snapshot.CompareMembers(t.Context(), dbs[:2])
	if err != nil {
		t.Fatal(err)
	}
	if !same.HashesAgree || same.FirstDivergentRevision != 0 || len(same.DivergentKeys) != 0 {
		t.Errorf("two identical members: got agree %v, divergence at %d, keys %v; want agreement", same.HashesAgree, same.FirstDivergentRevision, same.DivergentKeys)
	}
}
