package etcdproc

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Config describes a cluster to start.
type Config struct {
	// BinDir holds the etcd binary (see Binaries).
	BinDir string
	// Members is the cluster size; 0 means 1.
	Members int
	// Dir is the parent of the members' data directories and logs; it must
	// exist and be writable.
	Dir string
	// TLS, when set, serves clients over https with these files and
	// requires client certificates if TLS.ClientCertAuth. Peers always use
	// plain http on loopback.
	TLS *TLSFiles
	// UnsafeNoFsync passes --unsafe-no-fsync (etcd 3.5+): tests use it,
	// measurements must not.
	UnsafeNoFsync bool
	// ExtraArgs are appended to every member's command line.
	ExtraArgs []string
	// StartTimeout bounds the wait for a leader; 0 means 60 seconds.
	StartTimeout time.Duration
	// Netns runs every member in a network namespace of its own, on a
	// private bridge, so that Member.Partition can cut it off (see
	// netns.go). Start fails with ErrNoNetns where namespaces are not
	// allowed. With TLS, each member serves a certificate for its own
	// address, signed with TLS.CAKey.
	Netns bool
}

// Member is one etcd process of a Cluster.
type Member struct {
	// Name is etcd's --name: m0, m1, ... in the order of Cluster.Members.
	Name string
	// DataDir is the member's --data-dir; its database is
	// DataDir/member/snap/db.
	DataDir string
	// ClientURL and PeerURL are the member's client and peer URLs
	// (http or https, a loopback or network-namespace address).
	ClientURL string
	PeerURL   string
	// LogPath receives the process's stdout and stderr.
	LogPath string

	args   []string
	bin    string
	netns  *netnsLayout
	netIdx int

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when the current process has exited
	killed bool          // set by Kill, cleared by a restart
}

