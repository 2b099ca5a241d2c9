package snapshot

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"google.golang.org/protobuf/proto"
)

// Lease is one entry of the lease bucket: 8-byte big-endian ID ->
// leasepb.Lease{ID, TTL, RemainingTTL} (server/lease/leasepb/lease.proto,
// written by server/lease/lessor.go).
type Lease struct {
	// ID is the lease ID; etcdctl prints it in hex (IDHex).
	ID int64 `json:"id"`
	// IDHex is ID in hexadecimal, as etcdctl prints it.
	IDHex string `json:"idHex"`
	// TTLSeconds is the TTL the lease was granted with.
	TTLSeconds int64 `json:"ttlSeconds"`
	// RemainingTTLSeconds is the TTL left when the lease was last
	// checkpointed, 0 when it never was: only with etcd's LeaseCheckpoint
	// and LeaseCheckpointPersist feature gates (server/lease/lessor.go).
	// A file has no clock: it is not the TTL left now, and a member that
	// restarts from the file grants every lease at least this, or its full
	// TTL when 0.
	RemainingTTLSeconds int64 `json:"remainingTtlSeconds"`
}

// DecodeLease decodes one lease bucket entry. The key must be the 8-byte
// big-endian form of the ID the value holds.
func DecodeLease(k, v []byte) (Lease, error) {
	if len(k) != 8 {
		return Lease{}, fmt.Errorf("lease key is %d bytes, want 8", len(k))
	}
	var l leasepb.Lease
	if err := proto.Unmarshal(v, &l); err != nil {
		return Lease{}, fmt.Errorf("lease %x: value is not a leasepb.Lease: %w", k, err)
	}
	id := int64(binary.BigEndian.Uint64(k))
	if l.ID != id {
		return Lease{}, fmt.Errorf("lease %x: value holds ID %x", k, l.ID)
	}
	return Lease{ID: id, IDHex: strconv.FormatInt(id, 16), TTLSeconds: l.TTL, RemainingTTLSeconds: l.RemainingTTL}, nil
}

// Member is one entry of the members bucket: the member ID in hex ->
// the JSON of membership.Member
// (server/etcdserver/api/membership/member.go, store.go).
type Member struct {
	// ID is the member ID in hexadecimal.
	ID string `json:"id"`
	// Name is the member's --name (empty until it has published it).
	Name string `json:"name"`
	// PeerURLs are the member's advertised peer URLs.
	PeerURLs []string `json:"peerURLs"`
	// ClientURLs are the member's advertised client URLs.
	ClientURLs []string `json:"clientURLs"`
	// IsLearner is set for a non-voting learner.
	IsLearner bool `json:"isLearner"`
}

// DecodeMember decodes one members bucket entry.
func DecodeMember(k, v []byte) (Member, error) {
	var m struct {
		ID         uint64   `json:"id"`
		Name       string   `json:"name"`
		PeerURLs   []string `json:"peerURLs"`
		ClientURLs []string `json:"clientURLs"`
		IsLearner  bool     `json:"isLearner"`
	}
	if err := json.Unmarshal(v, &m); err != nil {
		return Member{}, fmt.Errorf("member %q: %w", k, err)
	}
	id := strconv.FormatUint(m.ID, 16)
	if want, err := strconv.ParseUint(string(k), 16, 64); err != nil || want != m.ID {
		return Member{}, fmt.Errorf("member key %q does not name member %s", k, id)
	}
	return Member{ID: id, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner}, nil
}

// Alarm is one entry of the alarm bucket: the key is a marshalled
// etcdserverpb.AlarmMember, the value empty
// (server/etcdserver/api/v3alarm/alarms.go).
type Alarm struct {
	// MemberID is the member that raised the alarm, in hexadecimal.
	MemberID string `json:"memberID"`
	// Alarm is NOSPACE, CORRUPT or NONE.
	Alarm string `json:"alarm"`
}

// DecodeAlarm decodes one alarm bucket key.
func DecodeAlarm(k []byte) (Alarm, error) {
	var a etcdserverpb.AlarmMember
	if err := proto.Unmarshal(k, &a); err != nil {
		return Alarm{}, fmt.Errorf("alarm %x: not an etcdserverpb.AlarmMember: %w", k, err)
	}
	return Alarm{MemberID: strconv.FormatUint(a.MemberID, 16), Alarm: a.Alarm.String()}, nil
}

// User is one entry of the authUsers bucket (api/authpb/auth.proto),
// without its password hash, which is never read out.
type User struct {
	// Name is the user name.
	Name string `json:"name"`
	// Roles are the roles granted to the user.
	Roles []string `json:"roles"`
	// HasPassword says whether a (bcrypt) password hash is stored.
	HasPassword bool `json:"hasPassword"`
	// NoPassword is the user's no-password option (etcd 3.5+).
	NoPassword bool `json:"noPassword"`
}

// DecodeUser decodes one authUsers bucket entry, dropping the password.
func DecodeUser(k, v []byte) (User, error) {
	var u authpb.User
	if err := proto.Unmarshal(v, &u); err != nil {
		return User{}, fmt.Errorf("user %q: not an authpb.User: %w", k, err)
	}
	return User{Name: string(u.Name), Roles: u.Roles, HasPassword: len(u.Password) > 0, NoPassword: u.GetOptions().GetNoPassword()}, nil
}

// Permission is one key permission of a role.
type Permission struct {
	// Type is READ, WRITE or READWRITE.
	Type string `json:"type"`
	// Key is the first key of the permitted range (or the single key).
	Key string `json:"key"`
	// RangeEnd is the end of the range, exclusive; empty for a single key.
	RangeEnd string `json:"rangeEnd,omitempty"`
}

