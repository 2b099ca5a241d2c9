package etcdproxy

import (
	"bytes"
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// Kinds the classifier names outside a message's own shape.
const (
	kindCall        = "call"
	kindStream      = "stream"
	kindUndecodable = "undecodable"
	kindNoRequest   = "no request"
)

// methodName returns Row.Method for a full gRPC method name.
func methodName(full string) string {
	if strings.HasPrefix(full, "/etcdserverpb.") {
		if i := strings.LastIndexByte(full, '/'); i >= 0 {
			return full[i+1:]
		}
	}
	return full
}

// bidirectional reports whether each message of method's streams is
// counted in the phase current when it passes (see Row).
func bidirectional(method string) bool {
	return method == "Watch" || method == "LeaseKeepAlive"
}

// Row.Resource of keys that lie in no resource.
const (
	// ResourceCompactRevKey is kube-apiserver's compactor's key,
	// compact_rev_key, outside its prefix
	// (k8s.io/apiserver/pkg/storage/etcd3/compact.go).
	ResourceCompactRevKey = "(compact_rev_key)"
	// ResourceOutsidePrefix is any other key outside every prefix
	// (Config.Prefixes), and a range from "\x00" (kind "all").
	ResourceOutsidePrefix = "(outside prefix)"
	// ResourceWholePrefix is a prefix itself with its slash
	// ("/registry/"): a range over every resource.
	ResourceWholePrefix = "(whole prefix)"
)

// appendResourcePath appends to dst the segment(s) of key, right below
// the longest of prefixes (without trailing slashes) it lies under, that
// name its resource, as keyspace.Parser.Parse splits them: two segments
// for a dotted group ("apps.example.com/foos") and for "services/specs"
// and "services/endpoints", else one ("pods", "minions"); the segment
// ends at the next slash or the key's end, so an object's key, its
// resource's or namespace's prefix and a paging continuation
// ("/registry/pods/ns/b\x00") give the same. Keys without a resource
// segment give a ResourceX name; an empty key gives nothing. It does not
// allocate beyond growing dst.
func appendResourcePath(dst, key []byte, prefixes []string) []byte {
	if len(key) == 0 {
		return dst
	}
	if string(key) == keyspace.CompactRevKey {
		return append(dst, ResourceCompactRevKey...)
	}
	best := -1
	for _, p := range prefixes {
		if len(key) > len(p) && key[len(p)] == '/' && string(key[:len(p)]) == p && len(p) > best {
			best = len(p)
		}
	}
	if best < 0 {
		return append(dst, ResourceOutsidePrefix...)
	}
	rest := key[best+1:]
	seg, tail, _ := bytes.Cut(rest, []byte{'/'})
	if len(seg) == 0 {
		return append(dst, ResourceWholePrefix...)
	}
	next, _, _ := bytes.Cut(tail, []byte{'/'})
	if len(next) > 0 && (bytes.IndexByte(seg, '.') >= 0 ||
		(string(seg) == "services" && (string(next) == "specs" || string(next) == "endpoints"))) {
		return append(dst, rest[:len(seg)+1+len(next)]...)
	}
	return append(dst, seg...)
}

// appendLeaseScope appends to dst, when key is a Lease's (resource path
// "leases" below the longest of prefixes it lies under: the
// coordination.k8s.io Leases of node heartbeats, leader election and
// kube-apiserver identity), a 0 byte and its namespace, and in
// kube-system, where a handful of leases live, a slash and its name:
// "\x00kube-node-lease", "\x00kube-system/kube-scheduler". Other keys,
// and a list of every Lease, append nothing. It does not allocate beyond
// growing dst.
func appendLeaseScope(dst, key []byte, prefixes []string) []byte {
	rest, ok := bytes.CutPrefix(belowPrefix(key, prefixes), []byte("leases/"))
	if !ok {
		return dst
	}
	ns, name, _ := bytes.Cut(rest, []byte{'/'})
	if len(ns) == 0 {
		return dst
	}
	dst = append(dst, 0)
	dst = append(dst, ns...)
	if string(ns) == leaseNamespaceSystem && len(name) > 0 && bytes.IndexByte(name, 0) < 0 {
		dst = append(dst, '/')
		dst = append(dst, name...)
	}
	return dst
}

// scopePrefixKey is the scope (Row.PrefixKey) of a read of a resource's
// prefix key itself; parentheses never occur in a namespace.
const scopePrefixKey = "(prefix key)"

// appendPrefixKeyScope appends to dst a 0 byte and scopePrefixKey when
// key, read without a range end, is the prefix key of the resource whose
// path (appendResourcePath) is path: the key below the longest of
// prefixes is path, with or without a trailing slash
// ("/registry/configmaps"). No object lives there: kube-apiserver reads it
// for the response header's revision in its object count poll
// (k8s.io/apiserver/pkg/storage/etcd3/store.go GetCurrentResourceVersion,
// called by cacher.go getKeys from registry/generic/registry/store.go
// startObservingCount). It does not allocate beyond growing dst.
func appendPrefixKeyScope(dst, key, path []byte, prefixes []string) []byte {
	rest := belowPrefix(key, prefixes)
	if len(path) == 0 || !bytes.HasPrefix(rest, path) {
		return dst
	}
	if tail := rest[len(path):]; len(tail) == 0 || (len(tail) == 1 && tail[0] == '/') {
		dst = append(dst, 0)
		dst = append(dst, scopePrefixKey...)
	}
	return dst
}

// belowPrefix returns what follows the longest of prefixes key lies
// under, and its slash; nil when it lies under none.
func belowPrefix(key []byte, prefixes []string) []byte {
	best := -1
	for _, p := range prefixes {
		if len(key) > len(p) && key[len(p)] == '/' && string(key[:len(p)]) == p && len(p) > best {
			best = len(p)
		}
	}
	if best < 0 {
		return nil
	}
	return key[best+1:]
}

// leaseNamespaceSystem is the namespace of the leader-election and
// kube-apiserver identity Leases (metav1.NamespaceSystem).
const leaseNamespaceSystem = "kube-system"

// trimPrefixes returns prefixes without trailing slashes, or
// keyspace.KnownPrefixes when there are none.
func trimPrefixes(prefixes []string) []string {
	if len(prefixes) == 0 {
		prefixes = keyspace.KnownPrefixes
	}
	out := make([]string, len(prefixes))
	for i, p := range prefixes {
		out[i] = strings.TrimSuffix(p, "/")
	}
	return out
}

// classifier decodes request messages of one stream into reused messages.
// It is not safe for concurrent use.
type classifier struct {
	rng   pb.RangeRequest
	put   pb.PutRequest
	del   pb.DeleteRangeRequest
	txn   pb.TxnRequest
	cmp   pb.CompactionRequest
	watch pb.WatchRequest
	grant pb.LeaseGrantRequest
	ttl   pb.LeaseTimeToLiveRequest
	// key is the key the request last classified touches (requestKey),
	// nil for none; it is valid until the next request.
	key []byte
}

// appendRequestKind appends the kind of request message b of method to
// dst, and sets c.key to the key it touches: a Range's, RangeStream's,
// Put's or DeleteRange's key, a Txn's first compare's key (else its first
// operation's: txnKey), a Watch create request's key; nil for every other
// request.
func (c *classifier) appendRequestKind(dst []byte, method string, b []byte) []byte {
	unmarshal := func(m proto.Message) bool { return proto.Unmarshal(b, m) == nil }
	c.key = nil
	switch method {
	case "Range", "RangeStream":
		if !unmarshal(&c.rng) {
			break
		}
		c.key = c.rng.Key
		return appendRangeKind(dst, &c.rng)
	case "Put":
		if !unmarshal(&c.put) {
			break
		}
		c.key = c.put.Key
		return appendPutKind(dst, &c.put)
	case "DeleteRange":
		if !unmarshal(&c.del) {
			break
		}
		c.key = c.del.Key
		return appendDeleteKind(dst, &c.del)
	case "Txn":
		if !unmarshal(&c.txn) {
			break
		}
		c.key = txnKey(&c.txn)
		return appendTxnShape(dst, &c.txn)
	case "Compact":
		if !unmarshal(&c.cmp) {
			break
		}
		dst = append(dst, "compact"...)
		if c.cmp.Physical {
			dst = append(dst, " physical"...)
		}
		return dst
	case "Watch":
		if !unmarshal(&c.watch) {
			c.watch.Reset() // no half-decoded create or cancel for the proxy's watches
			break
		}
		if r := c.watch.GetCreateRequest(); r != nil {
			c.key = r.Key
		}
		return appendWatchRequestKind(dst, &c.watch)
	case "LeaseGrant":
		// The TTL tells whose lease it is: kube-apiserver grants its
		// events' leases for --event-ttl + min(5 %, 60 s), other objects'
		// for their own TTL (k8s.io/apiserver/pkg/storage/etcd3/lease_manager.go).
		if !unmarshal(&c.grant) {
			break
		}
		dst = append(dst, "grant ttl="...)
		dst = strconv.AppendInt(dst, c.grant.TTL, 10)
		return append(dst, 's')
	case "LeaseRevoke":
		return append(dst, "revoke"...)
	case "LeaseKeepAlive":
		return append(dst, "keepalive"...)
	case "LeaseTimeToLive":
		if !unmarshal(&c.ttl) {
			break
		}
		dst = append(dst, "ttl"...)
		if c.ttl.Keys {
			dst = append(dst, " keys"...)
		}
		return dst
	case "LeaseLeases":
		return append(dst, "leases"...)
	default:
		return append(dst, kindCall...)
	}
	return append(dst, kindUndecodable...)
}

// txnKey returns the key a Txn touches: its first compare's, else its
// first success operation's, else its first failure operation's (nested
// transactions searched alike); nil without any. kube-apiserver's
// transactions compare and operate on one key
// (k8s.io/apiserver/pkg/storage/etcd3/store.go).
func txnKey(t *pb.TxnRequest) []byte {
	if len(t.Compare) > 0 {
		return t.Compare[0].Key
	}
	for _, ops := range [][]*pb.RequestOp{t.Success, t.Failure} {
		if len(ops) == 0 {
			continue
		}
		switch r := ops[0].Request.(type) {
		case *pb.RequestOp_RequestRange:
			return r.RequestRange.Key
		case *pb.RequestOp_RequestPut:
			return r.RequestPut.Key
		case *pb.RequestOp_RequestDeleteRange:
			return r.RequestDeleteRange.Key
		case *pb.RequestOp_RequestTxn:
			return txnKey(r.RequestTxn)
		}
	}
	return nil
}

// appendKeyShape appends how key and rangeEnd select keys, with etcd's
// conventions (api/v3/etcdserverpb/rpc.proto, RangeRequest.range_end):
// "key" (one key, no range_end), "all" (key and range_end "\x00"),
// "from" (range_end "\x00": every key >= key), "prefix" (range_end is
// key with its last byte below 0xff incremented and the rest dropped, as
// clientv3.WithPrefix makes it) or "range" (any other [key, range_end)).
func appendKeyShape(dst, key, rangeEnd []byte) []byte {
	switch {
	case len(rangeEnd) == 0:
		return append(dst, "key"...)
	case len(rangeEnd) == 1 && rangeEnd[0] == 0:
		if len(key) == 1 && key[0] == 0 {
			return append(dst, "all"...)
		}
		return append(dst, "from"...)
	case isPrefixEnd(key, rangeEnd):
		return append(dst, "prefix"...)
	}
	return append(dst, "range"...)
}

// isPrefixEnd reports whether end is the smallest key greater than every
// key with prefix key (clientv3.GetPrefixRangeEnd).
func isPrefixEnd(key, end []byte) bool {
	i := len(key) - 1
	for i >= 0 && key[i] == 0xff {
		i--
	}
	if i < 0 {
		return false
	}
	return len(end) == i+1 && bytes.Equal(end[:i], key[:i]) && end[i] == key[i]+1
}

// appendRangeKind appends a Range or RangeStream request's kind: its key
// shape, then in this order whichever apply: "limit" (limit > 0), "rev"
// (revision > 0: a read at a past revision), "serializable", "keys_only",
// "count_only", "sorted" (a sort order), "filtered" (a min/max mod or
// create revision).
func appendRangeKind(dst []byte, r *pb.RangeRequest) []byte {
	dst = appendKeyShape(dst, r.Key, r.RangeEnd)
	if r.Limit > 0 {
		dst = append(dst, " limit"...)
	}
	if r.Revision > 0 {
		dst = append(dst, " rev"...)
	}
	if r.Serializable {
		dst = append(dst, " serializable"...)
	}
	if r.KeysOnly {
		dst = append(dst, " keys_only"...)
	}
	if r.CountOnly {
		dst = append(dst, " count_only"...)
	}
	if r.SortOrder != pb.RangeRequest_NONE {
		dst = append(dst, " sorted"...)
	}
	if r.MinModRevision != 0 || r.MaxModRevision != 0 || r.MinCreateRevision != 0 || r.MaxCreateRevision != 0 {
		dst = append(dst, " filtered"...)
	}
	return dst
}

// appendPutKind appends "put" and whichever of "lease", "prev_kv",
// "ignore_value", "ignore_lease" apply.
func appendPutKind(dst []byte, r *pb.PutRequest) []byte {
	dst = append(dst, "put"...)
	if r.Lease != 0 {
		dst = append(dst, " lease"...)
	}
	if r.PrevKv {
		dst = append(dst, " prev_kv"...)
	}
	if r.IgnoreValue {
		dst = append(dst, " ignore_value"...)
	}
	if r.IgnoreLease {
		dst = append(dst, " ignore_lease"...)
	}
	return dst
}

// appendDeleteKind appends a DeleteRange request's key shape and
// "prev_kv" if asked.
func appendDeleteKind(dst []byte, r *pb.DeleteRangeRequest) []byte {
	dst = appendKeyShape(dst, r.Key, r.RangeEnd)
	if r.PrevKv {
		dst = append(dst, " prev_kv"...)
	}
	return dst
}

// appendTxnShape appends a Txn's shape: "if <compares> then <ops> else
// <ops>", where a compare is its target, operator and "0" or "?" (zero or
// any other value: "mod_revision=0" is a create-if-absent) joined by " and
// ", and ops are "put", "delete", "range" or "txn(<shape>)" joined by ",".
// "if" is left out without compares, "else" without failure ops, and an
// empty success branch is "then -". kube-apiserver's writes read as "if
// mod_revision=0 then put" (create), "if mod_revision=? then put else range"
// (update) and "if mod_revision=? then delete else range" (delete);
// its compactor's as "if version=? then put else range"
// (staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go, compact.go).
func appendTxnShape(dst []byte, t *pb.TxnRequest) []byte {
	if len(t.Compare) > 0 {
		dst = append(dst, "if "...)
		for i, c := range t.Compare {
			if i > 0 {
				dst = append(dst, " and "...)
			}
			dst = appendCompare(dst, c)
		}
		dst = append(dst, ' ')
	}
	dst = append(dst, "then "...)
	dst = appendOps(dst, t.Success)
	if len(t.Failure) > 0 {
		dst = append(dst, " else "...)
		dst = appendOps(dst, t.Failure)
	}
	return dst
}

func appendCompare(dst []byte, c *pb.Compare) []byte {
	zero := false
	switch c.Target {
	case pb.Compare_VERSION:
		dst = append(dst, "version"...)
		zero = c.GetVersion() == 0
	case pb.Compare_CREATE:
		dst = append(dst, "create_revision"...)
		zero = c.GetCreateRevision() == 0
	case pb.Compare_MOD:
		dst = append(dst, "mod_revision"...)
		zero = c.GetModRevision() == 0
	case pb.Compare_VALUE:
		dst = append(dst, "value"...)
		zero = len(c.GetValue()) == 0
	case pb.Compare_LEASE:
		dst = append(dst, "lease"...)
		zero = c.GetLease() == 0
	default:
		dst = append(dst, "target?"...)
	}
	switch c.Result {
	case pb.Compare_EQUAL:
		dst = append(dst, '=')
	case pb.Compare_GREATER:
		dst = append(dst, '>')
	case pb.Compare_LESS:
		dst = append(dst, '<')
	case pb.Compare_NOT_EQUAL:
		dst = append(dst, "!="...)
	}
	if zero {
		return append(dst, '0')
	}
	return append(dst, '?')
}

func appendOps(dst []byte, ops []*pb.RequestOp) []byte {
	if len(ops) == 0 {
		return append(dst, '-')
	}
	for i, op := range ops {
		if i > 0 {
			dst = append(dst, ',')
		}
		switch r := op.Request.(type) {
		case *pb.RequestOp_RequestRange:
			dst = append(dst, "range"...)
		case *pb.RequestOp_RequestPut:
			dst = append(dst, "put"...)
		case *pb.RequestOp_RequestDeleteRange:
			dst = append(dst, "delete"...)
		case *pb.RequestOp_RequestTxn:
			dst = append(dst, "txn("...)
			dst = appendTxnShape(dst, r.RequestTxn)
			dst = append(dst, ')')
		default:
			dst = append(dst, '?')
		}
	}
	return dst
}

// appendWatchRequestKind appends a Watch stream request's kind: "create"
// with the key shape and whichever of "rev" (start_revision > 0),
// "progress_notify", "prev_kv", "noput", "nodelete", "fragment",
// "watch_id" (an id chosen by the client) apply; "cancel"; or "progress"
// (a progress request).
func appendWatchRequestKind(dst []byte, w *pb.WatchRequest) []byte {
	switch {
	case w.GetCreateRequest() != nil:
		r := w.GetCreateRequest()
		dst = append(dst, "create "...)
		dst = appendKeyShape(dst, r.Key, r.RangeEnd)
		if r.StartRevision > 0 {
			dst = append(dst, " rev"...)
		}
		if r.ProgressNotify {
			dst = append(dst, " progress_notify"...)
		}
		if r.PrevKv {
			dst = append(dst, " prev_kv"...)
		}
		for _, f := range r.Filters {
			switch f {
			case pb.WatchCreateRequest_NOPUT:
				dst = append(dst, " noput"...)
			case pb.WatchCreateRequest_NODELETE:
				dst = append(dst, " nodelete"...)
			}
		}
		if r.Fragment {
			dst = append(dst, " fragment"...)
		}
		if r.WatchId != 0 {
			dst = append(dst, " watch_id"...)
		}
		return dst
	case w.GetCancelRequest() != nil:
		return append(dst, "cancel"...)
	case w.GetProgressRequest() != nil:
		return append(dst, "progress"...)
	}
	return append(dst, kindUndecodable...)
}

// Field numbers of the response messages the proxy scans without decoding
// (api/v3/etcdserverpb/rpc.proto).
const (
	rangeResponseKvs             = 2 // RangeResponse.kvs
	rangeStreamResponseRange     = 1 // RangeStreamResponse.range_response
	txnResponseSucceeded         = 2 // TxnResponse.succeeded
	watchResponseWatchID         = 2
	watchResponseCreated         = 3
	watchResponseCanceled        = 4
	watchResponseCompactRevision = 5
	watchResponseFragment        = 7
	watchResponseEvents          = 11
	invalidWatchID               = -1 // clientv3.InvalidWatchID
)

// countField returns how many times field num occurs at the top level of
// message b; -1 if b is not a valid message.
func countField(b []byte, num protowire.Number) int64 {
	var n int64
	for len(b) > 0 {
		f, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return -1
		}
		b = b[l:]
		l = protowire.ConsumeFieldValue(f, typ, b)
		if l < 0 {
			return -1
		}
		if f == num {
			n++
		}
		b = b[l:]
	}
	return n
}

