package etcdproxy

import (
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRequestKinds(t *testing.T) {
	prefix := []byte("/registry/pods/")
	prefixEnd := []byte(clientv3.GetPrefixRangeEnd(string(prefix)))
	put := &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k")}}}
	get := &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k")}}}
	del := &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("k")}}}
	mod := func(rev int64) *pb.Compare {
		return &pb.Compare{Target: pb.Compare_MOD, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_ModRevision{ModRevision: rev}}
	}
	tests := []struct {
		name   string
		method string
		msg    proto.Message
		want   string
	}{
		{"get", "Range", &pb.RangeRequest{Key: []byte("/registry/pods/ns/a")}, "key"},
		{"list page", "Range", &pb.RangeRequest{Key: prefix, RangeEnd: prefixEnd, Limit: 500, Revision: 9}, "prefix limit rev"},
		{"continue", "Range", &pb.RangeRequest{Key: []byte("/registry/pods/ns/b\x00"), RangeEnd: prefixEnd, Limit: 500}, "range limit"},
		{"count", "Range", &pb.RangeRequest{Key: prefix, RangeEnd: prefixEnd, CountOnly: true}, "prefix count_only"},
		{"keys", "Range", &pb.RangeRequest{Key: prefix, RangeEnd: prefixEnd, KeysOnly: true, Serializable: true}, "prefix serializable keys_only"},
		{"all sorted filtered", "Range", &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, SortOrder: pb.RangeRequest_ASCEND, MinModRevision: 3}, "all sorted filtered"},
		{"from", "Range", &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte{0}}, "from"},
		{"prefix of 0xff", "Range", &pb.RangeRequest{Key: []byte("a\xff"), RangeEnd: []byte("b")}, "prefix"},
		{"stream", "RangeStream", &pb.RangeRequest{Key: prefix, RangeEnd: prefixEnd}, "prefix"},
		{"put", "Put", &pb.PutRequest{Key: []byte("k"), Lease: 5, PrevKv: true}, "put lease prev_kv"},
		{"delete", "DeleteRange", &pb.DeleteRangeRequest{Key: prefix, RangeEnd: prefixEnd, PrevKv: true}, "prefix prev_kv"},
		{"create", "Txn", &pb.TxnRequest{Compare: []*pb.Compare{mod(0)}, Success: []*pb.RequestOp{put}}, "if mod_revision=0 then put"},
		{"update", "Txn", &pb.TxnRequest{Compare: []*pb.Compare{mod(7)}, Success: []*pb.RequestOp{put}, Failure: []*pb.RequestOp{get}}, "if mod_revision=? then put else range"},
		{"delete txn", "Txn", &pb.TxnRequest{Compare: []*pb.Compare{mod(7)}, Success: []*pb.RequestOp{del}, Failure: []*pb.RequestOp{get}}, "if mod_revision=? then delete else range"},
		{"compactor", "Txn", &pb.TxnRequest{
			Compare: []*pb.Compare{{Target: pb.Compare_VERSION, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Version{Version: 3}}},
			Success: []*pb.RequestOp{put}, Failure: []*pb.RequestOp{get}}, "if version=? then put else range"},
		{"nested, two compares", "Txn", &pb.TxnRequest{
			Compare: []*pb.Compare{
				{Target: pb.Compare_VALUE, Result: pb.Compare_NOT_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte("x")}},
				{Target: pb.Compare_LEASE, Result: pb.Compare_GREATER},
			},
			Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Success: []*pb.RequestOp{put, del}}}}}},
			"if value!=? and lease>0 then txn(then put,delete)"},
		{"empty txn", "Txn", &pb.TxnRequest{}, "then -"},
		{"compact", "Compact", &pb.CompactionRequest{Revision: 5, Physical: true}, "compact physical"},
		{"watch create", "Watch", &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
			Key: prefix, RangeEnd: prefixEnd, StartRevision: 10, ProgressNotify: true, PrevKv: true,
			Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NODELETE}}}}, "create prefix rev progress_notify prev_kv nodelete"},
		{"watch cancel", "Watch", &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: 3}}}, "cancel"},
		{"watch progress", "Watch", &pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}, "progress"},
		{"empty watch request", "Watch", &pb.WatchRequest{}, "undecodable"},
		{"grant", "LeaseGrant", &pb.LeaseGrantRequest{TTL: 3660}, "grant ttl=3660s"},
		{"keepalive", "LeaseKeepAlive", &pb.LeaseKeepAliveRequest{ID: 1}, "keepalive"},
		{"ttl keys", "LeaseTimeToLive", &pb.LeaseTimeToLiveRequest{ID: 1, Keys: true}, "ttl keys"},
		{"status", "Status", &pb.StatusRequest{}, "call"},
	}
	var c classifier
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(c.appendRequestKind(nil, tt.method, mustMarshal(t, tt.msg))); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if got := string(c.appendRequestKind(nil, "Range", []byte{0xff})); got != "undecodable" {
		t.Errorf("garbage range: got %q, want undecodable", got)
	}
}

