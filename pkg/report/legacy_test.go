package report

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// TestDecodeVersion3 reads results written one schema version back, by
// lwbench at 315dcdb: a model run (RunResult 3) and a run through
// kube-apiserver (KubeRunResult 3). Each decodes into today's RunResult
// with the renamed fields carried over (watchers to informers,
// fromCommit to fromResponse, a relist's watcher, cause and requests,
// an informer's cachedObjects and relists, namespaceCleanup to cleanup),
// and encodes again under the new names only.
func TestDecodeVersion3(t *testing.T) {
	read := func(name string) (Header, *RunResult) {
		t.Helper()
		b, err := os.ReadFile("testdata/v3/" + name)
		if err != nil {
			t.Fatal(err)
		}
		h, v, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r, ok := v.(*RunResult)
		if !ok {
			t.Fatalf("%s decoded as %T, want *RunResult", name, v)
		}
		return h, r
	}

	h, model := read("run.json")
	if h.Kind != KindRun || h.SchemaVersion != 3 {
		t.Errorf("run.json: header %+v, want RunResult 3", h)
	}
	if got, want := model.Delivery.FromResponse.P50Ms, 0.5; got != want {
		t.Errorf("run.json: delivery.fromResponse p50 %v, want fromCommit's %v", got, want)
	}
	if h := model.Delivery.HeldBack; h == nil || h.FromResponse.P50Ms != 1500 {
		t.Errorf("run.json: heldBack %+v, want fromCommit's p50 1500 as fromResponse", h)
	}
	if len(model.Members) == 0 || model.Members[0].Delivery == nil || model.Members[0].Delivery.FromResponse.P50Ms != 0.6 {
		t.Errorf("run.json: member 0's delivery %+v, want fromCommit's p50 0.6", model.Members[0].Delivery)
	}
	if len(model.Informers) != 1 || model.Informers[0].Lists != 2 || model.Informers[0].CacheObjects != 1000 || !model.Informers[0].HeldBack {
		t.Errorf("run.json: informers %+v, want the one watcher with 2 lists and 1000 cached objects, held back", model.Informers)
	}
	if len(model.Relists) != 1 || model.Relists[0].Informer != 0 || model.Relists[0].Reason != "compacted" || len(model.Relists[0].Attempts) != 2 {
		t.Errorf("run.json: relists %+v, want watcher 0's compacted relist of two attempts", model.Relists)
	}
	if len(model.Compactions) != 2 || model.APIServer != nil {
		t.Errorf("run.json: %d compactions, apiserver %+v; want 2 and none", len(model.Compactions), model.APIServer)
	}

	h, real := read("kube-run.json")
	if h.Kind != KindKubeRun || h.SchemaVersion != 3 {
		t.Errorf("kube-run.json: header %+v, want KubeRunResult 3", h)
	}
	if real.APIServer == nil || real.APIServer.Version != "v1.37.2" {
		t.Fatalf("kube-run.json: apiserver %+v, want v1.37.2", real.APIServer)
	}
	if got, want := real.Delivery.FromResponse.P50Ms, 2.0; got != want {
		t.Errorf("kube-run.json: delivery.fromResponse p50 %v, want fromCommit's %v", got, want)
	}
	wantInformers := []InformerStats{
		{ID: 0, Resource: "pods", Requests: 6, Lists: 2, Events: 2700, Bookmarks: 3, ResponseBytes: 4e6, CacheObjects: 1000, LastRevision: 9000, HeldBack: true},
		{ID: 1, Resource: "pods", Requests: 3, Lists: 1, Events: 2750, ResponseBytes: 3e6, CacheObjects: 1000, LastRevision: 9000},
	}
	if !reflect.DeepEqual(real.Informers, wantInformers) {
		t.Errorf("kube-run.json: informers\n%+v\nwant\n%+v", real.Informers, wantInformers)
	}
	wantRelist := Relist{Informer: 0, AtMs: 14000, Reason: "expired", Verb: "list", ResourceVersion: "", Pages: 2,
		Objects: 1000, Bytes: 1.2e6, DurationMs: 250, FailedRequests: 1, Expired: 1, BackoffMs: 800}
	if len(real.Relists) != 1 || !reflect.DeepEqual(real.Relists[0], wantRelist) {
		t.Errorf("kube-run.json: relists %+v, want %+v", real.Relists, wantRelist)
	}
	if len(real.Compactions) != 2 || real.Compactions[1].N != 2 || real.Compactions[1].Revision != 7000 || len(real.Holds) != 1 || len(real.Etcd) != 2 {
		t.Errorf("kube-run.json: compactions %+v, holds %+v, %d etcd rows; want 2 (the second to 7000), 1 hold, 2 rows",
			real.Compactions, real.Holds, len(real.Etcd))
	}

	// Written again, only the new names.
	b, err := json.Marshal(real)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for _, old := range []string{"watchers", "namespaceCleanup"} {
		if _, ok := fields[old]; ok {
			t.Errorf("re-encoded result has the old field %q", old)
		}
	}
}

// TestDecodeNamespaceCleanup: a KubeRunResult's namespaceCleanup, with
// the namespaces still present, is the RunResult's cleanup.
func TestDecodeNamespaceCleanup(t *testing.T) {
	doc := `{"kind":"KubeRunResult","schemaVersion":3,"scenario":{"profile":"client-go"},` +
		`"namespaceCleanup":{"namespaces":["a","b"],"objectsDeleted":7,"left":["b"],"durationMs":12,"error":"namespaces [b] still present"}}`
	_, v, err := Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	got := v.(*RunResult).Cleanup
	want := &Cleanup{Namespaces: []string{"a", "b"}, ObjectsDeleted: 7, NamespacesLeft: []string{"b"}, DurationMs: 12, Error: "namespaces [b] still present"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got cleanup %+v, want %+v", got, want)
	}
}
