package kubeload_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// The sizes of BenchmarkInformerMemory, overridable from the environment:
// LWBENCH_BENCH_INFORMERS pod informers over LWBENCH_BENCH_PODS pods.
const (
	benchInformersEnv = "LWBENCH_BENCH_INFORMERS"
	benchPodsEnv      = "LWBENCH_BENCH_PODS"
	// benchHeapProfileEnv names a directory where BenchmarkInformerMemory
	// writes each set's heap profile once synced (bare.pprof,
	// lwbench.pprof): `go tool pprof -top -base bare.pprof lwbench.pprof`
	// shows what lwbench holds beyond client-go.
	benchHeapProfileEnv = "LWBENCH_BENCH_HEAPPROFILE"
	// benchResourcesEnv, benchWritesEnv and benchWriteRateEnv: the
	// resources watched in turn, and the writes sent once synced.
	benchResourcesEnv = "LWBENCH_BENCH_RESOURCES"
	benchWritesEnv    = "LWBENCH_BENCH_WRITES"
	benchWriteRateEnv = "LWBENCH_BENCH_WRITE_RATE"
	// benchWatchCacheEnv=off turns kube-apiserver's watch cache off, as
	// lwbench run's informer profile does: every LIST and WATCH then
	// reaches the embedded etcd, in this process.
	benchWatchCacheEnv = "LWBENCH_BENCH_WATCH_CACHE"
)

// envInt is the positive integer in environment variable name, or def.
func envInt(tb testing.TB, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// informerCost is what one set of informers cost this process, from before
// it started until it had synced: the Go heap in use after a GC, the
// resident set, and the CPU time (user and system) spent.
type informerCost struct {
	heapBytes, rssBytes float64
	cpuSeconds          float64
	sync                time.Duration
	// writesHeapBytes is the heap once the writes arrived;
	// writeCPUSeconds the CPU time while they were sent and received.
	writesHeapBytes, writeCPUSeconds float64
	// peakHeapBytes is the highest heap (live objects and garbage not yet
	// collected, at the test binary's GOGC) while syncing.
	peakHeapBytes float64
	// objects is the mean number of objects an informer held once synced.
	objects float64
}

// processSample is the process's live heap after a GC (the memory
// returned to the OS first, so that the resident set shows what is in
// use), its resident set and its CPU time so far.
type processSample struct {
	heap, rss float64
	cpu       float64
}

func sampleProcess(tb testing.TB) processSample {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return processSample{heap: float64(ms.HeapAlloc), rss: residentBytes(tb), cpu: cpuSeconds(tb)}
}

// residentBytes is VmRSS from /proc/self/status.
func residentBytes(tb testing.TB) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				tb.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb * 1024
		}
	}
	tb.Fatal("/proc/self/status has no VmRSS")
	return 0
}

// measureInformers runs start (which starts informers and waits until
// they have synced), measures their cost per informer once synced, runs
// writes (which sends writes and waits until every informer has them,
// returning its CPU seconds) and measures again, then stops them. If
// LWBENCH_BENCH_HEAPPROFILE names a directory, the heap profile once
// synced is written there as name.pprof.
func measureInformers(tb testing.TB, name string, n int, writes func(*benchSet) float64, start func() *benchSet) informerCost {
	before := sampleProcess(tb)
	t0 := time.Now()
	stopPeak := make(chan struct{})
	peak := make(chan float64)
	go func() { peak <- peakHeap(stopPeak) }()
	set := start()
	syncTime := time.Since(t0)
	close(stopPeak)
	peakBytes := <-peak
	held := 0
	for i := range n {
		held += set.objects(i)
	}
	cpu := cpuSeconds(tb)
	synced := sampleProcess(tb)
	if dir := os.Getenv(benchHeapProfileEnv); dir != "" {
		writeHeapProfile(tb, filepath.Join(dir, name+".pprof"))
	}
	writeCPU := writes(set)
	after := sampleProcess(tb)
	if dir := os.Getenv(benchHeapProfileEnv); dir != "" {
		writeHeapProfile(tb, filepath.Join(dir, name+"-writes.pprof"))
	}
	set.stop()
	per := float64(n)
	return informerCost{heapBytes: (synced.heap - before.heap) / per, rssBytes: (synced.rss - before.rss) / per,
		cpuSeconds: (cpu - before.cpu) / per, sync: syncTime,
		writesHeapBytes: (after.heap - before.heap) / per, writeCPUSeconds: writeCPU / per,
		peakHeapBytes: (peakBytes - before.heap) / per, objects: float64(held) / per}
}

