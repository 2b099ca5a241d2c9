package live

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fakeKV serves Ranges of a fixed key space: keys at every revision are
// kvs, revisions below compact are refused as etcd refuses them. It
// records the revision of every Range and can cancel a context after a
// number of Ranges.
type fakeKV struct {
	compact, rev int64
	kvs          []*mvccpb.KeyValue
	ranges       []int64
	cancelAfter  int
	cancel       context.CancelFunc
}

func (f *fakeKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	op := clientv3.OpGet(key, opts...)
	f.ranges = append(f.ranges, op.Rev())
	if f.cancel != nil && len(f.ranges) > f.cancelAfter {
		f.cancel()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if op.Rev() != 0 && op.Rev() < f.compact {
		return nil, rpctypes.ErrCompacted
	}
	resp := &clientv3.GetResponse{Header: &etcdserverpb.ResponseHeader{Revision: f.rev, MemberId: 0xa}}
	for _, kv := range f.kvs {
		if string(kv.Key) < key {
			continue
		}
		// Count is every key of the range, as etcd counts it.
		resp.Count++
		if int64(len(resp.Kvs)) == op.Limit() {
			resp.More = true
			continue
		}
		resp.Kvs = append(resp.Kvs, kv)
	}
	return resp, nil
}

func (f *fakeKV) Status(context.Context, string) (*clientv3.StatusResponse, error) {
	return nil, errors.New("not served")
}

func (f *fakeKV) MemberList(context.Context, ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	return nil, errors.New("not served")
}

func (f *fakeKV) AlarmList(context.Context) (*clientv3.AlarmResponse, error) {
	return nil, errors.New("not served")
}

func (f *fakeKV) HashKV(context.Context, string, int64) (*clientv3.HashKVResponse, error) {
	return nil, errors.New("not served")
}

func TestCompactRevision(t *testing.T) {
	tests := []struct {
		name          string
		compact, rev  int64
		want          int64
		wantMaxRanges int
	}{
		{"never compacted", 0, 1000, 0, 1},
		{"compacted at 1", 1, 1000, 0, 1},
		{"compacted at 2", 2, 1000, 2, 12},
		{"compacted in the middle", 517, 1000, 517, 12},
		{"compacted at the current revision", 1000, 1000, 1000, 12},
		{"one revision", 0, 1, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeKV{compact: tc.compact, rev: tc.rev}
			got, err := CompactRevision(t.Context(), f, tc.rev)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got compact revision %d, want %d", got, tc.want)
			}
			if len(f.ranges) > tc.wantMaxRanges {
				t.Errorf("got %d Ranges, want at most %d", len(f.ranges), tc.wantMaxRanges)
			}
		})
	}
}

func TestRevisionsKept(t *testing.T) {
	tests := []struct {
		name      string
		now, then keyState
		want      int64
	}{
		{"created after the compaction", keyState{version: 3, createRevision: 50}, keyState{}, 3},
		{"unchanged since before it", keyState{version: 1, createRevision: 5}, keyState{version: 1, createRevision: 5}, 1},
		{"updated since", keyState{version: 6, createRevision: 5}, keyState{version: 3, createRevision: 5}, 4},
		{"re-created since: a lower bound", keyState{version: 2, createRevision: 60}, keyState{version: 3, createRevision: 5}, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := revisionsKept(tc.now, tc.then); got != tc.want {
				t.Errorf("got %d revisions kept, want %d", got, tc.want)
			}
		})
	}
}

func TestCheckVersions(t *testing.T) {
	tests := []struct {
		versions []string
		allow    bool
		wantErr  bool
	}{
		{[]string{"3.7.0"}, false, false},
		{[]string{"3.7.3", "3.8.0"}, false, false},
		{[]string{"3.7.3", "3.6.16"}, false, true},
		{[]string{"3.5.35"}, false, true},
		{[]string{"3.5.35"}, true, false},
		{[]string{""}, false, true},
		{[]string{"not a version"}, false, true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.versions, tc.allow), func(t *testing.T) {
			err := CheckVersions(tc.versions, tc.allow)
			if got := errors.Is(err, ErrValueReads); got != tc.wantErr {
				t.Errorf("got error %v, want ErrValueReads: %v", err, tc.wantErr)
			}
		})
	}
}

