// Command walcompare checks `etcdinspect wal` against etcd's own
// etcd-dump-logs (go.etcd.io/etcd/v3/tools/etcd-dump-logs), run by
// scripts/wal-vs-dump-logs.sh: a real etcd member (the binary given by
// -etcd) on free loopback ports receives a Kubernetes-shaped load (pods
// created, updated and deleted as kube-apiserver's guarded txns,
// then the member killed and restarted; configmaps put and deleted with
// plain Put and DeleteRange, events attached to leases, lease revokes,
// kube-apiserver's compaction), is stopped by PID, and both tools read its data directory. The entries per
// request kind of the two are compared and written to -out.json and
// -out.md; the command exits 1 when a kind differs.
//
// One run compares one etcd release (a section). With -section FILE it
// writes only that section's JSON; `walcompare -merge -out PATH FILE...`
// then writes the sections, in the order given, as one result, so that
// scripts/wal-vs-dump-logs.sh puts 3.5, 3.6 and 3.7 in one file. Each
// section names the etcd-dump-logs build it used, read from the binary's
// Go build info: the version of go.etcd.io/etcd/v3 whose
// tools/etcd-dump-logs it is, and every go.etcd.io module it links.
//
// etcd-dump-logs prints one line per entry, "term index type data", where
// data is the InternalRaftRequest in protobuf text format for a normal
// entry. Its kind here is the request's first top-level field other than
// the header (the same rule as pkg/wal: the oneof-like field that is set);
// an empty line is a new leader's no-op ("empty"), "???" an entry that does
// not decode. Where etcd-dump-logs has an -entry-type filter for a kind
// (IRRPut, IRRTxn, ..., ConfigChange), its own count under that filter is
// recorded beside the parsed one and must agree too.
package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/pkg/keyspace"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type config struct {
	etcd, dumpLogs, inspect, out string
	pods, configMaps, events     int
	meta                         listFlag
	keep                         bool
	// tryDumpLogs is an etcd-dump-logs build run first; what it does is
	// recorded, the comparison uses dumpLogs.
	tryDumpLogs string
	// startExclusive: -dump-logs reads the entries after -start-index
	// (etcd-dump-logs 3.6 and older), not from it (3.7).
	startExclusive bool
	// walBytes, when set, switches to the timing mode (bench.go).
	walBytes string
	runs     int
	// section, when set, is where the section's JSON goes instead of -out.
	section string
	// merge switches to writing -out from the section files given as
	// arguments.
	merge bool
	// skip, with -section, writes a section that records why the release
	// given by -skip-etcd was not compared (no load is run).
	skip, skipEtcd string
}

func main() {
	var c config
	flag.StringVar(&c.etcd, "etcd", "", "etcd server binary")
	flag.StringVar(&c.dumpLogs, "dump-logs", "", "etcd-dump-logs binary")
	flag.StringVar(&c.inspect, "etcdinspect", "", "etcdinspect binary")
	flag.StringVar(&c.out, "out", "results/wal-vs-dump-logs", "results path without .json/.md")
	flag.IntVar(&c.pods, "pods", 2600, "pods created (each updated 3 times; a quarter deleted)")
	flag.IntVar(&c.configMaps, "configmaps", 100, "configmaps put (a fifth deleted with DeleteRange)")
	flag.IntVar(&c.events, "events", 300, "events, attached to one of events/10 leases")
	flag.StringVar(&c.tryDumpLogs, "try-dump-logs", "", "another etcd-dump-logs binary (of the same release as etcd) whose run on the data directory is recorded, not compared")
	flag.BoolVar(&c.startExclusive, "start-index-exclusive", true, "-dump-logs dumps the entries after -start-index (3.6 and older; 3.7 dumps from it)")
	flag.BoolVar(&c.keep, "keep", false, "keep the member's data directory (its path is logged)")
	flag.StringVar(&c.walBytes, "wal-bytes", "", "time both tools instead: write until the data directory (WAL + db) holds this many bytes (e.g. 256MiB, 1GiB) and write -out (default results/wal-bench)")
	flag.IntVar(&c.runs, "runs", 3, "timed runs of each tool (-wal-bytes)")
	flag.Var(&c.meta, "meta", "section.key=value recorded in the results (repeatable; section machine or version)")
	flag.StringVar(&c.section, "section", "", "write this release's section as JSON to this file instead of -out (for -merge)")
	flag.BoolVar(&c.merge, "merge", false, "write -out.json and -out.md from the section files given as arguments, in their order")
	flag.StringVar(&c.skip, "skip", "", "with -section and -skip-etcd: write a section saying why this release is not compared")
	flag.StringVar(&c.skipEtcd, "skip-etcd", "", "the etcd release a -skip section is about")
	flag.Parse()
	switch {
	case c.merge:
		equal, err := merge(c, flag.Args())
		if err != nil {
			log.Fatalf("walcompare: %v", err)
		}
		if !equal {
			log.Printf("walcompare: the counts differ; see %s.md", c.out)
			os.Exit(1)
		}
		return
	case c.skip != "":
		if c.section == "" || c.skipEtcd == "" {
			log.Fatal("walcompare: -skip needs -section and -skip-etcd")
		}
		if err := writeJSON(c.section, &Section{Etcd: c.skipEtcd, Skipped: c.skip}); err != nil {
			log.Fatalf("walcompare: %v", err)
		}
		return
	}
	if c.etcd == "" || c.dumpLogs == "" || c.inspect == "" {
		log.Fatal("walcompare: -etcd, -dump-logs and -etcdinspect are required")
	}
	if c.walBytes != "" {
		if c.out == "results/wal-vs-dump-logs" {
			c.out = "results/wal-bench"
		}
		if err := bench(c); err != nil {
			log.Fatalf("walcompare: %v", err)
		}
		return
	}
	sec, err := run(c)
	if err != nil {
		log.Fatalf("walcompare: %v", err)
	}
	where := c.section
	if where == "" {
		res, err := newResult(c.meta, []Section{*sec})
		if err != nil {
			log.Fatalf("walcompare: %v", err)
		}
		if err := write(c.out, res); err != nil {
			log.Fatalf("walcompare: %v", err)
		}
		where = c.out + ".md"
	} else if err := writeJSON(c.section, sec); err != nil {
		log.Fatalf("walcompare: %v", err)
	}
	if !sec.Equal {
		log.Printf("walcompare: etcd %s: the counts differ; see %s", sec.Etcd, where)
		os.Exit(1)
	}
}

