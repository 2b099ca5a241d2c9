package experiment

import (
	"context"
	"time"

	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// StackFactory starts real kube-apiservers in front of t with
// --etcd-prefix prefix and kube-apiserver's own compactor every
// compactionInterval (negative: off, while the experiment compacts etcd
// itself with kube-apiserver's algorithm, when it needs to), and returns
// them as a kubeload.Stack and a function that stops them, to be called
// once, also after an error.
type StackFactory func(ctx context.Context, t watchload.Target, prefix string, compactionInterval time.Duration) (kubeload.Stack, func(), error)

// relistRequests counts a relist's LIST (or WATCHLIST) requests, failed
// attempts included: the model's attempts (each of one or more pages),
// or client-go's pages and the requests that failed before them.
func relistRequests(rl report.Relist) int {
	if rl.Attempts != nil {
		return len(rl.Attempts)
	}
	return rl.Pages + rl.FailedRequests
}

// relistListed reports whether a relist ended with the state listed:
// client-go's relists are reported only once they have
// (kubeload.relistsOf), the model's may have failed every attempt (no
// listRevision then).
func relistListed(rl report.Relist) bool {
	return rl.Attempts == nil || rl.ListRevision != 0
}

// relistTimes returns when a relist began, from the experiment's epoch,
// and how long it took.
func relistTimes(rl report.Relist) (at, duration time.Duration) {
	return time.Duration(rl.AtMs * float64(time.Millisecond)), time.Duration(rl.DurationMs * float64(time.Millisecond))
}

// startWrites starts c's writers updating the load's pods at rate, at
// most total writes, open loop, each write bounded by 10 s; they outlive
// ctx's cancellation until the case stops them.
func startWrites(ctx context.Context, c watchload.ClientSet, rate float64, total int64) error {
	return c.Write(context.WithoutCancel(ctx), watchload.WriterOptions{Rate: rate, Total: total, Timeout: 10 * time.Second})
}
