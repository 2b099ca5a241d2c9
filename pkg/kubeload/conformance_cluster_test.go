package kubeload_test

import (
	"strings"
	"testing"

	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/report"
)

// TestCompareByResource holds a cluster's comparison: rows split by
// resource, the drain (each side's own wait for its informers) left out
// with the seed, and a row of a pod-driven resource outside 10 % noted
// with both sides' counts per pod created when the real control plane
// created fewer pods.
func TestCompareByResource(t *testing.T) {
	const create, update = "if mod_revision=0 then put", "if mod_revision=? then put else range"
	model := []report.EtcdRequests{
		{Phase: "seed", Method: "Txn", Kind: create, Resource: "pods", Requests: 500},
		{Phase: "steady", Method: "Txn", Kind: create, Resource: "pods", Requests: 100},
		{Phase: "steady", Method: "Txn", Kind: update, Resource: "pods", Requests: 400},
		{Phase: "steady", Method: "Txn", Kind: update, Resource: "leases.coordination.k8s.io", Requests: 1000},
	}
	real := []report.EtcdRequests{
		{Phase: "seed", Method: "Txn", Kind: create, Resource: "pods", Requests: 480},
		{Phase: "steady after compaction 1", Method: "Txn", Kind: create, Resource: "pods", Requests: 80},
		{Phase: "steady", Method: "Txn", Kind: update, Resource: "pods", Requests: 322},
		{Phase: "steady", Method: "Txn", Kind: update, Resource: "leases.coordination.k8s.io", Requests: 960},
		{Phase: "drain after compaction 1", Method: "Txn", Kind: update, Resource: "leases.coordination.k8s.io", Requests: 140},
	}
	rows := kubeload.CompareByResource(model, real)
	tests := []struct {
		resource, kind string
		wantModel      int64
		wantReal       int64
		wantWithin     bool
		wantNote       string
	}{
		{"leases.coordination.k8s.io", update, 1000, 960, true, ""},
		{"pods", create, 100, 80, false, "created 80 pods in the window, the model 100"},
		{"pods", update, 400, 322, false, "per pod created, model 4.00, real 4.03: within 10 %"},
	}
	if len(rows) != len(tests) {
		t.Fatalf("got %d rows %+v, want %d", len(rows), rows, len(tests))
	}
	for i, tt := range tests {
		r := rows[i]
		if r.Resource != tt.resource || r.Kind != tt.kind || r.Model != tt.wantModel || r.Real != tt.wantReal || r.Within10 != tt.wantWithin {
			t.Errorf("row %d: got %s %q model %d real %d within %v, want %s %q model %d real %d within %v",
				i, r.Resource, r.Kind, r.Model, r.Real, r.Within10, tt.resource, tt.kind, tt.wantModel, tt.wantReal, tt.wantWithin)
		}
		if !strings.Contains(r.Note, tt.wantNote) {
			t.Errorf("row %d (%s %q): got note %q, want it to say %q", i, r.Resource, r.Kind, r.Note, tt.wantNote)
		}
	}
}

// TestCompareByResourceNotesKWOKLeases names KWOK's four lease workers
// when the real side renewed fewer Leases than the model (at 1,000 nodes
// on a busy machine KWOK renewed 45 a second of the 100 due).
func TestCompareByResourceNotesKWOKLeases(t *testing.T) {
	const update = "if mod_revision=? then put else range"
	model := []report.EtcdRequests{{Phase: "steady", Method: "Txn", Kind: update, Resource: "leases.coordination.k8s.io", Requests: 6219}}
	real := []report.EtcdRequests{{Phase: "steady", Method: "Txn", Kind: update, Resource: "leases.coordination.k8s.io", Requests: 2736}}
	rows := kubeload.CompareByResource(model, real)
	if len(rows) != 1 || rows[0].Within10 || !strings.Contains(rows[0].Note, "NodeLeaseParallelism 4") {
		t.Fatalf("got %+v, want one row outside 10 %% whose note names KWOK's NodeLeaseParallelism 4", rows)
	}
}