// Row is one request kind's entries as each tool counts them.
type Row struct {
	Kind string `json:"kind"`
	// DumpLogs counts etcd-dump-logs' lines of this kind.
	DumpLogs int64 `json:"dumpLogs"`
	// DumpLogsFilter is etcd-dump-logs' own count under -entry-type
	// Filter, where it has a filter for the kind.
	Filter         string `json:"filter,omitempty"`
	DumpLogsFilter *int64 `json:"dumpLogsFilter,omitempty"`
	// WAL is etcdinspect wal's count.
	WAL   int64 `json:"wal"`
	Equal bool  `json:"equal"`
}

// Result is what the command writes to -out.json: one Section per etcd
// release, in the order the script gives them.
type Result struct {
	Date    string            `json:"date"`
	Machine map[string]string `json:"machine"`
	// Versions are those shared by every section (Go, the repository's
	// commit); each section names its etcd and etcd-dump-logs.
	Versions map[string]string `json:"versions"`
	Sections []Section         `json:"sections"`
	// Equal is true when every section that ran is equal.
	Equal bool `json:"equal"`
}

// Section is one etcd release's comparison: the WAL a real member of that
// release wrote under the load, read by etcd-dump-logs and by etcdinspect.
type Section struct {
	// Etcd is the release of the etcd server that wrote the WAL, as its
	// --version prints it.
	Etcd string `json:"etcd"`
	// Skipped, when set, says why this release was not compared; the
	// other fields are then empty.
	Skipped string `json:"skipped,omitempty"`
	// DumpLogs is the etcd-dump-logs build whose counts are compared.
	DumpLogs *Build `json:"dumpLogs,omitempty"`
	// SameLine is true when DumpLogs' tool source and the etcd modules it
	// links are all of Etcd's minor release (x.y).
	SameLine bool     `json:"sameLine"`
	Load     string   `json:"load,omitempty"`
	Commands []string `json:"commands,omitempty"`
	// FirstIndex and LastIndex are the WAL's entry range, from
	// etcdinspect; etcd-dump-logs is run from FirstIndex.
	FirstIndex uint64 `json:"firstIndex"`
	LastIndex  uint64 `json:"lastIndex"`
	// LastSnapshotIndex is the index of the member's last .snap file (0:
	// none); etcd-dump-logs without -start-index starts there.
	LastSnapshotIndex uint64 `json:"lastSnapshotIndex"`
	// Entries are the entries each tool read in total.
	DumpLogsEntries int64 `json:"dumpLogsEntries"`
	WALEntries      int64 `json:"walEntries"`
	Rows            []Row `json:"rows,omitempty"`
	// TryDumpLogs records the run of -try-dump-logs: its build, command
	// and the end of its output when it failed.
	TryDumpLogs *Attempt `json:"tryDumpLogs,omitempty"`
	Equal       bool     `json:"equal"`
}

// Attempt is one run of a tool.
type Attempt struct {
	Build   *Build `json:"build,omitempty"`
	Command string `json:"command"`
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
}

