package command

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

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
			counts, err := conformanceModel(t.Context(), o, profile, nil, nil, t.Logf)
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
			// The phases are the real stack's names (kubeload.Run), so that
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