// txnSucceeded returns a TxnResponse's succeeded field (false when
// absent, as proto3 encodes false); ok is false if b is not a valid
// message.
func txnSucceeded(b []byte) (succeeded, ok bool) {
	for len(b) > 0 {
		f, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return false, false
		}
		b = b[l:]
		if f == txnResponseSucceeded && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false, false
			}
			succeeded = v != 0
			b = b[n:]
			continue
		}
		l = protowire.ConsumeFieldValue(f, typ, b)
		if l < 0 {
			return false, false
		}
		b = b[l:]
	}
	return succeeded, true
}

// rangeStreamKeys returns the number of keys in a RangeStreamResponse.
func rangeStreamKeys(b []byte) int64 {
	var n int64
	for len(b) > 0 {
		f, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return n
		}
		b = b[l:]
		if f == rangeStreamResponseRange && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return n
			}
			if k := countField(v, rangeResponseKvs); k > 0 {
				n += k
			}
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(f, typ, b)
		if l < 0 {
			return n
		}
		b = b[l:]
	}
	return n
}

// watchResponse is what the proxy reads of a Watch response
// (scanWatchResponse).
type watchResponse struct {
	ok                          bool // it parsed
	watchID, compactRev, events int64
	created, canceled, fragment bool
}

// scanWatchResponse reads the fields of Watch response b that the proxy
// counts by, without decoding it.
func scanWatchResponse(b []byte) watchResponse {
	var w watchResponse
	for len(b) > 0 {
		f, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return watchResponse{}
		}
		b = b[l:]
		if typ == protowire.VarintType {
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return watchResponse{}
			}
			switch f {
			case watchResponseWatchID:
				w.watchID = int64(v)
			case watchResponseCreated:
				w.created = v != 0
			case watchResponseCanceled:
				w.canceled = v != 0
			case watchResponseCompactRevision:
				w.compactRev = int64(v)
			case watchResponseFragment:
				w.fragment = v != 0
			}
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(f, typ, b)
		if l < 0 {
			return watchResponse{}
		}
		if f == watchResponseEvents {
			w.events++
		}
		b = b[l:]
	}
	w.ok = true
	return w
}