// Build is an etcd-dump-logs binary as its Go build info describes it.
type Build struct {
	// Source is the version of go.etcd.io/etcd/v3, the root module whose
	// tools/etcd-dump-logs the binary is.
	Source string `json:"source"`
	// Modules are the versions of the other go.etcd.io modules the binary
	// links, by module path.
	Modules map[string]string `json:"modules"`
	Go      string            `json:"go"`
	// SourceProbed is scripts/build-benchmark.sh's record, beside the
	// binary, of the rule that chose Source and of each newer root module
	// version it skipped, with the reason.
	SourceProbed string `json:"sourceProbed,omitempty"`
}

// readBuild reads the Go build info of an etcd-dump-logs binary and the
// SOURCE_PROBED file beside it, if any.
func readBuild(bin string) (*Build, error) {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("read build info of %s: %w", bin, err)
	}
	if bi.Main.Path != "go.etcd.io/etcd/v3" {
		return nil, fmt.Errorf("%s: main module %q, want go.etcd.io/etcd/v3", bin, bi.Main.Path)
	}
	b := &Build{Source: bi.Main.Version, Modules: map[string]string{}, Go: bi.GoVersion}
	for _, d := range bi.Deps {
		if strings.HasPrefix(d.Path, "go.etcd.io/") && d.Path != "go.etcd.io/bbolt" {
			v := d.Version
			if d.Replace != nil {
				v = d.Replace.Path + "@" + d.Replace.Version
			}
			b.Modules[d.Path] = v
		}
	}
	if p, err := os.ReadFile(filepath.Join(filepath.Dir(bin), "SOURCE_PROBED")); err == nil {
		b.SourceProbed = strings.TrimSpace(string(p))
	}
	return b, nil
}

// snapshotOnZero reports whether b, an etcd-dump-logs before 3.6, takes
// -start-index 0 as unset and starts from the last snapshot.
func snapshotOnZero(b *Build) bool {
	major, minor, _ := strings.Cut(minorOf(b.Source), ".")
	m, err := strconv.Atoi(minor)
	return major == "3" && err == nil && m < 6
}

// minorOf returns x.y of a version such as v3.6.14 or 3.6.16.
func minorOf(v string) string {
	v = strings.TrimPrefix(v, "v")
	if i := strings.LastIndexByte(v, '.'); i >= 0 {
		return v[:i]
	}
	return v
}

// sameLine reports whether b's source and its etcd modules (go.etcd.io/etcd/...)
// are all of etcd's minor release.
func sameLine(etcd string, b *Build) bool {
	if minorOf(b.Source) != minorOf(etcd) {
		return false
	}
	for p, v := range b.Modules {
		if strings.HasPrefix(p, "go.etcd.io/etcd/") && minorOf(v) != minorOf(etcd) {
			return false
		}
	}
	return true
}

// etcdVersion runs `etcd --version` and returns the "etcd Version:" value.
func etcdVersion(bin string) (string, error) {
	b, err := output(bin, "--version")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "etcd Version: "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s --version: no \"etcd Version:\" line", bin)
}

// filters maps kinds (pkg/wal's names) to etcd-dump-logs' -entry-type
// filters (tools/etcd-dump-logs/main.go, evaluateEntrytypeFlag).
var filters = map[string]string{
	"range": "IRRRange", "put": "IRRPut", "deleteRange": "IRRDeleteRange", "txn": "IRRTxn",
	"compaction": "IRRCompaction", "leaseGrant": "IRRLeaseGrant", "leaseRevoke": "IRRLeaseRevoke",
	"leaseCheckpoint": "IRRLeaseCheckpoint", "confChange": "ConfigChange",
}

// v2Filter is etcd-dump-logs' -entry-type for v2 store requests of every
// method (passRequest); pkg/wal counts them per method ("v2.PUT").
const v2Filter = "Request"

// parseMeta files -meta section.key=value flags into machine and versions.
func parseMeta(meta []string, machine, versions map[string]string) error {
	versions["go (walcompare)"] = runtime.Version()
	for _, m := range meta {
		k, v, ok := strings.Cut(m, "=")
		sec, key, ok2 := strings.Cut(k, ".")
		if !ok || !ok2 {
			return fmt.Errorf("-meta %q: want section.key=value", m)
		}
		switch sec {
		case "machine":
			machine[key] = v
		case "version":
			versions[key] = v
		default:
			return fmt.Errorf("-meta %q: section must be machine or version", m)
		}
	}
	return nil
}

// output runs a tool and returns its stdout; its stderr goes into the
// error.
func output(bin string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", filepath.Base(bin), err, lastLines(stderr.String(), 5))
	}
	return b, nil
}

