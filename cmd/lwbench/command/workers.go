package command

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/runtemp"
	"github.com/kubestore/etcdkit/pkg/barrier"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/shard"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// maxWorkers bounds --workers: each is a process with its own
// connections, informers and writers.
const maxWorkers = 64

// validateWorkers checks --workers: the etcd-direct model, or client-go
// through kube-apiservers the coordinator starts (--kube-apiserver) or a
// cluster's (--kubeconfig); a whole cluster's load (--nodes, at least a
// node per worker), modelled (--cluster-model) or through the control
// plane the coordinator starts, without its experiments; and a load the
// shards can divide (watchload.Options.Validate with the last shard and a
// barrier).
func (o *runOptions) validateWorkers() error {
	if o.workers == 0 {
		return nil
	}
	switch {
	case o.workers < 0 || o.workers > maxWorkers:
		return cli.FlagErrorf("--workers %d: want 1 to %d", o.workers, maxWorkers)
	case o.cluster.enabled() && o.workers > o.cluster.nodes:
		return cli.FlagErrorf("--workers %d with --nodes %d: each worker drives a block of the nodes and needs at least one", o.workers, o.cluster.nodes)
	case o.fault != "":
		return cli.FlagErrorf("--workers cannot be used with --fault: the workers would each need the cluster's members")
	case o.cluster.enabled() && !o.cluster.modelled():
		for _, name := range []string{"db-size", "defrag-at", "restart", "restart-at", "events-etcd"} {
			if o.changed(name) {
				return cli.FlagErrorf("--workers cannot be used with --%s: a cluster's experiments are not divided into shards", name)
			}
		}
	case o.snapshotPath != "":
		return cli.FlagErrorf("--workers cannot be used with --snapshot yet")
	}
	l := o.load
	l.Shard, l.Barrier = shard.Shard{Index: o.workers - 1, Count: o.workers}, pendingBarrier{}
	return flagErrors(o.flags, l.Validate())
}

// workersNotPassed are run's flags a coordinator keeps to itself: the
// target it opens (its workers get --endpoints) and its own output.
var workersNotPassed = map[string]bool{
	"workers": true, "write-out": true, "interval-csv": true, "benchstat": true,
	"data-dir": true, "unsafe-no-fsync": true, "cluster-size": true, "etcd-version": true, "netns": true,
	"db-size": true,
}

// coordinatorKubeFlags are the flags of `lwbench run --workers N
// --kube-apiserver` that shape the kube-apiservers the coordinator starts:
// its own, while its workers reach them with --kubeconfig, which refuses
// them (kubeconfigConflicts).
var coordinatorKubeFlags = map[string]bool{
	"kube-apiserver": true, "apiservers": true, "watch-cache": true, "apiserver-feature-gates": true, "apiserver-arg": true,
	"count-etcd": true, "allow-maintenance": true, "allow-compaction": true, "allow-defrag": true, "reuse-prefix": true,
}

// workerAPI is how the workers of `lwbench run --workers N
// --kube-apiserver` reach the kube-apiservers the coordinator started.
type workerAPI struct {
	kubeconfig string        // the file the coordinator wrote (writeKubeconfig)
	interval   time.Duration // their --etcd-compaction-interval (0: kube-apiserver's 5m, negative: off)
}

// workerArgs returns the arguments of worker i of n: `worker`, the
// shard, the barrier, the target and every run flag the user gave
// (a slice flag as one comma-separated value). With api (the coordinator
// started kube-apiservers) the workers drive those with --kubeconfig as
// kube-apiservers of the coordinator's (--apiservers-owned), told their
// compaction interval unless the user gave it, and the coordinator's
// kube-apiserver flags stay its own.
func workerArgs(fs *pflag.FlagSet, i, n int, key string, endpoints []string, owned bool, prefix string, api *workerAPI) []string {
	args := []string{"worker", "--index", strconv.Itoa(i), "--shards", strconv.Itoa(n), "--barrier-etcd-key", key, "-w", "json", "--prefix", prefix}
	if owned {
		args = append(args, "--endpoints", strings.Join(endpoints, ","), "--target-owned")
	}
	if api != nil {
		args = append(args, "--kubeconfig", api.kubeconfig, "--apiservers-owned")
		if !fs.Changed("compaction-interval") && api.interval > 0 {
			args = append(args, "--compaction-interval", api.interval.String())
		}
	}
	return append(args, passedFlags(fs, func(name string) bool {
		return workersNotPassed[name] || name == "prefix" || (owned && name == "endpoints") || (api != nil && coordinatorKubeFlags[name])
	})...)
}

