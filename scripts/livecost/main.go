// Command livecost measures what etcdinspect's live modes cost a running
// etcd, for scripts/live-cost.sh, and writes the table to -out
// (results/live-cost.md).
//
// For each etcd release (-etcd VERSION=BINDIR) and each key count
// (-keys), it starts one real etcd member on free loopback ports, writes
// that many Kubernetes-shaped keys (pods of about 4 KB and configmaps of
// 1 to 5 KB, encoded as kube-apiserver stores them), then, per live mode:
//
//   - times -scans scans alone (the median is reported) and the etcd
//     process's CPU seconds during each (utime plus stime from
//     /proc/<pid>/stat);
//   - runs `lwbench put` (-lwbench) against the member for -duration at
//     -rate plain 1 KiB Puts per second twice per mode (after one
//     discarded warm-up load): alone, then with that mode's scans run back
//     to back for the whole load; the p99 write latency of each run, the
//     difference being what the mode adds.
//
// The modes are pkg/live's reads as the commands and the exporter make
// them: status (ReadStatus), count-only (one count_only Range per
// resource prefix, the exporter's cheap scrape between full scans),
// keys-only (ReadUsage: usage --endpoints) and values (ReadUsage with
// values: usage --endpoints --values). The exporter's default scrape is
// reported as keys-only's figures: it runs that same read.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/live"
)

// budgetMs is the most the default scrape may add to the p99 write
// latency at the largest key count on etcd 3.7: the budget
// kube-apiserver's reviewers set for a count probe (kubernetes PR 59757).
const budgetMs = 50

// clockTicksPerSecond is USER_HZ, the unit of /proc/<pid>/stat's utime
// and stime: 100 on every Linux architecture Go supports.
const clockTicksPerSecond = 100

type release struct{ version, binDir string }

type releases []release

func (r *releases) String() string { return fmt.Sprint(*r) }

func (r *releases) Set(s string) error {
	v, dir, ok := strings.Cut(s, "=")
	if !ok || v == "" || dir == "" {
		return fmt.Errorf("want VERSION=BINDIR, got %q", s)
	}
	*r = append(*r, release{v, dir})
	return nil
}

type options struct {
	releases releases
	keys     []int
	scans    int
	duration time.Duration
	rate     int
	lwbench  string
	out      string
	commit   string
	quick    bool
	fsync    bool
}

func main() {
	var o options
	flag.Var(&o.releases, "etcd", "VERSION=BINDIR of an etcd release to measure (repeat)")
	keys := flag.String("keys", "10000,100000", "key counts, comma-separated")
	flag.IntVar(&o.scans, "scans", 3, "scans timed alone per mode (the median is reported)")
	flag.DurationVar(&o.duration, "duration", 15*time.Second, "length of each write load")
	flag.IntVar(&o.rate, "rate", 200, "writes per second of the load")
	flag.StringVar(&o.lwbench, "lwbench", "", "lwbench binary")
	flag.StringVar(&o.out, "out", "results/live-cost.md", "where to write the table")
	flag.StringVar(&o.commit, "commit", "", "git commit measured")
	flag.BoolVar(&o.quick, "quick", false, "label the output a quick run (not the target's 100k keys)")
	flag.BoolVar(&o.fsync, "fsync", false, "let etcd fsync (default off: the shared disk's noise would hide the scans' effect)")
	flag.Parse()
	for _, k := range strings.Split(*keys, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(k))
		if err != nil || n <= 0 {
			log.Fatalf("livecost: -keys %q: want positive numbers", *keys)
		}
		o.keys = append(o.keys, n)
	}
	if len(o.releases) == 0 || o.lwbench == "" {
		log.Fatal("livecost: -etcd and -lwbench are required")
	}
	if err := run(o); err != nil {
		log.Fatalf("livecost: %v", err)
	}
}

// row is one mode's figures on one release and key count.
type row struct {
	version, mode string
	keys          int
	// scanSeconds and cpuSeconds are medians over the scans alone.
	scanSeconds, cpuSeconds float64
	// scansDuringLoad counts the scans run during the load.
	scansDuringLoad int
	// p99Alone is the load alone just before p99During, the load with
	// the scans; aloneMin and aloneMax the range of every load alone on
	// this release and key count (its noise).
	p99Alone, p99During, aloneMin, aloneMax float64
}

