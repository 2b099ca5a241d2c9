package live

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Client is what a live reading asks of etcd: reads only.
type Client interface {
	// Get is a Range (clientv3.KV).
	Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error)
	// Status asks one member for its status (clientv3.Maintenance).
	Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error)
	// MemberList lists the members (clientv3.Cluster).
	MemberList(ctx context.Context, opts ...clientv3.OpOption) (*clientv3.MemberListResponse, error)
	// AlarmList lists the raised alarms (clientv3.Maintenance).
	AlarmList(ctx context.Context) (*clientv3.AlarmResponse, error)
	// HashKV asks one member for the hash of its key space at rev
	// (clientv3.Maintenance): a read, of every entry up to rev.
	HashKV(ctx context.Context, endpoint string, rev int64) (*clientv3.HashKVResponse, error)
}

var _ Client = (*clientv3.Client)(nil)

// SourceLive is the Source of every live result.
const SourceLive = "live"

// StatusSchemaVersion versions the JSON of Status.
const StatusSchemaVersion = 1

// MemberStatus is one member's answer to Status (etcdctl endpoint status).
type MemberStatus struct {
	// Name and MemberID identify the member (MemberList); MemberID in hex
	// as etcdctl prints it.
	Name     string `json:"name"`
	MemberID string `json:"memberID"`
	// Endpoint is the client URL that was asked.
	Endpoint string `json:"endpoint"`
	// Error is why the member did not answer; the fields below are then
	// absent.
	Error string `json:"error,omitempty"`
	// Version is the server's etcd version.
	Version string `json:"version,omitempty"`
	// StorageVersion is the storage version (etcd 3.6 and later).
	StorageVersion string `json:"storageVersion,omitempty"`
	// DBSizeBytes is the backend's size (bbolt's high-water mark: what
	// the quota checks); InUseBytes the bytes in use within it.
	DBSizeBytes int64 `json:"dbSizeBytes,omitempty"`
	InUseBytes  int64 `json:"inUseBytes,omitempty"`
	// FragmentationPercent is the share of DBSizeBytes not in use.
	FragmentationPercent float64 `json:"fragmentationPercent"`
	// QuotaBytes is the member's --quota-backend-bytes as it reports it
	// (etcd 3.6 and later); absent when it does not.
	QuotaBytes int64 `json:"quotaBytes,omitempty"`
	// Revision is the member's current revision.
	Revision int64 `json:"revision,omitempty"`
	// RaftIndex, RaftAppliedIndex and RaftTerm are the member's raft
	// state.
	RaftIndex        uint64 `json:"raftIndex,omitempty"`
	RaftAppliedIndex uint64 `json:"raftAppliedIndex,omitempty"`
	RaftTerm         uint64 `json:"raftTerm,omitempty"`
	// Leader is the member ID (hex) the member follows; IsLeader whether
	// that is itself.
	Leader    string `json:"leader,omitempty"`
	IsLeader  bool   `json:"isLeader"`
	IsLearner bool   `json:"isLearner"`
	// Errors are the member's own error strings (a raised alarm, a
	// corruption found).
	Errors []string `json:"errors,omitempty"`
	// Alarms are the alarms raised on the member (AlarmList): NOSPACE,
	// CORRUPT.
	Alarms []string `json:"alarms,omitempty"`
}

// Status is the cluster's status read live.
type Status struct {
	SchemaVersion int `json:"schemaVersion"`
	// Source is SourceLive.
	Source string `json:"source"`
	// ReadAtRevision is the revision of the cluster when it was read: the
	// header revision of the first Range.
	ReadAtRevision int64 `json:"readAtRevision"`
	// CompactRevision is the revision of the last completed compaction,
	// found by bisecting Ranges (see the package doc); 0 for none.
	CompactRevision int64 `json:"compactRevision"`
	// CompactRevisionSource says how CompactRevision was read.
	CompactRevisionSource string `json:"compactRevisionSource"`
	// Members holds every member, sorted by name then ID.
	Members []MemberStatus `json:"members"`
}

// CompactRevisionSource is Status.CompactRevisionSource.
const CompactRevisionSource = "bisection of count_only Ranges: etcd refuses a Range below the compact revision"

// ReadStatus asks every member (MemberList) for its Status, lists the
// alarms, and finds the compact revision. Each of endpoints (the URLs the
// caller reached) is asked first; a member none of them answered for is
// asked at the first client URL it advertises; a member that does not answer within timeout (0: no
// bound but ctx) gets its error in MemberStatus.Error. The MemberList,
// AlarmList or a Range failing is returned as an error.
func ReadStatus(ctx context.Context, c Client, endpoints []string, timeout time.Duration) (*Status, error) {
	head, err := c.Get(ctx, "compact_rev_key", clientv3.WithCountOnly())
	if err != nil {
		if errors.Is(err, rpctypes.ErrPermissionDenied) {
			err = fmt.Errorf("%w: the user's role needs read access to the key compact_rev_key", err)
		}
		return nil, fmt.Errorf("read the current revision: %w", err)
	}
	st := &Status{SchemaVersion: StatusSchemaVersion, Source: SourceLive, ReadAtRevision: head.Header.Revision,
		CompactRevisionSource: CompactRevisionSource}
	st.CompactRevision, err = CompactRevision(ctx, c, st.ReadAtRevision)
	if err != nil {
		return nil, err
	}
	if st.Members, err = MemberStatuses(ctx, c, endpoints, timeout); err != nil {
		return nil, err
	}
	return st, nil
}

