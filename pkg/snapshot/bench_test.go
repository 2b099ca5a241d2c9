package snapshot_test

import (
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// BenchmarkDecodeKeyValue compares the protowire decoder with
// proto.Unmarshal into the generated type, on a pod-sized entry.
func BenchmarkDecodeKeyValue(b *testing.B) {
	codec, err := keyspace.NewCodec()
	if err != nil {
		b.Fatal(err)
	}
	pod, err := codec.Encode(keyspace.NewGenerator(1).Pod("default", "web-0", 3))
	if err != nil {
		b.Fatal(err)
	}
	v, _ := proto.Marshal(&mvccpb.KeyValue{Key: []byte("/registry/pods/default/web-0"), CreateRevision: 2, ModRevision: 99, Version: 4, Value: pod})
	b.Run("protowire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := snapshot.DecodeKeyValue(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proto.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		var kv mvccpb.KeyValue
		for b.Loop() {
			kv.Reset()
			if err := proto.Unmarshal(v, &kv); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkUsage scans a database of 150 pods x 4 revisions written by an
// embedded etcd with one worker and with one per CPU; the 1 GiB figures
// come from scripts/inspect-bench.sh.
func BenchmarkUsage(b *testing.B) {
	path := makeHistoryDB(b)
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers_%d", workers), func(b *testing.B) {
			db, err := snapshot.Open(path, snapshot.Options{Workers: workers})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			b.SetBytes(db.SizeBytes())
			b.ReportAllocs()
			for b.Loop() {
				if _, err := db.Usage(b.Context(), keyspace.Parser{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
