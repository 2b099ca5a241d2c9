package watchload

import (
	"errors"
	"fmt"
)

// Target is the etcd a run drives.
type Target struct {
	// Endpoints are the members' client URLs, one per member, as the load
	// reaches them; without a Harness, each is defragmented in turn (the
	// leader last), and the first is queried for sizes and metrics.
	Endpoints []string
	// Embedded is true when the member runs in this process.
	Embedded bool
	// Managed is true when lwbench started the members (embedded or
	// processes) and stops them afterwards.
	Managed bool
	// Dial opens a new connection to every endpoint for the load: a run
	// opens Connections + WriterConnections + 1 (the compactor's: like
	// kube-apiserver's, it is a client of etcd, not of the harness) with
	// it, and closes them; without a Harness, also the harness's (the
	// maintenance connection, the recorder's and, with faults, the
	// probe's).
	Dial Dialer
	// DialEndpoint opens a connection to one endpoint only, for
	// Options.PinConnections.
	DialEndpoint endpointDialer
	// Members control the member processes, one per endpoint in the same
	// order, when the run may inject faults; nil otherwise.
	Members []MemberControl
	// Harness, if set, is how lwbench's own measuring reaches the same
	// members; nil: as the load does, through Endpoints, Dial and
	// DialEndpoint. See Harness.
	Harness *Harness
}

// Harness is how lwbench's own measuring reaches a Target's members, for
// a target whose load goes through something that must see the load alone:
// `lwbench conformance` puts a counting proxy in front of etcd, and what
// the proxy counts must be what kube-apiserver would send (the writers,
// the reflectors and caches with their reads and progress requests, the
// compactor's transaction and Compact), not the harness's requests, which
// kube-apiserver never sends. The harness is: the maintenance connection
// (Status, MemberList, the sizes, the prefix counts, the revision reads,
// the final counts and cache comparisons, defragmentation, the cleanup),
// the history recorder with its progress requests, and, with faults, the
// probe and the connections that see writes succeed again after a fault.
// Confirming the final revision asks etcd for nothing (Session.Confirm).
type Harness struct {
	// Endpoints are the members' client URLs as the harness reaches them,
	// in Target.Endpoints' order (member i is Endpoints[i] in both).
	Endpoints []string
	// Dial opens a new connection to every endpoint: the maintenance
	// connection, the history recorder's and, with faults, the probe's.
	Dial Dialer
	// DialEndpoint opens a connection to one endpoint only: with faults,
	// one to each member; nil when the target has no faults.
	DialEndpoint endpointDialer
}

// harness returns the target as the harness reaches it: t with its
// Harness's endpoints and dialers, if it has one.
func (t Target) harness() Target {
	if t.Harness == nil {
		return t
	}
	h := t
	h.Endpoints, h.Dial, h.DialEndpoint, h.Harness = t.Harness.Endpoints, t.Harness.Dial, t.Harness.DialEndpoint, nil
	return h
}

// checkTarget checks what the options need from the target.
func checkTarget(t Target, o Options) error {
	switch {
	case len(t.Endpoints) == 0 || t.Dial == nil:
		return errors.New("target needs endpoints and a dialer")
	case o.PinConnections && t.DialEndpoint == nil:
		return errors.New("pinned connections need a target that dials one endpoint")
	case len(o.Faults) > 0 && len(t.Members) != len(t.Endpoints):
		return fmt.Errorf("%w: faults need a cluster whose member processes lwbench started", ErrNoFaults)
	}
	for _, f := range o.Faults {
		if !f.Kind.Leader() && len(t.Members) < 2 {
			return fmt.Errorf("%w: %s needs at least two members", ErrNoFaults, f.Kind)
		}
	}
	return nil
}