func TestWatchResponseKinds(t *testing.T) {
	ev := &mvccpb.Event{Kv: &mvccpb.KeyValue{Key: []byte("k")}}
	hdr := &pb.ResponseHeader{Revision: 9}
	tests := []struct {
		name       string
		resp       *pb.WatchResponse
		want       string
		wantEvents int64
	}{
		{"created", &pb.WatchResponse{Header: hdr, WatchId: 0, Created: true}, "created", 0},
		{"events", &pb.WatchResponse{Header: hdr, WatchId: 2, Events: []*mvccpb.Event{ev, ev, ev}}, "events", 3},
		{"fragment", &pb.WatchResponse{Header: hdr, WatchId: 2, Fragment: true, Events: []*mvccpb.Event{ev}}, "events fragment", 1},
		{"progress notify", &pb.WatchResponse{Header: hdr, WatchId: 2}, "progress notify", 0},
		{"progress notify all", &pb.WatchResponse{Header: hdr, WatchId: -1}, "progress notify all", 0},
		{"canceled", &pb.WatchResponse{Header: hdr, WatchId: 2, Canceled: true, CancelReason: "x"}, "canceled", 0},
		{"compacted", &pb.WatchResponse{Header: hdr, WatchId: 2, Canceled: true, CompactRevision: 5}, "compacted", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, events := appendWatchResponseKind(nil, mustMarshal(t, tt.resp))
			if string(got) != tt.want || events != tt.wantEvents {
				t.Errorf("got %q with %d events, want %q with %d", got, events, tt.want, tt.wantEvents)
			}
		})
	}
	if got, _ := appendWatchResponseKind(nil, []byte{0x5a}); string(got) != "undecodable" {
		t.Errorf("truncated: got %q, want undecodable", got)
	}
}

func TestResponseKeys(t *testing.T) {
	kv := &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v")}
	r := &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: 3}, Kvs: []*mvccpb.KeyValue{kv, kv}, Count: 9, More: true}
	if got := countField(mustMarshal(t, r), rangeResponseKvs); got != 2 {
		t.Errorf("range response: %d keys, want 2", got)
	}
	s := &pb.RangeStreamResponse{RangeResponse: r}
	if got := rangeStreamKeys(mustMarshal(t, s)); got != 2 {
		t.Errorf("range stream response: %d keys, want 2", got)
	}
	if got := countField([]byte{0x12, 0x05, 0x01}, rangeResponseKvs); got != -1 {
		t.Errorf("truncated: got %d, want -1", got)
	}
}