// TestCompareByResourceNotesConsistencyChecks notes a resource whose
// consistency check (a RangeStream pinned to the cache's revision) fell
// in the window on one side only, with the checks of every resource on
// each side; a resource with two checks on a side gets no such note.
func TestCompareByResourceNotesConsistencyChecks(t *testing.T) {
	const check = "prefix limit rev"
	model := []report.EtcdRequests{
		{Phase: "steady", Method: "RangeStream", Kind: check, Resource: "configmaps", Requests: 1},
		{Phase: "steady", Method: "RangeStream", Kind: check, Resource: "secrets", Requests: 1},
		{Phase: "steady", Method: "RangeStream", Kind: check, Resource: "pods", Requests: 2},
	}
	real := []report.EtcdRequests{
		{Phase: "steady", Method: "RangeStream", Kind: check, Resource: "nodes", Requests: 1},
		{Phase: "steady", Method: "RangeStream", Kind: check, Resource: "secrets", Requests: 1},
	}
	for _, r := range kubeload.CompareByResource(model, real) {
		noted := strings.Contains(r.Note, "consistency checker") && strings.Contains(r.Note, "model 4, real 2")
		switch r.Resource {
		case "configmaps", "nodes":
			if r.Within10 || !noted {
				t.Errorf("%s: within %v, note %q; want outside 10 %% with the checks' note and totals (model 4, real 2)", r.Resource, r.Within10, r.Note)
			}
		case "secrets":
			if !r.Within10 || r.Note != "" {
				t.Errorf("secrets: within %v, note %q; want within 10 %%, no note", r.Within10, r.Note)
			}
		case "pods":
			if noted {
				t.Errorf("pods: two checks on one side, none on the other, got the one-or-none note %q", r.Note)
			}
		}
	}
}

// TestCompareByResourceNotesFailedCompares leads a noted row of writes
// or watch events with how many Txns wrote on each side once a compare
// failed (the ReplicaSets' events: the resource's Txns), and notes the
// controllers' merged writes in rollouts; a row without a known cause
// stays without a note, failed compares or not.
func TestCompareByResourceNotesFailedCompares(t *testing.T) {
	const create, update, del = "if mod_revision=0 then put", "if mod_revision=? then put else range", "if mod_revision=? then delete else range"
	model := []report.EtcdRequests{
		{Phase: "steady", Method: "Txn", Kind: update, Resource: "configmaps", Requests: 100},
		{Phase: "steady", Method: "Txn", Kind: create, Resource: "pods", Requests: 100},
		{Phase: "steady", Method: "Txn", Kind: del, Resource: "pods", Requests: 200, FailedCompares: 100},
		{Phase: "steady", Method: "Txn", Kind: update, Resource: "replicasets.apps", Requests: 800},
		{Phase: "steady", Method: "Watch", Kind: "events", Resource: "replicasets.apps", Responses: 800},
	}
	real := []report.EtcdRequests{
		{Phase: "steady", Method: "Txn", Kind: update, Resource: "configmaps", Requests: 130, FailedCompares: 30},
		{Phase: "steady", Method: "Txn", Kind: create, Resource: "pods", Requests: 100},
		{Phase: "steady", Method: "Txn", Kind: del, Resource: "pods", Requests: 260, FailedCompares: 160},
		{Phase: "steady", Method: "Txn", Kind: update, Resource: "replicasets.apps", Requests: 780, FailedCompares: 60},
		{Phase: "steady", Method: "Watch", Kind: "events", Resource: "replicasets.apps", Responses: 720},
	}
	rows := kubeload.CompareByResource(model, real)
	if len(rows) != 5 {
		t.Fatalf("got %d rows %+v, want 5", len(rows), rows)
	}
	cm, del1, rsTxn, rsEvents := rows[0], rows[2], rows[3], rows[4]
	if cm.Resource != "configmaps" || cm.Within10 || cm.RealFailedCompares != 30 || cm.Note != "" {
		t.Errorf("configmaps row %+v: want outside 10 %% with 30 real failed compares and no note (no known cause)", cm)
	}
	if del1.Kind != del || del1.ModelFailedCompares != 100 || del1.RealFailedCompares != 160 ||
		!strings.HasPrefix(del1.Note, "Txns that wrote (each one watch event): model 100 of 200, real 100 of 260;") || !strings.Contains(del1.Note, "KWOK's DELETE") {
		t.Errorf("pods delete row %+v: want its failed compares counted and its note led by the Txns that wrote", del1)
	}
	if rsTxn.RealFailedCompares != 60 || !rsTxn.Within10 || rsTxn.Note != "" {
		t.Errorf("replicasets Txn row %+v: want 60 real failed compares, within 10 %%, no note", rsTxn)
	}
	if rsEvents.Method != "Watch" || rsEvents.Within10 ||
		!strings.HasPrefix(rsEvents.Note, "Txns that wrote (each one watch event): model 800 of 800, real 720 of 780;") || !strings.Contains(rsEvents.Note, "--rollout-percent 0") {
		t.Errorf("replicasets events row %+v: want outside 10 %%, noted with the resource's Txns that wrote and the rollouts' merged writes", rsEvents)
	}
}
