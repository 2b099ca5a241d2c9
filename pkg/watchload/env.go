package watchload

import (
	"time"

	"github.com/kubestore/etcdkit/pkg/report"
)

// Env is what the parts of one load share: the epoch every time is
// measured from, the join of writes with the events they caused, the
// history oracle and the violations found. Writers publish into it;
// Reflectors record into it. An Env is safe for concurrent use.
type Env struct {
	// Epoch is the zero of every offset in a result.
	Epoch time.Time
	// Recorder is the history the watchers are validated against; nil
	// disables the history checks (reliable, resumable, unexpected).
	Recorder *Recorder
	// Violations collects what every watcher found.
	Violations *Violations

	timing *timing
	// rangeStream is the modelled kube-apiserver's memory of whether etcd
	// serves RangeStream, which every store of the Env consults
	// (rangestream.go); nil is the EtcdRangeStream gate off
	// (Options.RangeStream).
	rangeStream *rangeStreamSupport
}

// NewEnv returns an Env. ringCapacity bounds how many revisions back an
// event can still be matched with its write (rounded up to a power of
// two; each slot is 24 bytes); writers is the number of writer workers
// that will publish into it.
func NewEnv(epoch time.Time, ringCapacity int64, writers int, rec *Recorder) *Env {
	return &Env{Epoch: epoch, Recorder: rec, Violations: &Violations{}, timing: newTiming(epoch, ringCapacity, writers),
		rangeStream: newRangeStreamSupport(nil)}
}

// setRangeStream sets the EtcdRangeStream gate of the Env's stores
// (Options.RangeStream): off, they never stream; on, they stream while
// etcd serves it. Call it before any store of the Env reads.
func (e *Env) setRangeStream(on bool) {
	if !on {
		e.rangeStream = nil
	} else if e.rangeStream == nil {
		e.rangeStream = newRangeStreamSupport(nil)
	}
}

// Since returns the time elapsed since the epoch.
func (e *Env) Since() time.Duration { return time.Duration(e.timing.now()) }

// SetIntervalOrigin starts the one-second interval series at offset from
// the epoch (usually when the writes start).
func (e *Env) SetIntervalOrigin(offset time.Duration) { e.timing.setOrigin(int64(offset)) }

// WriteLatency summarises the latency of every write the Env's Writers
// have recorded so far, from each write's scheduled time to its end,
// failures included (what RunResult.Writes.Latency reports).
func (e *Env) WriteLatency() report.Latency {
	e.timing.mu.Lock()
	defer e.timing.mu.Unlock()
	return e.timing.writes.summary()
}

// KeepHistograms keeps the totals' histograms in the result (their HDR
// encoding, report.Latency.HDR), so that the results of a divided load's
// workers merge exactly (report.MergeRuns). Call it before the result is
// collected.
func (e *Env) KeepHistograms() { e.timing.keepHDR = true }