func TestTxnSucceeded(t *testing.T) {
	get := &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{Count: 1}}}
	for _, tt := range []struct {
		name          string
		b             []byte
		succeeded, ok bool
	}{
		{"succeeded", mustMarshal(t, &pb.TxnResponse{Header: &pb.ResponseHeader{Revision: 7}, Succeeded: true}), true, true},
		{"else branch", mustMarshal(t, &pb.TxnResponse{Header: &pb.ResponseHeader{Revision: 7}, Responses: []*pb.ResponseOp{get}}), false, true},
		{"empty", nil, false, true},
		{"truncated", []byte{0x10}, false, false},
	} {
		if s, ok := txnSucceeded(tt.b); s != tt.succeeded || ok != tt.ok {
			t.Errorf("%s: got %v %v, want %v %v", tt.name, s, ok, tt.succeeded, tt.ok)
		}
	}
}

func TestCounterPhasesAndReset(t *testing.T) {
	c := NewCounter()
	key := func(method, kind string) []byte { return appendKey(nil, method, kind) }
	c.add(key("Range", "key"), delta{requests: 1, requestBytes: 10})
	c.SetPhase("seed")
	e := c.add(key("Txn", "then put"), delta{requests: 1, requestBytes: 5})
	c.add(key("Range", "prefix"), delta{requests: 1})
	c.SetPhase("steady")
	// A unary response counts in its request's phase, a bidirectional
	// stream's in the current one.
	c.addTo(e, false, nil, delta{responses: 1, responseBytes: 7})
	c.addTo(e, true, nil, delta{responses: 1, responseBytes: 3})
	c.SetPhase("seed") // back to an earlier phase: no new phase
	c.add(key("Range", "prefix"), delta{requests: 1})

	want := Counts{
		{Phase: "start", Method: "Range", Kind: "key", Requests: 1, RequestBytes: 10},
		{Phase: "seed", Method: "Range", Kind: "prefix", Requests: 2},
		{Phase: "seed", Method: "Txn", Kind: "then put", Requests: 1, RequestBytes: 5, Responses: 1, ResponseBytes: 7},
		{Phase: "steady", Method: "Txn", Kind: "then put", Responses: 1, ResponseBytes: 3},
	}
	if got := c.Counts(); !equalCounts(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if got := c.Phases(); len(got) != 3 || got[2] != "steady" || c.Phase() != "seed" {
		t.Errorf("phases %v current %q, want [start seed steady] seed", got, c.Phase())
	}

	c.Reset()
	c.addTo(e, false, nil, delta{responses: 1})
	want = Counts{{Phase: "seed", Method: "Txn", Kind: "then put", Responses: 1}}
	if got := c.Counts(); !equalCounts(got, want) {
		t.Errorf("after reset: got %+v, want %+v", got, want)
	}
}

func equalCounts(a, b Counts) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestClassifyAllocs checks that counting a Watch response and a Range
// request allocates nothing beyond the decode once their rows exist.
func TestClassifyAllocs(t *testing.T) {
	c := NewCounter()
	var cl classifier
	var key []byte
	req := mustMarshal(t, &pb.RangeRequest{Key: []byte("/registry/pods/"), RangeEnd: []byte("/registry/pods0"), Limit: 500})
	resp := mustMarshal(t, &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: 9}, WatchId: 2, Events: []*mvccpb.Event{{}}})
	count := func() {
		key = appendKey(key[:0], "Watch", "")
		var n int64
		key, n = appendWatchResponseKind(key, resp)
		c.add(key, delta{responses: 1, items: n})
		key = appendKey(key[:0], "Range", "")
		key = cl.appendRequestKind(key, "Range", req)
		c.add(key, delta{requests: 1})
	}
	count()
	// Decoding the RangeRequest allocates its two keys.
	if n := testing.AllocsPerRun(100, count); n > 2 {
		t.Errorf("%v allocations per message pair, want at most 2", n)
	}
}

