// Package progress draws a one-line progress bar on a terminal, and
// samples the Go heap for the hidden --mem-stats flag. Nothing here is
// printed unless the caller asks: bars go only to a terminal.
package progress

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
)

// IsTerminal reports whether w is a terminal (a bar would be seen, not
// logged).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// Bar redraws "label [=====>    ]  42%" on w every 100 ms from load,
// which returns the work done and in all (total 0: not started); a bar
// whose work ends before its first redraw is never drawn. Stop erases it.
type Bar struct {
	stop chan struct{}
	done sync.WaitGroup
}

// Start begins drawing; call Stop when the work ends.
func Start(w io.Writer, label string, load func() (done, total int64)) *Bar {
	b := &Bar{stop: make(chan struct{})}
	b.done.Add(1)
	go func() {
		defer b.done.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		drawn := false
		for {
			select {
			case <-b.stop:
				if drawn {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-t.C:
				done, total := load()
				if total <= 0 || (done >= total && !drawn) {
					continue // not started, or finished before it was ever drawn
				}
				fmt.Fprint(w, "\r"+Line(label, done, total, 30))
				drawn = true
			}
		}
	}()
	return b
}

// Stop erases the bar and waits for the drawing goroutine to end.
func (b *Bar) Stop() {
	close(b.stop)
	b.done.Wait()
}

// Line renders one bar of width cells.
func Line(label string, done, total int64, width int) string {
	done = min(max(done, 0), total)
	fill := int(int64(width) * done / total)
	arrow := ""
	if fill < width {
		arrow = ">"
	}
	return fmt.Sprintf("%s [%s%s%s] %3d%%", label, strings.Repeat("=", fill), arrow,
		strings.Repeat(" ", max(width-fill-len(arrow), 0)), 100*done/total)
}

// HeapSampler records the peak of the Go heap (bytes in live and
// not-yet-swept objects, runtime/metrics /memory/classes/heap/objects:bytes)
// by sampling it every millisecond, for the benchmark's memory figure.
type HeapSampler struct {
	stop chan struct{}
	done sync.WaitGroup
	peak uint64
}

const heapMetric = "/memory/classes/heap/objects:bytes"

// SampleHeap starts sampling.
func SampleHeap() *HeapSampler {
	h := &HeapSampler{stop: make(chan struct{})}
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		s := []metrics.Sample{{Name: heapMetric}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			h.peak = max(h.peak, s[0].Value.Uint64())
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// MemStats is what --mem-stats prints, as one JSON line on stderr.
type MemStats struct {
	// PeakHeapBytes is the largest live heap sampled.
	PeakHeapBytes uint64 `json:"peakHeapBytes"`
	// TotalAllocBytes is every byte allocated (runtime.MemStats.TotalAlloc).
	TotalAllocBytes uint64 `json:"totalAllocBytes"`
	// SysBytes is the memory the runtime obtained from the OS.
	SysBytes uint64 `json:"sysBytes"`
	// NumGC counts completed garbage collections.
	NumGC uint32 `json:"numGC"`
}

// Stop ends sampling and returns the figures.
func (h *HeapSampler) Stop() MemStats {
	close(h.stop)
	h.done.Wait()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return MemStats{PeakHeapBytes: max(h.peak, ms.HeapAlloc), TotalAllocBytes: ms.TotalAlloc, SysBytes: ms.Sys, NumGC: ms.NumGC}
}
