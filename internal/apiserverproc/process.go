package apiserverproc

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/kubestore/etcdkit/internal/etcdproc"
)

// Process is one control-plane process (a kube-apiserver here, the
// controller-manager, scheduler and kwok in internal/controlplane): its
// output goes to a log file, and it is only ever signalled by its PID.
// Restart runs it again with the same command line; the methods always
// speak of its current run.
type Process struct {
	// Name names the process in errors: "apiserver0", "kube-scheduler".
	Name string
	// LogPath receives the process's stdout and stderr (every run's,
	// appended).
	LogPath string

	bin, dir   string
	args, env  []string
	stop       time.Duration
	mu         sync.Mutex // guards run, stopped and exits
	run        *run
	stopped    bool       // Stop was called: no supervisor restarts it
	exits      []Exit     // the runs that ended on their own
	restarting sync.Mutex // one Restart (or supervisor's restart) at a time
}

// Exit is a run of a Process that ended without Stop or Restart asking.
type Exit struct {
	At     time.Time
	Status string // ProcessState: "exit status 1", "signal: killed"
}

// run is one execution of a Process.
type run struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// ChildAttr is how lwbench starts the servers it runs (kube-apiserver,
// the control plane, KWOK, etcd members): in a process group of its own,
// so that a ^C to the caller does not reach it first and the caller's
// Stop decides the order, and killed (SIGKILL) when the caller dies
// without stopping it (PR_SET_PDEATHSIG, prctl(2)): a caller killed by
// SIGKILL, or by SIGPIPE when whoever read its output went away, leaves
// no server holding ports, memory and CPU behind. Linux sends the signal
// when the thread that started the child exits; Go ends a thread only
// when a goroutine locked to it (runtime.LockOSThread) returns, which
// nothing that starts these processes does.
func ChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// StartProcess starts bin with args in dir and environment env, its
// output appended to logPath, with ChildAttr (a process group of its own;
// killed when the caller dies). Stop sends SIGTERM and, after
// stopTimeout, SIGKILL.
func StartProcess(name, bin string, args, env []string, dir, logPath string, stopTimeout time.Duration) (*Process, error) {
	p := &Process{Name: name, LogPath: logPath, bin: bin, dir: dir, args: args, env: env, stop: stopTimeout}
	r, err := p.start()
	if err != nil {
		return nil, err
	}
	p.run = r
	return p, nil
}

// start starts one run of the process.
func (p *Process) start() (*run, error) {
	log, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = ChildAttr()
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", p.Name, err)
	}
	r := &run{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		log.Close()
		close(r.done)
	}()
	return r, nil
}

// current returns the current run.
func (p *Process) current() *run {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.run
}

// Restart stops the current run (Stop) and starts the process again with
// the same binary, arguments, environment and directory; it does not wait
// for the new run to be ready (the caller knows what ready means). After
// it returns, PID, Done and Stop speak of the new run; a Stop racing with
// Restart may leave the new run running, so callers do not mix them.
func (p *Process) Restart() error {
	p.restarting.Lock()
	defer p.restarting.Unlock()
	p.stopRun(p.current())
	r, err := p.start()
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.run = r
	p.mu.Unlock()
	return nil
}

// Done is closed when the current run has exited.
func (p *Process) Done() <-chan struct{} { return p.current().done }

// Exited returns an error saying how the process ended and quoting the last
// lines of its log, or nil while it runs.
func (p *Process) Exited() error {
	select {
	case <-p.Done():
		return fmt.Errorf("%s exited (%s); log %s: %s", p.Name, p.ExitStatus(), p.LogPath, p.LogTail(8))
	default:
		return nil
	}
}

// ExitStatus says how the process ended ("exit status 3", "signal:
// killed"), or "" while it runs.
func (p *Process) ExitStatus() string {
	r := p.current()
	select {
	case <-r.done:
		return r.cmd.ProcessState.String()
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

// PID returns the process ID of the current run, 0 once it has exited.
func (p *Process) PID() int {
	r := p.current()
	select {
	case <-r.done:
		return 0
	default:
		return r.cmd.Process.Pid
	}
}

// Stop ends the current run by its PID: SIGTERM, then SIGKILL when it has
// not exited after the stop timeout; it waits for the exit. Safe to call
// twice.
func (p *Process) Stop() {
	p.mu.Lock()
	p.stopped = true
	r := p.run
	p.mu.Unlock()
	p.stopRun(r)
}

// stopRun ends run r as Stop does.
func (p *Process) stopRun(r *run) {
	select {
	case <-r.done:
		return
	default:
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(p.stop):
		r.cmd.Process.Kill()
		<-r.done
	}
}

// Supervise restarts the process whenever a run ends without Stop or
// Restart asking, after backoff, doubled after each restart up to 5
// minutes: as the kubelet restarts a static pod's container
// (CrashLoopBackOff, pkg/kubelet/kubelet.go MaxContainerBackOff 300 s,
// initial 10 s). kube-controller-manager and kube-scheduler exit when they
// lose their leader Lease (k8s.io/client-go/tools/leaderelection
// OnStoppedLeading: klog.Fatal in both), for instance while kube-apiserver
// restarts. logf reports each exit. It returns at once; the supervision
// ends with Stop.
func (p *Process) Supervise(backoff time.Duration, logf func(string, ...any)) {
	go func() {
		for {
			r := p.current()
			<-r.done
			p.restarting.Lock()
			p.mu.Lock()
			stopped, replaced := p.stopped, p.run != r
			if !stopped && !replaced {
				p.exits = append(p.exits, Exit{At: time.Now(), Status: r.cmd.ProcessState.String()})
			}
			p.mu.Unlock()
			if stopped {
				p.restarting.Unlock()
				return
			}
			if replaced {
				p.restarting.Unlock()
				continue
			}
			logf("%s exited (%s); starting it again in %v (log %s: %s)", p.Name, r.cmd.ProcessState, backoff, p.LogPath, p.LogTail(3))
			time.Sleep(backoff)
			backoff = min(2*backoff, 5*time.Minute)
			p.mu.Lock()
			stopped = p.stopped
			p.mu.Unlock()
			if !stopped {
				if nr, err := p.start(); err != nil {
					logf("%s: %v", p.Name, err)
				} else {
					p.mu.Lock()
					p.run = nr
					p.mu.Unlock()
				}
			}
			p.restarting.Unlock()
			if stopped {
				return
			}
		}
	}()
}

// Exits returns the runs that ended without Stop or Restart asking, in
// order.
func (p *Process) Exits() []Exit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.exits)
}
