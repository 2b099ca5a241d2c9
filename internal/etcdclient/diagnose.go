package etcdclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrUnreachable is returned by Check when no endpoint answers as an etcd
// server; the error names each endpoint and why.
var ErrUnreachable = errors.New("no etcd endpoint reachable")

// ParseEndpoint checks that endpoint is a client URL as etcdctl takes it:
// http://host:port, https://host:port or unix://path (a bare host:port is
// taken as http://, as etcd's client does). It returns the parsed URL, or
// an error saying what is wrong with it.
func ParseEndpoint(endpoint string) (*url.URL, error) {
	if strings.TrimSpace(endpoint) == "" {
		return nil, errors.New("empty endpoint")
	}
	raw := endpoint
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL such as https://10.0.0.1:2379", endpoint)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" || u.Port() == "" || strings.ContainsAny(u.Host, " \t") {
			return nil, fmt.Errorf("%q is not a URL such as https://10.0.0.1:2379 (host and port required)", endpoint)
		}
	case "unix", "unixs":
		if u.Host+u.Path == "" {
			return nil, fmt.Errorf("%q names no socket path", endpoint)
		}
	default:
		return nil, fmt.Errorf("%q: scheme must be http, https or unix", endpoint)
	}
	return u, nil
}

// Diagnose finds out why endpoint does not serve as an etcd client URL
// under cfg's TLS settings, within cfg.DialTimeout (5 s if unset). It
// connects, completes the TLS handshake for https, and asks GET /version,
// which every etcd member answers on its client URLs with the JSON
// {"etcdserver": ..., "etcdcluster": ...} (server/etcdserver/api/etcdhttp/
// version.go). It returns nil when the endpoint is an etcd server, else one
// error naming the cause in an operator's words: connection refused, no
// answer within the timeout, a certificate signed by an unknown authority,
// a client certificate the server requires, a server that speaks TLS to a
// plain-http URL (or the reverse), or a server that is not etcd.
func Diagnose(ctx context.Context, cfg clientv3.Config, endpoint string) error {
	u, err := ParseEndpoint(endpoint)
	if err != nil {
		return err
	}
	timeout := cfg.DialTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	network, addr := "tcp", u.Host
	if u.Scheme == "unix" || u.Scheme == "unixs" {
		network, addr = "unix", u.Host+u.Path
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return dialCause(ctx, err, addr, timeout)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl) // a net.Conn's SetDeadline fails only once closed
	}
	secure := u.Scheme == "https" || u.Scheme == "unixs"
	if secure {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.TLS != nil {
			tc = cfg.TLS.Clone()
		}
		if tc.ServerName == "" && network == "tcp" {
			tc.ServerName = u.Hostname()
		}
		tconn := tls.Client(conn, tc)
		if err := tconn.HandshakeContext(ctx); err != nil {
			// etcd's client port (cmux) closes a connection whose first
			// bytes are a TLS hello when it serves plain HTTP only.
			if (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) && servesPlainEtcd(ctx, network, addr, u.Host) {
				return errors.New("the server does not speak TLS: use an http:// URL")
			}
			return tlsCause(ctx, err, timeout)
		}
		conn = tconn
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/version", nil)
	if err != nil {
		return err
	}
	req.Host = u.Host
	if err := req.Write(conn); err != nil {
		return tlsCause(ctx, err, timeout)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		if !secure && isTLSRecord(err) {
			return errors.New("the server speaks TLS: use an https:// URL (with --cacert)")
		}
		return tlsCause(ctx, err, timeout)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096)) // a short or failed read is judged below as "not etcd"
	var v struct {
		Server  string `json:"etcdserver"`
		Cluster string `json:"etcdcluster"`
	}
	if !secure && strings.Contains(string(body), "HTTP request to an HTTPS server") {
		return errors.New("the server speaks TLS: use an https:// URL (with --cacert)")
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &v) != nil || v.Server == "" {
		return fmt.Errorf("not an etcd server: GET /version answered %s, not etcd's {\"etcdserver\": ...}", resp.Status)
	}
	return nil
}

// servesPlainEtcd reports whether addr answers GET /version over plain
// HTTP as an etcd server does, within ctx.
func servesPlainEtcd(ctx context.Context, network, addr, host string) bool {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl) // a net.Conn's SetDeadline fails only once closed
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/version", nil)
	if err != nil {
		return false
	}
	req.Host = host
	if req.Write(conn) != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var v struct {
		Server string `json:"etcdserver"`
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096)) // a short read is judged as not etcd
	return resp.StatusCode == http.StatusOK && json.Unmarshal(body, &v) == nil && v.Server != ""
}

// Check diagnoses every endpoint of cfg concurrently and returns nil when
// at least one is an etcd server. Otherwise the error wraps ErrUnreachable
// and names each endpoint with its cause ("https://10.0.0.1:2379: x509:
// certificate signed by unknown authority: pass the CA with --cacert").
func Check(ctx context.Context, cfg clientv3.Config) error {
	errs := make([]error, len(cfg.Endpoints))
	done := make(chan struct{}, len(cfg.Endpoints))
	for i, ep := range cfg.Endpoints {
		go func() {
			defer func() { done <- struct{}{} }()
			errs[i] = Diagnose(ctx, cfg, ep)
		}()
	}
	for range cfg.Endpoints {
		<-done
	}
	var causes []string
	for i, err := range errs {
		if err == nil {
			return nil
		}
		causes = append(causes, cfg.Endpoints[i]+": "+err.Error())
	}
	return fmt.Errorf("%w: %s", ErrUnreachable, strings.Join(causes, "; "))
}

// dialCause names why a connection to addr failed.
func dialCause(ctx context.Context, err error, addr string, timeout time.Duration) error {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("connection refused: nothing listens on %s", addr)
	case ctx.Err() != nil || isTimeout(err):
		return fmt.Errorf("no answer from %s within --dial-timeout %s", addr, timeout)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return fmt.Errorf("cannot resolve %q: %v", dnsErr.Name, dnsErr.Err)
	}
	return err
}

// tlsCause names why a TLS handshake, or the first request over it, failed.
func tlsCause(ctx context.Context, err error, timeout time.Duration) error {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var alert tls.AlertError
	var recordHeader tls.RecordHeaderError
	msg := err.Error()
	switch {
	case errors.As(err, &unknownCA):
		return errors.New("x509: the server's certificate is signed by an unknown authority: pass its CA with --cacert")
	case errors.As(err, &hostname):
		return fmt.Errorf("x509: %v", hostname.Error())
	case errors.As(err, &invalid):
		return fmt.Errorf("x509: %v", invalid.Error())
	case errors.As(err, &recordHeader):
		return errors.New("the server does not speak TLS: use an http:// URL")
	case errors.As(err, &alert) && (strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate")),
		strings.Contains(msg, "certificate required"), strings.Contains(msg, "bad certificate"):
		return errors.New("the server requires a client certificate: pass --cert and --key")
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("the server closed the connection: %v", err)
	case ctx.Err() != nil || isTimeout(err):
		return fmt.Errorf("no answer within --dial-timeout %s", timeout)
	}
	return err
}

// isTimeout reports whether err is a connection's deadline passing, which
// the deadline Diagnose sets from its context can report before the
// context itself ends.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// isTLSRecord reports whether a plain-HTTP read failed because the server
// answered with a TLS record (a TLS alert starts with byte 0x15).
func isTLSRecord(err error) bool {
	return strings.Contains(err.Error(), "malformed HTTP response") && strings.Contains(err.Error(), "\\x15\\x03")
}
