package watchload

import (
	"bufio"
	"context"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kubestore/etcdkit/pkg/report"
)

// selfSampler measures this process's CPU and memory over a run, and the
// etcd member's from its /metrics when it runs elsewhere.
type selfSampler struct {
	start    time.Time
	ru0      syscall.Rusage
	gc0      uint32
	pause0   uint64
	embedded bool
	endpoint string
	etcd0    *processSample

	mu             sync.Mutex
	peakHeap       uint64
	peakGoroutines int
	stop           chan struct{}
	done           chan struct{}
}

type processSample struct {
	at       time.Time
	cpu      float64
	rssBytes float64
}

// startSelfSampler starts sampling; endpoint is the member to read
// /metrics from (ignored when embedded).
func startSelfSampler(ctx context.Context, embedded bool, endpoint string) *selfSampler {
	s := &selfSampler{start: time.Now(), embedded: embedded, endpoint: endpoint, stop: make(chan struct{}), done: make(chan struct{})}
	syscall.Getrusage(syscall.RUSAGE_SELF, &s.ru0)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.gc0, s.pause0 = ms.NumGC, ms.PauseTotalNs
	s.sample(&ms)
	if !embedded && endpoint != "" {
		s.etcd0 = scrapeProcess(ctx, endpoint)
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				runtime.ReadMemStats(&ms)
				s.sample(&ms)
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

func (s *selfSampler) sample(ms *runtime.MemStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peakHeap = max(s.peakHeap, ms.HeapInuse)
	s.peakGoroutines = max(s.peakGoroutines, runtime.NumGoroutine())
}

// finish stops sampling and returns the figures.
func (s *selfSampler) finish(ctx context.Context) report.SelfStats {
	close(s.stop)
	<-s.done
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.sample(&ms)
	wall := time.Since(s.start)
	cpu := tv(ru.Utime) + tv(ru.Stime) - tv(s.ru0.Utime) - tv(s.ru0.Stime)
	s.mu.Lock()
	defer s.mu.Unlock()
	st := report.SelfStats{
		WallMs: report.Ms(wall), CPUSeconds: cpu, CPUCores: cpu / wall.Seconds(), NumCPU: runtime.NumCPU(),
		MaxRSSBytes: ru.Maxrss * 1024, PeakHeapBytes: int64(s.peakHeap), PeakGoroutines: s.peakGoroutines,
		GCCount: int64(ms.NumGC - s.gc0), GCPauseMs: float64(ms.PauseTotalNs-s.pause0) / 1e6,
		IncludesEmbeddedEtcd: s.embedded,
	}
	if s.etcd0 != nil {
		if e1 := scrapeProcess(ctx, s.endpoint); e1 != nil {
			d := e1.at.Sub(s.etcd0.at).Seconds()
			st.Etcd = &report.ProcessStats{Endpoint: s.endpoint, CPUSeconds: e1.cpu - s.etcd0.cpu, RSSBytes: int64(e1.rssBytes)}
			if d > 0 {
				st.Etcd.CPUCores = st.Etcd.CPUSeconds / d
			}
		}
	}
	return st
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// scrapeProcess reads process_cpu_seconds_total and
// process_resident_memory_bytes from an http:// member's /metrics; nil if
// it cannot.
func scrapeProcess(ctx context.Context, endpoint string) *processSample {
	if !strings.HasPrefix(endpoint, "http://") {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/metrics", nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	p := &processSample{at: time.Now()}
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "process_cpu_seconds_total":
			p.cpu, _ = strconv.ParseFloat(val, 64)
			found++
		case "process_resident_memory_bytes":
			p.rssBytes, _ = strconv.ParseFloat(val, 64)
			found++
		}
	}
	if found < 2 {
		return nil
	}
	return p
}