// passedFlags returns the flags set on fs, in fs's order, as arguments
// "--NAME=VALUE" of a worker process (a slice's values joined by commas,
// as pflag parses them back), but those skip names.
func passedFlags(fs *pflag.FlagSet, skip func(name string) bool) []string {
	var args []string
	fs.Visit(func(f *pflag.Flag) {
		if skip(f.Name) {
			return
		}
		v := f.Value.String()
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			v = strings.Join(sv.GetSlice(), ",")
		}
		args = append(args, "--"+f.Name+"="+v)
	})
	return args
}

// runWorkers runs `lwbench run --workers N`: it opens the target as run
// does (the embedded member by default), starts N `lwbench worker`
// processes of this executable on it, one shard each, meeting at a
// barrier under a fresh etcd key, waits for them, and prints their
// results merged exactly (report.MergeRuns). The coordinator holds no
// load: its own figures are the etcd members' /metrics per phase. SIGINT
// is passed on to the workers, which return what they measured; a second
// one kills them.
//
// With --kube-apiserver the coordinator also starts the kube-apiservers
// in front of the target as run does (startKubeStack), writes a
// kubeconfig reaching them for the workers, each then a client-go
// process (--kubeconfig), and reports the apiservers beside the merged
// figures: their description, their own /metrics per phase of the load
// and, with --count-etcd, what they asked etcd by phase of the load. With --kubeconfig the workers drive that
// cluster, each creating and deleting its own namespaces.
func runWorkers(ctx context.Context, o *runOptions, out, errOut io.Writer) error {
	if err := o.out.prepare(); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--workers: find lwbench's executable: %w", err)
	}
	con := newConsole(errOut)
	defer con.Done()
	var (
		target  watchload.Target
		release func()
		stack   *kubeload.Stack // the kube-apiservers the coordinator started; nil: none
	)
	if o.kube.enabled() {
		var st kubeload.Stack
		st, release, err = startKubeStack(ctx, o, con)
		target, stack = st.Etcd, &st
	} else {
		target, release, err = o.target.open(ctx, con.Logf)
	}
	defer release()
	if err != nil {
		return err
	}
	admin, err := o.target.dial(ctx, target.Endpoints)
	if err != nil {
		return err
	}
	defer admin.Close()
	key := newBarrierKey()
	defer deleteBarrierKey(ctx, admin, key, con)
	dir, err := runtemp.New("", runtemp.WorkersPrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	var api *workerAPI
	if stack != nil {
		api = &workerAPI{kubeconfig: filepath.Join(dir, "kubeconfig"), interval: o.load.Defaults().CompactionInterval}
		if err := writeKubeconfig(api.kubeconfig, stack.RESTConfig); err != nil {
			return fmt.Errorf("the workers' kubeconfig: %w", err)
		}
		if stack.Counter != nil {
			stack.Counter.Reset()
		}
	}

	n := o.workers
	con.Logf("dividing the load among %d worker processes (barrier %s on %s)", n, key, strings.Join(target.Endpoints, ","))
	procs, stop, err := startWorkerProcs(ctx, exe, dir, n, func(i int) []string {
		return workerArgs(o.flags, i, n, key, target.Endpoints, !o.target.external(), o.load.Prefix, api)
	}, admin, key, con)
	if err != nil {
		return err
	}
	defer stop()
	// The servers' own figures per phase of the load, the phases
	// followed on the barrier, beside the workers' merged client
	// figures: every etcd member's /metrics and, with --kube-apiserver,
	// every kube-apiserver's (as the admin user it started them with).
	var tlsCfg *tls.Config
	if cfg, err := o.target.clientConfig(target.Endpoints[:1]); err == nil {
		tlsCfg = cfg.TLS
	}
	sc := phaseScrapeConfig{
		follow: func(ctx context.Context, onMet func(string, time.Time)) error {
			return barrier.FollowEtcd(ctx, admin, key, n, onMet)
		},
		endpoints: target.Endpoints, tls: tlsCfg, logf: con.Logf,
	}
	if stack != nil {
		sc.apiservers = stack.APIServers
		if stack.Counter != nil {
			sc.onPhase = stack.Counter.SetPhase
		}
	}
	scrape, err := startPhaseScrape(ctx, sc)
	if err != nil {
		for _, p := range procs {
			p.cmd.Process.Kill()
			<-p.exited
		}
		return err
	}
	results, failures := waitWorkerProcs(procs, readWorkerResult)
	servers, ferr := scrape.Finish(ctx)
	if ferr != nil && !errors.Is(ferr, barrier.ErrAborted) {
		con.Logf("follow the workers' barrier: %v", ferr)
	}
	con.Done()
	if len(failures) > 0 {
		return errors.Join(failures...)
	}
	merged, err := report.MergeRuns(results)
	if err != nil {
		return fmt.Errorf("merge the workers' results: %w", err)
	}
	merged.EtcdMetrics = servers.EtcdMetrics
	if stack != nil {
		reportStack(merged, results, stack)
		merged.APIServers, merged.APIServerMetrics = servers.APIServers, servers.APIServerMetrics
	}
	// The workers reached the coordinator's etcd as --endpoints; it is
	// the member the coordinator started (or the --endpoints it was given).
	merged.Target.Embedded, merged.Target.Managed = target.Embedded, !o.target.external()
	var interrupted error
	if merged.Interrupted {
		interrupted = fmt.Errorf("the workers were interrupted: the result holds what they measured until then: %w", context.Cause(ctx))
	}
	return writeRunResult(&o.out, out, errOut, merged, interrupted, nil)
}

