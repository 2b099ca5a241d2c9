package report

import (
	"fmt"
	"testing"
)

func TestEtcdVerb(t *testing.T) {
	tests := []struct{ method, kind, want string }{
		{"Put", "put lease", EtcdWrite},
		{"DeleteRange", "key", EtcdWrite},
		{"Txn", "if mod_revision=0 then put", EtcdWrite},
		{"Txn", "if mod_revision=? then put else range", EtcdWrite},
		{"Txn", "if mod_revision=? then delete else range", EtcdWrite},
		{"Txn", "if version=? then put else range", EtcdWrite},
		{"Txn", "if mod_revision=? then range else put", EtcdRead},
		{"Txn", "then -", ""},
		{"Range", "prefix limit", EtcdRead},
		{"RangeStream", "prefix", EtcdRead},
		{"Watch", "create prefix rev", EtcdWatch},
		{"Watch", "events", ""},
		{"Watch", "cancel", ""},
		{"LeaseGrant", "grant ttl=60s", ""},
		{"Compact", "compact", ""},
	}
	for _, tt := range tests {
		if got := EtcdVerb(tt.method, tt.kind); got != tt.want {
			t.Errorf("EtcdVerb(%q, %q) = %q, want %q", tt.method, tt.kind, got, tt.want)
		}
	}
}

func TestEtcdByResource(t *testing.T) {
	const lease = "leases.coordination.k8s.io"
	reqs := []EtcdRequests{
		{Phase: "seed", Method: "Txn", Kind: "if mod_revision=0 then put", Resource: "pods", Requests: 100, RequestBytes: 400000, Responses: 100, ResponseBytes: 3000},
		{Phase: "steady", Method: "LeaseGrant", Kind: "grant ttl=60s", Requests: 2, RequestBytes: 10, Responses: 2, ResponseBytes: 40},
		{Phase: "steady", Method: "Txn", Kind: "if mod_revision=? then put else range", Resource: lease, Requests: 190, RequestBytes: 95000, Responses: 190, ResponseBytes: 5700},
		{Phase: "steady", Method: "Txn", Kind: "if mod_revision=? then put else range", Resource: "pods", Requests: 10, RequestBytes: 40000, Responses: 10, ResponseBytes: 300},
		{Phase: "steady", Method: "Range", Kind: "prefix limit", Resource: "pods", Requests: 2, RequestBytes: 80, Responses: 2, ResponseBytes: 400000, Items: 100},
		{Phase: "steady", Method: "Watch", Kind: "create prefix rev", Resource: "pods", Requests: 1, RequestBytes: 40},
		{Phase: "steady", Method: "Watch", Kind: "events", Resource: "pods", Responses: 8, ResponseBytes: 41000, Items: 10},
		{Phase: "steady", Method: "Watch", Kind: "events", Resource: lease, Responses: 150, ResponseBytes: 100000, Items: 190},
		{Phase: "steady", Method: "Watch", Kind: "progress notify all", Responses: 3, ResponseBytes: 60},
		{Phase: "stop", Method: "Watch", Kind: "cancel", Resource: "pods", Requests: 1, RequestBytes: 4},
	}
	phases := []EtcdPhase{{Phase: "before", DurationMs: 500}, {Phase: "seed", DurationMs: 2000}, {Phase: "steady", DurationMs: 10000}}
	got := EtcdByResource(reqs, phases)
	want := []EtcdResourceRates{
		{Phase: "seed", Resource: "pods", DurationMs: 2000, Writes: 100, RequestBytes: 400000, ResponseBytes: 3000,
			WritesPerSecond: 50, RequestBytesPerSecond: 200000, ResponseBytesPerSecond: 1500},
		{Phase: "steady", Resource: lease, DurationMs: 10000, Writes: 190, WatchEvents: 190, RequestBytes: 95000, ResponseBytes: 105700,
			WritesPerSecond: 19, WatchEventsPerSecond: 19, RequestBytesPerSecond: 9500, ResponseBytesPerSecond: 10570},
		{Phase: "steady", Resource: "pods", DurationMs: 10000, Writes: 10, Reads: 2, Keys: 100, Watches: 1, WatchEvents: 10,
			RequestBytes: 40120, ResponseBytes: 441300, WritesPerSecond: 1, ReadsPerSecond: 0.2, KeysPerSecond: 10, WatchEventsPerSecond: 1,
			RequestBytesPerSecond: 4012, ResponseBytesPerSecond: 44130},
		{Phase: "steady", Resource: "", DurationMs: 10000, RequestBytes: 10, ResponseBytes: 100, RequestBytesPerSecond: 1, ResponseBytesPerSecond: 10},
		// A phase without a duration has counts and no rates.
		{Phase: "stop", Resource: "pods", RequestBytes: 4},
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
}

func TestEtcdByKind(t *testing.T) {
	reqs := []EtcdRequests{
		{Phase: "steady", Method: "Range", Kind: "key", Resource: "leases.coordination.k8s.io", Requests: 3, Responses: 3, Items: 3, RequestBytes: 90, ResponseBytes: 900},
		{Phase: "steady", Method: "Range", Kind: "key", Resource: "pods", Requests: 1, Responses: 1, Items: 1, RequestBytes: 30, ResponseBytes: 4000, Errors: 1},
		{Phase: "steady", Method: "Range", Kind: "prefix", Resource: "pods", Requests: 1},
		{Phase: "stop", Method: "Range", Kind: "key", Resource: "pods", Requests: 2},
		{Phase: "stop", Method: "Txn", Kind: "if mod_revision=? then put else range", Resource: "pods", Requests: 2, FailedCompares: 1},
		{Phase: "stop", Method: "Txn", Kind: "if mod_revision=? then put else range", Resource: "configmaps", Requests: 3, FailedCompares: 2},
	}
	want := []EtcdRequests{
		{Phase: "steady", Method: "Range", Kind: "key", Requests: 4, Responses: 4, Items: 4, RequestBytes: 120, ResponseBytes: 4900, Errors: 1},
		{Phase: "steady", Method: "Range", Kind: "prefix", Requests: 1},
		{Phase: "stop", Method: "Range", Kind: "key", Requests: 2},
		{Phase: "stop", Method: "Txn", Kind: "if mod_revision=? then put else range", Requests: 5, FailedCompares: 3},
	}
	if got := EtcdByKind(reqs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}
