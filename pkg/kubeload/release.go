package kubeload

import (
	"fmt"
	"strconv"
	"strings"
)

// The kube-apiserver feature gates whose effect on etcd the etcd-direct
// model (pkg/watchload) follows.
const (
	// GateEtcdRangeStream is kube-apiserver's EtcdRangeStream gate: on,
	// unfiltered LISTs and watch-list syncs read with etcd 3.7's
	// RangeStream (k8s.io/apiserver/pkg/storage/etcd3/store.go
	// shouldStream, watcher.go sync); the model's
	// watchload.Options.RangeStream.
	GateEtcdRangeStream = "EtcdRangeStream"
	// GateWatchList is kube-apiserver's WatchList gate: off, it refuses
	// a WATCH with sendInitialEvents before it reaches storage
	// (k8s.io/apiserver/pkg/endpoints/handlers/get.go ListResource,
	// ValidateListOptions), and client-go's reflector falls back to LIST
	// (tools/cache/reflector.go ListAndWatchWithContext): etcd then sees
	// what WatchListClient off sends, so off it turns the model's
	// watchload.Options.WatchList off.
	GateWatchList = "WatchList"
)

// releaseGates are the defaults of the gates the model follows in each
// Kubernetes minor release lwbench builds, from
// k8s.io/apiserver/pkg/features/kube_features.go of v0.35.4, v0.36.3,
// v0.37.2 and v0.38.0-beta.0. A gate missing from a release does not exist
// in it, and its kube-apiserver refuses it in --feature-gates:
//
//	gate             1.35       1.36       1.37       1.38
//	EtcdRangeStream  absent     absent     beta, on   beta, on (added in 1.37)
//	WatchList        beta, on   beta, on   beta, on   beta, on (on again since 1.34)
var releaseGates = map[string]map[string]bool{
	"1.35": {GateWatchList: true},
	"1.36": {GateWatchList: true},
	"1.37": {GateWatchList: true, GateEtcdRangeStream: true},
	"1.38": {GateWatchList: true, GateEtcdRangeStream: true},
}

// GateDefault returns the default of gate in kube-apiserver of version
// (x.y or x.y.z, a release lwbench builds), and whether that release has
// the gate at all. It knows only the gates the model follows
// (GateEtcdRangeStream, GateWatchList) and reports any other as absent.
func GateDefault(version, gate string) (def, ok bool) {
	def, ok = releaseGates[minorOf(version)][gate]
	return def, ok
}

// ModelGate reports whether gate is one the model follows.
func ModelGate(gate string) bool {
	return gate == GateEtcdRangeStream || gate == GateWatchList
}

// minorOf returns the x.y of version x.y.z, x.y or vx.y.z.
func minorOf(version string) string {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return version
	}
	return parts[0] + "." + parts[1]
}

// ParseFeatureGates parses a --feature-gates value as kube-apiserver does
// (k8s.io/component-base/featuregate/feature_gate.go Set): comma-separated
// name=value pairs, empty elements skipped, names and values trimmed,
// values as strconv.ParseBool reads them; a later pair for the same name
// wins. It does not check that a name is a gate.
func ParseFeatureGates(s string) (map[string]bool, error) {
	gates := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		if kv == "" {
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		name = strings.TrimSpace(name)
		if !ok {
			return nil, fmt.Errorf("missing bool value for %s", name)
		}
		b, err := strconv.ParseBool(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("invalid value of %s=%s: want true or false", name, strings.TrimSpace(val))
		}
		gates[name] = b
	}
	return gates, nil
}