func TestResourcePaths(t *testing.T) {
	tests := []struct {
		name     string
		key      string
		prefixes []string
		wantPath string
		want     string // Row.Resource
	}{
		{"object", "/registry/pods/default/web-0", nil, "pods", "pods"},
		{"list prefix", "/registry/pods/", nil, "pods", "pods"},
		{"namespace prefix", "/registry/pods/default/", nil, "pods", "pods"},
		{"continuation", "/registry/pods/default/b\x00", nil, "pods", "pods"},
		{"prefix without slash", "/registry/pods", nil, "pods", "pods"},
		{"node lease", "/registry/leases/kube-node-lease/node-1", nil, "leases", "leases.coordination.k8s.io"},
		{"override", "/registry/minions/node-1", nil, "minions", "nodes"},
		{"services", "/registry/services/specs/default/kubernetes", nil, "services/specs", "services"},
		{"endpoints", "/registry/services/endpoints/", nil, "services/endpoints", "endpoints"},
		{"built-in group dropped", "/registry/deployments/ns/d", nil, "deployments", "deployments.apps"},
		{"dotted group", "/registry/apiregistration.k8s.io/apiservices/v1.apps", nil, "apiregistration.k8s.io/apiservices", "apiservices.apiregistration.k8s.io"},
		{"custom resource list", "/registry/stable.example.com/crontabs/", nil, "stable.example.com/crontabs", "crontabs.stable.example.com"},
		{"health", "/registry/health", nil, "health", "health"},
		{"compactor", "compact_rev_key", nil, ResourceCompactRevKey, ResourceCompactRevKey},
		{"whole prefix", "/registry/", nil, ResourceWholePrefix, ResourceWholePrefix},
		{"all", "\x00", nil, ResourceOutsidePrefix, ResourceOutsidePrefix},
		{"outside", "/other/pods/a", nil, ResourceOutsidePrefix, ResourceOutsidePrefix},
		{"prefix's sibling", "/registryx/pods/a", nil, ResourceOutsidePrefix, ResourceOutsidePrefix},
		{"own prefix", "/custom/root/pods/ns/a", trimPrefixes([]string{"/custom/root/"}), "pods", "pods"},
		{"longest prefix", "/registry/sub/pods/ns/a", trimPrefixes([]string{"/registry", "/registry/sub"}), "pods", "pods"},
		{"no key", "", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefixes := tt.prefixes
			if prefixes == nil {
				prefixes = trimPrefixes(nil)
			}
			path := string(appendResourcePath(nil, []byte(tt.key), prefixes))
			if path != tt.wantPath || resourceName(path) != tt.want {
				t.Errorf("got path %q resource %q, want %q %q", path, resourceName(path), tt.wantPath, tt.want)
			}
			// An object's key names the resource keyspace.Parse does.
			if k := (keyspace.Parser{}).Parse(tt.key); k.Class == keyspace.ClassObject && k.GroupResource() != tt.want {
				t.Errorf("keyspace.Parse names %q, want %q", k.GroupResource(), tt.want)
			}
		})
	}
}

