package apiserverproc

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/kubestore/etcdkit/internal/etcdproc"
)

// Process is one control-plane process (a kube-apiserver here, the
// controller-manager, scheduler and kwok in internal/controlplane): its
// output goes to a log file, and it is only ever signalled by its PID.
type Process struct {
	// Name names the process in errors: "apiserver0", "kube-scheduler".
	Name string
	// LogPath receives the process's stdout and stderr.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	stop time.Duration
}

// StartProcess starts bin with args in dir and environment env, its
// output appended to logPath, in a process group of its own so that a ^C
// to the caller does not reach it first. Stop sends SIGTERM and, after
// stopTimeout, SIGKILL.
func StartProcess(name, bin string, args, env []string, dir, logPath string, stopTimeout time.Duration) (*Process, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{}), stop: stopTimeout}
	go func() {
		cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited returns an error saying how the process ended and quoting the last
// lines of its log, or nil while it runs.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%s); log %s: %s", p.Name, p.ExitStatus(), p.LogPath, p.LogTail(8))
	default:
		return nil
	}
}

// ExitStatus says how the process ended ("exit status 3", "signal:
// killed"), or "" while it runs.
func (p *Process) ExitStatus() string {
	select {
	case <-p.done:
		return p.cmd.ProcessState.String()
	default:
		return ""
	}
}

// LogTail returns the last n lines of the process's log joined with " | ".
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return err.Error()
	}
	return etcdproc.LastLines(string(b), n)
}

// PID returns the process ID, 0 once the process has exited.
func (p *Process) PID() int {
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// Stop ends the process by its PID: SIGTERM, then SIGKILL when it has not
// exited after the stop timeout; it waits for the exit. Safe to call
// twice.
func (p *Process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(p.stop):
		p.cmd.Process.Kill()
		<-p.done
	}
}
