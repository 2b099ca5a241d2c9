package kubeload_test

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// slowListServer answers informers of pods as fakeAPIServer does, but each
// LIST only after delay, and records the most LISTs it held at once.
func slowListServer(t *testing.T, delay time.Duration) (cfg *rest.Config, most func() int) {
	t.Helper()
	var mu sync.Mutex
	inFlight, top := 0, 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		mu.Lock()
		inFlight++
		top = max(top, inFlight)
		mu.Unlock()
		time.Sleep(delay)
		mu.Lock()
		inFlight--
		mu.Unlock()
		io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, func() int {
		mu.Lock()
		defer mu.Unlock()
		return top
	}
}

// TestInformerSetStartConcurrency starts six informers (WatchListClient
// off: each syncs with one LIST, which the server holds 200 ms) and checks
// that StartConcurrency bounds the LISTs in flight at once, and that every
// informer syncs: with 300 informers started at once through a
// kube-apiserver whose watch cache is off, every initial read of etcd
// outlived two of lwbench's compaction intervals, failed "too old" and
// started again, and none synced in 60 s (issue 21).
func TestInformerSetStartConcurrency(t *testing.T) {
	const informers = 6
	tests := []struct {
		name        string
		concurrency int
		wantMost    int
	}{
		{"bounded", 2, 2},
		{"one at a time", 1, 1},
		{"all at once", 0, informers},
		{"negative: all at once", -1, informers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, most := slowListServer(t, 200*time.Millisecond)
			conns, err := kubeload.NewConnections(cfg, kubeload.ConnectionsPerClient)
			if err != nil {
				t.Fatal(err)
			}
			env := watchload.NewEnv(time.Now(), 1<<10, 1, nil)
			resources := make([]string, informers)
			for i := range resources {
				resources[i] = watchload.ResourcePods
			}
			set, err := kubeload.NewInformerSet(conns, env, "/registry", resources, new(bool))
			if err != nil {
				t.Fatal(err)
			}
			defer set.Stop()
			set.StartConcurrency = tt.concurrency
			if err := set.Start(t.Context(), 30*time.Second); err != nil {
				t.Fatal(err)
			}
			if got := most(); got != tt.wantMost {
				t.Errorf("got %d LISTs in flight at most, want %d", got, tt.wantMost)
			}
		})
	}
}
