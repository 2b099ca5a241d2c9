package watchload

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"

	"github.com/kubestore/etcdkit/pkg/compaction"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/report"
)

// statusTimeout bounds one status request to one member.
const statusTimeout = 2 * time.Second

// describeMembers asks every endpoint for its status and the cluster for
// its member list (for names). The first endpoint must answer; another
// that does not is described with its error.
func describeMembers(ctx context.Context, c *clientv3.Client, endpoints []string) ([]report.MemberStats, error) {
	names := map[uint64]string{}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if ml, err := c.MemberList(lctx); err == nil {
		for _, m := range ml.Members {
			names[m.ID] = m.Name
		}
	}
	cancel()
	out := make([]report.MemberStats, len(endpoints))
	for i, ep := range endpoints {
		out[i].Endpoint = ep
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := c.Status(sctx, ep)
		cancel()
		if err != nil {
			if i == 0 {
				return nil, fmt.Errorf("status of %s: %w", ep, err)
			}
			out[i].Error = err.Error()
			continue
		}
		id := st.Header.MemberId
		out[i].ID, out[i].Name, out[i].Version = fmt.Sprintf("%x", id), names[id], st.Version
		out[i].LeaderAtStart = st.Leader != 0 && st.Leader == id
	}
	return out, nil
}

// memberSize is compaction.MemberSize bounded by five seconds: a member
// that is down (a fault) must not hold the maintenance loop until it is
// back.
func memberSize(ctx context.Context, m compaction.Maintenance, endpoint string) (compaction.Size, error) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return compaction.MemberSize(sctx, m, endpoint)
}

// memberSizes fills each member's database size at the end, or the error
// that kept it from being read.
func memberSizes(ctx context.Context, m compaction.Maintenance, endpoints []string, members []report.MemberStats) {
	for i, ep := range endpoints {
		size, err := memberSize(ctx, m, ep)
		if err != nil {
			members[i].Error = err.Error()
			continue
		}
		members[i].Error = ""
		members[i].DBSizeBytes, members[i].DBSizeInUseBytes = size.Bytes, size.InUseBytes
	}
}

// memberStats fills what the clients pinned to each member saw; it does
// nothing unless connections were pinned.
func memberStats(members []report.MemberStats, env *Env, watch, writers *Topology, refls []*Reflector) {
	tm := env.timing
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if tm.members == nil {
		return
	}
	for i := range members {
		mt := tm.member(i)
		if mt == nil {
			continue
		}
		m := &members[i]
		for _, cm := range watch.ConnMember {
			if cm == i {
				m.WatchConnections++
			}
		}
		for _, cm := range writers.ConnMember {
			if cm == i {
				m.WriterConnections++
			}
		}
		for _, r := range refls {
			if r.o.Stream.Member == i {
				m.Watchers++
			}
		}
		m.Writes = &report.MemberWrites{Completed: mt.writesDone, Errors: mt.writeErrors, Timeouts: mt.writeTimeout, Latency: mt.writes.summaryKept(tm.keepHDR)}
		m.Delivery = &report.MemberDelivery{Events: mt.events, TimedEvents: mt.timed, FromResponse: mt.delivery.summaryKept(tm.keepHDR)}
	}
}

// leaderIndex returns the index of the endpoint whose member reports
// itself leader, -1 if none does.
func leaderIndex(ctx context.Context, m compaction.Maintenance, endpoints []string) int {
	for i, ep := range endpoints {
		sctx, cancel := context.WithTimeout(ctx, statusTimeout)
		st, err := m.Status(sctx, ep)
		cancel()
		if err == nil && st.Leader != 0 && st.Header != nil && st.Leader == st.Header.MemberId {
			return i
		}
	}
	return -1
}

// CompactKV is what the compactor runs its transaction and compactions
// on: the client itself, or, with o.NamespaceCompactRevKey, the client
// with every key of the transaction moved under o.Prefix (etcd's
// client/v3/namespace), so that compact_rev_key becomes
// <prefix>/compact_rev_key (CompactRevKeyName). Compact itself is not
// namespaced: it is cluster-wide.
func CompactKV(c *clientv3.Client, o Options) compaction.KV {
	if o.NamespaceCompactRevKey {
		return namespace.NewKV(c.KV, o.Prefix+"/")
	}
	return c
}

// CompactRevKeyName is the compactor's compact_rev_key as stored
// (CompactKV).
func CompactRevKeyName(o Options) string {
	if o.NamespaceCompactRevKey {
		return o.Prefix + "/" + keyspace.CompactRevKey
	}
	return keyspace.CompactRevKey
}

// probeKey is the key the faults' probe writes and reads.
func probeKey(prefix string) string { return prefix + "/lwbench-probe" }

// faultKey is the key written to see writes succeed again after a fault.
func faultKey(prefix string) string { return prefix + "/lwbench-fault" }
