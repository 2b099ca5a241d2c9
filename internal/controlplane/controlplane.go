package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
)

// Config describes the control plane Start runs in front of one etcd.
type Config struct {
	// Binaries are the directories of the four binaries (ResolveBinaries).
	Binaries Binaries
	// Dir is the parent of the PKI, the kubeconfigs and every process's
	// directory; it must exist and be writable.
	Dir string
	// APIServer configures the kube-apiservers: the etcd to use
	// (EtcdServers, required, and its TLS files), how many servers, and
	// any kube-apiserver setting. Start sets BinDir, Dir and
	// ServiceAccountAdmission, an empty AuthorizationMode becomes
	// Node,RBAC, as kubeadm runs it, and an empty ServiceClusterIPRange
	// becomes ServiceClusterIPRange.
	APIServer apiserverproc.Config
	// KubeAPIQPS and KubeAPIBurst are kube-controller-manager's and
	// kube-scheduler's client rate limits (--kube-api-qps,
	// --kube-api-burst); 0 means 100 and 200. They bound how fast
	// Deployments become pods (the ReplicaSet controller creates pods at
	// KubeAPIQPS) and pods are bound.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// PodCIDR is KWOK's --cidr, where pod IPs come from; "" means
	// 10.64.0.0/10 (kwok's default, 10.0.0.1/24, holds 254 pods).
	PodCIDR string
	// KWOKNodeLeaseParallelism is how many workers renew KWOK's node
	// Leases (kwok's default 4 renews about 800 per second on 2 cores:
	// short of 10,000 nodes' 1,000); 0 keeps kwok's defaults.
	KWOKNodeLeaseParallelism int
	// ControllerManagerArgs, SchedulerArgs and KWOKArgs are appended to
	// each component's command line.
	ControllerManagerArgs, SchedulerArgs, KWOKArgs []string
	// StartTimeout bounds Start's wait for all components; 0 means 3
	// minutes.
	StartTimeout time.Duration
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL,
	// per process; 0 means 20 seconds.
	StopTimeout time.Duration
	// Logf reports a component that exited on its own and is started
	// again (Process.Supervise); nil discards it.
	Logf func(string, ...any)
}

// SuperviseBackoff is the wait before a component that exited is started
// again, doubled each time: the kubelet's first CrashLoopBackOff
// (k8s.io/kubernetes pkg/kubelet/kubelet.go backOffPeriod).
const SuperviseBackoff = 10 * time.Second

// Leader-election Lease names in kube-system
// (k8s.io/kubernetes cmd/kube-controller-manager/app/options and
// cmd/kube-scheduler/app/options: --leader-elect-resource-name defaults).
const (
	ControllerManagerLease = "kube-controller-manager"
	SchedulerLease         = "kube-scheduler"
)

// NodeLeaseDuration is the duration of the node Leases KWOK holds
// (--node-lease-duration-seconds, the kubelet's default); KWOK renews each
// every NodeLeaseDuration/4 plus up to 4 % (NodeLeaseRenewInterval).
const NodeLeaseDuration = 40 * time.Second

// NodeLeaseRenewInterval is the mean interval between two renewals of one
// node's Lease by KWOK: NodeLeaseDuration/4 = 10 s, stretched by
// wait.Jitter(10 s, 0.04), uniform in [10 s, 10.4 s): 10.2 s. N nodes write
// N/10.2 s Lease updates per second to etcd.
const NodeLeaseRenewInterval = 10200 * time.Millisecond

// ControlPlane is a running control plane.
type ControlPlane struct {
	// APIServers are the kube-apiservers, with the PKI and admin token.
	APIServers *apiserverproc.Cluster
	// ControllerManager, Scheduler and KWOK are the other processes.
	ControllerManager, Scheduler, KWOK *apiserverproc.Process
	// Kubeconfigs are the kubeconfig paths by component name
	// (kube-controller-manager, kube-scheduler, kwok).
	Kubeconfigs map[string]string

	stopTimeout time.Duration
	ports       map[string]int // each component's serving port, by name
}

// ServiceClusterIPRange is the control plane's --service-cluster-ip-range
// unless Config.APIServer sets one: 65,534 ClusterIPs, outside PodCIDR's
// default. ClusterLoader2's load test has a Service for half its
// Deployments, 550 at 1,000 nodes, more than apiserverproc's default /24
// holds (kube-apiserver refuses the 255th: "failed to allocate a
// serviceIP ... range is full", pkg/registry/core/service/ipallocator).
const ServiceClusterIPRange = "10.0.0.0/16"

