package apiserverproc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/internal/etcdproc"
)

// Config describes the kube-apiservers Start runs in front of one etcd.
//
// Zero values keep kube-apiserver's own defaults except where a field says
// otherwise.
type Config struct {
	// BinDir holds the kube-apiserver binary (see Binaries).
	BinDir string
	// Servers is how many kube-apiservers to start, all sharing the etcd,
	// the PKI and the token; 0 means 1.
	Servers int
	// Dir is the parent of the PKI (Dir/pki) and of every server's own
	// directory (Dir/apiserver0, ...); it must exist and be writable.
	Dir string

	// EtcdServers are etcd's client URLs (--etcd-servers); required.
	EtcdServers []string
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile are the TLS files
	// kube-apiserver dials etcd with (--etcd-cafile, --etcd-certfile,
	// --etcd-keyfile); empty for plain http.
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	// EtcdPrefix is the key prefix of every object (--etcd-prefix);
	// "" keeps /registry.
	EtcdPrefix string
	// EtcdCompactionInterval is how often kube-apiserver's own compactor
	// compacts etcd (--etcd-compaction-interval); 0 keeps 5m, a negative
	// value passes 0, which turns the compactor off.
	EtcdCompactionInterval time.Duration
	// EventTTL is how long events are kept (--event-ttl, an etcd lease per
	// event); 0 keeps 1h.
	EventTTL time.Duration
	// DisableWatchCache passes --watch-cache=false: every LIST and WATCH
	// goes to etcd.
	DisableWatchCache bool
	// DefaultWatchCacheSize is --default-watch-cache-size; 0 passes
	// nothing, a negative value passes 0. In 1.37.2 the flag is a
	// deprecated no-op (watch caches are sized automatically:
	// staging/src/k8s.io/apiserver/pkg/server/options/etcd.go); to turn
	// the cache off for one resource pass --watch-cache-sizes=pods#0 in
	// ExtraArgs, for all DisableWatchCache.
	DefaultWatchCacheSize int
	// FeatureGates is passed as --feature-gates as is
	// ("WatchList=false,EtcdRangeStream=true"); "" passes nothing.
	FeatureGates string

	// AuthorizationMode is --authorization-mode; "" means RBAC, what
	// clusters run (kubeadm: Node,RBAC), so that RBAC's bootstrap policy
	// and informers load etcd as they do in production. The admin token's
	// group system:masters is allowed everything under any mode.
	AuthorizationMode string
	// ServiceAccountAdmission keeps kube-apiserver's ServiceAccount
	// admission plugin on, as clusters run it: every pod then needs its
	// namespace's default ServiceAccount, which kube-controller-manager's
	// serviceaccount controller creates (internal/controlplane starts
	// one). Off, Start passes --disable-admission-plugins ServiceAccount.
	ServiceAccountAdmission bool
	// ServiceClusterIPRange is --service-cluster-ip-range; "" means
	// 10.0.0.0/24. No traffic goes to it: there are no nodes.
	ServiceClusterIPRange string
	// ExtraArgs are appended to every server's command line.
	ExtraArgs []string
	// StartTimeout bounds the wait for /readyz of every server; 0 means
	// 2 minutes.
	StartTimeout time.Duration
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL;
	// 0 means 20 seconds.
	StopTimeout time.Duration
}

// Server is one kube-apiserver process of a Cluster.
type Server struct {
	// Name is apiserver0, apiserver1, ... in the order of Cluster.Servers.
	Name string
	// URL is the server's https://127.0.0.1:PORT.
	URL string
	// Dir is the server's own directory: its log and --cert-dir.
	Dir string
	// LogPath receives the process's stdout and stderr.
	LogPath string

	pki  PKI
	proc *Process
	stop time.Duration
}

// Cluster is a set of kube-apiservers started by Start.
type Cluster struct {
	// Servers are in start order.
	Servers []*Server
	// PKI are the files every server shares, with the admin token.
	PKI PKI
}

