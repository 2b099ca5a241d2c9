package watchload

import (
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// The benchmarks below measure what lwbench adds per event and per write
// on top of the etcd client, so that its share of a run's CPU can be
// checked against the client's own (scripts/bench-vs-etcd.sh measures the
// whole).

// BenchmarkValidateEvent is the validation of one event of an etcd watch
// response against the recorded history, keys_N distinct keys updated in
// turn: its conversion to a WatchEvent, as the Reflector does it, and the
// checks.
func BenchmarkValidateEvent(b *testing.B) {
	for _, keys := range []int{1, 1000} {
		b.Run(fmt.Sprintf("keys_%d", keys), func(b *testing.B) {
			const n = 1 << 16
			rec := NewRecorder(nil, []string{testPrefix})
			evs := make([]*clientv3.Event, n)
			for i := range n {
				e := histEntry{rev: int64(i + 2), key: fmt.Sprintf("%sns/k%d", testPrefix, i%keys), put: true}
				rec.hist[0].append(e)
				evs[i] = event(e)
			}
			rec.watermark.Store(n + 1)
			v := newValidator(0, rec, testPrefix, &Violations{})
			var wevs []WatchEvent
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%n == 0 {
					v.startSession(2)
				}
				wevs = appendWatchEvents(wevs[:0], evs[i%n:i%n+1])
				v.events(wevs)
				i++
			}
			if v.viol.Total() != 0 {
				b.Fatalf("violations: %+v", v.viol.Samples())
			}
		})
	}
}

// BenchmarkTimeEvent is the join of one event with its write and its
// sample in the shared histograms.
func BenchmarkTimeEvent(b *testing.B) {
	tm := newTiming(time.Now(), 1<<16, 1)
	w := newWatchTiming(tm, -1)
	b.ReportAllocs()
	var rev int64
	for b.Loop() {
		rev++
		tm.ring.publish(rev, rev, rev+1000)
		w.event(rev, rev+5000)
	}
	w.finish()
}

// BenchmarkApplyEvent is one update applied to a watcher's cache of
// keys_N objects, with its prevKV check.
func BenchmarkApplyEvent(b *testing.B) {
	for _, keys := range []int{100, 10000} {
		b.Run(fmt.Sprintf("keys_%d", keys), func(b *testing.B) {
			env := NewEnv(time.Now(), 1024, 1, nil)
			r := NewReflector(env, ReflectorOptions{Prefix: testPrefix})
			evs := make([]*clientv3.Event, keys)
			for i := range keys {
				key := fmt.Sprintf("%sns/pod-%05d", testPrefix, i)
				r.cache.items[key] = &cacheEntry{rev: 1}
				evs[i] = &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), CreateRevision: 1},
					PrevKv: &mvccpb.KeyValue{Key: []byte(key)}}
			}
			b.ReportAllocs()
			rev := int64(1)
			for b.Loop() {
				ev := evs[int(rev)%keys]
				ev.PrevKv.ModRevision = r.cache.items[string(ev.Kv.Key)].rev
				rev++
				ev.Kv.ModRevision = rev
				r.cache.apply(ev)
			}
			if n := env.Violations.Total(); n != 0 {
				b.Fatalf("violations: %+v", env.Violations.Samples())
			}
		})
	}
}

// BenchmarkEncodeObject is the cost of one write's value: a realistic
// object encoded with Kubernetes' protobuf serializer.
func BenchmarkEncodeObject(b *testing.B) {
	codec, err := keyspace.NewCodec()
	if err != nil {
		b.Fatal(err)
	}
	gen := keyspace.NewGenerator(1)
	for _, resource := range Resources {
		b.Run(resource, func(b *testing.B) {
			b.ReportAllocs()
			var size int
			g := 0
			for b.Loop() {
				st := &objectState{owner: "seed-1"}
				w := &KubernetesWorkload{}
				val, err := codec.Encode(w.object(gen, resource, "ns-1", "obj-1", st, g%7))
				if err != nil {
					b.Fatal(err)
				}
				size = len(val)
				g++
			}
			b.ReportMetric(float64(size), "value-bytes")
		})
	}
}
