package watchload

import (
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/report"
)

// TestCollectFindsPlantedViolations plants a lost event and a stale cache
// entry and checks that collect reports both, with their revisions.
func TestCollectFindsPlantedViolations(t *testing.T) {
	w := &writers{records: []writeRecord{
		{op: OpUpdate, key: "/registry/pods/ns/a", rev: 10, sent: time.Millisecond, done: 2 * time.Millisecond},
		{op: OpUpdate, key: "/registry/pods/ns/b", rev: 11, sent: time.Millisecond, done: 2 * time.Millisecond},
		{op: OpUpdate, key: "/registry/pods/ns/a", rev: 12, sent: time.Millisecond, done: 2 * time.Millisecond},
	}}
	r := NewReflector(4, nil, "/registry/pods/", 500, time.Now())
	r.cache = map[string]int64{"/registry/pods/ns/a": 12, "/registry/pods/ns/b": 9}
	// The watch covered 10..12 but revision 11 never arrived.
	r.sessions = []*session{{from: 10, covered: 12, events: []eventRecord{{rev: 10, at: 3 * time.Millisecond}, {rev: 12, at: 3 * time.Millisecond}}}}
	final := &clientv3.GetResponse{Kvs: []*mvccpb.KeyValue{
		{Key: []byte("/registry/pods/ns/a"), ModRevision: 12},
		{Key: []byte("/registry/pods/ns/b"), ModRevision: 11},
	}}
	res := &report.RunResult{}
	collect(res, w, []*Reflector{r}, final, 0)
	v := res.Validation
	if v.Lost != 1 || v.CacheMismatches != 1 || v.OK() {
		t.Fatalf("validation %+v: want 1 lost, 1 cache mismatch, not OK", v)
	}
	kinds := map[string]int64{}
	for _, x := range v.Violations {
		kinds[x.Kind] = x.Revision
		if x.Watcher != 4 {
			t.Errorf("violation %+v names watcher %d, want 4", x, x.Watcher)
		}
	}
	if kinds["lost"] != 11 || kinds["cache"] != 11 {
		t.Errorf("violations %+v: want lost at 11 and cache mismatch at 11", v.Violations)
	}
	if res.Delivery.Events != 2 || res.Delivery.FromCommit.Count != 2 {
		t.Errorf("delivery %+v: want 2 events", res.Delivery)
	}
}

func TestApplyChecksPrevKV(t *testing.T) {
	r := NewReflector(0, nil, "/p/", 500, time.Now())
	r.cache = map[string]int64{"/p/a": 5}
	ev := func(typ mvccpb.Event_EventType, key string, create, mod, prev int64) *clientv3.Event {
		e := &clientv3.Event{Type: typ, Kv: &mvccpb.KeyValue{Key: []byte(key), CreateRevision: create, ModRevision: mod}}
		if prev != 0 {
			e.PrevKv = &mvccpb.KeyValue{Key: []byte(key), ModRevision: prev}
		}
		return e
	}
	r.apply(ev(mvccpb.PUT, "/p/a", 2, 6, 5), 6, "/p/a") // consistent update
	if r.viol.prevKV != 0 {
		t.Fatalf("consistent update flagged: %+v", r.viol.samples)
	}
	r.apply(ev(mvccpb.PUT, "/p/a", 2, 8, 7), 8, "/p/a")      // an update at 7 was missed
	r.apply(ev(mvccpb.PUT, "/p/b", 9, 9, 0), 9, "/p/b")      // create: fine
	r.apply(ev(mvccpb.PUT, "/p/b", 10, 10, 0), 10, "/p/b")   // created twice
	r.apply(ev(mvccpb.DELETE, "/p/c", 0, 11, 3), 11, "/p/c") // delete of an unknown key
	if r.viol.prevKV != 3 {
		t.Fatalf("prevKV violations = %d, want 3: %+v", r.viol.prevKV, r.viol.samples)
	}
	if got := r.viol.samples[0].rev; got != 8 {
		t.Errorf("first violation at revision %d, want 8", got)
	}
}
