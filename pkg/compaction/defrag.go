package compaction

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Maintenance is the part of the etcd client defragmentation uses;
// *clientv3.Client satisfies it.
type Maintenance interface {
	Defragment(ctx context.Context, endpoint string) (*clientv3.DefragmentResponse, error)
	Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error)
}

var _ Maintenance = (*clientv3.Client)(nil)

// Size is a member's database size as Maintenance.Status reports it.
type Size struct {
	// Bytes is dbSize, the bbolt file's size.
	Bytes int64
	// InUseBytes is dbSizeInUse: allocated pages minus free pages.
	InUseBytes int64
}

// MemberSize returns one member's database size.
func MemberSize(ctx context.Context, m Maintenance, endpoint string) (Size, error) {
	st, err := m.Status(ctx, endpoint)
	if err != nil {
		return Size{}, fmt.Errorf("status of %s: %w", endpoint, err)
	}
	return Size{Bytes: st.DbSize, InUseBytes: st.DbSizeInUse}, nil
}

// DefragResult is one measured defragmentation.
type DefragResult struct {
	Endpoint string        // the member
	Start    time.Time     // when its measurement began (the Status before)
	Duration time.Duration // the Defragment call: how long the member was blocked
	Before   Size          // size before
	After    Size          // size after
}

// Defragment defragments one member and measures its size before and
// after. The member serves no reads or writes meanwhile. ctx bounds the
// whole call; etcd keeps defragmenting if ctx ends first.
func Defragment(ctx context.Context, m Maintenance, endpoint string) (DefragResult, error) {
	res := DefragResult{Endpoint: endpoint, Start: time.Now()}
	var err error
	if res.Before, err = MemberSize(ctx, m, endpoint); err != nil {
		return res, err
	}
	start := time.Now()
	_, err = m.Defragment(ctx, endpoint)
	res.Duration = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("defragment %s: %w", endpoint, err)
	}
	res.After, err = MemberSize(ctx, m, endpoint)
	return res, err
}

// DefragmentAll defragments the members one after another, never two at
// once, so that a cluster keeps a quorum serving while one member is
// blocked, as etcd's maintenance guide and operators' tools do (the
// OpenShift defrag controller, etcd-defrag). It measures each member and
// stops at the first error, returning the members done so far. The order
// is the caller's: defragmenting the leader last avoids a leader election
// storm on slow disks (etcd-defrag does so).
func DefragmentAll(ctx context.Context, m Maintenance, endpoints []string) ([]DefragResult, error) {
	results := make([]DefragResult, 0, len(endpoints))
	for _, ep := range endpoints {
		res, err := Defragment(ctx, m, ep)
		results = append(results, res)
		if err != nil {
			return results, err
		}
	}
	return results, nil
}

// LeaderLast returns endpoints reordered so that the member that reports
// itself leader comes last, and that member's endpoint ("" if none did),
// from one round of Status requests so that the leader returned is the one
// the order used. Members that do not answer within timeout keep their
// place before it; should two report themselves leader (during an
// election), both go last, and the first is returned. The input slice is
// not modified.
func LeaderLast(ctx context.Context, m Maintenance, endpoints []string, timeout time.Duration) (order []string, leader string) {
	order = make([]string, 0, len(endpoints))
	var leaders []string
	for _, ep := range endpoints {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		st, err := m.Status(sctx, ep)
		cancel()
		if err == nil && st.Leader != 0 && st.Header != nil && st.Leader == st.Header.MemberId {
			leaders = append(leaders, ep)
			continue
		}
		order = append(order, ep)
	}
	if len(leaders) > 0 {
		leader = leaders[0]
	}
	return append(order, leaders...), leader
}
