// Package heapprofile keeps a heap profile of a process as it was near
// its peak heap: what a run that grows to gigabytes holds at its worst,
// which a profile written at the end (after the load has let go of it)
// does not show.
package heapprofile

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"time"
)

// Growth is how much the heap must grow past the heap of the last
// profile written before the next is written (1.25: 25 % more), so that
// a growing heap is profiled a bounded number of times (about 40 times
// from 16 MiB to 100 GiB).
const Growth = 1.25

// minHeapBytes is the heap below which nothing is written: the first
// profile is of a heap of at least 16 MiB.
const minHeapBytes = 16 << 20

// heapMetric is the Go runtime's live heap as the last garbage
// collection marked it (runtime/metrics): the heap a heap profile's inuse
// figures describe, cheap to read every interval.
const heapMetric = "/gc/heap/live:bytes"

// Recorder samples the Go live heap every Interval and rewrites one file
// with a heap profile (pprof's "heap" profile, gzipped protobuf, as `go
// tool pprof` reads it) each time the live heap has grown Growth times
// past the one of the last profile written. The file is replaced whole
// (written beside it, then renamed), so it is always a complete profile.
// Its inuse figures are those of the last garbage collection, the same
// the live heap is read from (runtime/pprof WriteHeapProfile).
type Recorder struct {
	path string

	stop chan struct{}
	done chan struct{}

	mu        sync.Mutex
	lastBytes uint64 // the live heap when the last profile was written
	written   int
	err       error // the first error writing the profile
}

// Interval is how often a Recorder reads the heap size.
const Interval = 500 * time.Millisecond

// Start checks that path can take the profile (a regular file or a new
// one in an existing directory; never a directory or a device) and starts
// sampling. The caller must call Stop.
func Start(path string) (*Recorder, error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	} else if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", filepath.Dir(path))
	}
	r := &Recorder{path: path, stop: make(chan struct{}), done: make(chan struct{})}
	go r.loop()
	return r, nil
}

func (r *Recorder) loop() {
	defer close(r.done)
	t := time.NewTicker(Interval)
	defer t.Stop()
	sample := []metrics.Sample{{Name: heapMetric}}
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		r.maybeWrite(sample[0].Value.Uint64())
	}
}

// maybeWrite writes a profile when the live heap (bytes) has grown past
// Growth times the last written one.
func (r *Recorder) maybeWrite(heap uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if heap < minHeapBytes || float64(heap) < Growth*float64(r.lastBytes) || r.err != nil {
		return
	}
	if err := r.write(); err != nil {
		r.err = err
		return
	}
	r.lastBytes = heap
	r.written++
}

// write replaces the file with a heap profile of now.
func (r *Recorder) write() error {
	tmp, err := os.CreateTemp(filepath.Dir(r.path), "."+filepath.Base(r.path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; there on failure
	if err := pprof.Lookup("heap").WriteTo(tmp, 0); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), r.path)
}

// Stop stops sampling and returns how many profiles were written and the
// first error writing one. If the live heap never reached 16 MiB, a
// profile of the heap at Stop is written, so the file always exists,
// unless final is false (the command did not run: nothing to profile).
func (r *Recorder) Stop(final bool) (written int, err error) {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	if final && r.written == 0 && r.err == nil {
		if r.err = r.write(); r.err == nil {
			r.written = 1
		}
	}
	return r.written, r.err
}
