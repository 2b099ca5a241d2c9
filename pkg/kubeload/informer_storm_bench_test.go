package kubeload_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// benchCompactionEnv is BenchmarkBareInformerRun's kube-apiserver
// --etcd-compaction-interval (a Go duration); benchStartConcurrencyEnv
// its informers listing at once.
const (
	benchCompactionEnv       = "LWBENCH_BENCH_COMPACTION"
	benchStartConcurrencyEnv = "LWBENCH_BENCH_START_CONCURRENCY"
)

// BenchmarkBareInformerRun is the load of `lwbench run --kube-apiserver
// 1.37 --watchers N --objects P` (issue 21 item 6's target: N 300, P
// 3,000) with bare client-go informers in place of lwbench's, in one
// process with the embedded etcd and the counting proxy as lwbench run
// has them: kube-apiserver with its watch cache off (lwbench's informer
// profile) and its compactor every LWBENCH_BENCH_COMPACTION (default a
// third of the run's 20 s, as lwbench run's); the run's objects (P pods,
// P/5 configmaps, P/2 events, watchload's defaults); N SharedIndexInformers
// (LWBENCH_BENCH_INFORMERS, default 300) over pods, configmaps and events
// in turn, at most LWBENCH_BENCH_START_CONCURRENCY listing at once
// (default 32, lwbench's --start-concurrency default), client-go's WatchListClient at its default (on); then the
// run's writes (LWBENCH_BENCH_WRITES, default 4,000, at
// LWBENCH_BENCH_WRITE_RATE, default 200/s) and a marker object per
// resource. It reports how many informers synced within 10 minutes and
// how many reached their marker within 5 more, the pods' initial states
// kube-apiserver streamed from etcd (RangeStreams of the pods' prefix,
// counted by the proxy: one per pod informer when nothing expires), the
// time the writes took, and the process's peak RSS and CPU: what the
// same load costs without lwbench's harness, beside scripts/harness-cost.sh's
// run of the target's command. Nothing is asserted but that the stack
// works: an informer that never syncs is the result, not a failure.
func BenchmarkBareInformerRun(b *testing.B) {
	n := envInt(b, benchInformersEnv, 300)
	pods := envInt(b, benchPodsEnv, 3000)
	writes := envInt(b, benchWritesEnv, 4000)
	rate := envInt(b, benchWriteRateEnv, 200)
	compaction := 20 * time.Second / 3
	if v := os.Getenv(benchCompactionEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("%s=%q: want a positive duration", benchCompactionEnv, v)
		}
		compaction = d
	}
	startConcurrency := envInt(b, benchStartConcurrencyEnv, 32)
	const syncTimeout, catchUpTimeout = 10 * time.Minute, 5 * time.Minute
	lo := watchload.Options{Objects: pods, Watchers: n, Duration: 20 * time.Second, Prefix: "/registry"}.Defaults()
	kopts := watchload.KubernetesWorkloadOptions{Prefix: lo.Prefix, Namespaces: lo.Namespaces, Pods: lo.Objects,
		ConfigMaps: lo.ConfigMaps, Events: lo.Events, Mix: lo.Mix, ResourceMix: lo.ResourceMix, EventTTL: lo.EventTTL,
		Workers: lo.WriterConcurrency, Seed: 1, NamespacePrefix: "bench-"}
	resources := make([]string, n)
	for i := range resources {
		resources[i] = lo.WatchResources[i%len(lo.WatchResources)]
	}

	st := stack(b, apiserverproc.Config{DisableWatchCache: true, EtcdCompactionInterval: compaction})
	ctx := b.Context()
	plan, wl := seedWorkload(b, st, kopts)
	sess := watchload.NewSession(st.Etcd, time.Now(), b.Logf)
	b.Cleanup(sess.Close)
	env := sess.NewEnv(1<<20, kopts.Workers)
	marker, err := st.Connections.NewClientset()
	if err != nil {
		b.Fatal(err)
	}
	st.Counter.Reset()

	for b.Loop() {
		cpu0 := cpuSeconds(b)
		t0 := time.Now()
		infs := bareInformers(b, st, resources)
		rctx, cancel := context.WithCancel(ctx)
		var running sync.WaitGroup
		// Each informer starts when a slot is free and frees it once
		// synced (or at the sync deadline), as lwbench's InformerSet
		// starts its informers.
		slots := make(chan struct{}, startConcurrency)
		var synced atomic.Int64
		syncCtx, syncCancel := context.WithTimeout(ctx, syncTimeout)
		var starting sync.WaitGroup
		for _, inf := range infs {
			select {
			case slots <- struct{}{}:
			case <-syncCtx.Done():
			}
			if syncCtx.Err() != nil {
				break
			}
			running.Go(func() { inf.RunWithContext(rctx) })
			starting.Go(func() {
				defer func() { <-slots }()
				if cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
					synced.Add(1)
				}
			})
		}
		starting.Wait()
		syncCancel()
		syncTime := time.Since(t0)
		b.Logf("%d of %d bare informers synced in %v", synced.Load(), n, syncTime.Round(time.Millisecond))

		w, err := watchload.NewWriters(env, []watchload.KV{nil}, opsFrom{wl, 0}, watchload.WriterOptions{Rate: float64(rate), Total: int64(writes), Workers: kopts.Workers})
		if err != nil {
			b.Fatal(err)
		}
		tw := time.Now()
		ws := w.Run(ctx)
		writeTime := time.Since(tw)
		if ws.Errors > 0 {
			b.Logf("%d of %d writes failed", ws.Errors, writes)
		}
		markers := writeMarkers(b, marker, lo.WatchResources, plan.Namespaces()[0], "bench-marker")
		caughtUp := 0
		deadline := time.Now().Add(catchUpTimeout)
		for i, r := range resources {
			for {
				rv, _ := strconv.ParseInt(infs[i].LastSyncResourceVersion(), 10, 64)
				if rv >= markers[r] {
					caughtUp++
					break
				}
				if !time.Now().Before(deadline) || ctx.Err() != nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		cpu := cpuSeconds(b) - cpu0
		cancel()
		running.Wait()

		var streams int64
		for _, r := range st.Counter.Requests() {
			if r.Method == "RangeStream" && r.Resource == watchload.ResourcePods {
				streams += r.Requests
			}
		}
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		b.Logf("bare client-go, %d informers x %d pods, compaction every %v: %d synced in %v, writes took %v (%v scheduled), %d caught up with the marker, %d pod states streamed from etcd, %.0f CPU s, peak RSS %.0f MB",
			n, pods, compaction, synced.Load(), syncTime.Round(time.Second), writeTime.Round(100*time.Millisecond),
			time.Duration(float64(writes)/float64(rate)*float64(time.Second)), caughtUp, streams, cpu, float64(ru.Maxrss)*1024/1e6)
		b.ReportMetric(float64(synced.Load()), "synced-informers")
		b.ReportMetric(syncTime.Seconds(), "sync-s")
		b.ReportMetric(float64(caughtUp), "caught-up-informers")
		b.ReportMetric(writeTime.Seconds(), "writes-s")
		b.ReportMetric(float64(streams), "pod-rangestreams")
		b.ReportMetric(cpu, "cpu-s")
		b.ReportMetric(float64(ru.Maxrss)*1024, "peak-rss-B") // Linux: kilobytes
	}
}
