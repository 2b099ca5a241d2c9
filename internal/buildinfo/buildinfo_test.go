package buildinfo

import (
	"runtime/debug"
	"slices"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/kubestore/etcdkit", Version: "v0.3.0"},
		Deps: []*debug.Module{
			{Path: "github.com/spf13/cobra", Version: "v1.10.2"},
			{Path: "go.etcd.io/etcd/client/v3", Version: "v3.7.3"},
			{Path: "k8s.io/apimachinery", Version: "v0.37.2"},
			{Path: "k8s.io/api", Version: "v0.37.1", Replace: &debug.Module{Path: "k8s.io/api", Version: "v0.37.2"}},
		},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "7ad617e"}, {Key: "vcs.time", Value: "2026-11-24T00:00:00Z"}, {Key: "vcs.modified", Value: "true"}},
	}
	got := fromBuildInfo(bi)
	want := Info{Module: "github.com/kubestore/etcdkit", Version: "v0.3.0", Commit: "7ad617e", CommitTime: "2026-11-24T00:00:00Z", Modified: true,
		GoVersion: "go1.26.8", EtcdVersion: "v3.7.3", KubernetesVersion: "v0.37.2",
		Modules: []Module{{"go.etcd.io/etcd/client/v3", "v3.7.3"}, {"k8s.io/apimachinery", "v0.37.2"}, {"k8s.io/api", "v0.37.2"}}}
	if got.Module != want.Module || got.Version != want.Version || got.Commit != want.Commit || got.CommitTime != want.CommitTime ||
		got.Modified != want.Modified || got.GoVersion != want.GoVersion || got.EtcdVersion != want.EtcdVersion ||
		got.KubernetesVersion != want.KubernetesVersion || !slices.Equal(got.Modules, want.Modules) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if rows := MakeTable(got).Rows; rows[1][1] != "7ad617e (modified)" {
		t.Errorf("got commit row %q, want the commit marked modified", rows[1])
	}
}