// Cluster is a running set of members started by Start.
type Cluster struct {
	// Members are the cluster's members in start order (m0, m1, ...);
	// faults are methods of a Member.
	Members []*Member
	cfg     Config
	netns   *netnsLayout
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before etcd binds it; Start retries with new ports then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts cfg.Members etcd processes forming one new cluster on
// loopback and waits until it has a leader and serves requests. On error
// every process it started is stopped.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Members == 0 {
		cfg.Members = 1
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		c, err := start(ctx, cfg, attempt)
		if err == nil {
			return c, nil
		}
		lastErr = err
		if ctx.Err() != nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

func start(ctx context.Context, cfg Config, attempt int) (*Cluster, error) {
	c := &Cluster{cfg: cfg}
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	var iss issuer
	if cfg.Netns {
		if cfg.TLS != nil {
			// The members' addresses are chosen below, after the
			// certificates: each member gets one of its own from the CA.
			var err error
			if iss, err = loadIssuer(*cfg.TLS); err != nil {
				return nil, fmt.Errorf("TLS with network namespaces: %w", err)
			}
		}
		l, err := setupNetns(cfg.Members)
		if err != nil {
			return nil, err
		}
		c.netns = l
	}
	var initial []string
	for i := range cfg.Members {
		host, cp, pp := "127.0.0.1", 2379, 2380
		if c.netns != nil {
			// Each member has a namespace, an address and ports of its own.
			host = c.netns.ip[i]
		} else {
			var err error
			if cp, err = freePort(); err != nil {
				return nil, err
			}
			if pp, err = freePort(); err != nil {
				return nil, err
			}
		}
		name := fmt.Sprintf("m%d", i)
		m := &Member{
			Name:      name,
			DataDir:   filepath.Join(cfg.Dir, fmt.Sprintf("%s-%d.etcd", name, attempt)),
			ClientURL: fmt.Sprintf("%s://%s:%d", scheme, host, cp),
			PeerURL:   fmt.Sprintf("http://%s:%d", host, pp),
			LogPath:   filepath.Join(cfg.Dir, fmt.Sprintf("%s-%d.log", name, attempt)),
			bin:       filepath.Join(cfg.BinDir, "etcd"),
			netns:     c.netns,
			netIdx:    i,
		}
		c.Members = append(c.Members, m)
		initial = append(initial, name+"="+m.PeerURL)
	}
	token := fmt.Sprintf("etcdkit-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, m := range c.Members {
		m.args = []string{
			"--name", m.Name,
			"--data-dir", m.DataDir,
			"--listen-client-urls", m.ClientURL,
			"--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL,
			"--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--log-level", "warn",
		}
		if cfg.UnsafeNoFsync {
			m.args = append(m.args, "--unsafe-no-fsync")
		}
		if t := cfg.TLS; t != nil {
			cert, key := t.ServerCert, t.ServerKey
			if c.netns != nil {
				cert, key = filepath.Join(cfg.Dir, m.Name+"-server.crt"), filepath.Join(cfg.Dir, m.Name+"-server.key")
				ip := net.ParseIP(c.netns.ip[m.netIdx])
				if err := iss.leaf(int64(100+m.netIdx), ip.String(), x509.ExtKeyUsageServerAuth, []net.IP{ip}, cert, key); err != nil {
					c.Stop()
					return nil, fmt.Errorf("certificate of %s: %w", m.Name, err)
				}
			}
			m.args = append(m.args, "--cert-file", cert, "--key-file", key, "--trusted-ca-file", t.CA)
			if t.ClientCertAuth {
				m.args = append(m.args, "--client-cert-auth")
			}
		}
		m.args = append(m.args, cfg.ExtraArgs...)
		if err := m.start(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	if err := c.WaitReady(wctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// start launches the member's process with the same arguments as before,
// which on a restart reuses its data directory.
func (m *Member) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	log, err := os.OpenFile(m.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(m.bin, m.args...)
	if m.netns != nil {
		// ip netns exec enters the namespace and execs etcd: same PID.
		cmd = exec.Command("ip", append([]string{"netns", "exec", m.netns.ns[m.netIdx], m.bin}, m.args...)...)
	}
	cmd.Env = CleanEnv()
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so a ^C to the test does not reach it first
	// and Stop decides the order; killed if lwbench dies without stopping
	// it (the same attributes as apiserverproc.ChildAttr's).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", m.Name, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		log.Close()
		close(done)
	}()
	m.cmd, m.done, m.killed = cmd, done, false
	return nil
}

// DBPath returns the member's bbolt database file.
func (m *Member) DBPath() string { return filepath.Join(m.DataDir, "member", "snap", "db") }

// PID returns the member's current process ID, 0 when it is not running.
func (m *Member) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil || m.exited() {
		return 0
	}
	return m.cmd.Process.Pid
}

func (m *Member) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

func (m *Member) signal(sig syscall.Signal) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil || m.exited() {
		return fmt.Errorf("member %s is not running", m.Name)
	}
	return m.cmd.Process.Signal(sig)
}

// Kill ends the member with SIGKILL, as a crash would, and waits for the
// process to exit.
func (m *Member) Kill() error {
	if err := m.signal(syscall.SIGKILL); err != nil {
		return err
	}
	m.mu.Lock()
	m.killed = true
	done := m.done
	m.mu.Unlock()
	<-done
	return nil
}

// Restart starts the member again on its data directory and ports; the
// process must have exited (Kill). It does not wait for the member to
// rejoin; see Cluster.WaitReady.
func (m *Member) Restart() error {
	m.mu.Lock()
	running := m.cmd != nil && !m.exited()
	m.mu.Unlock()
	if running {
		return fmt.Errorf("member %s is still running", m.Name)
	}
	return m.start()
}

// Pause stops the process with SIGSTOP: it holds its connections open but
// answers nothing, like a member stuck on a disk or in a long GC. It
// returns once every thread of the process is stopped, since kill(2)
// returns before the signal takes effect and a thread still running may
// answer one more request; an error when they are not all stopped within
// pauseWait.
func (m *Member) Pause() error {
	if err := m.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	pid := m.PID()
	if pid == 0 {
		return fmt.Errorf("member %s exited while being paused", m.Name)
	}
	if err := waitStopped(pid, pauseWait); err != nil {
		return fmt.Errorf("pause %s: %w", m.Name, err)
	}
	return nil
}

// waitStopped polls every millisecond until every thread of process pid
// is stopped; an error after wait, or when /proc cannot be read.
func waitStopped(pid int, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		stopped, err := threadsStopped(pid)
		if err != nil {
			return err
		}
		if stopped {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("threads still running %v after SIGSTOP", wait)
		}
		time.Sleep(time.Millisecond)
	}
}

// pauseWait bounds how long Pause waits for the threads to stop.
const pauseWait = 5 * time.Second

// threadsStopped reports whether every thread of process pid is in the
// stopped state ('T' in the third field of /proc/<pid>/task/<tid>/stat,
// proc(5)). A thread that exits meanwhile counts as stopped.
func threadsStopped(pid int) (bool, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tids, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, tid := range tids {
		b, err := os.ReadFile(filepath.Join(dir, tid.Name(), "stat"))
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue
		}
		if err != nil {
			return false, err
		}
		// "tid (comm) S ...": comm may hold ')' itself, so the last one ends it.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			return false, fmt.Errorf("unexpected %s: %q", filepath.Join(dir, tid.Name(), "stat"), b)
		}
		if b[i+2] != 'T' {
			return false, nil
		}
	}
	return true, nil
}