// TestRequestResources checks the resource of every method's requests.
func TestRequestResources(t *testing.T) {
	pod := []byte("/registry/pods/default/a")
	lease := []byte("/registry/leases/kube-node-lease/n1")
	put := func(k []byte) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: k}}}
	}
	get := func(k []byte) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: k}}}
	}
	del := &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("/registry/events/ns/e")}}}
	mod := func(k []byte, rev int64) *pb.Compare {
		return &pb.Compare{Key: k, Target: pb.Compare_MOD, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_ModRevision{ModRevision: rev}}
	}
	tests := []struct {
		name   string
		method string
		msg    proto.Message
		want   string
	}{
		{"range", "Range", &pb.RangeRequest{Key: pod}, "pods"},
		{"list", "Range", &pb.RangeRequest{Key: []byte("/registry/leases/"), RangeEnd: []byte("/registry/leases0"), Limit: 500}, "leases.coordination.k8s.io"},
		{"range stream", "RangeStream", &pb.RangeRequest{Key: []byte("/registry/minions/"), RangeEnd: []byte("/registry/minions0")}, "nodes"},
		{"put", "Put", &pb.PutRequest{Key: []byte("/registry/events/ns/e"), Lease: 7}, "events"},
		{"delete range", "DeleteRange", &pb.DeleteRangeRequest{Key: lease}, "leases.coordination.k8s.io"},
		{"txn update", "Txn", &pb.TxnRequest{Compare: []*pb.Compare{mod(lease, 7)}, Success: []*pb.RequestOp{put(lease)}, Failure: []*pb.RequestOp{get(lease)}}, "leases.coordination.k8s.io"},
		{"txn create", "Txn", &pb.TxnRequest{Compare: []*pb.Compare{mod(pod, 0)}, Success: []*pb.RequestOp{put(pod)}}, "pods"},
		{"txn without compares", "Txn", &pb.TxnRequest{Success: []*pb.RequestOp{del}}, "events"},
		{"txn, failure only", "Txn", &pb.TxnRequest{Failure: []*pb.RequestOp{get(lease)}}, "leases.coordination.k8s.io"},
		{"nested txn", "Txn", &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Success: []*pb.RequestOp{put(pod)}}}}}}, "pods"},
		{"empty txn", "Txn", &pb.TxnRequest{}, ""},
		{"compactor txn", "Txn", &pb.TxnRequest{
			Compare: []*pb.Compare{{Key: []byte("compact_rev_key"), Target: pb.Compare_VERSION, Result: pb.Compare_EQUAL}},
			Success: []*pb.RequestOp{put([]byte("compact_rev_key"))}}, ResourceCompactRevKey},
		{"compact", "Compact", &pb.CompactionRequest{Revision: 5}, ""},
		{"watch create", "Watch", &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
			Key: []byte("/registry/pods/"), RangeEnd: []byte("/registry/pods0")}}}, "pods"},
		{"watch progress", "Watch", &pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}, ""},
		{"watch cancel", "Watch", &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: 3}}}, ""},
		{"grant", "LeaseGrant", &pb.LeaseGrantRequest{TTL: 60}, ""},
		{"revoke", "LeaseRevoke", &pb.LeaseRevokeRequest{ID: 1}, ""},
		{"keepalive", "LeaseKeepAlive", &pb.LeaseKeepAliveRequest{ID: 1}, ""},
		{"ttl", "LeaseTimeToLive", &pb.LeaseTimeToLiveRequest{ID: 1}, ""},
		{"status", "Status", &pb.StatusRequest{}, ""},
	}
	prefixes := trimPrefixes(nil)
	var c classifier
	// A request with a key first, so that a keyless one must clear it.
	c.appendRequestKind(nil, "Range", mustMarshal(t, &pb.RangeRequest{Key: pod}))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.appendRequestKind(nil, tt.method, mustMarshal(t, tt.msg))
			if got := resourceName(string(appendResourcePath(nil, c.key, prefixes))); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestWatchResources follows two watches and a failed create on one
