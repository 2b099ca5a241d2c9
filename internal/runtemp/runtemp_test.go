package runtemp

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// deadPID returns the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	return cmd.Process.Pid
}

// TestRemoveStale: of the temporary data directories a killed run leaves
// (SIGKILL: nothing of lwbench runs to remove them), the next run removes
// those whose owner is dead, and keeps a live run's (this process's), one
// without an owner file (named), one whose pid was reused by a process
// started later (removed), and everything that is not an lwbench data
// directory: another name, a symlink to a directory, a file.
func TestRemoveStale(t *testing.T) {
	parent := t.TempDir()
	dead := deadPID(t)
	if _, err := processStart(os.Getpid()); err != nil {
		t.Skipf("no /proc: %v", err)
	}
	mk := func(name, owner string) string {
		dir := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(dir, "member", "snap"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "member", "snap", "db"), make([]byte, 4096), 0o600); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	live, err := New(parent, EtcdPrefix)
	if err != nil {
		t.Fatal(err)
	}
	type staleCase struct {
		name        string
		dir         string
		wantKept    bool
		wantFound   bool // reported (removed, or kept with a reason)
		wantRemoved bool
	}
	tests := []staleCase{
		{name: "killed run", dir: mk(EtcdPrefix+"111", fmt.Sprintf("pid=%d start=%s\n", dead, "12345")), wantFound: true, wantRemoved: true},
		{name: "pid reused by a later process", dir: mk(EtcdPrefix+"222", fmt.Sprintf("pid=%d start=%s\n", os.Getppid(), "1")), wantFound: true, wantRemoved: true},
		{name: "live run (this process)", dir: live, wantKept: true},
		{name: "live run, another pid", dir: mk(EtcdPrefix+"333", fmt.Sprintf("pid=%d start=\n", os.Getppid())), wantKept: true},
		{name: "no owner file", dir: mk(EtcdPrefix+"444", ""), wantKept: true, wantFound: true},
		{name: "unreadable owner", dir: mk(EtcdPrefix+"555", "pid=x\n"), wantKept: true, wantFound: true},
		{name: "not digits", dir: mk(EtcdPrefix+"mine", fmt.Sprintf("pid=%d start=1\n", dead)), wantKept: true},
		{name: "another name", dir: mk("etcd-666", fmt.Sprintf("pid=%d start=1\n", dead)), wantKept: true},
		{name: "killed run's kube-apiservers", dir: mk(APIServerPrefix+"999", fmt.Sprintf("pid=%d start=1\n", dead)), wantFound: true, wantRemoved: true},
	}
	// A symlink named like a data directory, to a directory with a dead
	// owner: neither it nor its target is touched.
	target := mk("elsewhere", fmt.Sprintf("pid=%d start=1\n", dead))
	link := filepath.Join(parent, EtcdPrefix+"777")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	tests = append(tests, staleCase{name: "symlink", dir: link, wantKept: true},
		staleCase{name: "symlink's target", dir: target, wantKept: true})
	// A dead owner's directory that a process still works in (a member
	// the killed run left running): kept, and named.
	busy := mk(EtcdPrefix+"888", fmt.Sprintf("pid=%d start=1\n", dead))
	member := exec.Command("sleep", "60")
	member.Dir = filepath.Join(busy, "member")
	if err := member.Start(); err != nil {
		t.Skipf("cannot run sleep: %v", err)
	}
	defer func() { member.Process.Kill(); member.Wait() }()
	tests = append(tests, staleCase{name: "in use by a process left running", dir: busy, wantKept: true, wantFound: true})

	found, err := RemoveStale(parent)
	if err != nil {
		t.Fatal(err)
	}
	byDir := map[string]Stale{}
	for _, s := range found {
		byDir[s.Dir] = s
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := os.Lstat(tt.dir)
			if kept := err == nil; kept != tt.wantKept {
				t.Errorf("%s kept: got %v, want %v", tt.dir, kept, tt.wantKept)
			}
			s, ok := byDir[tt.dir]
			if ok != tt.wantFound || s.Removed != tt.wantRemoved {
				t.Errorf("reported: got %v (%+v), want reported %v, removed %v", ok, s, tt.wantFound, tt.wantRemoved)
			}
			if ok && !s.Removed && s.Why == "" {
				t.Errorf("kept %s without saying why", tt.dir)
			}
			if tt.name == "in use by a process left running" && !strings.Contains(s.Why, fmt.Sprintf("pid %d (sleep)", member.Process.Pid)) {
				t.Errorf("got why %q, want it to name pid %d (sleep)", s.Why, member.Process.Pid)
			}
		})
	}
}

// TestNewOwner: a directory New makes names this process,
// and RemoveStale reads that back as a live owner.
func TestNewOwner(t *testing.T) {
	if _, err := New(t.TempDir(), "mine-"); err == nil {
		t.Error("New with a prefix RemoveStale does not know: got no error")
	}
	dir, err := New(t.TempDir(), EtcdPrefix)
	if err != nil {
		t.Fatal(err)
	}
	pid, _, err := readOwner(dir)
	if err != nil || pid != os.Getpid() {
		t.Fatalf("got owner pid %d (%v), want %d", pid, err, os.Getpid())
	}
	if alive, err := running(pid, ""); !alive || err != nil {
		t.Errorf("got running %v (%v), want true", alive, err)
	}
}
