package etcdproxy

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
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