func keys(n int) []*mvccpb.KeyValue {
	var kvs []*mvccpb.KeyValue
	for i := range n {
		kvs = append(kvs, &mvccpb.KeyValue{Key: fmt.Appendf(nil, "/registry/pods/default/p%03d", i), Version: 1, CreateRevision: int64(i + 2)})
	}
	return kvs
}

// TestReadUsagePinsOneRevision: every page after the first asks for the
// first page's revision, and the keys at the compact revision are read at
// it.
func TestReadUsagePinsOneRevision(t *testing.T) {
	f := &fakeKV{compact: 40, rev: 90, kvs: keys(25)}
	u, err := ReadUsage(t.Context(), f, UsageOptions{MaxKeysPerRequest: 10, Versions: []string{"3.7.3"}})
	if err != nil {
		t.Fatal(err)
	}
	if u.ReadAtRevision != 90 || u.CompactRevision != 40 || u.Total.Objects != 25 {
		t.Errorf("got revision %d, compact %d, %d objects; want 90, 40, 25", u.ReadAtRevision, u.CompactRevision, u.Total.Objects)
	}
	// 3 pages at 0 then 90, the bisection, 3 pages at 40.
	pages := f.ranges[:3]
	if pages[0] != 0 || pages[1] != 90 || pages[2] != 90 {
		t.Errorf("got the first pages at revisions %v, want [0 90 90]", pages)
	}
	last := f.ranges[len(f.ranges)-3:]
	if last[0] != 40 || last[1] != 40 || last[2] != 40 {
		t.Errorf("got the last pages at revisions %v, want [40 40 40]", last)
	}
}

// TestReadUsageRefusesOldServers: before any Range.
func TestReadUsageRefusesOldServers(t *testing.T) {
	f := &fakeKV{rev: 10, kvs: keys(3)}
	_, err := ReadUsage(t.Context(), f, UsageOptions{Versions: []string{"3.6.16"}})
	if !errors.Is(err, ErrValueReads) || len(f.ranges) != 0 {
		t.Errorf("got error %v after %d Ranges, want ErrValueReads before any", err, len(f.ranges))
	}
	if _, err := ReadUsage(t.Context(), f, UsageOptions{Versions: []string{"3.6.16"}, AllowValueReads: true}); err != nil {
		t.Errorf("with AllowValueReads: got %v, want the usage", err)
	}
}

// TestReadUsageInterrupted: a context ended between pages ends the scan
// with its error and no partial result.
func TestReadUsageInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f := &fakeKV{rev: 90, kvs: keys(25), cancelAfter: 1, cancel: cancel}
	u, err := ReadUsage(ctx, f, UsageOptions{MaxKeysPerRequest: 10, Versions: []string{"3.7.3"}})
	if u != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("got usage %v and error %v, want none and context.Canceled", u, err)
	}
	if len(f.ranges) != 2 {
		t.Errorf("got %d Ranges, want 2: none after the cancellation", len(f.ranges))
	}
}

// TestReadKeysRefusesOldServers: before any Range, as ReadUsage.
func TestReadKeysRefusesOldServers(t *testing.T) {
	f := &fakeKV{rev: 10, kvs: keys(3)}
	_, err := ReadKeys(t.Context(), f, KeysOptions{Versions: []string{"3.6.16"}})
	if !errors.Is(err, ErrValueReads) || len(f.ranges) != 0 {
		t.Errorf("got error %v after %d Ranges, want ErrValueReads before any", err, len(f.ranges))
	}
	ks, err := ReadKeys(t.Context(), f, KeysOptions{Versions: []string{"3.6.16"}, AllowValueReads: true, MaxKeysPerRequest: 2})
	if err != nil || len(ks.Keys) != 3 || ks.ReadAtRevision != 10 {
		t.Errorf("with AllowValueReads: got %v, %v; want 3 keys read at revision 10", ks, err)
	}
	if want := []int64{0, 10}; !slices.Equal(f.ranges, want) {
		t.Errorf("got Ranges at revisions %v, want %v: the first pins the revision", f.ranges, want)
	}
}

