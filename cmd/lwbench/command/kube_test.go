package command

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/report"
)

// TestRunThroughKubeAPIServer runs `lwbench run --kube-apiserver` as a
// user would, on the embedded member: the informer profile puts
// kube-apiserver's watch cache off, so the held informer's WATCH reaches
// etcd after kube-apiserver's compactor passed it, fails with 410 and
// client-go relists; nothing is lost, and the table and the JSON say so,
// with what etcd was asked.
func TestRunThroughKubeAPIServer(t *testing.T) {
	apiservertest.Binaries(t)
	var out, errOut bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetErr(&errOut)
	code := cli.Run(root, []string{"run", "--kube-apiserver", "1.37", "--unsafe-no-fsync", "--objects", "100", "--watchers", "3",
		"--write-rate", "50", "--duration", "12s", "--compaction-interval", "2s", "-w", "json"}, &errOut)
	if code != 0 {
		t.Fatalf("lwbench run --kube-apiserver exit %d:\n%s", code, errOut.String())
	}
	var res report.RunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("result JSON: %v", err)
	}
	if res.Kind != report.KindRun || res.APIServer == nil || res.APIServer.Version != "v1.37.2" || res.APIServer.WatchCache {
		t.Errorf("got kind %q, apiserver %+v; want a RunResult through v1.37.2 with the watch cache off", res.Kind, res.APIServer)
	}
	expired := 0
	for _, r := range res.Relists {
		if r.Reason == "expired" {
			expired++
		}
	}
	if expired == 0 || !res.Validation.OK() || res.Validation.Lost != 0 {
		t.Errorf("got %d relists after 410 (relists %+v), validation %+v; want at least one and nothing lost", expired, res.Relists, res.Validation)
	}
	if len(res.Etcd) == 0 {
		t.Errorf("no etcd request was counted")
	}
	// kube-apiserver's compactions begin phases, the member is
	// defragmented after the release (run's default), and the apiserver's
	// own metrics, CPU and memory are in the JSON and the table.
	if len(res.Compactions) == 0 || res.Defrag == nil || res.Defrag.Error != "" || !res.Scenario.Defragment {
		t.Errorf("got compactions %+v, defragmentation %+v; want compactions and a defragmentation", res.Compactions, res.Defrag)
	}
	afterCompaction := false
	for _, e := range res.Etcd {
		afterCompaction = afterCompaction || (strings.HasSuffix(e.Phase, "after compaction 1") && e.Requests > 0)
	}
	if !afterCompaction {
		t.Errorf("no etcd request counted in a phase after compaction 1")
	}
	if len(res.APIServers) != 1 || res.APIServers[0].CPUSeconds <= 0 || res.APIServers[0].PeakResidentMemoryBytes <= 0 || len(res.APIServerMetrics) == 0 {
		t.Errorf("got apiserver usage %+v and %d metric series, want CPU, memory and metrics", res.APIServers, len(res.APIServerMetrics))
	}
	table := map[string]string{}
	summary, _ := makeRunTable(&res)
	for _, row := range summary.Rows {
		table[row[0]] = row[1]
	}
	for _, name := range []string{"kube-apiserver's compactions at revision", "defrag duration", "apiserver0 CPU seconds (by phase)", "apiserver0 resident memory", "etcd_requests_total", "apiserver_request_total"} {
		if v, ok := table[name]; !ok || v == "-" || v == "0" || v == "" {
			t.Errorf("table row %q: got %q, want a figure", name, v)
		}
	}
	if !strings.Contains(errOut.String(), "starting 1 kube-apiserver 1.37.2") {
		t.Errorf("log %q does not say it started kube-apiserver", errOut.String())
	}
}
