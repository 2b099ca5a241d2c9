package kubeload

import (
	"sync"

	clientfeatures "k8s.io/client-go/features"
)

// client-go's feature gates are one per process
// (k8s.io/client-go/features FeatureGates), read by each reflector when it
// is made (tools/cache/reflector.go NewReflectorWithOptions reads
// WatchListClient). gates replaces them once with a wrapper whose
// WatchListClient can be set per InformerSet: a set holds gatesMu from
// setting the gate until its informers have synced (their reflectors
// exist), so that sets with different settings never mix.
var (
	gatesOnce sync.Once
	gatesMu   sync.Mutex
	gates     *clientGates
)

// clientGates answers WatchListClient from watchList when set, and every
// other gate from client-go's own gates.
type clientGates struct {
	base      clientfeatures.Gates
	mu        sync.Mutex
	watchList *bool
}

// Enabled implements clientfeatures.Gates.
func (g *clientGates) Enabled(key clientfeatures.Feature) bool {
	g.mu.Lock()
	wl := g.watchList
	g.mu.Unlock()
	if key == clientfeatures.WatchListClient && wl != nil {
		return *wl
	}
	return g.base.Enabled(key)
}

// setWatchListClient takes gatesMu and sets WatchListClient to on (nil:
// client-go's default, which its KUBE_FEATURE_WatchListClient environment
// variable can change); the caller releases gatesMu once its reflectors
// exist.
func setWatchListClient(on *bool) {
	installGates()
	gatesMu.Lock()
	gates.mu.Lock()
	gates.watchList = on
	gates.mu.Unlock()
}

// installGates replaces client-go's feature gates with gates, once. Run
// calls it before it makes any client, so that client-go has not read its
// gates yet (it warns when they are replaced after use).
func installGates() {
	gatesOnce.Do(func() {
		gates = &clientGates{base: clientfeatures.FeatureGates()}
		clientfeatures.ReplaceFeatureGates(gates)
	})
}
