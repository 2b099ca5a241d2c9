package kubeload

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/internal/controlplane"
	"github.com/kubestore/etcdkit/internal/parallel"
	"github.com/kubestore/etcdkit/internal/quantile"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// FillerPrefix holds a cluster run's filler keys (ClusterOptions.FillerBytes):
// outside kube-apiserver's --etcd-prefix, so that no watch cache, informer
// or history recorder holds them, and etcd's db holds them as it would
// hold any large live data set.
const FillerPrefix = "/lwbench-filler/"

// fillerValueSize is the size of one filler value: large values fill the
// db with few requests, well under etcd's 1.5 MiB request limit
// (server/embed/config.go DefaultMaxRequestBytes).
const fillerValueSize = 256 << 10

// fill writes FillerBytes of live keys under FillerPrefix with the
// harness's etcd client, four at a time.
func (a *apiClients) fill(ctx context.Context) error {
	n := int((a.o.Cluster.FillerBytes + fillerValueSize - 1) / fillerValueSize)
	if n <= 0 {
		return nil
	}
	value := make([]byte, fillerValueSize)
	rand.Read(value) // bbolt does not compress; random bytes are as good as any
	start := time.Now()
	a.r.Logf("growing etcd's db by %d MiB of filler under %s", int64(n)*fillerValueSize>>20, FillerPrefix)
	err := parallel.Each(ctx, 4, n, func(ctx context.Context, _, i int) error {
		_, err := a.r.Admin.Put(ctx, fmt.Sprintf("%s%08d", FillerPrefix, i), string(value))
		return err
	})
	if err != nil {
		return fmt.Errorf("filler: %w", err)
	}
	a.r.Logf("filler written in %v", time.Since(start).Round(time.Second))
	return nil
}

// clusterEvents defragments every member DefragAt into the churn and
// restarts Restart RestartAt into it, in time order, each in a phase of
// its own ("defrag", "restart <component>") followed by "after defrag" or
// "after restart".
func (a *apiClients) clusterEvents(ctx context.Context, w *watchload.Writing) {
	c, r, s := a.o.Cluster, a.r, a.r.Session
	type event struct {
		at time.Duration
		do func()
	}
	var events []event
	if c.DefragAt > 0 {
		events = append(events, event{c.DefragAt, func() {
			s.SetPhase(PhaseDefrag)
			r.Result.Defrag = watchload.DefragmentMembers(ctx, r.Admin, a.st.Etcd.Endpoints, s.Epoch(), r.Logf)
			s.SetPhase("after defrag")
		}})
	}
	if c.Restart != "" {
		events = append(events, event{c.RestartAt, func() {
			rs := &report.ComponentRestart{Component: c.Restart, AtMs: report.Ms(time.Since(s.Epoch()))}
			r.Result.Cluster.Restart = rs
			s.SetPhase("restart " + c.Restart)
			r.Logf("restarting %s", c.Restart)
			down, err := a.st.ControlPlane.Restart(ctx, c.Restart)
			rs.DownMs = report.Ms(down)
			if err != nil {
				rs.Error = err.Error()
				r.Logf("%v", err)
			} else {
				r.Logf("%s ready again after %v", c.Restart, down.Round(time.Millisecond))
			}
			s.SetPhase("after restart")
		}})
	}
	slices.SortStableFunc(events, func(x, y event) int { return int(x.at - y.at) })
	for _, e := range events {
		if !clockwait.SleepReal(ctx, time.Until(s.Epoch().Add(w.Start+e.at))) {
			return
		}
		e.do()
	}
}

// nodeHealth follows the nodes' Lease renewals at etcd and their Ready
// conditions through kube-apiserver (report.NodeHealth), each renewal
// counted in the run's phase it happened in.
type nodeHealth struct {
	epoch  time.Time
	cancel context.CancelFunc
	done   chan struct{} // closed once the Leases' watch ended (watchLeases); nil: none

	mu          sync.Mutex
	phase       string
	order       []string
	last        map[string]time.Time // each Lease's last renewal (or its create)
	longest     map[string]float64   // each Lease's longest interval, ms
	renewals    map[string]int64     // by phase
	intervals   map[string][]float64 // ms, by phase
	notReady    map[string]bool      // nodes not Ready now
	ever        map[string]bool      // nodes not Ready at some time
	wasReady    map[string]bool      // nodes seen Ready
	transitions int
	first       time.Time
}

// newNodeHealth returns a nodeHealth that counts in phase first, times
// from epoch, and watches nothing yet (watchLeases, startNodeHealth).
func newNodeHealth(epoch time.Time, phase string) *nodeHealth {
	return &nodeHealth{epoch: epoch, cancel: func() {}, phase: phase, order: []string{phase},
		last: map[string]time.Time{}, longest: map[string]float64{}, renewals: map[string]int64{}, intervals: map[string][]float64{},
		notReady: map[string]bool{}, ever: map[string]bool{}, wasReady: map[string]bool{}}
}