// appendWatchResponseKind appends a Watch response's kind to dst and returns its
// number of events: "created" (a watcher was created), "compacted"
// (canceled because its start revision was compacted: compact_revision >
// 0), "canceled", "events" (or "events fragment"), "progress notify" (no
// events, for one watcher: progress_notify) or "progress notify all" (no
// events, watch_id -1: the answer to a progress request, or a notification
// on behalf of every watcher of the stream; see
// server/etcdserver/api/v3rpc/watch.go). A response that cannot be parsed
// is "undecodable".
func appendWatchResponseKind(dst, b []byte) ([]byte, int64) {
	w := scanWatchResponse(b)
	return w.appendKind(dst), w.events
}

// appendKind appends the kind of w to dst (appendWatchResponseKind).
func (w watchResponse) appendKind(dst []byte) []byte {
	switch {
	case !w.ok:
		dst = append(dst, kindUndecodable...)
	case w.created:
		dst = append(dst, "created"...)
	case w.compactRev > 0:
		dst = append(dst, "compacted"...)
	case w.canceled:
		dst = append(dst, "canceled"...)
	case w.events > 0:
		dst = append(dst, "events"...)
		if w.fragment {
			dst = append(dst, " fragment"...)
		}
	case w.watchID == invalidWatchID:
		dst = append(dst, "progress notify all"...)
	default:
		dst = append(dst, "progress notify"...)
	}
	return dst
}