// stream: each response counts under its own watch's resource, learnt from
// the created responses in the order of the creates.
func TestWatchResources(t *testing.T) {
	ev := &mvccpb.Event{Kv: &mvccpb.KeyValue{Key: []byte("k")}}
	hdr := &pb.ResponseHeader{Revision: 9}
	create := func(key string) []byte {
		return mustMarshal(t, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
			Key: []byte(key), RangeEnd: []byte(clientv3.GetPrefixRangeEnd(key))}}})
	}
	cancel := func(id int64) []byte {
		return mustMarshal(t, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: id}}})
	}
	resp := func(r *pb.WatchResponse) []byte { r.Header = hdr; return mustMarshal(t, r) }
	const pods, leases = "pods", "leases.coordination.k8s.io"
	steps := []struct {
		request  []byte // a request, else response
		response []byte
		want     kindResource // zero: not checked
	}{
		{request: create("/registry/pods/"), want: kindResource{"create prefix", pods}},
		{request: create("/registry/leases/"), want: kindResource{"create prefix", leases}},
		{request: create("/registry/configmaps/")}, // etcd refuses it below
		{response: resp(&pb.WatchResponse{WatchId: 0, Created: true}), want: kindResource{"created", pods}},
		{response: resp(&pb.WatchResponse{WatchId: 1, Created: true}), want: kindResource{"created", leases}},
		{response: resp(&pb.WatchResponse{WatchId: -1, Created: true, Canceled: true, CancelReason: "permission denied"}), want: kindResource{"created", "configmaps"}},
		{response: resp(&pb.WatchResponse{WatchId: 1, Events: []*mvccpb.Event{ev, ev}}), want: kindResource{"events", leases}},
		{response: resp(&pb.WatchResponse{WatchId: 0, Events: []*mvccpb.Event{ev}}), want: kindResource{"events", pods}},
		{response: resp(&pb.WatchResponse{WatchId: 0, Fragment: true, Events: []*mvccpb.Event{ev}}), want: kindResource{"events fragment", pods}},
		{response: resp(&pb.WatchResponse{WatchId: 1}), want: kindResource{"progress notify", leases}},
		{request: mustMarshal(t, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}), want: kindResource{"progress", ""}},
		{response: resp(&pb.WatchResponse{WatchId: -1}), want: kindResource{"progress notify all", ""}},
		{request: cancel(1), want: kindResource{"cancel", leases}},
		{response: resp(&pb.WatchResponse{WatchId: 1, Canceled: true}), want: kindResource{"canceled", leases}},
		{response: resp(&pb.WatchResponse{WatchId: 1, Events: []*mvccpb.Event{ev}}), want: kindResource{"events", ""}}, // forgotten
		{response: resp(&pb.WatchResponse{WatchId: 0, Canceled: true, CompactRevision: 5}), want: kindResource{"compacted", pods}},
		{response: resp(&pb.WatchResponse{WatchId: 0}), want: kindResource{"progress notify", ""}},
		{response: []byte{0x5a}, want: kindResource{"undecodable", ""}},
	}
	ws := &watches{ids: map[int64]string{}}
	rc := requestCounter{prefixes: trimPrefixes(nil), method: "Watch", ws: ws}
	for i, s := range steps {
		// A counter per step: its one row is the step's.
		c := NewCounter()
		if s.request != nil {
			rc.counter = c
			rc.count(s.request, len(s.request))
		} else {
			c.countWatchResponse(ws, nil, s.response, delta{responses: 1})
		}
		rows := c.Counts()
		if len(rows) != 1 {
			t.Fatalf("step %d: %d rows, want 1: %+v", i, len(rows), rows)
		}
		if s.want == (kindResource{}) {
			continue
		}
		if got := (kindResource{rows[0].Kind, rows[0].Resource}); got != s.want {
			t.Errorf("step %d: got kind %q resource %q, want %q %q", i, got.kind, got.resource, s.want.kind, s.want.resource)
		}
	}
	if len(ws.ids) != 0 || len(ws.pending) != 0 {
		t.Errorf("left %d watches and %d creates, want none", len(ws.ids), len(ws.pending))
	}
}

// kindResource is a row's kind and resource.
type kindResource struct{ kind, resource string }

