package snapshot

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// TestBboltOracle holds the page reader against bbolt itself, opened
// read-only with its freelist preloaded, on the file every etcd version
// wrote: every bucket's keys and values byte for byte and in order, and the
// free page count (Check and Space). The fixtures must not change.
func TestBboltOracle(t *testing.T) {
	for _, v := range []string{"3.4", "3.5", "3.6", "3.7"} {
		t.Run(v, func(t *testing.T) {
			path := filepath.Join("..", "..", "testdata", "fixtures", "etcd-"+v+".db")
			before := fileSHA(t, path)
			bdb, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
			if err != nil {
				t.Fatal(err)
			}
			type kv struct{ k, v []byte }
			want := map[string][]kv{}
			err = bdb.View(func(tx *bolt.Tx) error {
				return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
					return b.ForEach(func(k, v []byte) error {
						want[string(name)] = append(want[string(name)], kv{bytes.Clone(k), bytes.Clone(v)})
						return nil
					})
				})
			})
			wantFree := bdb.Stats().FreePageN
			bdb.Close()
			if err != nil {
				t.Fatal(err)
			}

			db, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for name, kvs := range want {
				var got []kv
				if err := db.forEach([]byte(name), func(k, v []byte) error {
					got = append(got, kv{bytes.Clone(k), bytes.Clone(v)})
					return nil
				}); err != nil {
					t.Fatalf("bucket %s: %v", name, err)
				}
				if len(got) != len(kvs) {
					t.Errorf("bucket %s: got %d keys, bbolt %d", name, len(got), len(kvs))
					continue
				}
				for i := range kvs {
					if !bytes.Equal(got[i].k, kvs[i].k) || !bytes.Equal(got[i].v, kvs[i].v) {
						t.Errorf("bucket %s element %d: got %x=%x, bbolt %x=%x", name, i, got[i].k, got[i].v, kvs[i].k, kvs[i].v)
					}
				}
			}
			var revisions int
			if err := db.ForEachRevision(t.Context(), func(e Entry) error { revisions++; return nil }); err != nil {
				t.Fatal(err)
			}
			if revisions != len(want["key"]) {
				t.Errorf("ForEachRevision: got %d entries, bbolt %d", revisions, len(want["key"]))
			}
			check, err := db.Check()
			if err != nil {
				t.Fatal(err)
			}
			space, err := db.Space(t.Context(), SpaceOptions{}, keyspace.Parser{})
			if err != nil {
				t.Fatal(err)
			}
			if check.FreePages != int64(wantFree) || space.FreePages != int64(wantFree) {
				t.Errorf("free pages: got %d (Check) and %d (Space), bbolt %d", check.FreePages, space.FreePages, wantFree)
			}
			if fileSHA(t, path) != before {
				t.Errorf("%s changed", path)
			}
		})
	}
}

func fileSHA(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