// Role is one entry of the authRoles bucket (api/authpb/auth.proto).
type Role struct {
	// Name is the role name.
	Name string `json:"name"`
	// Permissions are the role's key permissions.
	Permissions []Permission `json:"permissions"`
}

// DecodeRole decodes one authRoles bucket entry.
func DecodeRole(k, v []byte) (Role, error) {
	var r authpb.Role
	if err := proto.Unmarshal(v, &r); err != nil {
		return Role{}, fmt.Errorf("role %q: not an authpb.Role: %w", k, err)
	}
	out := Role{Name: string(r.Name), Permissions: []Permission{}}
	for _, p := range r.KeyPermission {
		out.Permissions = append(out.Permissions, Permission{Type: p.PermType.String(), Key: string(p.Key), RangeEnd: string(p.RangeEnd)})
	}
	return out, nil
}

// ClusterInfo is the content of the cluster, members, members_removed,
// alarm and auth buckets, and of meta: what `etcdinspect meta` shows.
type ClusterInfo struct {
	// SchemaVersion is ClusterInfoSchemaVersion.
	SchemaVersion int `json:"schemaVersion"`
	// Path is the file read.
	Path string `json:"path"`
	// Meta is the meta bucket.
	Meta Meta `json:"meta"`
	// ClusterVersion is cluster/clusterVersion ("3.5.0"), "" if absent.
	ClusterVersion string `json:"clusterVersion"`
	// Downgrade is cluster/downgrade, the JSON of a downgrade in progress
	// (etcd 3.5+), "" if absent.
	Downgrade string `json:"downgrade,omitempty"`
	// Members are the members bucket's entries, by name.
	Members []Member `json:"members"`
	// RemovedMembers are the IDs in members_removed.
	RemovedMembers []string `json:"removedMembers"`
	// Alarms are the raised alarms.
	Alarms []Alarm `json:"alarms"`
	// AuthEnabled is auth/authEnabled.
	AuthEnabled bool `json:"authEnabled"`
	// AuthRevision is auth/authRevision, bumped by every auth change.
	AuthRevision uint64 `json:"authRevision"`
	// Users are the authUsers bucket's entries, by name, without passwords.
	Users []User `json:"users"`
	// Roles are the authRoles bucket's entries, by name.
	Roles []Role `json:"roles"`
}

// ClusterInfoSchemaVersion versions the JSON of ClusterInfo.
const ClusterInfoSchemaVersion = 1

// ClusterInfo reads the small buckets. Malformed entries are ErrCorrupt
// errors naming the bucket and key; missing buckets (older etcd) are
// empty.
func (db *DB) ClusterInfo() (*ClusterInfo, error) {
	m, err := db.Meta()
	if err != nil {
		return nil, err
	}
	ci := &ClusterInfo{SchemaVersion: ClusterInfoSchemaVersion, Path: db.path, Meta: m,
		Members: []Member{}, RemovedMembers: []string{}, Alarms: []Alarm{}, Users: []User{}, Roles: []Role{}}
	wrap := func(bucket []byte, err error) error {
		if err == nil {
			return nil
		}
		return fmt.Errorf("%w: bucket %s: %v", ErrCorrupt, bucket, err)
	}
	err = db.guard("read the cluster buckets", func() error {
		if err := db.forEach(bucketCluster, func(k, v []byte) error {
			switch string(k) {
			case "clusterVersion":
				ci.ClusterVersion = string(v)
			case "downgrade":
				ci.Downgrade = string(v)
			}
			return nil
		}); err != nil {
			return err
		}
		if err := db.forEach(bucketMembers, func(k, v []byte) error {
			mb, err := DecodeMember(k, v)
			ci.Members = append(ci.Members, mb)
			return wrap(bucketMembers, err)
		}); err != nil {
			return err
		}
		if err := db.forEach(bucketMembersRemoved, func(k, _ []byte) error {
			ci.RemovedMembers = append(ci.RemovedMembers, string(k))
			return nil
		}); err != nil {
			return err
		}
		if err := db.forEach(bucketAlarm, func(k, _ []byte) error {
			a, err := DecodeAlarm(k)
			ci.Alarms = append(ci.Alarms, a)
			return wrap(bucketAlarm, err)
		}); err != nil {
			return err
		}
		if err := db.forEach(bucketAuth, func(k, v []byte) error {
			switch string(k) {
			case "authEnabled":
				ci.AuthEnabled = len(v) == 1 && v[0] == 1
			case "authRevision":
				if len(v) != 8 {
					return wrap(bucketAuth, fmt.Errorf("authRevision is %d bytes, want 8", len(v)))
				}
				ci.AuthRevision = binary.BigEndian.Uint64(v)
			}
			return nil
		}); err != nil {
			return err
		}
		if err := db.forEach(bucketAuthUsers, func(k, v []byte) error {
			u, err := DecodeUser(k, v)
			ci.Users = append(ci.Users, u)
			return wrap(bucketAuthUsers, err)
		}); err != nil {
			return err
		}
		return db.forEach(bucketAuthRoles, func(k, v []byte) error {
			r, err := DecodeRole(k, v)
			ci.Roles = append(ci.Roles, r)
			return wrap(bucketAuthRoles, err)
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ci.Members, func(a, b Member) int { return cmp.Compare(a.Name+a.ID, b.Name+b.ID) })
	return ci, nil
}

// leases reads the lease bucket in ID order.
func (db *DB) leases() ([]Lease, error) {
	var out []Lease
	err := db.guard("read the lease bucket", func() error {
		return db.forEach(bucketLease, func(k, v []byte) error {
			l, err := DecodeLease(k, v)
			if err != nil {
				return fmt.Errorf("%w: bucket lease: %v", ErrCorrupt, err)
			}
			out = append(out, l)
			return nil
		})
	})
	return out, err
}
