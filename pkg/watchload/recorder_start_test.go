package watchload_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// TestStartRecorderWaitsForItsWatch: StartRecorder returns only once etcd
// has created the recorder's watch, so a compaction right after it
// cannot pass the recorder. The recorder's connection opens its Watch
// stream 500 ms late (a loaded machine); before, StartRecorder returned
// at once, the writes and the compaction below came first, and the
// recorder failed with "required revision has been compacted".
func TestStartRecorderWaitsForItsWatch(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	ctx := t.Context()
	slowWatch := grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if method == "/etcdserverpb.Watch/Watch" {
			time.Sleep(500 * time.Millisecond)
		}
		return streamer(ctx, desc, cc, method, opts...)
	})
	target := watchload.Target{Endpoints: srv.Endpoints, Embedded: true, Dial: func(ctx context.Context) (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
			DialOptions: []grpc.DialOption{slowWatch}})
	}}
	s := watchload.NewSession(target, time.Now(), t.Logf)
	defer s.Close()
	admin := etcdtest.NewClient(t, srv)
	head, err := admin.Put(ctx, "/rec/pods/a", "v")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.StartRecorder(ctx, []string{"/rec/pods/"}, "", head.Header.Revision+1)
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := range 10 {
		r, err := admin.Put(ctx, fmt.Sprintf("/rec/pods/%d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		last = r.Header.Revision
	}
	if _, err := admin.Compact(ctx, last, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if err := rec.WaitFor(ctx, last, 20*time.Millisecond); err != nil {
		t.Fatalf("recorder: %v", err)
	}
	if got := rec.Events(); got != 10 {
		t.Errorf("got %d events recorded, want the 10 puts", got)
	}
}