// fakeCluster is fakeKV with members: each member's Status and HashKV
// answer from status and hashes by endpoint; an endpoint without a status
// does not answer.
type fakeCluster struct {
	fakeKV
	status  map[string]*clientv3.StatusResponse
	hashes  map[string]uint32
	hashRev map[string]int64
}

func (f *fakeCluster) Status(_ context.Context, ep string) (*clientv3.StatusResponse, error) {
	if s, ok := f.status[ep]; ok {
		return s, nil
	}
	return nil, errors.New("connection refused")
}

func (f *fakeCluster) MemberList(context.Context, ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	ml := &clientv3.MemberListResponse{}
	for _, ep := range slices.Sorted(maps.Keys(f.hashes)) {
		ml.Members = append(ml.Members, &etcdserverpb.Member{ID: uint64(len(ml.Members) + 1), Name: ep, ClientURLs: []string{ep}})
	}
	return ml, nil
}

func (f *fakeCluster) AlarmList(context.Context) (*clientv3.AlarmResponse, error) {
	return &clientv3.AlarmResponse{}, nil
}

func (f *fakeCluster) HashKV(_ context.Context, ep string, rev int64) (*clientv3.HashKVResponse, error) {
	if f.hashRev == nil {
		f.hashRev = map[string]int64{}
	}
	f.hashRev[ep] = rev
	return &clientv3.HashKVResponse{Hash: f.hashes[ep], CompactRevision: f.compact}, nil
}

func memberStatusAt(id uint64, rev int64, index uint64) *clientv3.StatusResponse {
	return &clientv3.StatusResponse{Header: &etcdserverpb.ResponseHeader{MemberId: id, Revision: rev}, RaftIndex: index, Version: "3.7.3"}
}

