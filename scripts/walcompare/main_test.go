package main

import (
	"maps"
	"strings"
	"testing"
)

// The outputs below follow the printf formats of tools/etcd-dump-logs
// (3.5: "WAL entries:" then "lastIndex=N"; 3.6 and 3.7: "WAL entries: N").
func TestParseDump(t *testing.T) {
	const header35 = "Snapshot:\nempty\nStart dumping log entries from snapshot.\nWAL metadata:\nnodeID=1 clusterID=2 term=2 commitIndex=5 vote=1\nWAL entries:\nlastIndex=5\nterm\t     index\ttype\tdata\n"
	const header36 = "Start dumping log entries from index 0.\nWAL metadata:\nnodeID=1 clusterID=2 term=2 commitIndex=5 vote=1\nWAL entries: 5\nlastIndex=5\nterm\t     index\ttype\tdata\n"
	const entries = "   1\t         1\tconf\tmethod=ConfChangeAddNode id=1\n" +
		"   2\t         2\tnorm\t\n" +
		"   2\t         3\tnorm\tmethod=PUT path=\"/0/version\" val=\"3.5.0\"\n" +
		"   2\t         4\tnorm\theader:<ID:7 > txn:<compare:<target:MOD key:\"/registry/pods/a\" > success:<request_put:<key:\"a\" value:\"{\\\"x\\\":1}\" > > > \n" +
		"   2\t         5\tnorm\theader:<ID:8 > compaction:<revision:16 > \n"
	want := map[string]int64{"confChange": 1, "empty": 1, "v2.PUT": 1, "txn": 1, "compaction": 1}
	tests := []struct {
		name      string
		out       string
		want      map[string]int64
		wantTotal int64
		wantErr   string
	}{
		{name: "3.6 header", out: header36 + entries + "\nEntry types (Normal,ConfigChange) count is : 5\n", want: want, wantTotal: 5},
		{name: "3.5 header", out: header35 + entries + "\nEntry types (Normal,ConfigChange) count is : 5\n", want: want, wantTotal: 5},
		{name: "3.6 header, a line missing", out: strings.Replace(header36, "WAL entries: 5", "WAL entries: 6", 1) + entries,
			wantErr: "printed 5 entry lines, its header says 6"},
		{name: "3.5 header, an index missing", out: strings.Replace(header35, "lastIndex=5", "lastIndex=6", 1) + entries,
			wantErr: "indexes 1-5, its header says lastIndex=6"},
		{name: "no header", out: entries, wantErr: "no \"WAL entries: N\" or \"lastIndex=N\" line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, total, err := parseDump([]byte(tt.out))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if total != tt.wantTotal {
				t.Errorf("got total %d, want %d", total, tt.wantTotal)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("got counts %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSameLineAndSnapshotOnZero(t *testing.T) {
	tests := []struct {
		name           string
		etcd           string
		build          Build
		wantSameLine   bool
		wantSnapOnZero bool
	}{
		{name: "3.5 source, 3.5 modules", etcd: "3.5.35",
			build:        Build{Source: "v3.5.22", Modules: map[string]string{"go.etcd.io/etcd/server/v3": "v3.5.35", "go.etcd.io/etcd/raft/v3": "v3.5.35"}},
			wantSameLine: true, wantSnapOnZero: true},
		{name: "3.6 source, 3.6 modules, raft v3.6.0", etcd: "3.6.16",
			build:        Build{Source: "v3.6.14", Modules: map[string]string{"go.etcd.io/etcd/server/v3": "v3.6.16", "go.etcd.io/raft/v3": "v3.6.0"}},
			wantSameLine: true},
		{name: "3.6 build on a 3.7 WAL", etcd: "3.7.3",
			build: Build{Source: "v3.6.14", Modules: map[string]string{"go.etcd.io/etcd/server/v3": "v3.6.16"}}},
		{name: "3.7 source, 3.6 modules", etcd: "3.7.3",
			build: Build{Source: "v3.7.1", Modules: map[string]string{"go.etcd.io/etcd/server/v3": "v3.6.16"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sameLine(tt.etcd, &tt.build); got != tt.wantSameLine {
				t.Errorf("sameLine: got %v, want %v", got, tt.wantSameLine)
			}
			if got := snapshotOnZero(&tt.build); got != tt.wantSnapOnZero {
				t.Errorf("snapshotOnZero: got %v, want %v", got, tt.wantSnapOnZero)
			}
		})
	}
}
