package watchload

import (
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/revision"
)

// TestStoreGetList checks the store's table: which revision a LIST's
// resourceVersion, limit and continue token make it read at, what it is
// served at, and the errors, against a real etcd compacted at C.
func TestStoreGetList(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	prefix := "/registry/store/"
	first := putKeys(t, c, prefix, 0, 4) // keys 0..3, the last at first
	compact := first - 1
	if _, err := c.Compact(t.Context(), compact, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	latest := putKeys(t, c, prefix, 4, 7) // keys 4..6
	s := &store{stream: NewStream(0, 0, c, ""), client: c, prefix: prefix}
	rv := revision.ListResourceVersion
	tests := []struct {
		name         string
		opts         listOptions
		wantErr      error // nil: success
		wantAnswered bool
		wantRead     int64 // readRevision
		wantRevision int64 // revision, when etcd answered
		wantKeys     int
		wantNext     bool
	}{
		{name: "any, paginated", opts: listOptions{resourceVersion: "0", limit: 3},
			wantAnswered: true, wantRevision: latest, wantKeys: 3, wantNext: true},
		{name: "most recent, unpaginated", opts: listOptions{resourceVersion: ""},
			wantAnswered: true, wantRevision: latest, wantKeys: 7},
		{name: "not older than, unpaginated", opts: listOptions{resourceVersion: rv(first)},
			wantAnswered: true, wantRevision: latest, wantKeys: 7},
		{name: "exact with a limit", opts: listOptions{resourceVersion: rv(first), limit: 3},
			wantAnswered: true, wantRead: first, wantRevision: first, wantKeys: 3, wantNext: true},
		{name: "exact, last page", opts: listOptions{resourceVersion: rv(first), limit: 10},
			wantAnswered: true, wantRead: first, wantRevision: first, wantKeys: 4},
		{name: "exact below the compact revision", opts: listOptions{resourceVersion: rv(compact - 1), limit: 3},
			wantErr: rpctypes.ErrCompacted, wantRead: compact - 1},
		{name: "exact in the future", opts: listOptions{resourceVersion: rv(latest + 5), limit: 3},
			wantErr: rpctypes.ErrFutureRev, wantRead: latest + 5},
		{name: "not older than the future", opts: listOptions{resourceVersion: rv(latest + 5)},
			wantErr: errTooLargeRV, wantAnswered: true, wantRevision: latest},
		{name: "continued", opts: listOptions{limit: 3, continueFrom: &continueToken{key: fmt.Sprintf("%sns/p%03d\x00", prefix, 1), revision: first}},
			wantAnswered: true, wantRead: first, wantRevision: first, wantKeys: 2},
		{name: "continued at a compacted revision", opts: listOptions{limit: 3, continueFrom: &continueToken{key: prefix, revision: compact - 1}},
			wantErr: rpctypes.ErrCompacted, wantRead: compact - 1},
		{name: "not a resourceVersion", opts: listOptions{resourceVersion: "12a", limit: 3},
			wantErr: revision.ErrInvalidResourceVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := s.getList(t.Context(), tt.opts)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if page.answered != tt.wantAnswered || page.readRevision != tt.wantRead {
				t.Errorf("got answered %v, read revision %d; want %v, %d", page.answered, page.readRevision, tt.wantAnswered, tt.wantRead)
			}
			if page.answered && page.revision != tt.wantRevision {
				t.Errorf("got revision %d, want %d", page.revision, tt.wantRevision)
			}
			if err != nil {
				return
			}
			if len(page.kvs) != tt.wantKeys || (page.next != nil) != tt.wantNext {
				t.Errorf("got %d keys, continue %v; want %d, %v", len(page.kvs), page.next != nil, tt.wantKeys, tt.wantNext)
			}
			if page.next != nil && page.next.revision != page.revision {
				t.Errorf("continue token at revision %d, want the page's %d", page.next.revision, page.revision)
			}
		})
	}
}