// Start starts, on free loopback ports, cfg.APIServer.Servers
// kube-apiservers (apiserverproc.Start, which generates the PKI under
// cfg.Dir/pki), then kube-controller-manager, kube-scheduler and KWOK, each
// ready before the next starts: the first two once they hold their
// leader-election Lease, KWOK once its /healthz answers. Every wait obeys
// ctx and cfg.StartTimeout. On error every process started is stopped and
// the error names the component and quotes the end of its log.
func Start(ctx context.Context, cfg Config) (*ControlPlane, error) {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 3 * time.Minute
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 20 * time.Second
	}
	if cfg.KubeAPIQPS == 0 {
		cfg.KubeAPIQPS = 100
	}
	if cfg.KubeAPIBurst == 0 {
		cfg.KubeAPIBurst = 200
	}
	if cfg.PodCIDR == "" {
		cfg.PodCIDR = "10.64.0.0/10"
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()

	api := cfg.APIServer
	api.BinDir, api.Dir, api.ServiceAccountAdmission = cfg.Binaries.KubeAPIServer, cfg.Dir, true
	if api.AuthorizationMode == "" {
		api.AuthorizationMode = "Node,RBAC"
	}
	if api.ServiceClusterIPRange == "" {
		api.ServiceClusterIPRange = ServiceClusterIPRange
	}
	if api.StopTimeout == 0 {
		api.StopTimeout = cfg.StopTimeout
	}
	apiservers, err := apiserverproc.Start(ctx, api)
	if err != nil {
		return nil, err
	}
	c := &ControlPlane{APIServers: apiservers, Kubeconfigs: map[string]string{}, stopTimeout: cfg.StopTimeout, ports: map[string]int{}}
	if err := c.start(ctx, cfg); err != nil {
		c.Stop()
		return nil, err
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	// As the kubelet runs them, in static pods: one that exits is
	// started again.
	for _, p := range c.Processes() {
		p.Supervise(SuperviseBackoff, logf)
	}
	return c, nil
}

// start starts the components after the apiservers.
func (c *ControlPlane) start(ctx context.Context, cfg Config) error {
	server := c.APIServers.Servers[0].URL
	pki := c.APIServers.PKI
	for _, k := range []struct {
		name string
		id   Identity
	}{
		{"kube-controller-manager", ControllerManagerIdentity},
		{"kube-scheduler", SchedulerIdentity},
		{"kwok", KWOKIdentity},
	} {
		path, err := writeKubeconfig(filepath.Dir(pki.CA), k.name, server, pki, k.id)
		if err != nil {
			return fmt.Errorf("kubeconfig of %s: %w", k.name, err)
		}
		c.Kubeconfigs[k.name] = path
	}
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	qps := strconv.FormatFloat(float64(cfg.KubeAPIQPS), 'f', -1, 32)
	burst := strconv.Itoa(cfg.KubeAPIBurst)

	c.ControllerManager, err = c.startComponent(ctx, cfg, "kube-controller-manager", cfg.Binaries.KubeControllerManager,
		func(dir string, port int) []string {
			kc := c.Kubeconfigs["kube-controller-manager"]
			return append([]string{
				"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
				"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port), "--cert-dir=" + dir,
				"--leader-elect=true", "--controllers=*", "--use-service-account-credentials=true",
				"--root-ca-file=" + pki.CA, "--service-account-private-key-file=" + pki.ServiceAccountKey,
				"--cluster-signing-cert-file=" + pki.CA, "--cluster-signing-key-file=" + pki.CAKey,
				"--kube-api-qps=" + qps, "--kube-api-burst=" + burst,
			}, cfg.ControllerManagerArgs...)
		},
		func(ctx context.Context, p *apiserverproc.Process, _ int) error {
			return waitLease(ctx, cs, p, ControllerManagerLease)
		})
	if err != nil {
		return err
	}
	c.Scheduler, err = c.startComponent(ctx, cfg, "kube-scheduler", cfg.Binaries.KubeScheduler,
		func(dir string, port int) []string {
			kc := c.Kubeconfigs["kube-scheduler"]
			return append([]string{
				"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
				"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port), "--cert-dir=" + dir,
				"--leader-elect=true", "--kube-api-qps=" + qps, "--kube-api-burst=" + burst,
			}, cfg.SchedulerArgs...)
		},
		func(ctx context.Context, p *apiserverproc.Process, _ int) error {
			return waitLease(ctx, cs, p, SchedulerLease)
		})
	if err != nil {
		return err
	}
	c.KWOK, err = c.startComponent(ctx, cfg, "kwok", cfg.Binaries.KWOK,
		func(dir string, port int) []string {
			a := []string{
				"--kubeconfig=" + c.Kubeconfigs["kwok"],
				"--manage-all-nodes=false",
				"--manage-nodes-with-annotation-selector=" + NodeAnnotation + "=" + NodeAnnotationValue,
				"--cidr=" + cfg.PodCIDR, "--node-ip=10.255.0.1",
				"--server-address=127.0.0.1:" + strconv.Itoa(port),
				"--node-lease-duration-seconds=" + strconv.Itoa(int(NodeLeaseDuration/time.Second)),
			}
			for _, f := range apiserverproc.KWOKStageFiles {
				a = append(a, "--config="+filepath.Join(cfg.Binaries.KWOK, f))
			}
			if cfg.KWOKNodeLeaseParallelism > 0 {
				a = append(a, "--config="+filepath.Join(dir, "kwok-parallelism.yaml"))
			}
			return append(a, cfg.KWOKArgs...)
		},
		waitHealthz)
	return err
}

// startComponent starts one component in cfg.Dir/NAME-ATTEMPT on a free
// port and waits for ready, retrying with another port when the one it was
// given was taken in between.
func (c *ControlPlane) startComponent(ctx context.Context, cfg Config, name, binDir string,
	args func(dir string, port int) []string, ready func(ctx context.Context, p *apiserverproc.Process, port int) error,
) (*apiserverproc.Process, error) {
	var lastErr error
	for attempt := range 3 {
		dir := filepath.Join(cfg.Dir, fmt.Sprintf("%s-%d", name, attempt))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if name == "kwok" && cfg.KWOKNodeLeaseParallelism > 0 {
			// A KwokConfiguration must set all four parallelisms: kwok
			// applies no defaults to a partial one ("playStageParallelism
			// must be greater than 0"); the others are kwok's defaults.
			conf := fmt.Sprintf("apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions:\n"+
				"  nodeLeaseParallelism: %d\n  nodePlayStageParallelism: 4\n  podPlayStageParallelism: 4\n  podsOnNodeSyncParallelism: 1\n",
				cfg.KWOKNodeLeaseParallelism)
			if err := os.WriteFile(filepath.Join(dir, "kwok-parallelism.yaml"), []byte(conf), 0o600); err != nil {
				return nil, err
			}
		}
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		p, err := apiserverproc.StartProcess(name, filepath.Join(binDir, name), args(dir, port), env(dir), dir,
			filepath.Join(dir, name+".log"), c.stopTimeout)
		if err != nil {
			return nil, err
		}
		err = ready(ctx, p, port)
		if err == nil {
			c.ports[name] = port
			return p, nil
		}
		if errors.Is(err, errExited) {
			err = fmt.Errorf("%w (%s)", err, p.ExitStatus())
		}
		p.Stop()
		lastErr = fmt.Errorf("%s: %w (log %s: %s)", name, err, p.LogPath, p.LogTail(8))
		if ctx.Err() != nil || !strings.Contains(lastErr.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

// env is a component's whole environment: PATH and HOME (its own
// directory, so that no ~/.kube or ~/.kwok of the caller's is read).
func env(dir string) []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir}
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before the component binds it; startComponent retries then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// errExited is returned by the waits when the process ended first.
var errExited = errors.New("exited before it was ready")

// waitLease polls the leader-election Lease kube-system/name every 200 ms
// until its holder is p's (leader election's identity is
// HOSTNAME_UUID; only one candidate runs, so any holder whose renewTime is
// younger than its lease duration and later than p's start is p), p exits
// or ctx ends.
func waitLease(ctx context.Context, cs kubernetes.Interface, p *apiserverproc.Process, name string) error {
	started := time.Now().Add(-time.Second)
	var last string
	for {
		l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			last = "no Lease kube-system/" + name
		case err != nil:
			last = err.Error()
		case l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil:
			last = "Lease kube-system/" + name + " not held"
		case l.Spec.RenewTime.Time.Before(started):
			last = "Lease kube-system/" + name + " held by " + *l.Spec.HolderIdentity + " before this process started"
		default:
			return nil
		}
		select {
		case <-p.Done():
			return errExited
		case <-ctx.Done():
			return fmt.Errorf("not leader (%s): %w", last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitHealthz polls kwok's http://127.0.0.1:port/healthz every 200 ms
// until it answers 200, p exits or ctx ends.
func waitHealthz(ctx context.Context, p *apiserverproc.Process, port int) error {
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
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
		case <-p.Done():
			return errExited
		case <-ctx.Done():
			return fmt.Errorf("not healthy (%s: %s): %w", url, last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Components names what Restart restarts, in start order.
var Components = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// Restart stops component (one of Components; kube-apiserver is the first
// server) by its PID, SIGTERM as an operator's restart or a rollout would
// (SIGKILL after the stop timeout), starts it again with the same command
// line and port, and waits until it is ready again: kube-apiserver's
// /readyz, kwok's /healthz, and for kube-controller-manager and
// kube-scheduler their leader-election Lease held by another identity than
// before (each run picks a new one: client-go's leaderelection identity is
// hostname_UUID). kube-scheduler releases its Lease on SIGTERM
// (cmd/kube-scheduler/app/options/options.go ReleaseOnCancel true);
// kube-controller-manager does not unless the alpha gate
// ControllerManagerReleaseLeaderElectionLockOnExit is on (off in 1.37:
// k8s.io/controller-manager pkg/features), so its successor waits out the
// Lease's 15 s duration. It returns when ready (down
// is how long the process was stopped or starting, from the signal to
// ready) or with ctx's error or the component's log tail.
func (c *ControlPlane) Restart(ctx context.Context, component string) (down time.Duration, err error) {
	start := time.Now()
	switch component {
	case "kube-apiserver":
		err = c.APIServers.Servers[0].Restart(ctx)
	case "kube-controller-manager", "kube-scheduler":
		p, lease := c.ControllerManager, ControllerManagerLease
		if component == "kube-scheduler" {
			p, lease = c.Scheduler, SchedulerLease
		}
		var cs kubernetes.Interface
		if cs, err = kubernetes.NewForConfig(c.RESTConfig()); err != nil {
			return 0, err
		}
		before := ""
		if l, gerr := cs.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{}); gerr == nil && l.Spec.HolderIdentity != nil {
			before = *l.Spec.HolderIdentity
		}
		if err = p.Restart(); err == nil {
			err = waitNewHolder(ctx, cs, p, lease, before)
		}
	case "kwok":
		if err = c.KWOK.Restart(); err == nil {
			err = waitHealthz(ctx, c.KWOK, c.ports["kwok"])
		}
	default:
		return 0, fmt.Errorf("no control-plane component %q (one of %s)", component, strings.Join(Components, ", "))
	}
	if err != nil {
		return time.Since(start), fmt.Errorf("restart of %s: %w", component, err)
	}
	return time.Since(start), nil
}

// waitNewHolder polls Lease kube-system/name every 200 ms until a holder
// other than before holds it, p exits or ctx ends.
func waitNewHolder(ctx context.Context, cs kubernetes.Interface, p *apiserverproc.Process, name, before string) error {
	var last string
	for {
		l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			last = err.Error()
		case l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "":
			last = "Lease kube-system/" + name + " not held"
		case *l.Spec.HolderIdentity == before:
			last = "Lease kube-system/" + name + " still held by " + before
		default:
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("%w (log %s: %s)", errExited, p.LogPath, p.LogTail(8))
		case <-ctx.Done():
			return fmt.Errorf("not leader again (%s): %w", last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// RESTConfig returns a client-go configuration for the first
// kube-apiserver with the admin token; each call returns a new value the
// caller may change.
func (c *ControlPlane) RESTConfig() *rest.Config { return c.APIServers.RESTConfig() }

// Processes returns every process of the control plane, apiservers first,
// then kube-controller-manager, kube-scheduler and kwok (those started).
func (c *ControlPlane) Processes() []*apiserverproc.Process {
	var ps []*apiserverproc.Process
	for _, s := range c.APIServers.Servers {
		ps = append(ps, s.Process())
	}
	for _, p := range []*apiserverproc.Process{c.ControllerManager, c.Scheduler, c.KWOK} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// Exits returns, by component name (apiserver0, kube-controller-manager,
// kube-scheduler, kwok), the runs that ended on their own and were
// started again (Process.Supervise); components that never exited are
// left out.
func (c *ControlPlane) Exits() map[string][]apiserverproc.Exit {
	out := map[string][]apiserverproc.Exit{}
	for _, p := range c.Processes() {
		if e := p.Exits(); len(e) > 0 {
			out[p.Name] = e
		}
	}
	return out
}

// Err returns an error naming every process that has exited, with the end
// of its log, or nil while all run. Callers check it after a wait that
// timed out, to tell a dead component from a slow one.
func (c *ControlPlane) Err() error {
	var errs []error
	for _, p := range c.Processes() {
		if err := p.Exited(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stop stops kwok, kube-scheduler, kube-controller-manager and then the
// kube-apiservers, each by PID (SIGTERM, then SIGKILL after the stop
// timeout), and waits for them. Safe to call twice.
func (c *ControlPlane) Stop() {
	for _, p := range []*apiserverproc.Process{c.KWOK, c.Scheduler, c.ControllerManager} {
		if p != nil {
			p.Stop()
		}
	}
	c.APIServers.Stop()
}