// reportStack puts the kube-apiservers the coordinator started in the
// merged result: their description (the workers saw them as a cluster
// reached with --kubeconfig), with the workers' client connections summed,
// and, when a counting proxy ran, what they asked etcd by phase of the
// load (the barrier's phases: phaseAfter).
func reportStack(merged *report.RunResult, results []*report.RunResult, st *kubeload.Stack) {
	api := st.APIServer
	for _, r := range results {
		if r.APIServer != nil {
			api.ClientConnections += r.APIServer.ClientConnections
			api.ClientWatchList = r.APIServer.ClientWatchList
		}
	}
	merged.APIServer = &api
	if st.Counter != nil {
		merged.Etcd = st.Counter.Requests()
		merged.EtcdPhases = st.Counter.Phases()
	}
}

// writeKubeconfig writes a kubeconfig reaching the server cfg reaches as
// cfg's user (its bearer token or client certificate, files or data as
// cfg has them), readable by its owner alone.
func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["lwbench"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: cfg.CAFile,
		CertificateAuthorityData: cfg.CAData, InsecureSkipTLSVerify: cfg.Insecure, TLSServerName: cfg.ServerName}
	kc.AuthInfos["lwbench"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, TokenFile: cfg.BearerTokenFile,
		ClientCertificate: cfg.CertFile, ClientCertificateData: cfg.CertData, ClientKey: cfg.KeyFile, ClientKeyData: cfg.KeyData}
	kc.Contexts["lwbench"] = &clientcmdapi.Context{Cluster: "lwbench", AuthInfo: "lwbench"}
	kc.CurrentContext = "lwbench"
	return clientcmd.WriteToFile(*kc, path)
}

// phaseAfter names the phase of a divided load that begins when every
// worker has reached a barrier point (watchload.Barrier*): the phases of
// watchload.Run's script.
var phaseAfter = map[string]string{
	watchload.BarrierBegin:   watchload.PhaseSeed,
	watchload.BarrierSeeded:  watchload.PhaseSync,
	watchload.BarrierSynced:  watchload.PhaseSteady,
	watchload.BarrierWritten: watchload.PhaseDrain,
	watchload.BarrierDone:    "cleanup",
}

// newBarrierKey returns a fresh etcd key, unique to one coordinator's
// run, under which its workers meet (barrier.NewEtcd).
func newBarrierKey() string {
	id := make([]byte, 6)
	rand.Read(id)
	return "/lwbench-barrier/" + hex.EncodeToString(id)
}

// deleteBarrierKey deletes the barrier's keys once the workers are done,
// within 10 s even if ctx has ended, logging a failure to con.
func deleteBarrierKey(ctx context.Context, admin *clientv3.Client, key string, con *console) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := barrier.DeleteEtcd(dctx, admin, key); err != nil {
		con.Logf("%v", err)
	}
}