// Start generates a PKI under cfg.Dir and starts cfg.Servers
// kube-apiservers in front of cfg.EtcdServers on free loopback ports, one
// after another, each ready (/readyz answers 200 to the admin token) before
// the next starts. On error every process it started is stopped and the
// error carries the last lines of the failing server's log.
//
// Besides the fields of cfg, every server runs with
// --endpoint-reconciler-type none (kube-apiserver refuses to publish a
// loopback address as the kubernetes service's endpoint otherwise),
// --bind-address 127.0.0.1, the generated serving certificate,
// service-account key pair, token file and CA (--client-ca-file: client
// certificates the CA signed authenticate as their common name, in the
// groups of their organizations), and, unless cfg.ServiceAccountAdmission,
// --disable-admission-plugins ServiceAccount: without a controller-manager
// nothing creates each namespace's default ServiceAccount, which that
// plugin would require of every pod.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if len(cfg.EtcdServers) == 0 {
		return nil, errors.New("no etcd servers to start kube-apiserver in front of")
	}
	if cfg.Servers == 0 {
		cfg.Servers = 1
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 2 * time.Minute
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 20 * time.Second
	}
	pkiDir := filepath.Join(cfg.Dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return nil, err
	}
	pki, err := generatePKI(pkiDir)
	if err != nil {
		return nil, fmt.Errorf("pki in %s: %w", pkiDir, err)
	}
	c := &Cluster{PKI: pki}
	wctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	for i := range cfg.Servers {
		s, err := startServer(wctx, cfg, pki, i)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	return c, nil
}