// TestReadMembers: every member is hashed at the lowest current revision,
// lag is counted from the newest member, and the verdicts follow
// snapshot.CompareMembers' majority rule.
func TestReadMembers(t *testing.T) {
	tests := []struct {
		name         string
		hashes       map[string]uint32
		down         string
		wantAgree    bool
		wantMajority bool
		wantAgreeing []bool
	}{
		{"agree", map[string]uint32{"a": 7, "b": 7, "c": 7}, "", true, true, []bool{true, true, true}},
		{"one differs", map[string]uint32{"a": 7, "b": 9, "c": 7}, "", false, true, []bool{true, false, true}},
		{"all differ", map[string]uint32{"a": 7, "b": 8, "c": 9}, "", false, false, []bool{false, false, false}},
		{"one down", map[string]uint32{"a": 7, "b": 7, "c": 7}, "c", false, true, []bool{true, true, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCluster{fakeKV: fakeKV{compact: 20, rev: 100}, hashes: tc.hashes, status: map[string]*clientv3.StatusResponse{
				"a": memberStatusAt(1, 100, 110), "b": memberStatusAt(2, 97, 105), "c": memberStatusAt(3, 100, 109)}}
			delete(f.status, tc.down)
			ms, err := ReadMembers(t.Context(), f, []string{"a"}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if ms.CommonRevision != 97 || ms.CompactRevision != 20 {
				t.Errorf("got common revision %d, compact %d; want 97, 20", ms.CommonRevision, ms.CompactRevision)
			}
			if ms.HashesAgree != tc.wantAgree || ms.Majority != tc.wantMajority {
				t.Errorf("got agree %v, majority %v; want %v, %v", ms.HashesAgree, ms.Majority, tc.wantAgree, tc.wantMajority)
			}
			for i, m := range ms.Members {
				if m.Agrees != tc.wantAgreeing[i] {
					t.Errorf("member %s: got agrees %v, want %v", m.Name, m.Agrees, tc.wantAgreeing[i])
				}
				if (m.Name == tc.down) != (m.Error != "") {
					t.Errorf("member %s: got error %q, want one only when down", m.Name, m.Error)
				}
				if m.Name != tc.down && f.hashRev[m.Name] != 97 {
					t.Errorf("member %s: hashed at %d, want 97", m.Name, f.hashRev[m.Name])
				}
			}
			if b := ms.Members[1]; b.RevisionsBehind != 3 || b.IndexBehind != 5 {
				t.Errorf("member b: got %d revisions and %d entries behind, want 3 and 5", b.RevisionsBehind, b.IndexBehind)
			}
		})
	}
}

func TestChooseMember(t *testing.T) {
	leader := MemberStatus{Name: "a", MemberID: "1", Endpoint: "http://a:2379", IsLeader: true}
	follower := MemberStatus{Name: "b", MemberID: "2", Endpoint: "http://b:2379"}
	learner := MemberStatus{Name: "c", MemberID: "3", Endpoint: "http://c:2379", IsLearner: true}
	silent := MemberStatus{Name: "d", MemberID: "4", Endpoint: "http://d:2379", Error: "connection refused"}
	tests := []struct {
		name     string
		members  []MemberStatus
		want     string
		wantName string
		wantErr  string
	}{
		{"a follower by default", []MemberStatus{leader, follower, learner}, "", "b", ""},
		{"not a learner nor a silent member", []MemberStatus{leader, learner, silent}, "", "a", ""},
		{"one member", []MemberStatus{leader}, "", "a", ""},
		{"by name", []MemberStatus{leader, follower}, "a", "a", ""},
		{"by endpoint", []MemberStatus{leader, follower}, "http://b:2379", "b", ""},
		{"by member ID", []MemberStatus{leader, follower}, "2", "b", ""},
		{"a learner when asked", []MemberStatus{leader, learner}, "c", "c", ""},
		{"unknown", []MemberStatus{leader, follower}, "z", "", "the members are a (http://a:2379), b (http://b:2379)"},
		{"silent when asked", []MemberStatus{leader, silent}, "d", "", "did not answer: connection refused"},
		{"none answered", []MemberStatus{silent}, "", "", "no member answered"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChooseMember(tc.members, tc.want)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("got %+v, error %v; want an error saying %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Name != tc.wantName {
				t.Errorf("got %q, error %v; want %q", got.Name, err, tc.wantName)
			}
		})
	}
}

// TestReadUsageProgress: the Progress ends with every key of both scans
// done, and the member that answered is named.
func TestReadUsageProgress(t *testing.T) {
	f := &fakeKV{compact: 40, rev: 90, kvs: keys(25)}
	p := &Progress{}
	u, err := ReadUsage(t.Context(), f, UsageOptions{MaxKeysPerRequest: 10, Versions: []string{"3.7.3"}, Progress: p})
	if err != nil {
		t.Fatal(err)
	}
	if done, total := p.Load(); done != 50 || total != 50 {
		t.Errorf("got progress %d of %d, want 50 of 50: 25 keys at each of two revisions", done, total)
	}
	if u.MemberID != "a" {
		t.Errorf("got member %q, want a", u.MemberID)
	}
}

// TestReadUsagePartial: under Partial, a context ended between pages
// returns the keys read until then, marked partial, with ctx's error.
func TestReadUsagePartial(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f := &fakeKV{rev: 90, kvs: keys(25), cancelAfter: 2, cancel: cancel}
	u, err := ReadUsage(ctx, f, UsageOptions{MaxKeysPerRequest: 10, Versions: []string{"3.7.3"}, Values: true, Partial: true})
	if !errors.Is(err, context.Canceled) || u == nil {
		t.Fatalf("got usage %v and error %v, want a partial usage and context.Canceled", u, err)
	}
	if !u.Partial || u.Total.Objects != 20 || u.RevisionsCounted || u.History != "" || u.PartialPhase != "the keys at revision 90" {
		t.Errorf("got partial %v, %d objects, revisions counted %v, history %q, phase %q; want partial, 20 (two pages), false, none, the keys at revision 90",
			u.Partial, u.Total.Objects, u.RevisionsCounted, u.History, u.PartialPhase)
	}
}
