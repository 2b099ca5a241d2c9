package kubeload

import (
	"context"
	"testing"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// TestStateAtCompacted holds the state confirm compares an informer's
// cache with: at the informer's revision while etcd keeps it, the latest
// once a compaction passed it (kube-apiserver's compactor, while the
// informer's resource stopped changing), read at one revision for every
// prefix.
func TestStateAtCompacted(t *testing.T) {
	c := etcdtest.NewClient(t, etcdtest.RunEtcd(t))
	ctx := context.Background()
	put := func(k string) int64 {
		resp, err := c.Put(ctx, k, "v")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	a1 := put("/registry/pods/a/1")
	at := put("/registry/pods/b/1") // the informer's revision
	put("/registry/pods/a/1")       // a later change of the resource...
	if _, err := c.Delete(ctx, "/registry/pods/b/1"); err != nil {
		t.Fatal(err)
	}
	other := put("/registry/leases/x") // ...then only other resources

	prefixes := []string{"/registry/pods/a/", "/registry/pods/b/"}
	m, rev, err := stateAt(ctx, c, prefixes, at)
	if err != nil || rev != at || len(m) != 2 || m["/registry/pods/a/1"] != a1 || m["/registry/pods/b/1"] != at {
		t.Fatalf("before compaction: state %v at %d, %v; want both keys at revision %d", m, rev, err, at)
	}
	if _, err := c.Compact(ctx, other); err != nil {
		t.Fatal(err)
	}
	m, rev, err = stateAt(ctx, c, prefixes, at)
	if err != nil || rev != other || len(m) != 1 || m["/registry/pods/a/1"] != other-2 {
		t.Fatalf("after compaction: state %v at %d, %v; want /registry/pods/a/1 at %d, read at the latest revision %d", m, rev, err, other-2, other)
	}
	if _, _, err := stateAt(ctx, c, prefixes, other+10); err == nil {
		t.Errorf("a future revision read without error")
	}
}
