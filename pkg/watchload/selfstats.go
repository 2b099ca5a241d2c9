package watchload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
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

	sched0 *metrics.Float64Histogram // /sched/latencies:seconds at the start

	mu             sync.Mutex
	peakHeap       uint64
	peakGoroutines int
	loadMax        float64 // highest one-minute load average seen
	stop           chan struct{}
	done           chan struct{}
}

// SelfSampler measures this process's resource use from its start
// (StartSelfSampler) to Finish, as a run's result reports it (SelfStats):
// for an experiment's worker process, whose result carries it too.
type SelfSampler struct{ s *selfSampler }

// StartSelfSampler starts sampling this process's CPU, memory, load
// average and Go scheduling delay (runtime/metrics /sched/latencies:
// seconds) every second until ctx ends or Finish; embedded says whether
// the etcd member runs in this process, and endpoint, when it does not,
// is the member whose /metrics it reads at the start and the end.
func StartSelfSampler(ctx context.Context, embedded bool, endpoint string) *SelfSampler {
	return &SelfSampler{s: startSelfSampler(ctx, embedded, endpoint)}
}

// Finish stops sampling and returns the figures over the time since
// StartSelfSampler. Call it once.
func (s *SelfSampler) Finish(ctx context.Context) report.SelfStats { return s.s.finish(ctx) }

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
	s.sched0 = schedLatencies()
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
	if l, err := loadAverage(); err == nil {
		s.loadMax = max(s.loadMax, l)
	}
}

// loadAverage returns the machine's one-minute load average, the first
// field of /proc/loadavg (proc(5)).
func loadAverage() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("/proc/loadavg is empty")
	}
	return strconv.ParseFloat(f[0], 64)
}

// schedLatencies reads the Go runtime's histogram of how long runnable
// goroutines waited to run (cumulative since the process started); nil
// if the runtime does not export it.
func schedLatencies() *metrics.Float64Histogram {
	sample := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return sample[0].Value.Float64Histogram()
}

// histogramQuantile returns quantile q of the samples added to a
// cumulative runtime/metrics histogram between before and after (the
// same buckets), as the upper bound of the bucket it falls in (its lower
// bound for the last, unbounded, bucket), in seconds; 0 without samples.
func histogramQuantile(before, after *metrics.Float64Histogram, q float64) float64 {
	if after == nil || (before != nil && len(before.Counts) != len(after.Counts)) {
		return 0
	}
	var total uint64
	counts := make([]uint64, len(after.Counts))
	for i, c := range after.Counts {
		if before != nil {
			c -= before.Counts[i]
		}
		counts[i] = c
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= rank {
			if hi := after.Buckets[i+1]; !math.IsInf(hi, 1) {
				return hi
			}
			return after.Buckets[i]
		}
	}
	return 0
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
		IncludesEmbeddedEtcd: s.embedded, LoadAverageMax: s.loadMax,
		SchedLatencyP99Ms: math.Round(histogramQuantile(s.sched0, schedLatencies(), 0.99)*1e6) / 1e3, // ms, to the µs
		CPULimitCores:     cpuLimitCores(),
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

// cpuMaxPath is cgroup v2's CPU limit of this process's cgroup, as a
// container sees its own (cgroup namespace).
const cpuMaxPath = "/sys/fs/cgroup/cpu.max"

// cpuLimitCores returns the CPU this process's cgroup may use, in cores
// (parseCPUMax of cpuMaxPath); 0 when unlimited or unreadable.
func cpuLimitCores() float64 {
	b, err := os.ReadFile(cpuMaxPath)
	if err != nil {
		return 0
	}
	cores, err := parseCPUMax(string(b))
	if err != nil {
		return 0
	}
	return cores
}

// parseCPUMax parses cgroup v2's cpu.max, "$MAX $PERIOD" ("max 100000"
// when unlimited; the kernel's cgroup-v2.rst), into cores: MAX over
// PERIOD, 0 for "max". An error for any other content.
func parseCPUMax(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, fmt.Errorf("cpu.max %q: want \"$MAX $PERIOD\"", s)
	}
	period, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || period <= 0 {
		return 0, fmt.Errorf("cpu.max %q: period not a positive integer", s)
	}
	if f[0] == "max" {
		return 0, nil
	}
	quota, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || quota <= 0 {
		return 0, fmt.Errorf("cpu.max %q: quota neither \"max\" nor a positive integer", s)
	}
	return float64(quota) / float64(period), nil
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
