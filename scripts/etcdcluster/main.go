// Command etcdcluster starts and stops real etcd clusters on loopback for
// the scripts under scripts/ (and for a user who wants one by hand):
//
//	go run ./scripts/etcdcluster start --dir DIR [--version 3.7.3] [--members 3] [--tls] [--unsafe-no-fsync]
//	go run ./scripts/etcdcluster status --dir DIR
//	go run ./scripts/etcdcluster stop --dir DIR
//
// start builds the binaries if needed (scripts/build-etcd.sh), starts the
// members on free loopback ports with data directories and logs under DIR,
// waits for a leader, writes DIR/cluster.json (endpoints, PIDs, TLS files)
// and prints the client endpoints, comma-separated, on stdout. The members
// keep running after it exits. stop signals exactly the PIDs recorded in
// DIR/cluster.json, after checking that each still runs etcd with that data
// directory, so a reused PID is never touched.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kubestore/etcdkit/internal/etcdproc"
)

// state is DIR/cluster.json.
type state struct {
	Version   string             `json:"version"`
	Endpoints []string           `json:"endpoints"`
	Members   []memberState      `json:"members"`
	TLS       *etcdproc.TLSFiles `json:"tls,omitempty"`
	StartedAt time.Time          `json:"startedAt"`
}

type memberState struct {
	Name      string `json:"name"`
	PID       int    `json:"pid"`
	ClientURL string `json:"clientURL"`
	PeerURL   string `json:"peerURL"`
	DataDir   string `json:"dataDir"`
	Log       string `json:"log"`
}

func main() {
	if len(os.Args) < 2 {
		fail(2, "usage: etcdcluster start|status|stop --dir DIR [flags]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ContinueOnError)
	dir := fs.String("dir", "", "directory for data, logs and cluster.json (required)")
	version := fs.String("version", "3.7.3", "etcd release")
	members := fs.Int("members", 3, "cluster size")
	useTLS := fs.Bool("tls", false, "serve clients over TLS with a generated CA and require client certificates")
	noFsync := fs.Bool("unsafe-no-fsync", false, "run members without fsync")
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	if *dir == "" {
		fail(2, "--dir is required")
	}
	var err error
	switch os.Args[1] {
	case "start":
		err = start(*dir, *version, *members, *useTLS, *noFsync)
	case "status":
		err = status(*dir)
	case "stop":
		err = stop(*dir)
	default:
		fail(2, fmt.Sprintf("unknown command %q: want start, status or stop", os.Args[1]))
	}
	if err != nil {
		fail(1, err.Error())
	}
}

func fail(code int, msg string) {
	fmt.Fprintln(os.Stderr, "etcdcluster: "+msg)
	os.Exit(code)
}

func statePath(dir string) string { return filepath.Join(dir, "cluster.json") }

func start(dir, version string, members int, useTLS, noFsync bool) error {
	if _, err := os.Stat(statePath(dir)); err == nil {
		return fmt.Errorf("%s exists: a cluster may be running there; stop it first", statePath(dir))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bin, err := etcdproc.Binaries(context.Background(), version, os.Stderr)
	if err != nil {
		return err
	}
	cfg := etcdproc.Config{BinDir: bin, Members: members, Dir: dir, UnsafeNoFsync: noFsync}
	if useTLS {
		files, err := etcdproc.GenerateTLS(dir, "root")
		if err != nil {
			return err
		}
		files.ClientCertAuth = true
		cfg.TLS = &files
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := etcdproc.Start(ctx, cfg)
	if err != nil {
		return err
	}
	st := state{Version: version, Endpoints: c.Endpoints(), TLS: cfg.TLS, StartedAt: time.Now().UTC()}
	for _, m := range c.Members {
		st.Members = append(st.Members, memberState{Name: m.Name, PID: m.PID(), ClientURL: m.ClientURL, PeerURL: m.PeerURL, DataDir: m.DataDir, Log: m.LogPath})
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		c.Stop()
		return err
	}
	if err := os.WriteFile(statePath(dir), append(b, '\n'), 0o644); err != nil {
		c.Stop()
		return err
	}
	fmt.Println(strings.Join(st.Endpoints, ","))
	return nil
}

func load(dir string) (state, error) {
	var st state
	b, err := os.ReadFile(statePath(dir))
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// ours reports whether pid still runs etcd on the member's data directory.
func ours(m memberState) bool {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(m.PID), "cmdline"))
	if err != nil {
		return false
	}
	args := strings.Split(string(cmdline), "\x00")
	return len(args) > 0 && filepath.Base(args[0]) == "etcd" && strings.Contains(string(cmdline), m.DataDir)
}

func status(dir string) error {
	st, err := load(dir)
	if err != nil {
		return err
	}
	for _, m := range st.Members {
		state := "stopped"
		if ours(m) {
			state = "running"
		}
		fmt.Printf("%s\tpid %d\t%s\t%s\n", m.Name, m.PID, m.ClientURL, state)
	}
	return nil
}

func stop(dir string) error {
	st, err := load(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range st.Members {
		if !ours(m) {
			continue
		}
		syscall.Kill(m.PID, syscall.SIGCONT)
		if err := syscall.Kill(m.PID, syscall.SIGTERM); err != nil {
			errs = append(errs, fmt.Errorf("%s (pid %d): %w", m.Name, m.PID, err))
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, m := range st.Members {
		for ours(m) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if ours(m) {
			syscall.Kill(m.PID, syscall.SIGKILL)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.Remove(statePath(dir))
}