// lastLines returns the last n lines of s, or n lines from a Go panic's
// first line.
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	for i, line := range l {
		if strings.HasPrefix(line, "panic:") {
			return strings.Join(l[i:min(len(l), i+n)], "\n")
		}
	}
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// run writes the load with one etcd release and compares the two tools
// on its data directory.
func run(c config) (*Section, error) {
	ctx := context.Background()
	version, err := etcdVersion(c.etcd)
	if err != nil {
		return nil, err
	}
	dumpBuild, err := readBuild(c.dumpLogs)
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "walcompare-")
	if err != nil {
		return nil, err
	}
	if c.keep {
		log.Printf("keeping %s", work)
	} else {
		defer os.RemoveAll(work)
	}
	p, err := etcdproc.Start(ctx, etcdproc.Config{BinDir: filepath.Dir(c.etcd), Dir: work,
		// The WAL's content does not depend on fsync; the load runs faster without it.
		UnsafeNoFsync: true})
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	cli, err := p.Client()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	// A crash and restart between the pods and the rest: a new term, a new
	// leader's empty entry, and a WAL reopened after SIGKILL.
	crash := func() error {
		m := p.Members[0]
		if err := m.Kill(); err != nil {
			return err
		}
		if err := m.Restart(); err != nil {
			return err
		}
		return p.WaitReady(ctx)
	}
	if err := load(ctx, cli, c, crash); err != nil {
		cli.Close()
		return nil, err
	}
	cli.Close()
	p.Stop()
	log.Printf("load written in %v", time.Since(start).Round(time.Millisecond))
	dataDir := p.Members[0].DataDir

	res := &Section{Etcd: version, DumpLogs: dumpBuild, SameLine: sameLine(version, dumpBuild),
		Load: fmt.Sprintf("etcd %s, one member, loopback, --unsafe-no-fsync; %d pods created, updated 3 times and a quarter deleted, each a kube-apiserver guarded txn; "+
			"then the member is killed (SIGKILL) and restarted; "+
			"%d configmaps with plain Put, a fifth removed with DeleteRange; %d events with Put-in-txn on %d leases of 1 h, half of the leases revoked; "+
			"one kube-apiserver compaction (txn on compact_rev_key, then Compact)", version, c.pods, c.configMaps, c.events, max(1, c.events/10))}

	// etcdinspect wal DIR -w json
	args := []string{"wal", dataDir, "-w", "json"}
	res.Commands = append(res.Commands, "etcdinspect "+strings.Join(args, " "))
	b, err := output(c.inspect, args...)
	if err != nil {
		return nil, fmt.Errorf("etcdinspect wal: %w", err)
	}
	var rep struct {
		FirstIndex   uint64 `json:"firstIndex"`
		LastIndex    uint64 `json:"lastIndex"`
		Entries      int64  `json:"entries"`
		LastSnapshot *struct {
			Index uint64 `json:"index"`
		} `json:"lastSnapshot"`
		Kinds []struct {
			Kind    string `json:"kind"`
			Entries int64  `json:"entries"`
		} `json:"kinds"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("etcdinspect wal output: %w", err)
	}
	res.FirstIndex, res.LastIndex, res.WALEntries = rep.FirstIndex, rep.LastIndex, rep.Entries
	if rep.LastSnapshot != nil {
		res.LastSnapshotIndex = rep.LastSnapshot.Index
	}
	walCounts := map[string]int64{}
	for _, k := range rep.Kinds {
		walCounts[k.Kind] = k.Entries
	}

	if c.tryDumpLogs != "" {
		args := []string{"-start-index", strconv.FormatUint(max(rep.FirstIndex, 1), 10), dataDir}
		tb, err := readBuild(c.tryDumpLogs)
		if err != nil {
			return nil, err
		}
		a := &Attempt{Build: tb, Command: c.tryDumpLogs + " " + strings.Join(args, " ")}
		if _, err := output(c.tryDumpLogs, args...); err != nil {
			log.Printf("-try-dump-logs: %v", err)
			a.Error = err.Error()
		} else {
			a.OK = true
		}
		res.TryDumpLogs = a
	}

	// etcd-dump-logs -start-index FIRST DIR
	first := max(rep.FirstIndex, 1)
	if c.startExclusive {
		first--
	}
	// etcd-dump-logs 3.5 and older read -start-index 0 as "not set" and
	// start from the last snapshot (tools/etcd-dump-logs/main.go, isIndex);
	// without a snapshot they read the WAL from its start, as wanted here.
	if first == 0 && snapshotOnZero(dumpBuild) && res.LastSnapshotIndex != 0 {
		return nil, fmt.Errorf("etcd-dump-logs %s starts from the snapshot at %d when -start-index is 0, and cannot read entry %d: write fewer entries than the member's --snapshot-count",
			dumpBuild.Source, res.LastSnapshotIndex, rep.FirstIndex)
	}
	startIndex := strconv.FormatUint(first, 10)
	args = []string{"-start-index", startIndex, dataDir}
	res.Commands = append(res.Commands, "etcd-dump-logs "+strings.Join(args, " "))
	b, err = output(c.dumpLogs, args...)
	if err != nil {
		return nil, fmt.Errorf("etcd-dump-logs: %w", err)
	}
	dumpCounts, total, err := parseDump(b)
	if err != nil {
		return nil, err
	}
	res.DumpLogsEntries = total

	kinds := map[string]bool{}
	for k := range walCounts {
		kinds[k] = true
	}
	for k := range dumpCounts {
		kinds[k] = true
	}
	for _, f := range []string{"put", "txn", "deleteRange", "compaction", "leaseGrant", "leaseRevoke", "confChange"} {
		kinds[f] = true // a zero on both sides is still a checked row
	}
	res.Equal = res.DumpLogsEntries == res.WALEntries
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range kinds {
			if !yield(k) {
				return
			}
		}
	}) {
		row := Row{Kind: k, DumpLogs: dumpCounts[k], WAL: walCounts[k]}
		row.Equal = row.DumpLogs == row.WAL
		f, ok := filters[k]
		want := row.WAL
		if strings.HasPrefix(k, "v2.") {
			// One filter for every method: held against the sum of
			// pkg/wal's v2 kinds.
			f, ok, want = v2Filter, true, 0
			for k2, n := range walCounts {
				if strings.HasPrefix(k2, "v2.") {
					want += n
				}
			}
		}
		if ok {
			args := []string{"-start-index", startIndex, "-entry-type", f, dataDir}
			res.Commands = append(res.Commands, "etcd-dump-logs "+strings.Join(args, " "))
			b, err := output(c.dumpLogs, args...)
			if err != nil {
				return nil, fmt.Errorf("etcd-dump-logs -entry-type %s: %w", f, err)
			}
			n, err := filterCount(b)
			if err != nil {
				return nil, fmt.Errorf("etcd-dump-logs -entry-type %s: %w", f, err)
			}
			row.Filter, row.DumpLogsFilter = f, &n
			row.Equal = row.Equal && n == want
		}
		res.Equal = res.Equal && row.Equal
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// load writes the Kubernetes-shaped requests.
func load(ctx context.Context, cli *clientv3.Client, c config, crash func() error) error {
	codec, err := keyspace.NewCodec()
	if err != nil {
		return err
	}
	gen := keyspace.NewGenerator(13)
	key := func(resource, ns, name string) string {
		return keyspace.Build(keyspace.Key{Prefix: keyspace.DefaultPrefix, Resource: resource, Namespace: ns, Name: name})
	}
	ns := func(i int) string { return fmt.Sprintf("ns-%02d", i%8) }

	// Pods: kube-apiserver's create (txn on mod revision 0), updates and
	// deletes (txn on the last mod revision, else read it back).
	revs := make([]int64, c.pods)
	for gen2 := range 4 {
		for i := range c.pods {
			name := fmt.Sprintf("pod-%04d", i)
			v, err := codec.Encode(gen.Pod(ns(i), name, gen2))
			if err != nil {
				return err
			}
			k := key("pods", ns(i), name)
			resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", revs[i])).
				Then(clientv3.OpPut(k, string(v))).Else(clientv3.OpGet(k)).Commit()
			if err != nil {
				return err
			}
			if !resp.Succeeded {
				return fmt.Errorf("pod %s generation %d: txn failed", k, gen2)
			}
			revs[i] = resp.Header.Revision
		}
	}
	for i := 0; i < c.pods; i += 4 {
		k := key("pods", ns(i), fmt.Sprintf("pod-%04d", i))
		if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", revs[i])).
			Then(clientv3.OpDelete(k)).Else(clientv3.OpGet(k)).Commit(); err != nil {
			return err
		}
	}
	if err := crash(); err != nil {
		return fmt.Errorf("crash and restart: %w", err)
	}
	// ConfigMaps: plain Put and DeleteRange.
	for i := range c.configMaps {
		name := fmt.Sprintf("cm-%04d", i)
		v, err := codec.Encode(gen.ConfigMap(ns(i), name, 1, gen.ConfigMapDataBytes(ns(i), name)))
		if err != nil {
			return err
		}
		if _, err := cli.Put(ctx, key("configmaps", ns(i), name), string(v)); err != nil {
			return err
		}
	}
	for i := 0; i < c.configMaps; i += 5 {
		if _, err := cli.Delete(ctx, key("configmaps", ns(i), fmt.Sprintf("cm-%04d", i))); err != nil {
			return err
		}
	}
	// Events on leases, as kube-apiserver's --event-ttl does it.
	leases := make([]clientv3.LeaseID, max(1, c.events/10))
	for i := range leases {
		l, err := cli.Grant(ctx, 3600)
		if err != nil {
			return err
		}
		leases[i] = l.ID
	}
	for i := range c.events {
		name := fmt.Sprintf("pod-%04d.%x", i, i*7919)
		v, err := codec.Encode(gen.Event(ns(i), name, fmt.Sprintf("pod-%04d", i), 1))
		if err != nil {
			return err
		}
		k := key("events", ns(i), name)
		if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, string(v), clientv3.WithLease(leases[i%len(leases)]))).Commit(); err != nil {
			return err
		}
	}
	for i := 0; i < len(leases); i += 2 {
		if _, err := cli.Revoke(ctx, leases[i]); err != nil {
			return err
		}
	}
	// kube-apiserver's compaction: bump compact_rev_key, then compact.
	const compactKey = "compact_rev_key"
	g, err := cli.Get(ctx, compactKey)
	if err != nil {
		return err
	}
	var version int64
	if len(g.Kvs) > 0 {
		version = g.Kvs[0].Version
	}
	t, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(compactKey), "=", version)).
		Then(clientv3.OpPut(compactKey, strconv.FormatInt(g.Header.Revision, 10))).Else(clientv3.OpGet(compactKey)).Commit()
	if err != nil {
		return err
	}
	_, err = cli.Compact(ctx, t.Header.Revision)
	return err
}

var entryLine = regexp.MustCompile(`^\s*\d+\t\s*(\d+)\t(norm|conf)(\t(.*))?$`)

// parseDump counts etcd-dump-logs' entry lines per kind. It checks the
// lines against the tool's header: "WAL entries: N" (3.6 and later), or,
// where the header gives only "lastIndex=N" (3.5), that the lines hold
// every index up to N once.
func parseDump(b []byte) (map[string]int64, int64, error) {
	counts := map[string]int64{}
	var total int64
	var lo, hi uint64
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		m := entryLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		total++
		idx, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("etcd-dump-logs: index %q: %w", m[1], err)
		}
		if total == 1 || idx < lo {
			lo = idx
		}
		hi = max(hi, idx)
		data := strings.TrimSpace(m[4])
		switch {
		case m[2] == "conf":
			counts["confChange"]++
		case data == "":
			counts["empty"]++
		case data == "???":
			counts["undecodable"]++
		case strings.HasPrefix(data, "method="):
			// A v2 store request (etcd 3.5 and older; printRequest):
			// "method=PUT path=... val=...", pkg/wal's "v2.PUT".
			method, _, _ := strings.Cut(strings.TrimPrefix(data, "method="), " ")
			counts["v2."+method]++
		default:
			counts[lowerCamel(topField(data))]++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	var want, last int64 = -1, -1
	for _, l := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(l, "WAL entries: "); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return nil, 0, fmt.Errorf("etcd-dump-logs: %q: %w", l, err)
			}
			want = v
		}
		if n, ok := strings.CutPrefix(l, "lastIndex="); ok && last < 0 {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return nil, 0, fmt.Errorf("etcd-dump-logs: %q: %w", l, err)
			}
			last = v
		}
	}
	switch {
	case want >= 0:
		if want != total {
			return nil, 0, fmt.Errorf("etcd-dump-logs printed %d entry lines, its header says %d", total, want)
		}
	case last >= 0:
		if total == 0 || uint64(last) != hi || uint64(total) != hi-lo+1 {
			return nil, 0, fmt.Errorf("etcd-dump-logs printed %d entry lines, indexes %d-%d, its header says lastIndex=%d", total, lo, hi, last)
		}
	default:
		return nil, 0, fmt.Errorf("etcd-dump-logs: no \"WAL entries: N\" or \"lastIndex=N\" line")
	}
	return counts, total, nil
}

// topField returns the first field name at the top level of a protobuf
// text-format message other than header and ID.
func topField(s string) string {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '"' || ch == '\'':
			for i++; i < len(s) && s[i] != ch; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case ch == '{' || ch == '<':
			depth++
		case ch == '}' || ch == '>':
			depth--
		case depth == 0 && (ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z'):
			j := i
			for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			name := s[i:j]
			rest := strings.TrimLeft(s[j:], " ")
			if (strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, "<")) && name != "header" && name != "ID" {
				return name
			}
			i = j - 1
		}
	}
	return "unknown"
}

// lowerCamel turns a proto field name (delete_range) into its JSON name
// (deleteRange), the names pkg/wal reports.
func lowerCamel(s string) string {
	var b strings.Builder
	up := false
	for _, r := range s {
		if r == '_' {
			up = true
			continue
		}
		if up && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		up = false
		b.WriteRune(r)
	}
	return b.String()
}

// filterCount reads etcd-dump-logs' "Entry types (F) count is : N" line.
func filterCount(b []byte) (int64, error) {
	m := regexp.MustCompile(`Entry types \(.*\) count is : (\d+)`).FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("no count line in its output")
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}

// writeJSON writes v, indented, to path.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// mdSection writes m as a markdown list under a heading, sorted by key.
func mdSection(md *strings.Builder, title string, m map[string]string) {
	fmt.Fprintf(md, "## %s\n\n", title)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(md, "- %s: %s\n", k, m[k])
	}
	md.WriteString("\n")
}

// newResult assembles sections into a Result dated now; meta gives the
// machine and the shared versions (-meta flags).
func newResult(meta []string, sections []Section) (*Result, error) {
	r := &Result{Date: time.Now().UTC().Format(time.RFC3339), Machine: map[string]string{}, Versions: map[string]string{}, Sections: sections}
	if err := parseMeta(meta, r.Machine, r.Versions); err != nil {
		return nil, err
	}
	ran := 0
	r.Equal = true
	for _, sec := range sections {
		if sec.Skipped != "" {
			continue
		}
		ran++
		r.Equal = r.Equal && sec.Equal
	}
	r.Equal = r.Equal && ran > 0
	return r, nil
}

// merge reads the section files, in order, and writes them as one result
// to out.json and out.md. It returns whether every section that ran is
// equal.
func merge(c config, files []string) (bool, error) {
	if len(files) == 0 {
		return false, fmt.Errorf("-merge: no section files given")
	}
	var sections []Section
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return false, fmt.Errorf("-merge: %w", err)
		}
		var sec Section
		if err := json.Unmarshal(b, &sec); err != nil {
			return false, fmt.Errorf("-merge: %s: %w", f, err)
		}
		sections = append(sections, sec)
	}
	r, err := newResult(c.meta, sections)
	if err != nil {
		return false, err
	}
	return r.Equal, write(c.out, r)
}

// modules lists a build's go.etcd.io modules grouped by version, in the
// order of their versions: "go.etcd.io/etcd/api/v3, .../server/v3 v3.6.16;
// go.etcd.io/raft/v3 v3.6.0".
func modules(b *Build) string {
	byVersion := map[string][]string{}
	for p, v := range b.Modules {
		byVersion[v] = append(byVersion[v], p)
	}
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(byVersion)) {
		paths := byVersion[v]
		sort.Strings(paths)
		parts = append(parts, strings.Join(paths, ", ")+" "+v)
	}
	return strings.Join(parts, "; ")
}

// describe says which etcd-dump-logs b is, for the markdown.
func describe(b *Build) string {
	return fmt.Sprintf("tools/etcd-dump-logs of go.etcd.io/etcd/v3 %s, linked against %s (%s)", b.Source, modules(b), b.Go)
}

// probed turns a build's SOURCE_PROBED record into one sentence.
func probed(b *Build) string {
	if b.SourceProbed == "" {
		return ""
	}
	lines := strings.Split(b.SourceProbed, "\n")
	rule, _, _ := strings.Cut(lines[0], "; skipped:")
	out := "The source is the " + rule
	if len(lines) > 1 {
		out += "; skipped: " + strings.Join(lines[1:], ", ")
	}
	return out + "."
}

func write(out string, r *Result) error {
	if err := writeJSON(out+".json", r); err != nil {
		return err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# etcdinspect wal vs etcd-dump-logs: entries per request kind\n\n")
	fmt.Fprintf(&md, "Written by `scripts/wal-vs-dump-logs.sh` on %s. Equal: **%v** (every release compared).\n\n", r.Date, r.Equal)
	md.WriteString("One section per etcd release: a real member of that release writes its WAL under the same Kubernetes-shaped load, " +
		"and etcd-dump-logs and `etcdinspect wal` read the same data directory. The Go module proxy does not serve the root module " +
		"go.etcd.io/etcd/v3 (which holds tools/etcd-dump-logs) of every release, so each etcd-dump-logs is built from the newest root module " +
		"of the release's minor line that the proxy serves and the checksum database knows, linked against the release's own modules " +
		"(`scripts/build-benchmark.sh`); each section names both, read from the binary's build info.\n\n")
	md.WriteString("| etcd (wrote the WAL) | etcd-dump-logs source (go.etcd.io/etcd/v3) | etcd modules linked | same minor line | entries | equal |\n|---|---|---|---|---:|---|\n")
	for _, sec := range r.Sections {
		if sec.Skipped != "" {
			fmt.Fprintf(&md, "| %s | - | - | - | - | skipped: %s |\n", sec.Etcd, sec.Skipped)
			continue
		}
		same := "yes"
		if !sec.SameLine {
			same = "no"
			if sec.TryDumpLogs != nil && !sec.TryDumpLogs.OK {
				same = "no: the same line's build fails on this WAL (its section says why)"
			}
		}
		fmt.Fprintf(&md, "| %s | %s | %s | %s | %d | %v |\n", sec.Etcd, sec.DumpLogs.Source, modules(sec.DumpLogs), same, sec.WALEntries, sec.Equal)
	}
	md.WriteString("\n")
	mdSection(&md, "Machine", r.Machine)
	mdSection(&md, "Versions", r.Versions)
	for _, sec := range r.Sections {
		writeSection(&md, &sec)
	}
	return os.WriteFile(out+".md", []byte(md.String()), 0o644)
}

// writeSection writes one release's section of the markdown.
func writeSection(md *strings.Builder, r *Section) {
	fmt.Fprintf(md, "## etcd %s\n\n", r.Etcd)
	if r.Skipped != "" {
		fmt.Fprintf(md, "Not compared: %s.\n\n", r.Skipped)
		return
	}
	fmt.Fprintf(md, "Equal: **%v**. Load: %s.\n\n", r.Equal, r.Load)
	same := "no"
	if r.SameLine {
		same = "yes"
	}
	fmt.Fprintf(md, "etcd-dump-logs: %s; of etcd %s's minor line: %s. %s\n\n", describe(r.DumpLogs), r.Etcd, same, probed(r.DumpLogs))
	fmt.Fprintf(md, "WAL entries %d-%d", r.FirstIndex, r.LastIndex)
	switch {
	case r.LastSnapshotIndex != 0:
		fmt.Fprintf(md, ", the member's last snapshot at index %d (etcd-dump-logs is run with -start-index to read the entries before it too)", r.LastSnapshotIndex)
	case snapshotOnZero(r.DumpLogs):
		md.WriteString(", no snapshot file (this etcd-dump-logs takes -start-index 0 as unset and then reads from the last snapshot, " +
			"here none: from the WAL's start)")
	default:
		md.WriteString(", no snapshot file")
	}
	fmt.Fprintf(md, "; etcd-dump-logs read %d entries, etcdinspect wal %d.\n\n", r.DumpLogsEntries, r.WALEntries)
	md.WriteString("| kind | etcd-dump-logs (lines) | etcd-dump-logs -entry-type | etcdinspect wal | equal |\n|---|---:|---:|---:|---|\n")
	for _, row := range r.Rows {
		f := "-"
		if row.DumpLogsFilter != nil {
			f = fmt.Sprintf("%d (%s)", *row.DumpLogsFilter, row.Filter)
		}
		fmt.Fprintf(md, "| %s | %d | %s | %d | %v |\n", row.Kind, row.DumpLogs, f, row.WAL, row.Equal)
	}
	md.WriteString("\nA kind's etcd-dump-logs line count classifies each printed entry by the request's first top-level field after the header " +
		"(an empty normal entry is a new leader's no-op, `empty`; a v2 store request, `method=PUT ...`, is `v2.PUT`); " +
		"the -entry-type column is etcd-dump-logs' own count under its filter for the kind (`Request` counts the v2 requests of every method " +
		"and is held against the sum of etcdinspect's `v2.*` rows).\n\n")
	if a := r.TryDumpLogs; a != nil {
		fmt.Fprintf(md, "### etcd-dump-logs of etcd %s's minor line\n\n", r.Etcd)
		if a.Build != nil {
			fmt.Fprintf(md, "Build: %s. %s\n\n", describe(a.Build), probed(a.Build))
		}
		fmt.Fprintf(md, "`%s` ok: %v\n\n", a.Command, a.OK)
		switch {
		case !a.OK && strings.Contains(a.Error, "nil pointer dereference"):
			md.WriteString("The same-line comparison is blocked: this etcd-dump-logs dereferences optional fields " +
				"that etcd 3.7's protobuf types hold as pointers and that the WAL leaves unset (a normal entry's Type), so it panics on the first " +
				"normal entry; the counts above come from the build named above the table, which decodes the same wire format " +
				"(scripts/wal-vs-dump-logs.sh).\n\n")
		case !a.OK:
			md.WriteString("When it fails, the counts above come from the build named above the table; scripts/wal-vs-dump-logs.sh says why the same line's tool cannot read this WAL.\n\n")
		}
		if a.Error != "" {
			fmt.Fprintf(md, "```\n%s\n```\n\n", a.Error)
		}
	}
	md.WriteString("### Commands\n\nDIR is the member's data directory (a temporary one); etcd-dump-logs is the build named above the table.\n\n```\n")
	for _, c := range r.Commands {
		md.WriteString(c + "\n")
	}
	md.WriteString("```\n\n")
}
