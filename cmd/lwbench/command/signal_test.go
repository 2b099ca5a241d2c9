package command

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/runtemp"
)

// lwbenchProcess is lwbench run as a process of its own (TestMain), with
// its stderr read line by line as it comes.
type lwbenchProcess struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	mu     sync.Mutex
	stderr []string
	lines  chan string
	done   chan struct{} // closed when stderr ends
}

// startLwbench starts lwbench with args, its temporary directory tmp;
// env adds to its environment.
func startLwbench(t *testing.T, tmp string, env []string, args ...string) *lwbenchProcess {
	t.Helper()
	p := &lwbenchProcess{lines: make(chan string, 1024), done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(append(os.Environ(), subprocessEnv+"=1", "TMPDIR="+tmp), env...)
	p.cmd.Stdout = &p.stdout
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr = append(p.stderr, sc.Text())
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	return p
}

// waitFor returns the first stderr line from now on that contains s, or
// fails the test after timeout.
func (p *lwbenchProcess) waitFor(t *testing.T, s string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l := <-p.lines:
			if strings.Contains(l, s) {
				return l
			}
		case <-p.done:
			t.Fatalf("lwbench ended before printing %q; stderr:\n%s", s, p.stderrText())
		case <-deadline:
			t.Fatalf("no %q on stderr after %v; stderr:\n%s", s, timeout, p.stderrText())
		}
	}
}

func (p *lwbenchProcess) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.stderr, "\n")
}

// wait waits for the process and returns its exit code.
func (p *lwbenchProcess) wait(t *testing.T) int {
	t.Helper()
	<-p.done
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// dataDirs returns the lwbench data directories under tmp.
func dataDirs(t *testing.T, tmp string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(tmp, runtemp.EtcdPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// TestSecondInterruptStopsAtOnce interrupts `lwbench run` during its
// writes, then again while it collects what it measured (held there, as
// a slow collection is): the second SIGINT must end it within 2 s, with
// exit code 130, no result, a last line that says what was not
// collected, and its temporary data directory removed. Before, the
// second signal was lost and the collection ran its course (up to 20 s).
func TestSecondInterruptStopsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	tmp := t.TempDir()
	p := startLwbench(t, tmp, []string{holdConfirmEnv + "=1"}, "run", "--objects", "50", "--watchers", "2", "--duration", "60s",
		"--write-rate", "100", "--no-defrag", "--unsafe-no-fsync", "-w", "json")
	p.waitFor(t, "writing ", 60*time.Second)
	time.Sleep(time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, holdConfirmLine, 20*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	second := time.Now()
	code := p.wait(t)
	if d := time.Since(second); d > 2*time.Second {
		t.Errorf("lwbench ended %v after the second SIGINT, want within 2s", d.Round(time.Millisecond))
	}
	stderr := p.stderrText()
	if code != cli.ExitInterrupted {
		t.Errorf("got exit code %d, want %d; stderr:\n%s", code, cli.ExitInterrupted, stderr)
	}
	last := stderr[strings.LastIndex(stderr, "\n")+1:]
	t.Logf("last line: %s", last)
	for _, want := range []string{"lwbench: interrupted: ", "not collected: the informers' confirmation of the final revision", "no result"} {
		if !strings.Contains(last, want) {
			t.Errorf("got last stderr line %q, want it to contain %q", last, want)
		}
	}
	if p.stdout.Len() != 0 {
		t.Errorf("got a result on stdout after a collection given up: %q", p.stdout.String())
	}
	if left := dataDirs(t, tmp); len(left) != 0 {
		t.Errorf("data directories left behind: %v", left)
	}
}

// TestKilledRunDataDirRemovedByNextRun kills `lwbench run` (SIGKILL: it
// cannot remove its temporary data directory) and checks that the next
// run removes that directory, says so, and removes its own at its end.
// Before, every killed run left its member's data (about 138 MB after a
// default run) in /tmp for good.
func TestKilledRunDataDirRemovedByNextRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd; skipped under -short")
	}
	tmp := t.TempDir()
	p := startLwbench(t, tmp, nil, "run", "--objects", "50", "--watchers", "2", "--duration", "60s",
		"--write-rate", "100", "--no-defrag", "--unsafe-no-fsync", "-w", "json")
	p.waitFor(t, "writing ", 60*time.Second)
	left := dataDirs(t, tmp)
	if len(left) != 1 {
		t.Fatalf("got data directories %v during the run, want one", left)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	if _, err := os.Stat(left[0]); err != nil {
		t.Fatalf("the killed run's data directory: %v; want it left behind by SIGKILL", err)
	}

	next := startLwbench(t, tmp, nil, "run", "--objects", "10", "--watchers", "1", "--duration", "1s",
		"--write-rate", "20", "--no-defrag", "--unsafe-no-fsync", "-w", "json")
	if code := next.wait(t); code != 0 {
		t.Fatalf("next run: exit code %d; stderr:\n%s", code, next.stderrText())
	}
	if want := "removed " + left[0]; !strings.Contains(next.stderrText(), want) {
		t.Errorf("next run's stderr does not say %q:\n%s", want, next.stderrText())
	}
	if dirs := dataDirs(t, tmp); len(dirs) != 0 {
		t.Errorf("data directories left after the next run: %v", dirs)
	}
}