// MemberStatuses asks every member (MemberList) for its Status and lists
// the alarms, as ReadStatus does: each of endpoints (the URLs the caller
// reached) is asked first; a member none of them answered for is asked at
// the first client URL it advertises; a member that does not answer
// within timeout (0: no bound but ctx) gets its error in
// MemberStatus.Error. The members are sorted by name then ID. The
// MemberList or AlarmList failing, or ctx ending, is returned as an error.
func MemberStatuses(ctx context.Context, c Client, endpoints []string, timeout time.Duration) ([]MemberStatus, error) {
	var members []MemberStatus
	ml, err := c.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	al, err := c.AlarmList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list alarms: %w", err)
	}
	// Ask the endpoints the caller reached first: a member's advertised
	// URL may not be reachable from here (an address inside a NAT or a
	// pod network).
	type answer struct {
		endpoint string
		resp     *clientv3.StatusResponse
	}
	byID := map[uint64]answer{}
	for _, ep := range endpoints {
		if s, err := memberStatus(ctx, c, ep, timeout); err == nil {
			byID[s.Header.MemberId] = answer{ep, s}
		} else if ctx.Err() != nil {
			return nil, fmt.Errorf("status of %s: %w", ep, ctx.Err())
		}
	}
	for _, m := range ml.Members {
		ms := MemberStatus{Name: m.Name, MemberID: hexID(m.ID)}
		for _, a := range al.Alarms {
			if a.MemberID == m.ID {
				ms.Alarms = append(ms.Alarms, a.Alarm.String())
			}
		}
		a, ok := byID[m.ID]
		switch {
		case ok:
			ms.Endpoint = a.endpoint
		case len(m.ClientURLs) == 0:
			ms.Error = "no client URL (a member not started yet)"
			members = append(members, ms)
			continue
		default:
			ms.Endpoint = m.ClientURLs[0]
			resp, err := memberStatus(ctx, c, ms.Endpoint, timeout)
			if err != nil {
				if ctx.Err() != nil {
					return nil, fmt.Errorf("status of %s: %w", ms.Endpoint, ctx.Err())
				}
				ms.Error = err.Error()
				members = append(members, ms)
				continue
			}
			a.resp = resp
		}
		s := a.resp
		ms.Version, ms.StorageVersion = s.Version, s.StorageVersion
		ms.DBSizeBytes, ms.InUseBytes, ms.QuotaBytes = s.DbSize, s.DbSizeInUse, s.DbSizeQuota
		if s.DbSize > 0 {
			ms.FragmentationPercent = 100 * float64(s.DbSize-s.DbSizeInUse) / float64(s.DbSize)
		}
		ms.Revision = s.Header.Revision
		ms.RaftIndex, ms.RaftAppliedIndex, ms.RaftTerm = s.RaftIndex, s.RaftAppliedIndex, s.RaftTerm
		ms.Leader, ms.IsLeader, ms.IsLearner = hexID(s.Leader), s.Leader == s.Header.MemberId, s.IsLearner
		ms.Errors = s.Errors
		members = append(members, ms)
	}
	slices.SortFunc(members, func(a, b MemberStatus) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.MemberID, b.MemberID))
	})
	return members, nil
}

// memberStatus is c.Status(endpoint) bounded by timeout.
func memberStatus(ctx context.Context, c Client, endpoint string, timeout time.Duration) (*clientv3.StatusResponse, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	s, err := c.Status(ctx, endpoint)
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("no answer from %s within %s", endpoint, timeout)
	}
	return s, err
}

// CompactRevision returns the revision of the cluster's last completed
// compaction, at most rev: the smallest revision in [1, rev] a Range may
// still read (etcd refuses one below the compact revision with
// rpctypes.ErrCompacted and serves the compact revision itself), or 0 when
// revision 1 is still readable (no compaction, or one at revision 1,
// which removed nothing). Each probe is a count_only Range of one key.
func CompactRevision(ctx context.Context, c Client, rev int64) (int64, error) {
	readable := func(r int64) (bool, error) {
		_, err := c.Get(ctx, "compact_rev_key", clientv3.WithCountOnly(), clientv3.WithRev(r))
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, rpctypes.ErrCompacted):
			return false, nil
		}
		if errors.Is(err, rpctypes.ErrPermissionDenied) {
			err = fmt.Errorf("%w: the user's role needs read access to the key compact_rev_key", err)
		}
		return false, fmt.Errorf("find the compact revision: range at revision %d: %w", r, err)
	}
	if rev <= 1 {
		return 0, nil
	}
	if ok, err := readable(1); err != nil || ok {
		return 0, err
	}
	// Invariant: lo is not readable, hi is.
	lo, hi := int64(1), rev
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := readable(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}

// hexID spells a member ID as etcdctl does.
func hexID(id uint64) string { return strconv.FormatUint(id, 16) }
