// Package etcdclient turns etcdctl's connection flags into an etcd client
// configuration, so that lwbench connects to a cluster exactly as an
// operator's etcdctl does.
package etcdclient

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/tlsutil"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Flags are etcdctl's global connection flags (etcdctl/ctlv3/ctl.go).
type Flags struct {
	Endpoints             []string      // client URLs
	DialTimeout           time.Duration // bound of the first connection
	CACert                string        // CA bundle that verifies the servers
	Cert                  string        // client certificate
	Key                   string        // its key
	InsecureSkipTLSVerify bool          // do not verify the servers
	User                  string        // user, or user:password
	Password              string        // password of User
	// KeepAliveTime and KeepAliveTimeout are the gRPC keepalive: a ping
	// after KeepAliveTime without activity, the connection closed if no
	// answer comes within KeepAliveTimeout; 0 disables it. gRPC raises a
	// time below 10 s to 10 s.
	KeepAliveTime    time.Duration
	KeepAliveTimeout time.Duration // see KeepAliveTime
}

// DefaultKeepAliveTime and DefaultKeepAliveTimeout are kube-apiserver's
// keepalive towards etcd (k8s.io/apiserver/pkg/storage/storagebackend/
// factory/etcd3.go keepaliveTime, keepaliveTimeout); etcdctl's own are
// 2 s (raised to gRPC's 10 s minimum) and 6 s.
const (
	DefaultKeepAliveTime    = 30 * time.Second
	DefaultKeepAliveTimeout = 10 * time.Second
)

// AddFlags registers the flags with etcdctl's names and meanings.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.Endpoints, "endpoints", nil, "etcd client URLs (comma-separated); default: an embedded member")
	fs.DurationVar(&f.DialTimeout, "dial-timeout", 5*time.Second, "timeout to connect to --endpoints")
	f.AddSecurityFlags(fs)
	f.AddKeepAliveFlags(fs)
}

// AddKeepAliveFlags registers --keepalive-time and --keepalive-timeout
// (etcdctl's names) with kube-apiserver's values as defaults.
func (f *Flags) AddKeepAliveFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&f.KeepAliveTime, "keepalive-time", DefaultKeepAliveTime, "gRPC keepalive time of client connections (kube-apiserver's; at least 10s); 0 disables keepalive")
	fs.DurationVar(&f.KeepAliveTimeout, "keepalive-timeout", DefaultKeepAliveTimeout, "gRPC keepalive timeout of client connections (kube-apiserver's)")
}

// AddSecurityFlags registers only the TLS and authentication flags, for a
// command that registers --endpoints and --dial-timeout itself.
func (f *Flags) AddSecurityFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.CACert, "cacert", "", "verify the servers' TLS certificates with this CA bundle")
	fs.StringVar(&f.Cert, "cert", "", "identify this client with this TLS certificate")
	fs.StringVar(&f.Key, "key", "", "the TLS key of --cert")
	fs.BoolVar(&f.InsecureSkipTLSVerify, "insecure-skip-tls-verify", false, "skip verification of the servers' certificates (insecure)")
	fs.StringVar(&f.User, "user", "", "username[:password] for authentication (the password may also come from --password)")
	fs.StringVar(&f.Password, "password", "", "password for authentication (if given, --user holds no colon-separated password)")
}

// Set reports whether any connection flag other than the dial timeout was
// given.
func (f *Flags) Set() bool {
	return len(f.Endpoints) > 0 || f.CACert != "" || f.Cert != "" || f.Key != "" || f.InsecureSkipTLSVerify || f.User != "" || f.Password != ""
}

// Validate checks flag combinations the way etcdctl does: --cert and --key
// go together, TLS and auth flags need --endpoints, a password needs a user.
// Errors name the flags.
func (f *Flags) Validate() error {
	switch {
	case (f.Cert == "") != (f.Key == ""):
		return errors.New("--cert and --key must be given together")
	case len(f.Endpoints) == 0 && f.Set():
		return errors.New("--cacert, --cert, --key, --insecure-skip-tls-verify, --user and --password need --endpoints")
	case f.Password != "" && f.User == "":
		return errors.New("--password needs --user")
	case f.Password != "" && strings.Contains(f.User, ":"):
		return errors.New("--user holds a password (user:password) and --password gives another")
	case f.DialTimeout <= 0:
		return errors.New("--dial-timeout must be positive")
	case f.KeepAliveTime < 0 || f.KeepAliveTimeout < 0:
		return errors.New("--keepalive-time and --keepalive-timeout must not be negative")
	}
	for _, ep := range f.Endpoints {
		if _, err := ParseEndpoint(ep); err != nil {
			return fmt.Errorf("--endpoints: %w", err)
		}
	}
	return nil
}

// Config returns the client configuration for the flags: TLS when any
// endpoint is https or any TLS flag is set (built by etcd's transport
// package, as etcdctl builds it), credentials when --user is set, and the
// keepalive. The client logs nothing.
func (f *Flags) Config() (clientv3.Config, error) {
	cfg := clientv3.Config{Endpoints: f.Endpoints, DialTimeout: f.DialTimeout, Logger: zap.NewNop(),
		DialKeepAliveTime: f.KeepAliveTime, DialKeepAliveTimeout: f.KeepAliveTimeout}
	secure := f.CACert != "" || f.Cert != "" || f.InsecureSkipTLSVerify
	for _, ep := range f.Endpoints {
		secure = secure || strings.HasPrefix(ep, "https://")
	}
	if secure {
		info := transport.TLSInfo{CertFile: f.Cert, KeyFile: f.Key, TrustedCAFile: f.CACert, InsecureSkipVerify: f.InsecureSkipTLSVerify}
		var tc *tls.Config
		var err error
		if f.Cert != "" {
			tc, err = info.ClientConfig()
		} else {
			tc, err = caOnly(info)
		}
		if err != nil {
			return cfg, fmt.Errorf("TLS configuration: %w", err)
		}
		cfg.TLS = tc
	}
	if f.User != "" {
		cfg.Username, cfg.Password = f.User, f.Password
		if user, pass, ok := strings.Cut(f.User, ":"); ok {
			cfg.Username, cfg.Password = user, pass
		}
	}
	return cfg, nil
}

// caOnly builds a client TLS configuration without a client certificate:
// transport.TLSInfo.ClientConfig requires one, etcdctl does not.
func caOnly(info transport.TLSInfo) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: info.InsecureSkipVerify}
	if info.TrustedCAFile != "" {
		pool, err := tlsutil.NewCertPool([]string{info.TrustedCAFile})
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	return tc, nil
}
