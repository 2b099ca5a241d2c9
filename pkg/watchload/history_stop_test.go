package watchload

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// TestWaitForReturnsWhenTheRecorderStops: a recorder whose Run ended with
// its ctx (an interrupted load) never reaches a later revision; WaitFor on
// a ctx that never ends returns errRecorderStopped instead of blocking.
func TestWaitForReturnsWhenTheRecorderStops(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	srv := etcdtest.RunEtcd(t)
	c, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	put, err := c.Put(t.Context(), "/a/x", "v")
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(NewStream(0, 0, c, ""), []string{"/a/"})
	rctx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- rec.Run(rctx, put.Header.Revision) }()
	if err := rec.WaitFor(t.Context(), put.Header.Revision, 50*time.Millisecond); err != nil {
		t.Fatalf("WaitFor(%d) before the stop: %v", put.Header.Revision, err)
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("Run ended with %v, want nil on its ctx's end", err)
	}
	later := put.Header.Revision + 5
	done := make(chan error, 1)
	go func() { done <- rec.WaitFor(context.Background(), later, 50*time.Millisecond) }()
	select {
	case err := <-done:
		if !errors.Is(err, errRecorderStopped) {
			t.Errorf("WaitFor(%d) after the stop: %v, want errRecorderStopped", later, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("WaitFor(%d) still blocked 10 s after the recorder stopped", later)
	}
}
