package command

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// TestConformanceTableGolden renders a conformance result as a table
// (within maxTableWidth: cases numbered, notes below) and as markdown: each row with the counts, their ratio, the Txns whose compares failed and the within-10 %
// judgement ("plan" for the writes, which agree by construction), then the
// bytes both ways and their ratio ("-" for a row the real stack did not
// send), then the note; each case with how many of its reads and watches
// are within 10 %.
func TestConformanceTableGolden(t *testing.T) {
	model := []report.EtcdRequests{
		{Phase: "sync", Method: "Range", Kind: "prefix limit", Requests: 11, RequestBytes: 550, Responses: 11, ResponseBytes: 1_200_000},
		{Phase: "steady", Method: "Txn", Kind: "if mod_revision=? then put else range", Requests: 3963, RequestBytes: 2_000_000, Responses: 3963, ResponseBytes: 150_000},
		{Phase: "steady", Method: "Watch", Kind: "events", Responses: 26564, ResponseBytes: 9_000_000},
		{Phase: "sync", Method: "RangeStream", Kind: "prefix", Requests: 1, RequestBytes: 40, Responses: 3, ResponseBytes: 90_000},
	}
	real := []report.EtcdRequests{
		{Phase: "sync", Method: "Range", Kind: "prefix limit", Requests: 11, RequestBytes: 560, Responses: 11, ResponseBytes: 1_210_000},
		{Phase: "released after compaction 2", Method: "Range", Kind: "prefix", Requests: 10, RequestBytes: 400, Responses: 10, ResponseBytes: 600},
		{Phase: "steady", Method: "Txn", Kind: "if mod_revision=? then put else range", Requests: 3969, RequestBytes: 2_100_000, Responses: 3969, ResponseBytes: 160_000, FailedCompares: 6},
		{Phase: "steady", Method: "Watch", Kind: "events", Responses: 25984, ResponseBytes: 9_500_000},
		{Phase: "released after compaction 2", Method: "Status", Kind: "call", Requests: 1, Responses: 1, ResponseBytes: 78},
	}
	off := false
	r := &report.Conformance{Kind: report.KindConformance, SchemaVersion: report.ConformanceSchemaVersion,
		EtcdVersion: "3.7.3", APIServerVersion: "v1.36.3", Cases: []report.ConformanceCase{{
			Name: "watch cache off, WatchList on", ClientWatchList: "on", ModelProfile: string(watchload.ProfileInformer),
			ModelRangeStream: &off, Rows: kubeload.Compare(model, real)}}}
	text := renderLayout(t, output.FormatTable, conformanceLayout(r), r)
	assertWidth(t, "conformance.table", text)
	golden(t, "conformance.table", text)
	golden(t, "conformance.md", renderLayout(t, output.FormatMarkdown, conformanceLayout(r), r))
}

// TestConformanceModelCountsOnlyTheLoad runs a short load through the
// model as `lwbench conformance` does (conformanceModel: a counting proxy
// in front of an embedded etcd) and checks that the proxy saw the load's
// requests and none of the harness's: the maintenance connection's calls
// (Status, MemberList, Defragment), its count_only and keys_only reads
// (prefix counts, final counts, cache comparisons), the history
// recorder's whole-keyspace watch, and no progress request with the watch
// cache off, where nothing of the load asks for one. The compactor is the
// load's (kube-apiserver's): its transactions and a logical Compact, as
// k8s.io/apiserver/pkg/storage/etcd3/compact.go sends them, must pass.
func TestConformanceModelCountsOnlyTheLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs loads on embedded etcd; skipped under -short")
	}
	for _, profile := range []watchload.Profile{watchload.ProfileInformer, watchload.ProfileAPIServerCache} {
		t.Run(string(profile), func(t *testing.T) {
			o := &runOptions{}
			fs := pflag.NewFlagSet("conformance", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse([]string{"--duration", "3s", "--objects", "120", "--watchers", "4", "--write-rate", "150",
				"--compaction-interval", "1s", "--event-ttl", "2s", "--seed", "3"}); err != nil {
				t.Fatal(err)
			}
			o.flags = fs
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			o.load.Logf = t.Logf
			counts, err := conformanceModel(t.Context(), o, profile, nil, nil, "0000beef", t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			rows := map[string]int64{} // method + " " + kind, every phase
			for _, r := range counts {
				n := r.Requests
				if n == 0 {
					n = r.Responses
				}
				rows[r.Method+" "+r.Kind] += n
			}
			for k, n := range rows {
				method, kind, _ := strings.Cut(k, " ")
				switch {
				case method == "Status" || method == "MemberList" || method == "Defragment" || method == "HashKV" || method == "Alarm":
					t.Errorf("%d %s through the proxy: the maintenance connection is the harness's", n, k)
				case method == "Range" && (strings.Contains(kind, "count_only") || strings.Contains(kind, "keys_only")):
					t.Errorf("%d %s through the proxy: the harness's counts and cache comparisons; kube-apiserver sends neither", n, k)
				case method == "Watch" && (strings.HasPrefix(kind, "create all") || strings.HasPrefix(kind, "create from")):
					t.Errorf("%d %s through the proxy: the history recorder's watch is the harness's", n, k)
				case method == "Compact" && kind != "compact":
					t.Errorf("%d %s through the proxy: kube-apiserver compacts without waiting for the deletion", n, k)
				}
			}
			if profile == watchload.ProfileInformer && rows["Watch progress"] != 0 {
				t.Errorf("%d progress requests with the watch cache off: confirming the final revision must ask etcd for nothing", rows["Watch progress"])
			}
			for _, k := range []string{"Compact compact", "Txn if version=0 then put else range", "Txn if version=? then put else range"} {
				if rows[k] == 0 {
					t.Errorf("no %q through the proxy: the compactor's requests are the load's; saw %v", k, rows)
				}
			}
			if n := rows["Txn if version=0 then put else range"]; n != 1 {
				t.Errorf("%d compactor transactions on a missing compact_rev_key, want 1 (the first tick)", n)
			}
			// The phases are the one script's (watchload.Run), so that
			// Compare leaves the same ones out.
			phases := map[string]bool{}
			for _, r := range counts {
				phases[r.Phase] = true
			}
			for _, p := range []string{"seed", "sync", "steady"} {
				if !phases[p] {
					t.Errorf("no request counted in phase %q; phases %v", p, phases)
				}
			}
			if rows := kubeload.Compare(counts, nil); len(rows) == 0 {
				t.Errorf("nothing left to compare after the excluded phases")
			}
		})
	}
}