// startServer starts server i and waits for it to be ready, retrying with
// another port when one it was given was taken in between.
func startServer(ctx context.Context, cfg Config, pki PKI, i int) (*Server, error) {
	var lastErr error
	for attempt := range 3 {
		s := &Server{
			Name: fmt.Sprintf("apiserver%d", i),
			Dir:  filepath.Join(cfg.Dir, fmt.Sprintf("apiserver%d-%d", i, attempt)),
			pki:  pki,
			stop: cfg.StopTimeout,
		}
		s.LogPath = filepath.Join(s.Dir, "kube-apiserver.log")
		if err := os.MkdirAll(s.Dir, 0o700); err != nil {
			return nil, err
		}
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
		if err := s.start(filepath.Join(cfg.BinDir, "kube-apiserver"), args(cfg, pki, s.Dir, port)); err != nil {
			return nil, err
		}
		err = s.waitReady(ctx)
		if err == nil {
			return s, nil
		}
		s.Stop()
		lastErr = fmt.Errorf("%s: %w (log %s: %s)", s.Name, err, s.LogPath, s.logTail(8))
		if ctx.Err() != nil || !strings.Contains(lastErr.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

// args returns the command line of one server listening on port.
func args(cfg Config, pki PKI, dir string, port int) []string {
	a := []string{
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + dir,
		"--tls-cert-file=" + pki.ServingCert,
		"--tls-private-key-file=" + pki.ServingKey,
		"--token-auth-file=" + pki.TokenFile,
		"--client-ca-file=" + pki.CA,
		"--service-account-key-file=" + pki.ServiceAccountPublicKey,
		"--service-account-signing-key-file=" + pki.ServiceAccountKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--endpoint-reconciler-type=none",
		"--etcd-servers=" + strings.Join(cfg.EtcdServers, ","),
	}
	if !cfg.ServiceAccountAdmission {
		a = append(a, "--disable-admission-plugins=ServiceAccount")
	}
	authz := cfg.AuthorizationMode
	if authz == "" {
		authz = "RBAC"
	}
	a = append(a, "--authorization-mode="+authz)
	cidr := cfg.ServiceClusterIPRange
	if cidr == "" {
		cidr = "10.0.0.0/24"
	}
	a = append(a, "--service-cluster-ip-range="+cidr)
	if cfg.EtcdCAFile != "" {
		a = append(a, "--etcd-cafile="+cfg.EtcdCAFile)
	}
	if cfg.EtcdCertFile != "" {
		a = append(a, "--etcd-certfile="+cfg.EtcdCertFile, "--etcd-keyfile="+cfg.EtcdKeyFile)
	}
	if cfg.EtcdPrefix != "" {
		a = append(a, "--etcd-prefix="+cfg.EtcdPrefix)
	}
	switch {
	case cfg.EtcdCompactionInterval > 0:
		a = append(a, "--etcd-compaction-interval="+cfg.EtcdCompactionInterval.String())
	case cfg.EtcdCompactionInterval < 0:
		a = append(a, "--etcd-compaction-interval=0")
	}
	if cfg.EventTTL > 0 {
		a = append(a, "--event-ttl="+cfg.EventTTL.String())
	}
	if cfg.DisableWatchCache {
		a = append(a, "--watch-cache=false")
	}
	switch {
	case cfg.DefaultWatchCacheSize > 0:
		a = append(a, "--default-watch-cache-size="+strconv.Itoa(cfg.DefaultWatchCacheSize))
	case cfg.DefaultWatchCacheSize < 0:
		a = append(a, "--default-watch-cache-size=0")
	}
	if cfg.FeatureGates != "" {
		a = append(a, "--feature-gates="+cfg.FeatureGates)
	}
	return append(a, cfg.ExtraArgs...)
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before kube-apiserver binds it; startServer retries then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start launches the process with its output in LogPath.
func (s *Server) start(bin string, args []string) error {
	p, err := StartProcess(s.Name, bin, args, etcdproc.CleanEnv(), s.Dir, s.LogPath, s.stop)
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

// waitReady polls /readyz with the admin token until it answers 200, the
// process exits or ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	client, err := s.httpClient()
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+s.pki.Token)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-s.proc.Done():
			return fmt.Errorf("kube-apiserver exited before it was ready (%s)", s.proc.ExitStatus())
		case <-ctx.Done():
			return fmt.Errorf("not ready (/readyz: %s): %w", last, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// httpClient trusts the PKI's CA and nothing else.
func (s *Server) httpClient() (*http.Client, error) {
	ca, err := os.ReadFile(s.pki.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s holds no certificate", s.pki.CA)
	}
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}, nil
}

// logTail returns the last n lines of the server's log joined with " | ".
func (s *Server) logTail(n int) string { return s.proc.LogTail(n) }

// PID returns the server's process ID, 0 when it has exited.
func (s *Server) PID() int { return s.proc.PID() }

// Process returns the server's process.
func (s *Server) Process() *Process { return s.proc }

// Stop ends the server by its PID: SIGTERM, then SIGKILL when it has not
// exited after Config.StopTimeout; it waits for the exit. Safe to call
// twice.
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.Stop()
	}
}

// Restart stops the server by its PID (Process.Restart), starts it again
// on the same port with the same flags, and waits until /readyz answers
// 200, the process exits or ctx ends; the error then quotes its log.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.proc.Restart(); err != nil {
		return err
	}
	if err := s.waitReady(ctx); err != nil {
		return fmt.Errorf("%s: %w (log %s: %s)", s.Name, err, s.LogPath, s.logTail(8))
	}
	return nil
}

// RESTConfig returns a client-go configuration for this server with the
// admin token, trusting the PKI's CA. Each call returns a new value the
// caller may change (QPS, Burst, ContentType, ...).
func (s *Server) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     s.pki.Token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: s.pki.CA},
	}
}

// RESTConfig returns the first server's RESTConfig.
func (c *Cluster) RESTConfig() *rest.Config { return c.Servers[0].RESTConfig() }

// Stop stops every server together and waits for them. Safe to call twice.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, s := range c.Servers {
		wg.Add(1)
		go func() { defer wg.Done(); s.Stop() }()
	}
	wg.Wait()
}