// startNodeHealth watches prefix's node Leases on etcd with admin from
// its current revision and the nodes through a's connections, until
// finish; phase is the phase it counts in first.
func (a *apiClients) startNodeHealth(ctx context.Context, phase string) (*nodeHealth, error) {
	cs, err := a.st.Connections.NewClientset()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := newNodeHealth(a.r.Session.Epoch(), phase)
	h.cancel = cancel
	factory := informers.NewSharedInformerFactory(cs, 0)
	nodes := factory.Core().V1().Nodes().Informer()
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.node(obj) },
		UpdateFunc: func(_, obj any) { h.node(obj) },
	}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodes.HasSynced) {
		cancel()
		return nil, fmt.Errorf("node informer did not sync")
	}
	h.watchLeases(ctx, a.r.Admin, a.st.EtcdPrefix+"/leases/"+corev1.NamespaceNodeLease+"/", 0, factory.Shutdown)
	return h, nil
}

// watchLeases watches the Leases under prefix on c from revision from
// (0: the current one) until ctx ends, then calls stop and closes
// h.done. A Lease's
// create (its first version: KWOK's or the kubelet's node lease
// controller acquiring it) starts its first interval; every later put is
// a renewal.
func (h *nodeHealth) watchLeases(ctx context.Context, c *clientv3.Client, prefix string, from int64, stop func()) {
	wch := c.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(from))
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		defer stop()
		for resp := range wch {
			now := time.Now()
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut {
					h.renewal(string(ev.Kv.Key), now, ev.IsCreate())
				}
			}
		}
	}()
}

// renewal notes a put of Lease key at now, in the current phase: a
// renewal, or its create, which only starts its first interval.
func (h *nodeHealth) renewal(key string, now time.Time, create bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !create {
		h.renewals[h.phase]++
		if prev, ok := h.last[key]; ok {
			ms := report.Ms(now.Sub(prev))
			h.intervals[h.phase] = append(h.intervals[h.phase], ms)
			h.longest[key] = max(h.longest[key], ms)
		}
	}
	h.last[key] = now
}

// node notes a node's Ready condition. A node not Ready that never was
// and has no Ready condition yet (created during the seeding, before
// KWOK's node-initialize stage or the kubelet set it) has not left Ready.
func (h *nodeHealth) node(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	ready, known := false, false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready, known = c.Status == corev1.ConditionTrue, true
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case ready:
		h.wasReady[n.Name] = true
		delete(h.notReady, n.Name)
	case !known && !h.wasReady[n.Name]:
	case !h.notReady[n.Name]:
		h.notReady[n.Name], h.ever[n.Name] = true, true
		h.transitions++
		if h.first.IsZero() {
			h.first = time.Now()
		}
	}
}

// setPhase counts renewals into phase from now on.
func (h *nodeHealth) setPhase(phase string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.phase = phase
	if !slices.Contains(h.order, phase) {
		h.order = append(h.order, phase)
	}
}

// finish stops both watches and returns what they saw.
func (h *nodeHealth) finish() *report.NodeHealth {
	h.cancel()
	if h.done != nil {
		<-h.done
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := &report.NodeHealth{NotReady: len(h.ever), Transitions: h.transitions,
		StillNotReady: len(h.notReady), Phases: []report.NodeHealthPhase{}}
	if !h.first.IsZero() {
		out.FirstNotReadyMs = report.Ms(h.first.Sub(h.epoch))
	}
	var all []float64
	for _, p := range h.order {
		n := h.renewals[p]
		if n == 0 {
			continue
		}
		out.Renewals += n
		ph := report.NodeHealthPhase{Phase: p, Renewals: n}
		if iv := slices.Sorted(slices.Values(h.intervals[p])); len(iv) > 0 {
			all = append(all, iv...)
			ph.IntervalP50Ms, ph.IntervalP99Ms, ph.IntervalMaxMs = quantile.NearestRank(iv, 0.5), quantile.NearestRank(iv, 0.99), iv[len(iv)-1]
		}
		out.Phases = append(out.Phases, ph)
	}
	slices.Sort(all)
	if len(all) > 0 {
		out.IntervalP50Ms, out.IntervalP99Ms, out.IntervalMaxMs = quantile.NearestRank(all, 0.5), quantile.NearestRank(all, 0.99), all[len(all)-1]
	}
	// A node counts once it was renewed twice; one whose Lease went
	// longer than its duration without a renewal expired.
	out.Nodes = len(h.longest)
	for _, ms := range h.longest {
		if ms > report.Ms(controlplane.NodeLeaseDuration) {
			out.LeaseExpired++
		}
	}
	return out
}

// componentExits lists cp's components that exited on their own, in time
// order, at offsets from epoch.
func componentExits(cp *controlplane.ControlPlane, epoch time.Time) []report.ComponentExit {
	var out []report.ComponentExit
	for name, exits := range cp.Exits() {
		for _, e := range exits {
			out = append(out, report.ComponentExit{Component: name, AtMs: report.Ms(e.At.Sub(epoch)), Status: e.Status})
		}
	}
	slices.SortFunc(out, func(x, y report.ComponentExit) int { return cmp.Compare(x.AtMs, y.AtMs) })
	return out
}
