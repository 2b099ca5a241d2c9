package kubeload

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/report"
)

// PhaseDefrag is the phase of the defragmentation: etcd's requests while
// it runs count there.
const PhaseDefrag = "defrag"

// compactRevKey is the key kube-apiserver's compactor keeps its logical
// clock in, outside --etcd-prefix: every compaction is preceded by a put
// of the revision it compacts to
// (k8s.io/apiserver/pkg/storage/etcd3/compact.go compactRevKey, Compact).
const compactRevKey = "compact_rev_key"

// phaseName is the name of phase base after n compactions: base itself
// before the first compaction and for the defragmentation, else
// "<base> after compaction n", e.g. "steady after compaction 1".
func phaseName(base string, n int) string {
	if n == 0 || base == PhaseDefrag {
		return base
	}
	return fmt.Sprintf("%s after compaction %d", base, n)
}

// BasePhase returns the phase name without its " after compaction N"
// suffix (phaseName): "steady after compaction 2" is "steady".
func BasePhase(name string) string {
	if i := strings.Index(name, " after compaction "); i >= 0 {
		return name[:i]
	}
	return name
}

// phases names the load's phases and switches the etcd counter and the
// apiservers' meter to each: a phase begins when the load moves on (seed,
// sync, steady, held, released, defrag, drain) and when kube-apiserver
// compacts etcd. It is safe for concurrent use.
type phases struct {
	mu          sync.Mutex
	base        string
	compactions int
	counter     EtcdCounter // nil: none
	meter       *meter      // nil: none
}

// set begins phase base (named after the compactions so far).
func (p *phases) set(ctx context.Context, base string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.base = base
	p.applyLocked(ctx)
}

// current returns the current phase's name.
func (p *phases) current() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return phaseName(p.base, p.compactions)
}

// compacted begins the current phase after one more compaction and
// returns how many there have been.
func (p *phases) compacted(ctx context.Context) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.compactions++
	p.applyLocked(ctx)
	return p.compactions
}

// applyLocked switches the counter first (it is exact), then the meter
// (a scrape, tens of milliseconds).
func (p *phases) applyLocked(ctx context.Context) {
	name := phaseName(p.base, p.compactions)
	if p.counter != nil {
		p.counter.SetPhase(name)
	}
	if p.meter != nil {
		p.meter.setPhase(context.WithoutCancel(ctx), name)
	}
}

// watchCompactions watches compact_rev_key from revision from
// (WatchCompactions) and, for every compaction announced, begins a new
// phase (p.compacted) and records it, until ctx ends. kube-apiserver's
// compactor puts the key, then calls Compact: the requests between the
// two (none but the Compact itself, usually) may count in either phase.
// It returns the compactions seen, in order, once ctx has ended.
func watchCompactions(ctx context.Context, admin *clientv3.Client, from int64, p *phases, epoch time.Time, logf func(string, ...any)) <-chan []report.Compaction {
	out := make(chan []report.Compaction, 1)
	var seen []report.Compaction
	done := WatchCompactions(ctx, admin, from, func(rev int64) {
		n := p.compacted(ctx)
		seen = append(seen, report.Compaction{N: n, AtMs: report.Ms(time.Since(epoch)), Revision: rev})
		logf("kube-apiserver compacts etcd to revision %d (compaction %d)", rev, n)
	}, logf)
	go func() {
		<-done
		out <- seen
	}()
	return out
}

// WatchCompactions watches compact_rev_key, kube-apiserver's compactor's
// logical clock (outside --etcd-prefix), from revision from on, and calls
// f with the revision of every compaction a put of it announces, as soon
// as it is seen: the compactor puts the revision it compacts to, then
// calls Compact (k8s.io/apiserver/pkg/storage/etcd3/compact.go Compact;
// the first put of each compactor, at its bootstrap, holds 0 and compacts
// nothing). f runs on the watch's goroutine, one call at a time. It
// returns a channel closed once ctx has ended or the watch failed (logged
// with logf unless ctx had ended), after f's last call.
func WatchCompactions(ctx context.Context, admin *clientv3.Client, from int64, f func(rev int64), logf func(string, ...any)) <-chan struct{} {
	done := make(chan struct{})
	wch := admin.Watch(clientv3.WithRequireLeader(ctx), compactRevKey, clientv3.WithRev(from))
	go func() {
		defer close(done)
		for resp := range wch {
			if err := resp.Err(); err != nil {
				if ctx.Err() == nil {
					logf("watch %s: %v", compactRevKey, err)
				}
				return
			}
			for _, ev := range resp.Events {
				if ev.Type != clientv3.EventTypePut {
					continue
				}
				rev, err := strconv.ParseInt(string(ev.Kv.Value), 10, 64)
				if err != nil || rev == 0 {
					continue
				}
				f(rev)
			}
		}
	}()
	return done
}
