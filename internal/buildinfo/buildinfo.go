// Package buildinfo describes the running binary for both tools' version
// command: the module version and VCS commit that runtime/debug.
// ReadBuildInfo reports, the Go version, and the etcd and Kubernetes
// modules built in.
package buildinfo

import (
	"runtime/debug"
	"strings"

	"go.etcd.io/etcd/api/v3/version"

	"github.com/kubestore/etcdkit/internal/output"
)

// Info is what a binary knows of its own build. Fields the build did not
// record (a test binary has no VCS stamp) are empty.
type Info struct {
	// Module and Version are the main module's path and version
	// ("(devel)" for a build from a source tree).
	Module  string `json:"module"`
	Version string `json:"version"`
	// Commit is the VCS revision (vcs.revision), CommitTime its time
	// (RFC 3339) and Modified whether the tree had local changes.
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commitTime,omitempty"`
	Modified   bool   `json:"modified"`
	// GoVersion is the toolchain that built the binary (go1.26.1).
	GoVersion string `json:"goVersion"`
	// EtcdVersion is the version of the etcd client module built in
	// (go.etcd.io/etcd/client/v3); KubernetesVersion that of
	// k8s.io/apimachinery, empty when the build lists no modules.
	EtcdVersion       string `json:"etcdVersion"`
	KubernetesVersion string `json:"kubernetesVersion"`
	// Modules are every go.etcd.io and k8s.io module built in, in the
	// order of the build information (sorted by path).
	Modules []Module `json:"modules"`
}

// Module is one dependency built in.
type Module struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

// Read returns the running binary's Info; ok is false when the binary
// carries no build information (built without module support).
func Read() (Info, bool) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{}, false
	}
	return fromBuildInfo(bi), true
}

// fromBuildInfo reads bi. A binary's module list lacks nothing, but a
// test binary's lists no dependency: the etcd version then comes from the
// etcd API module's own constant (go.etcd.io/etcd/api/v3/version).
func fromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Module: bi.Main.Path, Version: bi.Main.Version, GoVersion: bi.GoVersion, Modules: []Module{}}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.time":
			info.CommitTime = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		switch {
		case d.Path == "go.etcd.io/etcd/client/v3":
			info.EtcdVersion = d.Version
		case d.Path == "k8s.io/apimachinery":
			info.KubernetesVersion = d.Version
		}
		if strings.HasPrefix(d.Path, "go.etcd.io/") || strings.HasPrefix(d.Path, "k8s.io/") {
			info.Modules = append(info.Modules, Module{Path: d.Path, Version: d.Version})
		}
	}
	if info.EtcdVersion == "" {
		info.EtcdVersion = "v" + version.Version
	}
	return info
}

// MakeTable lays info out as name/value rows: version, commit, Go, etcd,
// Kubernetes, then every etcd and Kubernetes module. Missing values print
// as "-".
func MakeTable(info Info) output.Table {
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	commit := dash(info.Commit)
	if info.Modified {
		commit += " (modified)"
	}
	t := output.Table{Header: []string{"name", "version"}, Rows: [][]string{
		{info.Module, dash(info.Version)},
		{"commit", commit},
		{"commit time", dash(info.CommitTime)},
		{"go", dash(info.GoVersion)},
		{"etcd", dash(info.EtcdVersion)},
		{"kubernetes", dash(info.KubernetesVersion)},
	}}
	for _, m := range info.Modules {
		t.Rows = append(t.Rows, []string{m.Path, m.Version})
	}
	return t
}