func run(o options) error {
	ctx := context.Background()
	start := time.Now().UTC()
	load := readFile("/proc/loadavg")
	var rows []row
	etcdVersions := map[string]string{}
	for _, r := range o.releases {
		for _, n := range o.keys {
			rs, served, err := measure(ctx, o, r, n)
			if err != nil {
				return fmt.Errorf("etcd %s, %d keys: %w", r.version, n, err)
			}
			etcdVersions[r.version] = served
			rows = append(rows, rs...)
		}
	}
	return os.WriteFile(o.out, []byte(report(o, rows, start, load, etcdVersions)), 0o644)
}

// mode is one live read.
type mode struct {
	name string
	read func(ctx context.Context) error
}

func measure(ctx context.Context, o options, r release, keys int) ([]row, string, error) {
	dir, err := os.MkdirTemp("", "livecost-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(dir)
	cl, err := etcdproc.Start(ctx, etcdproc.Config{BinDir: r.binDir, Dir: dir, UnsafeNoFsync: !o.fsync,
		ExtraArgs: []string{"--quota-backend-bytes", fmt.Sprint(int64(8) << 30)}})
	if err != nil {
		return nil, "", err
	}
	defer cl.Stop()
	c, err := cl.Client()
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	t0 := time.Now()
	valueBytes, err := write(ctx, c, keys)
	if err != nil {
		return nil, "", err
	}
	log.Printf("etcd %s: wrote %d keys (%d value bytes) in %v", r.version, keys, valueBytes, time.Since(t0).Round(time.Second))
	eps := cl.Endpoints()
	versions, err := live.ServerVersions(ctx, c, eps, 5*time.Second)
	if err != nil {
		return nil, "", err
	}
	resources, err := resourcePrefixes(ctx, c)
	if err != nil {
		return nil, "", err
	}
	pid := cl.Members[0].PID()
	modes := []mode{
		{"status", func(ctx context.Context) error { _, err := live.ReadStatus(ctx, c, eps, 5*time.Second); return err }},
		{"usage count-only", func(ctx context.Context) error { return countOnly(ctx, c, resources) }},
		{"usage keys-only", func(ctx context.Context) error {
			_, err := live.ReadUsage(ctx, c, live.UsageOptions{AllowValueReads: true, Versions: versions})
			return err
		}},
		{"usage --values", func(ctx context.Context) error {
			_, err := live.ReadUsage(ctx, c, live.UsageOptions{AllowValueReads: true, Versions: versions, Values: true})
			return err
		}},
	}
	// A first load, discarded: etcd's first writes after the keys were
	// written, and lwbench's first connection, are slower than later ones.
	warm := o
	warm.duration = min(o.duration, 3*time.Second)
	if _, err := writeP99(ctx, warm, eps[0], nil); err != nil {
		return nil, "", err
	}
	var rows []row
	for _, m := range modes {
		rw := row{version: r.version, mode: m.name, keys: keys}
		var times, cpus []float64
		for range o.scans {
			cpu0, err := cpuSeconds(pid)
			if err != nil {
				return nil, "", err
			}
			t := time.Now()
			if err := m.read(ctx); err != nil {
				return nil, "", fmt.Errorf("%s: %w", m.name, err)
			}
			times = append(times, time.Since(t).Seconds())
			cpu1, err := cpuSeconds(pid)
			if err != nil {
				return nil, "", err
			}
			cpus = append(cpus, cpu1-cpu0)
		}
		rw.scanSeconds, rw.cpuSeconds = median(times), median(cpus)
		if rw.p99Alone, err = writeP99(ctx, o, eps[0], nil); err != nil {
			return nil, "", err
		}
		rw.p99During, err = writeP99(ctx, o, eps[0], func(ctx context.Context) error {
			err := m.read(ctx)
			if err == nil {
				rw.scansDuringLoad++
			}
			return err
		})
		if err != nil {
			return nil, "", fmt.Errorf("%s under load: %w", m.name, err)
		}
		log.Printf("etcd %s, %d keys, %s: scan %.3f s, etcd CPU %.2f s, p99 write %.1f ms during %d scans, %.1f ms alone",
			r.version, keys, m.name, rw.scanSeconds, rw.cpuSeconds, rw.p99During, rw.scansDuringLoad, rw.p99Alone)
		rows = append(rows, rw)
	}
	lo, hi := rows[0].p99Alone, rows[0].p99Alone
	for _, rw := range rows {
		lo, hi = min(lo, rw.p99Alone), max(hi, rw.p99Alone)
	}
	for i := range rows {
		rows[i].aloneMin, rows[i].aloneMax = lo, hi
	}
	return rows, versions[0], nil
}

// write puts keys Kubernetes objects under /registry, half pods (about 4
// KB) and half configmaps of 1 to 5 KB, in 20 namespaces, with 32
// writers, and returns their value bytes.
func write(ctx context.Context, c *clientv3.Client, keys int) (int64, error) {
	codec, err := keyspace.NewCodec()
	if err != nil {
		return 0, err
	}
	jobs := make(chan int)
	errs := make(chan error, 32)
	var mu sync.Mutex
	var total int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gen := keyspace.NewGenerator(7)
			for i := range jobs {
				ns := fmt.Sprintf("ns-%02d", i%20)
				k := keyspace.Key{Prefix: keyspace.DefaultPrefix, Namespace: ns}
				var b []byte
				var err error
				if i%2 == 0 {
					k.Resource, k.Name = "pods", fmt.Sprintf("pod-%06d", i)
					b, err = codec.Encode(gen.Pod(ns, k.Name, 0))
				} else {
					k.Resource, k.Name = "configmaps", fmt.Sprintf("cm-%06d", i)
					size := 700 + rand.New(rand.NewPCG(uint64(i), 7)).IntN(3600)
					b, err = codec.Encode(gen.ConfigMap(ns, k.Name, 0, size))
				}
				if err == nil {
					_, err = c.Put(ctx, keyspace.Build(k), string(b))
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				total += int64(len(b))
				mu.Unlock()
			}
		}()
	}
	for i := range keys {
		select {
		case jobs <- i:
		case err := <-errs:
			close(jobs)
			wg.Wait()
			return 0, err
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	return total, nil
}

// resourcePrefixes lists the resource directories under /registry/ (one
// keys_only read, not measured): what kube-apiserver's count probe and
// the exporter's count-only scrape range over.
func resourcePrefixes(ctx context.Context, c *clientv3.Client) ([]string, error) {
	resp, err := c.Get(ctx, keyspace.DefaultPrefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), keyspace.DefaultPrefix+"/")
		res, _, _ := strings.Cut(rest, "/")
		seen[keyspace.DefaultPrefix+"/"+res+"/"] = true
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// countOnly is one count_only Range per prefix.
func countOnly(ctx context.Context, c *clientv3.Client, prefixes []string) error {
	for _, p := range prefixes {
		if _, err := c.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
			return err
		}
	}
	return nil
}

// writeP99 runs lwbench put against endpoint for o.duration and returns
// its p99 write latency in ms; with scan, it runs scan back to back until
// the load ends.
func writeP99(ctx context.Context, o options, endpoint string, scan func(context.Context) error) (float64, error) {
	writes := int(o.duration.Seconds() * float64(o.rate))
	cmd := exec.CommandContext(ctx, o.lwbench, "put", "--endpoints", endpoint, "--value-size", "1024", "--keys", "1000",
		"--writes", fmt.Sprint(writes), "--write-rate", fmt.Sprint(o.rate), "-w", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var scanErr error
	var werr error
	if scan != nil {
		sctx, cancel := context.WithCancel(ctx)
		scanning := make(chan struct{})
		go func() {
			defer close(scanning)
			for sctx.Err() == nil {
				if err := scan(sctx); err != nil && sctx.Err() == nil {
					scanErr = err
					return
				}
			}
		}()
		werr = <-done
		cancel()
		<-scanning
	} else {
		werr = <-done
	}
	if werr != nil {
		return 0, fmt.Errorf("lwbench put: %w: %s", werr, lastLine(stderr.String()))
	}
	if scanErr != nil {
		return 0, scanErr
	}
	var res struct {
		Writes struct {
			Errors  int64 `json:"errors"`
			Latency struct {
				P99Ms float64 `json:"p99Ms"`
			} `json:"latency"`
		} `json:"writes"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return 0, fmt.Errorf("lwbench put JSON: %w", err)
	}
	if res.Writes.Errors > 0 {
		return 0, fmt.Errorf("lwbench put: %d write errors", res.Writes.Errors)
	}
	return res.Writes.Latency.P99Ms, nil
}

// cpuSeconds is the user plus system CPU time of process pid
// (/proc/<pid>/stat fields 14 and 15, after the parenthesised command).
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// fields[0] is field 3 (state): utime is field 14, stime 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	u, err1 := strconv.ParseInt(fields[11], 10, 64)
	st, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, fields[11], fields[12])
	}
	return float64(u+st) / clockTicksPerSecond, nil
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// machine describes the machine: CPU model, cores, memory.
func machine() (model string, cores int, memory string) {
	model, memory = "unknown", "unknown"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	for _, l := range strings.Split(readFile("/proc/meminfo"), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
				memory = fmt.Sprintf("%.1f GiB", kb/(1<<20))
			}
		}
	}
	return model, runtime.NumCPU(), memory
}

func report(o options, rows []row, start time.Time, load string, etcdVersions map[string]string) string {
	var b strings.Builder
	title := "# Live mode cost"
	if o.quick {
		title += " (QUICK RUN: smaller key counts, not the target's measurement)"
	}
	fmt.Fprintf(&b, "%s\n\nGenerated by `scripts/live-cost.sh%s` (scripts/livecost). Do not edit.\n\n", title, map[bool]string{true: " --quick"}[o.quick])
	model, cores, memory := machine()
	fmt.Fprintf(&b, "- Date: %s (took %s)\n", start.Format(time.RFC3339), time.Since(start).Round(time.Second))
	fmt.Fprintf(&b, "- Machine: %s, %d cores, %s memory; load average before: %s (the machine may be shared)\n", model, cores, memory, load)
	var vs []string
	for _, r := range o.releases {
		vs = append(vs, etcdVersions[r.version])
	}
	fmt.Fprintf(&b, "- Versions: etcd %s; %s; etcdkit commit %s\n", strings.Join(vs, ", "), runtime.Version(), o.commit)
	fsync := "off (--unsafe-no-fsync: the disk's noise would hide the scans' effect)"
	if o.fsync {
		fsync = "on"
	}
	fmt.Fprintf(&b, "- Setup: one etcd member per release on loopback, fsync %s; keys: half pods (about 4 KB), half configmaps "+
		"(1 to 5 KB), encoded as kube-apiserver stores them, in 20 namespaces; write load: `lwbench put` of 1 KiB values over 1,000 keys "+
		"at %d writes/s for %s.\n\n", fsync, o.rate, o.duration)
	fmt.Fprintf(&b, "**Target**: the exporter's default scrape adds at most %d ms to etcd's p99 write latency at 100,000 keys on etcd 3.7 "+
		"(the budget kube-apiserver's reviewers set for a count probe, kubernetes PR 59757).\n\n", budgetMs)

	largest := slices.Max(o.keys)
	fmt.Fprintf(&b, "## Verdict (default scrape at %d keys)\n\n", largest)
	if largest < 100_000 {
		fmt.Fprintf(&b, "Measured at %d keys, not the target's 100,000: indicative only.\n\n", largest)
	}
	b.WriteString("| etcd | p99 write alone (ms) | p99 during scrapes (ms) | added (ms) | within 50 ms | loads alone ranged (ms) |\n|---|--:|--:|--:|---|---|\n")
	for _, r := range rows {
		if r.mode == "usage keys-only" && r.keys == largest {
			added := r.p99During - r.p99Alone
			verdict := map[bool]string{true: "yes", false: "NO"}[added <= budgetMs]
			if r.aloneMax-r.aloneMin > budgetMs {
				verdict += " (inconclusive: the loads alone differ by more than the budget)"
			}
			fmt.Fprintf(&b, "| %s | %.1f | %.1f | %+.1f | %s | %.1f to %.1f |\n", r.version, r.p99Alone, r.p99During, added, verdict, r.aloneMin, r.aloneMax)
		}
	}
	b.WriteString("\n## Every mode\n\n")
	b.WriteString("| etcd | keys | mode | scan (s) | etcd CPU per scan (s) | scans during load | p99 write alone (ms) | p99 write during scans (ms) | added (ms) |\n")
	b.WriteString("|---|--:|---|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		line := func(mode string) {
			fmt.Fprintf(&b, "| %s | %d | %s | %.3f | %.2f | %d | %.1f | %.1f | %+.1f |\n", r.version, r.keys, mode, r.scanSeconds, r.cpuSeconds,
				r.scansDuringLoad, r.p99Alone, r.p99During, r.p99During-r.p99Alone)
		}
		line(r.mode)
		if r.mode == "usage keys-only" {
			line("exporter default scrape (= usage keys-only)")
		}
	}
	b.WriteString(`
How to read it: scan is the median wall time of one read alone (pkg/live, in process, over one connection), etcd CPU the etcd
process's user plus system seconds during it (/proc/<pid>/stat). "During scans" runs the mode's reads back to back for the whole
write load: a scrape interval as short as the scan itself, the worst case; a longer --interval adds less. "Alone" is the same
load run just before, without scans; "loads alone ranged" is the spread of the four such loads, the noise. Before etcd 3.7 a keys_only Range reads every value from disk (etcd issue 20386), so
keys-only costs there what --values costs; 3.7 serves it from the in-memory index (etcd PR 21791) and is read with one
RangeStream, older releases in pages of 1,000 keys. One run each: differences of a few ms are noise on a shared machine.
`)
	return b.String()
}