// Resume continues a paused member with SIGCONT.
func (m *Member) Resume() error { return m.signal(syscall.SIGCONT) }

// stop ends the member: SIGCONT (a paused process cannot handle SIGTERM),
// SIGTERM, then SIGKILL after 10 seconds.
func (m *Member) stop() {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// Endpoints returns every member's client URL.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.ClientURL
	}
	return eps
}

// Stop ends every member it started, waits for them, and removes the
// network namespaces it created. Safe to call twice.
//
// A leader that receives SIGTERM first hands its leadership to a peer and
// waits for it, up to etcd's request timeout (7 s by default), which it
// runs into when that peer is stopping too. So Stop ends the leader alone,
// while its peers can still take over, as long as one member reports
// itself leader (at most once per member), then the rest together.
func (c *Cluster) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range c.Members {
		m, err := c.Leader(ctx)
		if err != nil {
			break
		}
		m.stop()
	}
	var wg sync.WaitGroup
	for _, m := range c.Members {
		wg.Add(1)
		go func() { defer wg.Done(); m.stop() }()
	}
	wg.Wait()
	if c.netns != nil {
		c.netns.teardown()
		c.netns = nil
	}
}

// Partition cuts the member off from its peers and clients by taking its
// link to the bridge down; the process keeps running. It needs a cluster
// started with Config.Netns.
func (m *Member) Partition() error {
	if m.netns == nil {
		return fmt.Errorf("member %s: partitions need a cluster started with Netns", m.Name)
	}
	return ipCmd("link", "set", m.netns.hostIf[m.netIdx], "down")
}

// Heal reconnects a partitioned member.
func (m *Member) Heal() error {
	if m.netns == nil {
		return fmt.Errorf("member %s: partitions need a cluster started with Netns", m.Name)
	}
	return ipCmd("link", "set", m.netns.hostIf[m.netIdx], "up")
}

// ClientConfig returns a client configuration for endpoints of this
// cluster, with the cluster's client TLS files when it serves TLS.
func (c *Cluster) ClientConfig(endpoints ...string) (clientv3.Config, error) {
	if len(endpoints) == 0 {
		endpoints = c.Endpoints()
	}
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if c.cfg.TLS != nil {
		tc, err := c.cfg.TLS.ClientTLS()
		if err != nil {
			return cfg, err
		}
		cfg.TLS = tc
	}
	return cfg, nil
}

// Client returns a new client of the cluster's members (see
// ClientConfig); the caller closes it.
func (c *Cluster) Client(endpoints ...string) (*clientv3.Client, error) {
	cfg, err := c.ClientConfig(endpoints...)
	if err != nil {
		return nil, err
	}
	return clientv3.New(cfg)
}

// WaitReady waits until every running member answers a Status call and
// the cluster has a leader, polling every 100 ms until ctx ends.
func (c *Cluster) WaitReady(ctx context.Context) error {
	cfg, err := c.ClientConfig()
	if err != nil {
		return err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return err
	}
	defer cli.Close()
	for {
		err := c.ready(ctx, cli)
		if err == nil {
			return nil
		}
		for _, m := range c.Members {
			if m.cmd != nil && m.exited() && !m.killedOnPurpose() {
				return fmt.Errorf("member %s exited during start-up: %s", m.Name, tail(m.LogPath))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not ready: %w (last: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// killedOnPurpose reports whether the member is down because Kill ended
// it; such a member does not fail WaitReady.
func (m *Member) killedOnPurpose() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.killed
}

func (c *Cluster) ready(ctx context.Context, cli *clientv3.Client) error {
	var leader uint64
	for _, m := range c.Members {
		if m.PID() == 0 {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(sctx, m.ClientURL)
		cancel()
		if err != nil {
			return fmt.Errorf("member %s: %w", m.Name, err)
		}
		if st.Leader == 0 {
			return fmt.Errorf("member %s has no leader", m.Name)
		}
		leader = st.Leader
	}
	if leader == 0 {
		return errors.New("no member running")
	}
	return nil
}

// Leader returns the member that currently leads, asking each running
// member for its status.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	cfg, err := c.ClientConfig()
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	for _, m := range c.Members {
		if m.PID() == 0 {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, m.ClientURL)
		cancel()
		if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
			return m, nil
		}
	}
	return nil, errors.New("no member reports itself leader")
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return LastLines(string(b), 3)
}
