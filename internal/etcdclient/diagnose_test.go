package etcdclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// TestDiagnose holds each cause Diagnose names against a real server of
// that kind on loopback: before it, every one of these read "status of URL:
// context deadline exceeded".
func TestDiagnose(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()
	mtls := httptest.NewUnstartedServer(http.NotFoundHandler())
	mtls.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert}
	mtls.StartTLS()
	defer mtls.Close()
	// Freed last, so that none of the servers above is handed its port.
	closed := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}()
	trust := func(srv *httptest.Server) *tls.Config {
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}

	tests := []struct {
		name     string
		endpoint string
		tls      *tls.Config
		wantErr  string
	}{
		{name: "not a url", endpoint: "not a url", wantErr: "is not a URL"},
		{name: "empty", endpoint: "", wantErr: "empty endpoint"},
		{name: "bad scheme", endpoint: "ftp://127.0.0.1:1", wantErr: "scheme must be"},
		{name: "closed port", endpoint: "http://" + closed, wantErr: "connection refused"},
		{name: "no answer", endpoint: "http://" + silent.Addr().String(), wantErr: "no answer"},
		{name: "not etcd", endpoint: plain.URL, wantErr: "not an etcd server"},
		{name: "unknown authority", endpoint: tlsSrv.URL, wantErr: "unknown authority: pass its CA with --cacert"},
		{name: "client certificate required", endpoint: mtls.URL, tls: trust(mtls), wantErr: "requires a client certificate"},
		{name: "https to a plain server", endpoint: strings.Replace(plain.URL, "http://", "https://", 1), wantErr: "does not speak TLS"},
		{name: "http to a TLS server", endpoint: strings.Replace(tlsSrv.URL, "https://", "http://", 1), wantErr: "speaks TLS"},
		{name: "TLS, trusted, not etcd", endpoint: tlsSrv.URL, tls: trust(tlsSrv), wantErr: "not an etcd server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := clientv3.Config{DialTimeout: time.Second, TLS: tt.tls}
			start := time.Now()
			err := Diagnose(context.Background(), cfg, tt.endpoint)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %v, want the 1s dial timeout honoured", d)
			}
		})
	}
}

// TestDiagnoseEtcd checks that a real etcd member passes, and that Check
// passes when one endpoint of several is etcd and fails naming every
// endpoint when none is.
func TestDiagnoseEtcd(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	cfg := clientv3.Config{DialTimeout: 2 * time.Second}
	if err := Diagnose(context.Background(), cfg, srv.Endpoints[0]); err != nil {
		t.Fatalf("Diagnose of a real etcd member: %v", err)
	}
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	cfg.Endpoints = []string{plain.URL, srv.Endpoints[0]}
	if err := Check(context.Background(), cfg); err != nil {
		t.Errorf("Check with one etcd endpoint: %v", err)
	}
	cfg.Endpoints = []string{plain.URL, "http://127.0.0.1:1"}
	err := Check(context.Background(), cfg)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), plain.URL+": not an etcd server") || !strings.Contains(err.Error(), "127.0.0.1:1: connection refused") {
		t.Errorf("got %v, want ErrUnreachable naming both endpoints and causes", err)
	}
}
