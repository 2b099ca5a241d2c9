package live

import (
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fakeWatcher sends events, one response per revision from the watch's
// start revision, then, when progress is set, a progress notification at
// its revision in answer to RequestProgress (as etcd does once a watch
// has caught up); it never closes the channel.
type fakeWatcher struct {
	events   []int64
	progress int64
	ch       chan clientv3.WatchResponse
	startRev int64
}

func (f *fakeWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	f.startRev = clientv3.OpGet(key, opts...).Rev()
	f.ch = make(chan clientv3.WatchResponse, len(f.events)+16)
	for _, rev := range f.events {
		if rev >= f.startRev {
			f.ch <- clientv3.WatchResponse{Header: &etcdserverpb.ResponseHeader{Revision: 100},
				Events: []*clientv3.Event{{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("k"), ModRevision: rev}}}}
		}
	}
	return f.ch
}

func (f *fakeWatcher) RequestProgress(context.Context) error {
	if f.progress > 0 {
		select {
		case f.ch <- clientv3.WatchResponse{Header: &etcdserverpb.ResponseHeader{Revision: f.progress}}:
		default:
		}
	}
	return nil
}

// TestReplay: the replay starts at from+1, hands every event up to `to`
// and none after, and ends on an event past `to` or on a progress
// notification at or past it; with neither, ctx ends it.
func TestReplay(t *testing.T) {
	tests := []struct {
		name     string
		w        *fakeWatcher
		cancel   bool
		wantRevs []int64
		wantErr  error
	}{
		{"an event past to", &fakeWatcher{events: []int64{11, 12, 15, 21}}, false, []int64{11, 12, 15}, nil},
		{"a progress notification", &fakeWatcher{events: []int64{11, 20}, progress: 20}, false, []int64{11, 20}, nil},
		{"neither: ctx ends it", &fakeWatcher{events: []int64{11}}, true, []int64{11}, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var got []int64
			p := &Progress{}
			err := replay(ctx, tc.w, 10, 20, p, func(ev *clientv3.Event) {
				got = append(got, ev.Kv.ModRevision)
				if tc.cancel {
					cancel()
				}
			})
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("got error %v, want %v", err, tc.wantErr)
			}
			if tc.w.startRev != 11 {
				t.Errorf("got a watch from revision %d, want 11", tc.w.startRev)
			}
			if len(got) != len(tc.wantRevs) {
				t.Fatalf("got events at %v, want %v", got, tc.wantRevs)
			}
			for i := range got {
				if got[i] != tc.wantRevs[i] {
					t.Errorf("got events at %v, want %v", got, tc.wantRevs)
				}
			}
			if done, total := p.Load(); tc.wantErr == nil && (done != 10 || total != 10) {
				t.Errorf("got progress %d of %d, want 10 of 10 revisions", done, total)
			}
		})
	}
}
