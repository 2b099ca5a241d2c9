package kubeload_test

import (
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// fakeAPIServer is an HTTP/2 TLS server that answers as kube-apiserver
// does the requests of informers of pods (an empty LIST, a WATCH that
// sends nothing until the client leaves) and of writers (a create is
// answered with the object sent), and counts the TCP connections it
// accepted and those still open. It returns the rest.Config that
// reaches it.
func fakeAPIServer(t *testing.T) (cfg *rest.Config, accepted, open *atomic.Int64) {
	t.Helper()
	accepted, open = &atomic.Int64{}, &atomic.Int64{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
		case r.Method == http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
			w.WriteHeader(http.StatusCreated)
			w.Write(body)
		default:
			http.NotFound(w, r)
		}
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			accepted.Add(1)
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, accepted, open
}

// TestConnectionsPerClient starts informers and writer workers made by
// NewInformerSet and NewAPIWorkload against an HTTP/2 server that counts
// the connections it accepts: with ConnectionsPerClient every informer and
// every writer must open a connection of its own, as separate processes
// do (client-go's transport cache would otherwise hand them all one
// transport); with ConnectionsShared all must share one. (Shared, the
// informers' first requests start together on the new transport, and Go
// may dial a connection for each before it knows the server speaks HTTP/2;
// it closes all but one at once: the test counts those still open, and
// with a connection each it also counts every one accepted.)
func TestConnectionsPerClient(t *testing.T) {
	const informers, writers = 3, 2
	tests := []struct {
		name         string
		layout       kubeload.ConnectionLayout
		wantOpen     int64
		wantAccepted int64 // 0: not checked
	}{
		{"per-client", kubeload.ConnectionsPerClient, informers + writers, informers + writers},
		{"shared", kubeload.ConnectionsShared, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, accepted, open := fakeAPIServer(t)
			conns, err := kubeload.NewConnections(cfg, tt.layout)
			if err != nil {
				t.Fatal(err)
			}
			env := watchload.NewEnv(time.Now(), 1<<10, writers, nil)
			resources := make([]string, informers)
			for i := range resources {
				resources[i] = watchload.ResourcePods
			}
			set, err := kubeload.NewInformerSet(conns, env, "/registry", resources, new(bool))
			if err != nil {
				t.Fatal(err)
			}
			defer set.Stop()
			if err := set.Start(t.Context(), 30*time.Second); err != nil {
				t.Fatal(err)
			}
			plan, err := watchload.NewKubernetesWorkload(watchload.KubernetesWorkloadOptions{Prefix: "/registry", Namespaces: 1,
				Pods: 1, Mix: watchload.DefaultMix, ResourceMix: watchload.ResourceMix{PodsPercent: 100}, Workers: writers, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			wl, err := kubeload.NewAPIWorkload(conns, plan, writers, 1)
			if err != nil {
				t.Fatal(err)
			}
			create := plan.PlanSeed()[0]
			for w := range writers {
				if _, _, err := wl.Do(t.Context(), w, nil, create); err != nil {
					t.Fatalf("writer %d: %v", w, err)
				}
			}
			// The extra connections' closes are asynchronous.
			for deadline := time.Now().Add(5 * time.Second); (open.Load() != tt.wantOpen || conns.Open() != tt.wantOpen) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if got := open.Load(); got != tt.wantOpen {
				t.Errorf("got %d connections open at the server, want %d", got, tt.wantOpen)
			}
			if got := conns.Open(); got != tt.wantOpen {
				t.Errorf("got Open %d, want %d", got, tt.wantOpen)
			}
			if got := accepted.Load(); tt.wantAccepted > 0 && got != tt.wantAccepted {
				t.Errorf("got %d connections accepted, want %d", got, tt.wantAccepted)
			}
		})
	}
}

// tcpProxy forwards every TCP connection it accepts on loopback to
// upstream, and counts those it accepted and those still open.
type tcpProxy struct {
	addr           string
	accepted, open atomic.Int64
}

// startTCPProxy starts a tcpProxy in front of upstream (host:port); it
// stops with the test.
func startTCPProxy(t *testing.T, upstream string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &tcpProxy{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			p.open.Add(1)
			go p.forward(c, upstream)
		}
	}()
	return p
}

// forward copies c to a new connection to upstream and back until either
// side closes.
func (p *tcpProxy) forward(c net.Conn, upstream string) {
	defer p.open.Add(-1)
	defer c.Close()
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(u, c); done <- struct{}{} }()
	go func() { io.Copy(c, u); done <- struct{}{} }()
	<-done
}

// TestConnectionsThroughKubeAPIServer runs a short load through a real
// kube-apiserver with the informers' and writers' connections going
// through a loopback TCP proxy that counts the connections
// kube-apiserver was sent: per client, one for each of the 2 informers
// and 4 writer workers; shared, one for all. The result's
// clientConnections says the same.
func TestConnectionsThroughKubeAPIServer(t *testing.T) {
	base := stack(t, apiserverproc.Config{DisableWatchCache: true})
	lo := smallLoad(t, 0)
	lo.Duration = 3 * time.Second
	clients := int64(lo.Watchers + lo.WriterConcurrency)
	tests := []struct {
		name         string
		layout       kubeload.ConnectionLayout
		wantOpen     int64
		wantAccepted int64 // 0: not checked (see TestConnectionsPerClient)
	}{
		{"per-client", kubeload.ConnectionsPerClient, clients, clients},
		{"shared", kubeload.ConnectionsShared, 1, 0},
	}
	off := false
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := url.Parse(base.RESTConfig.Host)
			if err != nil {
				t.Fatal(err)
			}
			proxy := startTCPProxy(t, u.Host)
			cfg := rest.CopyConfig(base.RESTConfig)
			cfg.Host = "https://" + proxy.addr
			st := base
			if st.Connections, err = kubeload.NewConnections(cfg, tt.layout); err != nil {
				t.Fatal(err)
			}
			res, err := runAPI(t.Context(), st, lo, kubeload.Options{WatchList: &off})
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, res)
			for deadline := time.Now().Add(5 * time.Second); proxy.open.Load() != tt.wantOpen && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("%s: %d connections accepted, %d open at the end", tt.name, proxy.accepted.Load(), proxy.open.Load())
			if got := proxy.open.Load(); got != tt.wantOpen {
				t.Errorf("got %d connections open through the proxy, want %d", got, tt.wantOpen)
			}
			if got := proxy.accepted.Load(); tt.wantAccepted > 0 && got != tt.wantAccepted {
				t.Errorf("got %d connections to kube-apiserver, want %d", got, tt.wantAccepted)
			}
			if got := res.APIServer.ClientConnections; got != tt.wantOpen {
				t.Errorf("got clientConnections %d, want %d", got, tt.wantOpen)
			}
		})
	}
}