func TestCounterResourcesAndPhaseTimes(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	now := t0
	c := newCounter(func() time.Time { return now })
	key := func(method, kind, path string) []byte { return appendPath(appendKey(nil, method, kind), path) }
	c.add(key("Txn", "then put", "minions"), delta{requests: 1, requestBytes: 10})
	c.add(key("Txn", "then put", "nodes"), delta{requests: 2, requestBytes: 20}) // the same resource
	e := c.add(key("Txn", "then put", "leases"), delta{requests: 1})
	c.add(key("LeaseGrant", "grant ttl=60s", ""), delta{requests: 1})
	now = now.Add(2 * time.Second)
	c.SetPhase("steady")
	c.addTo(e, true, nil, delta{responses: 1}) // counts in steady, under leases
	now = now.Add(3 * time.Second)
	c.SetPhase("start")
	now = now.Add(time.Second)
	c.SetPhase("steady")
	now = now.Add(500 * time.Millisecond)

	want := Counts{
		{Phase: "start", Method: "LeaseGrant", Kind: "grant ttl=60s", Requests: 1},
		{Phase: "start", Method: "Txn", Kind: "then put", Resource: "leases.coordination.k8s.io", Requests: 1},
		{Phase: "start", Method: "Txn", Kind: "then put", Resource: "nodes", Requests: 3, RequestBytes: 30},
		{Phase: "steady", Method: "Txn", Kind: "then put", Resource: "leases.coordination.k8s.io", Responses: 1},
	}
	got := c.Counts()
	if !equalCounts(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if r, ok := got.Get("start", "Txn", "then put"); !ok || r.Requests != 4 || r.RequestBytes != 30 || r.Resource != "" {
		t.Errorf("Get: got %+v %v, want 4 requests, 30 bytes, no single resource", r, ok)
	}
	if r, _ := got.Get("steady", "Txn", "then put"); r.Responses != 1 || r.Resource != "leases.coordination.k8s.io" {
		t.Errorf("Get of one resource: got %+v, want its resource", r)
	}
	wantTimes := []PhaseTime{{"start", t0, 3 * time.Second}, {"steady", t0.Add(2 * time.Second), 3500 * time.Millisecond}}
	if got := c.PhaseTimes(); fmt.Sprint(got) != fmt.Sprint(wantTimes) {
		t.Errorf("phase times %v, want %v", got, wantTimes)
	}
	now = now.Add(time.Second)
	c.Reset()
	now = now.Add(time.Second)
	if got, want := c.PhaseTimes(), []PhaseTime{{"steady", t0.Add(7500 * time.Millisecond), time.Second}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after reset: phase times %v, want %v", got, want)
	}
}

// TestResourceAllocs checks that counting a request and a watch response
// under their resources allocates nothing beyond decoding the request once
// their rows exist.
func TestResourceAllocs(t *testing.T) {
	c := NewCounter()
	ws := &watches{ids: map[int64]string{}}
	ws.create([]byte("leases"))
	ws.response(watchResponse{ok: true, created: true, watchID: 2})
	rc := requestCounter{counter: c, prefixes: trimPrefixes(nil), method: "Txn"}
	lease := []byte("/registry/leases/kube-node-lease/n1")
	req := mustMarshal(t, &pb.TxnRequest{Compare: []*pb.Compare{{Key: lease, Target: pb.Compare_MOD}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: lease}}}}})
	resp := mustMarshal(t, &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: 9}, WatchId: 2, Events: []*mvccpb.Event{{}}})
	var cl classifier
	decode := testing.AllocsPerRun(100, func() { cl.appendRequestKind(nil, "Txn", req) })
	var key []byte
	count := func() {
		key = c.countWatchResponse(ws, key, resp, delta{responses: 1})
		rc.count(req, len(req))
	}
	count()
	if n := testing.AllocsPerRun(100, count); n > decode {
		t.Errorf("%v allocations per message pair, want at most the %v of decoding the Txn", n, decode)
	}
	if r, _ := c.Counts().Get(DefaultPhase, "Watch", "events"); r.Resource != "leases.coordination.k8s.io" || r.Items != 102 {
		t.Errorf("got %+v, want 102 events of leases", r)
	}
	if r, _ := c.Counts().Get(DefaultPhase, "Txn", "if mod_revision=0 then put"); r.Resource != "leases.coordination.k8s.io" || r.Requests != 102 {
		t.Errorf("got %+v, want 102 txns of leases", r)
	}
}

