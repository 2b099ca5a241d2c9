// Package etcdproc starts a real etcd binary for the scripts under scripts/:
// one member on free loopback ports with its own data directory, an
// environment without ETCD_* variables (etcd reads each as a flag), stopped
// by its PID.
package etcdproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Proc is a running etcd member started by Start.
type Proc struct {
	cmd *exec.Cmd
	// Endpoint is the member's client URL, http://127.0.0.1:PORT.
	Endpoint string
	// DataDir is the member's data directory; its bbolt file is
	// DataDir/member/snap/db.
	DataDir string
	done    chan error
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before etcd binds it; Start then fails and says so.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start runs binary (an etcd server) with dataDir and extra flags, logging
// to dataDir/../<base>.log, and waits up to a minute for it to answer.
func Start(ctx context.Context, binary, dataDir string, extra ...string) (*Proc, error) {
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", cport)
	peer := fmt.Sprintf("http://127.0.0.1:%d", pport)
	args := []string{
		"--name", "fixture",
		"--data-dir", dataDir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "fixture=" + peer,
		"--initial-cluster-state", "new",
		"--log-level", "warn",
	}
	args = append(args, extra...)
	logPath := strings.TrimSuffix(dataDir, "/") + ".log"
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	p := &Proc{cmd: cmd, Endpoint: client, DataDir: dataDir, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); logf.Close() }()
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := p.Client()
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err = c.Get(cctx, "health-probe")
			cancel()
			c.Close()
			if err == nil {
				return p, nil
			}
		}
		select {
		case err := <-p.done:
			return nil, fmt.Errorf("%s exited before serving (%v); see %s", binary, err, logPath)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("%s not serving after a minute; see %s", binary, logPath)
		}
	}
}

// Client returns a new client of the member; the caller closes it.
func (p *Proc) Client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{p.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// DBPath is the member's bbolt file.
func (p *Proc) DBPath() string { return filepath.Join(p.DataDir, "member", "snap", "db") }

// Stop sends SIGTERM to the member's PID, waits up to 30 seconds, then
// SIGKILL. It is safe to call twice.
func (p *Proc) Stop() {
	if p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd.Process = nil
}

// cleanEnv is this process's environment without ETCD_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") {
			env = append(env, kv)
		}
	}
	return env
}
