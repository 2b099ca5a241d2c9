package snapshot

import (
	"bytes"
	"encoding/binary"
	"testing"

	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"google.golang.org/protobuf/proto"

	"github.com/kubestore/etcdkit/pkg/revision"
)

func TestDecodeKeyValueMatchesGeneratedCode(t *testing.T) {
	tests := []*mvccpb.KeyValue{
		{Key: []byte("/registry/pods/default/a"), CreateRevision: 2, ModRevision: 9, Version: 3, Value: []byte("k8s\x00xyz"), Lease: 0x7a11},
		{Key: []byte("tomb")}, // a tombstone holds only the key
		{},                    // etcdutl restore --bump-revision writes an empty value
		{Key: bytes.Repeat([]byte("k"), 300), Value: bytes.Repeat([]byte("v"), 70000), ModRevision: 1 << 40},
	}
	for _, want := range tests {
		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeKeyValue(b)
		if err != nil {
			t.Fatalf("DecodeKeyValue(%x): %v", b, err)
		}
		if !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Value, want.Value) || got.CreateRevision != want.CreateRevision ||
			got.ModRevision != want.ModRevision || got.Version != want.Version || got.Lease != want.Lease {
			t.Errorf("DecodeKeyValue = %+v, want %v", got, want)
		}
		if back := AppendKeyValue(nil, got); !bytes.Equal(back, b) {
			t.Errorf("AppendKeyValue = %x, want %x (what protobuf marshals)", back, b)
		}
	}
	for _, bad := range [][]byte{{0x0a, 0x05, 'a'}, {0x10}, {0x0a}, {0x12, 0x01, 'x'}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		if _, err := DecodeKeyValue(bad); err == nil {
			t.Errorf("DecodeKeyValue(%x) succeeded", bad)
		}
	}
}

// FuzzDecodeKeyValue checks that the protowire decoder never panics and
// agrees with the generated mvccpb code on whatever both accept.
func FuzzDecodeKeyValue(f *testing.F) {
	seed, _ := proto.Marshal(&mvccpb.KeyValue{Key: []byte("/registry/a"), CreateRevision: 2, ModRevision: 3, Version: 1, Value: []byte("v"), Lease: 5})
	f.Add(seed)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeKeyValue(b)
		var want mvccpb.KeyValue
		werr := proto.Unmarshal(b, &want)
		if err != nil {
			return
		}
		if werr != nil {
			t.Fatalf("DecodeKeyValue accepted %x, proto.Unmarshal failed: %v", b, werr)
		}
		if !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Value, want.Value) || got.ModRevision != want.ModRevision ||
			got.CreateRevision != want.CreateRevision || got.Version != want.Version || got.Lease != want.Lease {
			t.Fatalf("DecodeKeyValue(%x) = %+v, proto says %v", b, got, &want)
		}
		again, err := DecodeKeyValue(AppendKeyValue(nil, got))
		if err != nil || !bytes.Equal(again.Key, got.Key) || again.ModRevision != got.ModRevision || again.Lease != got.Lease {
			t.Fatalf("round trip of %+v = %+v, %v", got, again, err)
		}
	})
}

func FuzzDecodeLease(f *testing.F) {
	k := binary.BigEndian.AppendUint64(nil, 0x7a11)
	v, _ := proto.Marshal(&leasepb.Lease{ID: 0x7a11, TTL: 3600, RemainingTTL: 12})
	f.Add(k, v)
	f.Add([]byte{1}, []byte{})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		l, err := DecodeLease(k, v)
		if err != nil {
			return
		}
		if len(k) != 8 || int64(binary.BigEndian.Uint64(k)) != l.ID {
			t.Fatalf("DecodeLease accepted key %x for lease %d", k, l.ID)
		}
	})
}

func FuzzDecodeMember(f *testing.F) {
	f.Add([]byte("8e9e05c52164694d"), []byte(`{"id":10276657743932975437,"peerURLs":["http://127.0.0.1:2380"],"name":"default","clientURLs":["http://127.0.0.1:2379"]}`))
	f.Add([]byte("1"), []byte(`{"id":1}`))
	f.Fuzz(func(t *testing.T, k, v []byte) {
		m, err := DecodeMember(k, v)
		if err == nil && m.ID == "" {
			t.Fatalf("member without an ID from %q", v)
		}
	})
}

func FuzzDecodeAlarm(f *testing.F) {
	k, _ := proto.Marshal(&etcdserverpb.AlarmMember{MemberID: 0xabc, Alarm: etcdserverpb.AlarmType_NOSPACE})
	f.Add(k)
	f.Fuzz(func(t *testing.T, k []byte) {
		if a, err := DecodeAlarm(k); err == nil && a.Alarm == "" {
			t.Fatalf("alarm without a type from %x", k)
		}
	})
}

func FuzzDecodeUserAndRole(f *testing.F) {
	u, _ := proto.Marshal(&authpb.User{Name: []byte("root"), Password: []byte("$2a$10$hash"), Roles: []string{"root"}})
	r, _ := proto.Marshal(&authpb.Role{Name: []byte("reader"), KeyPermission: []*authpb.Permission{{PermType: authpb.Permission_READ, Key: []byte("/a"), RangeEnd: []byte("/b")}}})
	f.Add(u)
	f.Add(r)
	f.Fuzz(func(t *testing.T, b []byte) {
		if u, err := DecodeUser([]byte("k"), b); err == nil {
			var raw authpb.User
			if proto.Unmarshal(b, &raw) == nil && u.HasPassword != (len(raw.Password) > 0) {
				t.Fatalf("HasPassword %v for %x", u.HasPassword, b)
			}
		}
		_, _ = DecodeRole([]byte("k"), b)
	})
}

func TestDecodeUserNeverKeepsThePassword(t *testing.T) {
	b, _ := proto.Marshal(&authpb.User{Name: []byte("root"), Password: []byte("$2a$10$secret-hash"), Roles: []string{"root"}})
	u, err := DecodeUser([]byte("root"), b)
	if err != nil || !u.HasPassword || u.Name != "root" {
		t.Fatalf("DecodeUser = %+v, %v", u, err)
	}
	if bytes.Contains([]byte(u.Name+u.Roles[0]), []byte("secret")) {
		t.Fatal("password hash leaked")
	}
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 9}, []byte{0, 0, 0, 0, 0, 0, 0, 2}, revision.Revision{Main: 7}.Bytes(), []byte("3.6.0"))
	f.Add([]byte{1}, []byte{}, []byte{1, 2}, []byte{})
	f.Fuzz(func(t *testing.T, ci, term, compact, version []byte) {
		vals := map[string][]byte{"consistent_index": ci, "term": term, "finishedCompactRev": compact, "scheduledCompactRev": compact, "storageVersion": version}
		m, err := DecodeMeta(func(k []byte) []byte { return vals[string(k)] })
		if err != nil {
			return
		}
		if len(ci) > 0 && m.ConsistentIndex != binary.BigEndian.Uint64(ci) {
			t.Fatalf("consistent index %d from %x", m.ConsistentIndex, ci)
		}
		if m.DetectedVersion() == "" {
			t.Fatal("no detected version")
		}
	})
}
