package etcdproxy

import "errors"

// ErrUpstreamScheme is returned by Start when Config.Upstream is not an
// http:// or https:// URL.
var ErrUpstreamScheme = errors.New("upstream scheme is not http or https")

// ErrClosed is the upstream error of a call that reached a Proxy being
// closed; its client sees codes.Unavailable.
var ErrClosed = errors.New("etcd proxy closed")