// startWorkerProcs starts n worker processes of exe, worker i with
// args(i), its result (standard output) to dir/worker-i.json, its
// standard error to con, and passes an interrupt of ctx on to them (a
// second one kills them); stop ends that. A worker that exits with an
// error before writing a result (killed, crashed, or failed before it
// could tell the others) is aborted on the barrier under key in its
// name (abortLost), so that the others stop instead of waiting for it.
// If one fails to start, those started are killed and waited for.
func startWorkerProcs(ctx context.Context, exe, dir string, n int, args func(i int) []string, admin *clientv3.Client, key string, con *console) (procs []*workerProc, stop func() bool, err error) {
	procs = make([]*workerProc, n)
	for i := range n {
		p, err := startWorker(exe, args(i), filepath.Join(dir, fmt.Sprintf("worker-%d.json", i)), i, con)
		if err != nil {
			for _, q := range procs[:i] {
				q.cmd.Process.Kill()
				q.wait()
			}
			return nil, nil, err
		}
		procs[i] = p
	}
	for i, p := range procs {
		go func() {
			defer close(p.exited) // after the abort: the barrier outlives it
			if p.exitErr = p.wait(); p.exitErr != nil {
				abortLost(ctx, admin, key, shard.Shard{Index: i, Count: n}, p, con)
			}
		}()
	}
	stop = context.AfterFunc(ctx, func() {
		for _, p := range procs {
			p.cmd.Process.Signal(os.Interrupt)
		}
		if again := cli.SecondInterrupt(ctx); again != nil {
			context.AfterFunc(again, func() {
				for _, p := range procs {
					p.cmd.Process.Kill()
				}
			})
		}
	})
	return procs, stop, nil
}

// waitWorkerProcs waits for every worker and reads its result with read:
// the results of those that gave one, in order, and an error per worker
// that did not, naming it (with its exit status and last line of
// standard error when it failed).
func waitWorkerProcs[T any](procs []*workerProc, read func(path string) (T, error)) ([]T, []error) {
	var results []T
	var failures []error
	for i, p := range procs {
		<-p.exited
		werr := p.exitErr
		res, rerr := read(p.resultPath)
		switch {
		case rerr != nil && werr != nil:
			failures = append(failures, fmt.Errorf("worker %d: %v (%s)", i, werr, p.lastLine()))
		case rerr != nil:
			failures = append(failures, fmt.Errorf("worker %d: %w", i, rerr))
		default:
			results = append(results, res)
		}
	}
	return results, failures
}

// abortLost aborts the barrier under key as worker sh, which exited with
// an error, unless it wrote a result (it ended its part: the others may
// still be meeting at the last points, which an abort would fail).
func abortLost(ctx context.Context, admin *clientv3.Client, key string, sh shard.Shard, p *workerProc, con *console) {
	if fi, err := os.Stat(p.resultPath); err == nil && fi.Size() > 0 {
		return
	}
	b, err := barrier.NewEtcd(admin, key, sh)
	if err != nil {
		con.Logf("abort the barrier for worker %d: %v", sh.Index, err)
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := b.Abort(actx, fmt.Sprintf("its process exited: %v", p.exitErr)); err != nil {
		con.Logf("abort the barrier for worker %d: %v", sh.Index, err)
	}
}

// workerProc is a started worker process.
type workerProc struct {
	cmd        *exec.Cmd
	resultPath string
	done       chan struct{} // closed once its standard error is read
	exited     chan struct{} // closed once it exited, exitErr set
	exitErr    error         // its exit status (cmd.Wait)
	mu         sync.Mutex
	last       string // its last line of stderr
}

// startWorker starts exe with args, its standard output to resultPath
// and its standard error to con, each line prefixed with its index.
func startWorker(exe string, args []string, resultPath string, i int, con *console) (*workerProc, error) {
	f, err := os.Create(resultPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(exe, args...)
	cmd.Stdout = f
	cmd.Env = withoutEtcdEnv(os.Environ())
	cmd.SysProcAttr = apiserverproc.ChildAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker %d: %w", i, err)
	}
	p := &workerProc{cmd: cmd, resultPath: resultPath, done: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.last = line
			p.mu.Unlock()
			con.Logf("worker %d: %s", i, line)
		}
	}()
	return p, nil
}

// wait waits for the worker to exit, its standard error read.
func (p *workerProc) wait() error {
	<-p.done
	return p.cmd.Wait()
}

func (p *workerProc) lastLine() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// withoutEtcdEnv drops ETCD_* variables, which an embedded etcd would
// read as flags.
func withoutEtcdEnv(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, "ETCD_") {
			out = append(out, e)
		}
	}
	sort.Strings(out)
	return out
}
