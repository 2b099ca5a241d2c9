package etcdclient_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdclient"
	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/internal/etcdtest"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		f       etcdclient.Flags
		wantErr string
	}{
		{"embedded", etcdclient.Flags{DialTimeout: time.Second}, ""},
		{"endpoints", etcdclient.Flags{Endpoints: []string{"https://127.0.0.1:2379"}, DialTimeout: time.Second}, ""},
		{"cert without key", etcdclient.Flags{Endpoints: []string{"https://x:1"}, Cert: "c", DialTimeout: time.Second}, "--cert and --key"},
		{"tls without endpoints", etcdclient.Flags{CACert: "ca", DialTimeout: time.Second}, "need --endpoints"},
		{"password without user", etcdclient.Flags{Endpoints: []string{"http://x:1"}, Password: "p", DialTimeout: time.Second}, "--password needs --user"},
		{"two passwords", etcdclient.Flags{Endpoints: []string{"http://x:1"}, User: "u:p", Password: "p", DialTimeout: time.Second}, "another"},
		{"bad scheme", etcdclient.Flags{Endpoints: []string{"grpc://x:1"}, DialTimeout: time.Second}, "scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.f.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestConfigUserPassword(t *testing.T) {
	f := etcdclient.Flags{Endpoints: []string{"http://127.0.0.1:1"}, User: "bench:s3:cret", DialTimeout: time.Second}
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Username != "bench" || cfg.Password != "s3:cret" || cfg.TLS != nil {
		t.Fatalf("config user %q password %q TLS %v", cfg.Username, cfg.Password, cfg.TLS != nil)
	}
}

// TestConnectsToTLSClusterWithAuth connects through the flags to a real
// etcd that requires client certificates, as a user limited to a prefix.
func TestConnectsToTLSClusterWithAuth(t *testing.T) {
	bin := etcdtest.EtcdBinaries(t, "3.7.3")
	dir := t.TempDir()
	files, err := etcdproc.GenerateTLS(dir, "root")
	if err != nil {
		t.Fatal(err)
	}
	files.ClientCertAuth = true
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := etcdproc.Start(ctx, etcdproc.Config{BinDir: bin, Dir: dir, TLS: &files, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	rootCfg, _ := c.ClientConfig()
	root, err := clientv3.New(rootCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := etcdproc.AddPrefixUser(ctx, root, "bench", "pw", "/lwbench/"); err != nil {
		t.Fatal(err)
	}
	if err := etcdproc.EnableAuth(ctx, root, "rootpw"); err != nil {
		t.Fatal(err)
	}

	f := etcdclient.Flags{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, CACert: files.CA,
		Cert: files.ClientCert, Key: files.ClientKey, User: "bench", Password: "pw"}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "/lwbench/x", "v"); err != nil {
		t.Fatalf("put as bench over TLS: %v", err)
	}
	if _, err := cli.Put(ctx, "/registry/x", "v"); err == nil {
		t.Fatal("bench wrote outside its prefix")
	}
	// A wrong CA fails the handshake.
	other, err := etcdproc.GenerateTLS(t.TempDir(), "root")
	if err != nil {
		t.Fatal(err)
	}
	f.CACert = filepath.Clean(other.CA)
	cfg, err = f.Config()
	if err != nil {
		t.Fatal(err)
	}
	bad, err := clientv3.New(cfg)
	if err == nil {
		gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = bad.Get(gctx, "/lwbench/x")
		cancel()
		bad.Close()
	}
	if err == nil {
		t.Fatal("a client trusting another CA was served")
	}

	// Each TLS mistake is named by Diagnose, against the real member.
	ep := c.Endpoints()[0]
	for _, tt := range []struct {
		name    string
		flags   etcdclient.Flags
		wantErr string
	}{
		{name: "no --cacert", flags: etcdclient.Flags{}, wantErr: "unknown authority"},
		{name: "another CA", flags: etcdclient.Flags{CACert: other.CA}, wantErr: "unknown authority"},
		{name: "no client certificate", flags: etcdclient.Flags{CACert: files.CA}, wantErr: "requires a client certificate"},
		{name: "all of it", flags: etcdclient.Flags{CACert: files.CA, Cert: files.ClientCert, Key: files.ClientKey}},
	} {
		tt.flags.Endpoints, tt.flags.DialTimeout = []string{ep}, 5*time.Second
		cfg, err := tt.flags.Config()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		err = etcdclient.Diagnose(ctx, cfg, ep)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: got %v, want the member to pass", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.wantErr)
		}
	}
}