// peakHeap samples the bytes of heap objects, live or not yet collected
// (runtime/metrics, without stopping the world), every 50 ms until stop,
// and returns the highest.
func peakHeap(stop <-chan struct{}) float64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var top uint64
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		metrics.Read(s)
		top = max(top, s[0].Value.Uint64())
		select {
		case <-stop:
			return float64(top)
		case <-t.C:
		}
	}
}

// cpuSeconds is the process's CPU time so far, user and system.
func cpuSeconds(tb testing.TB) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// writeHeapProfile writes the heap profile to path.
func writeHeapProfile(tb testing.TB, path string) {
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		tb.Fatal(err)
	}
}

// benchSet is a running set of informers: the last revision informer i
// received (in an event or bookmark) and its stop.
type benchSet struct {
	lastRevision func(i int) int64
	// objects is the number of objects informer i holds.
	objects func(i int) int
	stop    func()
}

// benchObject returns a new object of resource named name in namespace ns
// for the marker writes, and the type client-go decodes it into.
func benchObject(resource, ns, name string) (kruntime.Object, error) {
	m := metav1.ObjectMeta{Namespace: ns, Name: name}
	switch resource {
	case watchload.ResourcePods:
		return &corev1.Pod{ObjectMeta: m, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}, nil
	case watchload.ResourceConfigMaps:
		return &corev1.ConfigMap{ObjectMeta: m}, nil
	case watchload.ResourceEvents:
		return &corev1.Event{ObjectMeta: m, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name}, Reason: "Bench", Type: corev1.EventTypeNormal}, nil
	}
	return nil, fmt.Errorf("resource %q: informers watch pods, configmaps or events", resource)
}

// seedWorkload plans kopts' objects and creates them through st's API,
// returning the plan and its writers' workload.
func seedWorkload(tb testing.TB, st kubeload.Stack, kopts watchload.KubernetesWorkloadOptions) (*watchload.KubernetesWorkload, *kubeload.APIWorkload) {
	plan, err := watchload.NewKubernetesWorkload(kopts)
	if err != nil {
		tb.Fatal(err)
	}
	wl, err := kubeload.NewAPIWorkload(st.Connections, plan, kopts.Workers, kopts.Seed)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := wl.Seed(tb.Context(), kopts.Workers); err != nil {
		tb.Fatal(err)
	}
	return plan, wl
}

// bareInformers returns client-go SharedIndexInformers of resources (one
// each, in order) through st, each on a clientset of its own, dropping
// managedFields as kube-controller-manager's informers do; not started.
func bareInformers(tb testing.TB, st kubeload.Stack, resources []string) []cache.SharedIndexInformer {
	infs := make([]cache.SharedIndexInformer, len(resources))
	for i, r := range resources {
		cs, err := st.Connections.NewClientset()
		if err != nil {
			tb.Fatal(err)
		}
		obj, err := benchObject(r, "", "")
		if err != nil {
			tb.Fatal(err)
		}
		lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), r, "", fields.Everything())
		infs[i] = cache.NewSharedIndexInformerWithOptions(lw, obj, cache.SharedIndexInformerOptions{})
		if err := infs[i].SetTransform(kubeload.TrimManagedFields); err != nil {
			tb.Fatal(err)
		}
	}
	return infs
}

// writeMarkers creates one object named name in namespace ns of each of
// resources through cs and returns their resourceVersions by resource.
func writeMarkers(tb testing.TB, cs kubernetes.Interface, resources []string, ns, name string) map[string]int64 {
	markers := map[string]int64{}
	for _, r := range resources {
		obj, err := benchObject(r, ns, name)
		if err != nil {
			tb.Fatal(err)
		}
		got, err := cs.CoreV1().RESTClient().Post().Namespace(ns).Resource(r).Body(obj).Do(tb.Context()).Get()
		if err != nil {
			tb.Fatalf("marker %s: %v", r, err)
		}
		m, err := meta.Accessor(got)
		if err != nil {
			tb.Fatal(err)
		}
		markers[r], _ = strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	}
	return markers
}