// TestLeaseScopes counts Lease writes of node heartbeats, leader election
// and kube-apiserver identity, a list of all Leases and a watch of them:
// the rows keep a single Lease's namespace, and its name in kube-system;
// reads of a resource's prefix key are marked; ByResource sums them up
// again.
func TestLeaseScopes(t *testing.T) {
	c := NewCounter()
	txn := func(key string) []byte {
		k := []byte(key)
		return mustMarshal(t, &pb.TxnRequest{Compare: []*pb.Compare{{Key: k, Target: pb.Compare_MOD}},
			Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: k}}}}})
	}
	rc := requestCounter{counter: c, prefixes: trimPrefixes([]string{"/registry", "/registry/sub"}), method: "Txn"}
	for _, key := range []string{
		"/registry/leases/kube-node-lease/node-1",
		"/registry/leases/kube-node-lease/node-2",
		"/registry/leases/kube-system/kube-scheduler",
		"/registry/leases/kube-system/kube-scheduler",
		"/registry/leases/kube-system/apiserver-abc",
		"/registry/sub/leases/other/x", // under the longer prefix
		"/registry/pods/kube-node-lease/p",
		"/registry/leasesx/kube-system/y",
	} {
		b := txn(key)
		rc.count(b, len(b))
	}
	rr := requestCounter{counter: c, prefixes: trimPrefixes(nil), method: "Range"}
	list := mustMarshal(t, &pb.RangeRequest{Key: []byte("/registry/leases/"), RangeEnd: []byte("/registry/leases0")})
	rr.count(list, len(list))
	ns := mustMarshal(t, &pb.RangeRequest{Key: []byte("/registry/leases/kube-system/"), RangeEnd: []byte("/registry/leases/kube-system0")})
	rr.count(ns, len(ns))
	for _, key := range []string{"/registry/configmaps", "/registry/configmaps/", "/registry/configmaps/ns/a", "/registry/configmapsx"} {
		b := mustMarshal(t, &pb.RangeRequest{Key: []byte(key), Limit: 1})
		rr.count(b, len(b))
	}
	wc := requestCounter{counter: c, prefixes: trimPrefixes(nil), method: "Watch", ws: &watches{ids: map[int64]string{}}}
	watch := mustMarshal(t, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte("/registry/leases/kube-node-lease/"), RangeEnd: []byte("/registry/leases/kube-node-lease0")}}})
	wc.count(watch, len(watch))

	type row struct {
		method, resource, namespace, name string
		prefixKey                         bool
		requests                          int64
	}
	var got []row
	for _, r := range c.Counts() {
		got = append(got, row{r.Method, r.Resource, r.Namespace, r.Name, r.PrefixKey, r.Requests})
	}
	const leases = "leases.coordination.k8s.io"
	want := []row{
		{"Range", "configmaps", "", "", false, 1},
		{"Range", "configmaps", "", "", true, 2}, // the count poll's key, with and without its slash
		{"Range", "configmapsx", "", "", true, 1},
		{"Range", leases, "", "", false, 1},
		{"Range", leases, "kube-system", "", false, 1},
		{"Txn", leases, "kube-node-lease", "", false, 2},
		{"Txn", leases, "kube-system", "apiserver-abc", false, 1},
		{"Txn", leases, "kube-system", "kube-scheduler", false, 2},
		{"Txn", leases, "other", "", false, 1},
		{"Txn", "leasesx", "", "", false, 1}, // no Lease
		{"Txn", "pods", "", "", false, 1},
		{"Watch", leases, "", "", false, 1},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
	var sums []row
	for _, r := range c.Counts().ByResource() {
		sums = append(sums, row{r.Method, r.Resource, r.Namespace, r.Name, r.PrefixKey, r.Requests})
	}
	wantSums := []row{{"Range", "configmaps", "", "", false, 3}, {"Range", "configmapsx", "", "", false, 1}, {"Range", leases, "", "", false, 2},
		{"Txn", leases, "", "", false, 6}, {"Txn", "leasesx", "", "", false, 1}, {"Txn", "pods", "", "", false, 1}, {"Watch", leases, "", "", false, 1}}
	if fmt.Sprint(sums) != fmt.Sprint(wantSums) {
		t.Errorf("ByResource: got  %v\nwant %v", sums, wantSums)
	}
}
