package etcdproxy

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// BenchmarkCount counts what the proxy counts of a node Lease renewal as
// kube-apiserver sends it: the Txn, its response and the watch event
// that follows, without the network: the proxy's own cost per message.
func BenchmarkCount(b *testing.B) {
	c := NewCounter()
	ws := &watches{ids: map[int64]string{}}
	wc := requestCounter{counter: c, prefixes: trimPrefixes(nil), method: "Watch", ws: ws}
	create := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte("/registry/leases/"), RangeEnd: []byte("/registry/leases0")}}}
	created := &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: 1}, WatchId: 0, Created: true}
	marshal := func(m proto.Message) []byte {
		out, err := proto.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	cr := marshal(create)
	wc.count(cr, len(cr))
	c.countWatchResponse(ws, nil, marshal(created), delta{responses: 1})
	lease := []byte("/registry/leases/kube-node-lease/node-1")
	txn := marshal(&pb.TxnRequest{
		Compare: []*pb.Compare{{Key: lease, Target: pb.Compare_MOD, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_ModRevision{ModRevision: 7}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: lease, Value: make([]byte, 400)}}}},
		Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: lease}}}},
	})
	event := marshal(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: 9}, WatchId: 0,
		Events: []*mvccpb.Event{{Kv: &mvccpb.KeyValue{Key: lease, Value: make([]byte, 400), ModRevision: 9}}}})
	rc := requestCounter{counter: c, prefixes: trimPrefixes(nil), method: "Txn"}
	var key []byte
	b.ReportAllocs()
	for b.Loop() {
		e := rc.count(txn, len(txn))
		key = c.addTo(e, false, key, delta{responses: 1, responseBytes: 20})
		key = c.countWatchResponse(ws, key, event, delta{responses: 1, responseBytes: int64(len(event))})
	}
}