// BenchmarkInformerMemory holds lwbench's informers against a bare
// client-go informer set doing the same (issue 21 item 6): through one
// real kube-apiserver (watch cache on; LWBENCH_BENCH_WATCH_CACHE=off
// turns it off), LWBENCH_BENCH_INFORMERS informers
// (30 by default), each on a connection of its own, of the resources of
// LWBENCH_BENCH_RESOURCES in turn (pods by default; e.g.
// "pods,configmaps,events" as lwbench run's watchers), over
// LWBENCH_BENCH_PODS pods (1,000; and a fifth as many configmaps and half
// as many events when those are watched, as lwbench run seeds), first as
// SharedIndexInformers with client-go's own ListWatch (dropping
// managedFields, as kube-controller-manager's do: TrimManagedFields), then
// as lwbench's
// InformerSet with the observers a run gives it (an Env whose history
// recorder watches etcd). Each set syncs, then receives
// LWBENCH_BENCH_WRITES updates (1,000; updates alone, so that both sets
// hold the same objects) at LWBENCH_BENCH_WRITE_RATE per
// second (200), through the run's own API writers, until every informer
// has the last; then it stops. It reports per informer: the Go heap in use
// after a GC once synced (heap-B/informer) and once the writes arrived
// (heap-after-writes-B/informer), the resident set's growth until synced
// (rss-B/informer), the highest heap while syncing, garbage included
// (sync-peak-heap-B/informer), the CPU time spent to sync (cpu-s/informer) and to
// receive the writes (write-cpu-s/informer: the writers' own CPU, measured
// alone first, taken off); the ratios are lwbench's over the bare set's.
// The embedded etcd and the benchmark's own clients are in the same
// process, outside the deltas.
//
// Run it with
//
//	go test ./pkg/kubeload -run '^$' -bench InformerMemory -benchtime 1x
func BenchmarkInformerMemory(b *testing.B) {
	n := envInt(b, benchInformersEnv, 30)
	pods := envInt(b, benchPodsEnv, 1000)
	writes := envInt(b, benchWritesEnv, 1000)
	rate := envInt(b, benchWriteRateEnv, 200)
	watched := []string{watchload.ResourcePods}
	if v := os.Getenv(benchResourcesEnv); v != "" {
		watched = strings.Split(v, ",")
	}
	kopts := watchload.KubernetesWorkloadOptions{Prefix: "/registry", Namespaces: 10, Pods: pods,
		Mix: watchload.Mix{UpdatePercent: 100}, ResourceMix: watchload.ResourceMix{PodsPercent: 100}, Workers: 8, Seed: 1, NamespacePrefix: "bench-"}
	mix := watchload.ResourceMix{}
	for _, r := range watched {
		switch r {
		case watchload.ResourcePods:
			mix.PodsPercent = 60
		case watchload.ResourceConfigMaps:
			kopts.ConfigMaps, mix.ConfigMapsPercent = pods/5, 10
		case watchload.ResourceEvents:
			kopts.Events, mix.EventsPercent = pods/2, 30
		default:
			b.Fatalf("%s: resource %q: want pods, configmaps or events", benchResourcesEnv, r)
		}
	}
	if len(watched) > 1 {
		kopts.ResourceMix = mix
	}
	resources := make([]string, n)
	for i := range resources {
		resources[i] = watched[i%len(watched)]
	}

	cacheOff := false
	switch v := os.Getenv(benchWatchCacheEnv); v {
	case "", "on":
	case "off":
		cacheOff = true
	default:
		b.Fatalf("%s=%q: want on or off", benchWatchCacheEnv, v)
	}
	st := stack(b, apiserverproc.Config{DisableWatchCache: cacheOff})
	ctx := b.Context()
	plan, wl := seedWorkload(b, st, kopts)
	sess := watchload.NewSession(st.Etcd, time.Now(), b.Logf)
	b.Cleanup(sess.Close)
	admin, err := sess.DialAdmin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := admin.Get(ctx, "/registry/namespaces/default")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sess.StartRecorder(ctx, plan.Prefixes(), "", resp.Header.Revision+1); err != nil {
		b.Fatal(err)
	}
	env := sess.NewEnv(1<<20, kopts.Workers)
	marker, err := st.Connections.NewClientset()
	if err != nil {
		b.Fatal(err)
	}
	ns := plan.Namespaces()[0]

	// writePhase sends the writes, then one marker object per resource
	// watched, and waits until every informer of set has its resource's
	// marker. It returns the CPU seconds it took.
	var phase int64
	var nextOp int64
	writePhase := func(set *benchSet) float64 {
		cpu0 := cpuSeconds(b)
		w, err := watchload.NewWriters(env, []watchload.KV{nil}, opsFrom{wl, nextOp}, watchload.WriterOptions{Rate: float64(rate), Total: int64(writes), Workers: kopts.Workers})
		if err != nil {
			b.Fatal(err)
		}
		ws := w.Run(ctx)
		nextOp += int64(writes)
		if ws.Errors > 0 {
			b.Logf("%d of %d writes failed", ws.Errors, writes)
		}
		phase++
		markers := writeMarkers(b, marker, watched, ns, fmt.Sprintf("bench-marker-%d", phase))
		if set != nil {
			deadline := time.Now().Add(2 * time.Minute)
			for i, r := range resources {
				for set.lastRevision(i) < markers[r] {
					if time.Now().After(deadline) {
						b.Fatalf("informer %d (%s) has revision %d, not the marker's %d, after 2m", i, r, set.lastRevision(i), markers[r])
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}
		return cpuSeconds(b) - cpu0
	}
	// The writers' own CPU, with no informer.
	writersCPU := writePhase(nil)

	const syncTimeout = 5 * time.Minute
	for b.Loop() {
		bare := measureInformers(b, "bare", n, writePhase, func() *benchSet {
			infs := bareInformers(b, st, resources)
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{}, n)
			for _, inf := range infs {
				go func() {
					inf.RunWithContext(rctx)
					done <- struct{}{}
				}()
			}
			wctx, wcancel := context.WithTimeout(ctx, syncTimeout)
			defer wcancel()
			for i, inf := range infs {
				if !cache.WaitForCacheSync(wctx.Done(), inf.HasSynced) {
					b.Fatalf("bare informer %d did not sync within %v", i, syncTimeout)
				}
			}
			return &benchSet{
				lastRevision: func(i int) int64 {
					rv, _ := strconv.ParseInt(infs[i].LastSyncResourceVersion(), 10, 64)
					return rv
				},
				objects: func(i int) int { return len(infs[i].GetStore().ListKeys()) },
				stop: func() {
					cancel()
					for range infs {
						<-done
					}
				},
			}
		})
		lwb := measureInformers(b, "lwbench", n, writePhase, func() *benchSet {
			set, err := kubeload.NewInformerSet(st.Connections, env, "/registry", resources, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := set.Start(ctx, syncTimeout); err != nil {
				b.Fatal(err)
			}
			return &benchSet{lastRevision: set.LastRevision, objects: func(i int) int { return len(set.Cache(i)) }, stop: set.Stop}
		})
		if v := env.Violations.Total(); v > 0 {
			b.Errorf("lwbench's informers found %d violations: %v", v, env.Violations.Samples())
		}
		b.Logf("%d informers (%s) x %d pods: bare client-go synced in %v, lwbench in %v; writers alone %.2f CPU s",
			n, strings.Join(watched, ","), pods, bare.sync, lwb.sync, writersCPU)
		bare.writeCPUSeconds -= writersCPU / float64(n)
		lwb.writeCPUSeconds -= writersCPU / float64(n)
		report := func(c informerCost, name string) {
			b.ReportMetric(c.heapBytes, name+"-heap-B/informer")
			b.ReportMetric(c.writesHeapBytes, name+"-heap-after-writes-B/informer")
			b.ReportMetric(c.rssBytes, name+"-rss-B/informer")
			b.ReportMetric(c.peakHeapBytes, name+"-sync-peak-heap-B/informer")
			b.ReportMetric(c.cpuSeconds, name+"-cpu-s/informer")
			b.ReportMetric(c.writeCPUSeconds, name+"-write-cpu-s/informer")
		}
		report(bare, "bare")
		report(lwb, "lwbench")
		// The writes are updates: both sets hold the same objects.
		b.ReportMetric(bare.objects, "bare-objects/informer")
		b.ReportMetric(lwb.objects, "lwbench-objects/informer")
		if bare.objects < float64(pods)/2 || lwb.objects < float64(pods)/2 {
			b.Errorf("informers held %.1f objects on average (bare) and %.1f (lwbench); want at least half of the %d pods seeded", bare.objects, lwb.objects, pods)
		}
		b.ReportMetric(lwb.heapBytes/bare.heapBytes, "heap-ratio")
		b.ReportMetric(lwb.writesHeapBytes/bare.writesHeapBytes, "heap-after-writes-ratio")
		b.ReportMetric(lwb.rssBytes/bare.rssBytes, "rss-ratio")
		b.ReportMetric(lwb.peakHeapBytes/bare.peakHeapBytes, "sync-peak-heap-ratio")
		b.ReportMetric(lwb.cpuSeconds/bare.cpuSeconds, "cpu-ratio")
		b.ReportMetric(lwb.writeCPUSeconds/bare.writeCPUSeconds, "write-cpu-ratio")
	}
}

// opsFrom is a Workload whose op i is w's op from+i: each write phase
// goes on with the plan where the last ended.
type opsFrom struct {
	*kubeload.APIWorkload
	from int64
}

func (o opsFrom) Next(i int64) watchload.Op { return o.APIWorkload.Next(o.from + i) }
