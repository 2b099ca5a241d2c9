package kubeload

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ConnectionLayout is how the client-go clients of a load (its informers
// and writer workers) share TCP connections to kube-apiserver.
type ConnectionLayout string

const (
	// ConnectionsPerClient gives every informer and every writer worker
	// a connection of its own, as separate processes have (controllers,
	// kubelets): each HTTP/2 connection carries one client's requests
	// and watches only.
	ConnectionsPerClient ConnectionLayout = "per-client"
	// ConnectionsShared puts every informer and writer worker on one
	// HTTP/2 connection, as the clientsets of one process made from one
	// kubeconfig share one (a kube-controller-manager's controllers):
	// client-go's transport cache hands them one transport.
	ConnectionsShared ConnectionLayout = "shared"
)

// Connections makes the client-go clientsets of a load's informers and
// writer workers, each on a connection of its own or all on one
// (Layout), and counts the TCP connections they hold open.
//
// client-go shares a transport, and so its HTTP/2 connection, between
// every clientset whose rest.Config has the same TLS settings
// (k8s.io/client-go/transport/cache.go tlsCacheKey); a WrapTransport is
// not part of the key, a Dial is (as a *transport.DialHolder, which
// rest.Config.TransportConfig makes anew on every call). A client of its
// own therefore gets a rest.Config with Dial set, whose transport no other
// clientset is handed; the shared layout builds one http.Client and makes
// every clientset on it (kubernetes.NewForConfigAndClient). The clients
// a load uses for its own chores and measurements (namespace checks,
// /version, Load's lists and watches, APIProbe) are not made here.
//
// A Connections is safe for concurrent use; it holds no connection until
// a client sends its first request, and closes none: they close when
// idle for 90 s (the IdleConnTimeout client-go's transports take from
// http.DefaultTransport), when kube-apiserver closes them, or with the
// process.
type Connections struct {
	cfg    *rest.Config // clientConfig of the Stack's
	layout ConnectionLayout
	shared *http.Client // ConnectionsShared's; nil per client
	open   atomic.Int64 // connections dialled and not yet closed
}

// NewConnections returns the Connections of clients reaching cfg's
// kube-apiserver in layout ("" means ConnectionsPerClient). It fails if
// layout is neither, or cfg cannot make a transport (its TLS files do not
// load).
func NewConnections(cfg *rest.Config, layout ConnectionLayout) (*Connections, error) {
	if layout == "" {
		layout = ConnectionsPerClient
	}
	c := &Connections{cfg: clientConfig(cfg), layout: layout}
	switch layout {
	case ConnectionsPerClient:
	case ConnectionsShared:
		hc, err := rest.HTTPClientFor(c.dialConfig())
		if err != nil {
			return nil, fmt.Errorf("the shared connection's transport: %w", err)
		}
		c.shared = hc
	default:
		return nil, fmt.Errorf("connection layout %q: want %q or %q", layout, ConnectionsPerClient, ConnectionsShared)
	}
	return c, nil
}

// Layout returns the clients' connection layout.
func (c *Connections) Layout() ConnectionLayout { return c.layout }

// Open returns how many TCP connections the clients hold open now: one
// per client that has sent a request (one in all when shared), once
// client-go has closed the extra connections it may dial when several
// requests start on a new transport at once (x/net/http2's
// clientConnPool.addConnIfNeeded), and until kube-apiserver or the idle
// timeout closes one.
func (c *Connections) Open() int64 { return c.open.Load() }

// NewClientset returns one more client's clientset: on a connection of its
// own, or on the shared one.
func (c *Connections) NewClientset() (kubernetes.Interface, error) {
	if c.shared != nil {
		return kubernetes.NewForConfigAndClient(c.cfg, c.shared)
	}
	return kubernetes.NewForConfig(c.dialConfig())
}

// dialConfig is c.cfg with a Dial that counts the connections open: a
// transport of its own for every clientset made from it (see
// Connections).
func (c *Connections) dialConfig() *rest.Config {
	cfg := rest.CopyConfig(c.cfg)
	dial := cfg.Dial
	if dial == nil {
		// client-go's own dialer (transport/cache.go)
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	cfg.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		c.open.Add(1)
		return &countedConn{Conn: conn, open: &c.open}, nil
	}
	return cfg
}

// countedConn takes itself off open when it is first closed.
type countedConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}
