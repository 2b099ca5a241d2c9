// Package etcdproxy is a transparent, counting gRPC proxy in front of one
// etcd endpoint: it shows what a client such as kube-apiserver asks of
// etcd, request by request, per phase of an experiment.
//
// # Forwarding
//
// Start listens on a loopback port and serves plain gRPC over HTTP/2
// (h2c), which is what clientv3 dials for an http:// endpoint, so
// kube-apiserver can be pointed at it with --etcd-servers=Proxy.URL().
// Every call, whatever its service and method (an unknown-service handler
// with a pass-through codec: etcd methods added later, such as etcd 3.7's
// KV.RangeStream, pass too), unary or streaming, is forwarded to
// Config.Upstream over http or https with the client's metadata; etcd's
// headers, messages, trailers and status (code, message, details) come
// back unchanged. Messages are forwarded as the bytes that arrived,
// without re-encoding. Each downstream connection gets one upstream
// connection of its own, so etcd sees as many client connections as it
// would without the proxy. For a cluster, start one Proxy per member and
// share one Counter between them (Config.Counter).
//
// # Counting
//
// Each message is counted before it is forwarded, so once a client has
// seen a response Counts includes it and its request. A request is
// classified by decoding a copy with the etcdserverpb types; responses are
// scanned, not decoded, for the few fields counted (keys of a Range, events
// and flags of a Watch response). Counts are per phase (SetPhase), Row.Method,
// Row.Kind and Row.Resource; see Row for which phase a response counts in.
//
// Kinds, by method (shapes of keys: "key", "prefix", "range", "from",
// "all"; see appendKeyShape):
//
//	Range, RangeStream  key shape + limit, rev, serializable, keys_only,
//	                    count_only, sorted, filtered   e.g. "prefix limit rev"
//	Put                 "put" + lease, prev_kv, ignore_value, ignore_lease
//	DeleteRange         key shape + prev_kv
//	Txn                 "if <compares> then <ops> else <ops>", e.g.
//	                    "if mod_revision=? then put else range"
//	Compact             "compact" or "compact physical"
//	Watch requests      "create <key shape>" + rev, progress_notify, prev_kv,
//	                    noput, nodelete, fragment, watch_id; "cancel";
//	                    "progress" (a progress request)
//	Watch responses     "created", "canceled", "compacted", "events",
//	                    "events fragment", "progress notify" (one watcher's),
//	                    "progress notify all" (watch_id -1: answers a
//	                    progress request)
//	LeaseGrant ...      "grant ttl=<seconds>s" (the TTL asked for), "revoke",
//	                    "keepalive", "ttl", "ttl keys", "leases"
//	Watch, LeaseKeepAlive  "stream": streams opened and failed
//	anything else       "call" (Status, Defragment, MemberList, Auth ...)
//
// A request that does not decode is "undecodable"; responses and errors
// of a call whose request never passed are "no request".
//
// # Resources
//
// Each row also names the resource its messages touch (Row.Resource),
// from the key below kube-apiserver's prefix (Config.Prefixes), as
// keyspace.Parser maps it: "pods", "minions" as "nodes",
// "leases.coordination.k8s.io". A Range, RangeStream, Put or DeleteRange
// by its key (a list by its prefix, a page by its continuation key), a Txn
// by its first compare's key (kube-apiserver's transactions touch one), a
// Watch create request by its key and a cancel request by its watch. The
// responses of unary and server-streaming calls count with their
// request. Watch responses count under the resource of the watch they
// belong to: the proxy maps each watch_id, learnt from the "created"
// response that answers a create request (etcd answers a stream's creates
// in order), to the create's resource. Messages without a key (leases,
// Compact, Status, progress requests, "progress notify all") have none.
// Requests on a single Lease, or one namespace's Leases, also keep the
// namespace (Row.Namespace), and in kube-system the Lease's name
// (Row.Name): node heartbeats, leader election and kube-apiserver
// identity renew Leases at different rates. A read of a resource's prefix
// key itself is marked (Row.PrefixKey): kube-apiserver's object count
// poll. Counts.ByResource sums those rows up again.
// Counter.PhaseTimes gives each phase's duration, to turn counts into
// rates.
//
// # Cost
//
// Forwarding copies no message bytes (the received buffers are handed on);
// counting decodes each request (allocating its byte fields) and scans
// Range and Watch responses in place; a message's resource is read from
// its key in place too (a watch create allocates its entry in the
// stream's map of watches). On a shared 2-core VM
// (BenchmarkRange: a 100-key list of 1 KiB values, etcd, client and proxy
// in one process) a call took 1.0-1.2 ms through the proxy against
// 0.8-1.1 ms directly, with about 220 more allocations per call, nearly
// all gRPC's per-stream machinery. Counting alone (BenchmarkCount: a node
// Lease renewal's Txn, its response and the watch event that follows)
// took about 2 µs of CPU and 15 allocations, nearly all of both decoding
// the Txn; naming the three messages' resource added about 0.1 µs and no
// allocation, nor does keeping a Lease's namespace or marking a prefix
// key's read (TestResourceAllocs, BenchmarkCount: 15 allocations).
package etcdproxy
