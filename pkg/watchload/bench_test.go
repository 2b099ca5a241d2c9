package watchload_test

import (
	"testing"
	"time"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

func TestWatchFanOut(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	tests := []struct {
		name string
		o    watchload.WatchOptions
	}{
		{name: "raw values, one key, like etcd's benchmark", o: watchload.WatchOptions{
			Watchers: 60, Streams: 6, Connections: 2, Keys: 1, ValueSize: 4, Puts: 200, PutRate: 1000, PutWorkers: 4,
			NoPrevKV: true, NoProgressNotify: true, Prefix: "/fanout/raw/"}},
		{name: "pods with prevKV", o: watchload.WatchOptions{
			Watchers: 20, Streams: 2, Keys: 30, Puts: 100, PutRate: 500, PutWorkers: 4, Prefix: "/fanout/k8s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := watchload.Watch(t.Context(), target(srv), tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Writes.Completed != tt.o.Puts || res.ExpectedEvents != tt.o.Puts*int64(tt.o.Watchers) {
				t.Fatalf("puts %+v, expected events %d", res.Writes, res.ExpectedEvents)
			}
			if res.Delivery.Events != res.ExpectedEvents || res.Delivery.TimedEvents != res.ExpectedEvents {
				t.Errorf("received %d events (%d timed), want %d", res.Delivery.Events, res.Delivery.TimedEvents, res.ExpectedEvents)
			}
			if !res.Validation.OK() || res.Validation.HistoryEvents != tt.o.Puts {
				t.Errorf("validation %s, history %d events", res.Validation.Summary(), res.Validation.HistoryEvents)
			}
			if res.Creation.Count != int64(tt.o.Watchers) || res.Delivery.EventsPerSecond <= 0 {
				t.Errorf("creation %+v, %.0f events/s", res.Creation, res.Delivery.EventsPerSecond)
			}
		})
	}
}

func TestPut(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	res, err := watchload.Put(t.Context(), target(srv), watchload.PutOptions{Keys: 50, KeySize: 16, ValueSize: 8, Total: 300, Rate: 1000, Workers: 4, Connections: 2})
	if err != nil {
		t.Fatal(err)
	}
	w := res.Writes
	if w.Completed != 300 || w.Puts != 300 || w.Errors != 0 || w.Latency.Count != 300 || w.ThroughputPerSecond <= 0 {
		t.Errorf("writes %+v", w)
	}
	var scheduled int64
	for _, iv := range res.Intervals {
		scheduled += iv.WritesScheduled
	}
	if scheduled != 300 {
		t.Errorf("intervals account for %d writes, want 300", scheduled)
	}
}

func TestPutKubernetes(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	res, err := watchload.Put(t.Context(), target(srv), watchload.PutOptions{Keys: 40, Total: 200, Rate: 500, Workers: 4, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w := res.Writes
	if w.Completed != 200 || w.Errors != 0 || w.Creates == 0 || w.Updates == 0 || w.Deletes == 0 || res.Scenario.KubernetesObjects != 40+8+20 {
		t.Errorf("writes %+v, scenario %+v", w, res.Scenario)
	}
}

func TestListCost(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	res, err := watchload.List(t.Context(), target(srv), watchload.ListOptions{
		Objects: []int{20, 45}, PageSizes: []int64{10, 0}, Repeats: 2, Prefix: "/listcost",
	})
	if err != nil {
		t.Fatal(err)
	}
	// Per object count: full and keys-only at 2 page sizes, count-only
	// and stream once.
	if len(res.Rows) != 2*6 {
		t.Fatalf("%d rows, want 12", len(res.Rows))
	}
	for _, row := range res.Rows {
		wantPages := 1
		if row.PageSize == 10 {
			wantPages = (row.Objects + 9) / 10
		}
		if row.Mode == watchload.ListModeStream {
			wantPages = row.Pages // chunks are the server's choice
		}
		if row.ObjectsReturned != int64(row.Objects) || row.Pages != wantPages || row.Errors != 0 || row.Latency.Count != 2 {
			t.Errorf("row %+v: want %d objects in %d pages", row, row.Objects, wantPages)
		}
	}
	var full, keys int64
	for _, row := range res.Rows {
		if row.Objects == 45 && row.PageSize == 0 {
			switch row.Mode {
			case watchload.ListModeFull:
				full = row.ResponseBytes
			case watchload.ListModeKeysOnly:
				keys = row.ResponseBytes
			}
		}
	}
	if keys == 0 || full < 10*keys {
		t.Errorf("full list %d bytes, keys-only %d: pods of a few KiB should weigh far more than their keys", full, keys)
	}
}
