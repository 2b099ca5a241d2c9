package watchload

import (
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// TestDeleteAllUnder deletes 2,500 keys under a prefix in pages of 1,000
// and leaves the keys beside the prefix, one sharing its first bytes,
// alone.
func TestDeleteAllUnder(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx := t.Context()
	const n = 2500
	for i := 0; i < n; i += 100 {
		var ops []clientv3.Op
		for j := i; j < i+100; j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/b/%05d", j), "v"))
		}
		if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"/b", "/bb/0", "/a/0"} {
		if _, err := c.Put(ctx, k, "theirs"); err != nil {
			t.Fatal(err)
		}
	}
	res := DeleteAllUnder(ctx, c, "/b/")
	if res.Error != "" || res.KeysDeleted != n || res.KeysLeft != 0 {
		t.Errorf("cleanup %+v: want %d keys deleted, none left, no error", res, n)
	}
	all, err := c.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range all.Kvs {
		got = append(got, string(kv.Key))
	}
	if want := []string{"/a/0", "/b", "/bb/0"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("keys left %q, want %q", got, want)
	}
	if res := DeleteAllUnder(ctx, c, "/b/"); res.Error != "" || res.KeysDeleted != 0 || res.KeysLeft != 0 {
		t.Errorf("cleanup of an empty prefix %+v: want nothing deleted, nothing left", res)
	}
}
