package live

import (
	"cmp"

	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// SpaceSchemaVersion versions the JSON of Space.
const SpaceSchemaVersion = 1

// MemberSpace is the quota verdict of one member, by the rules of
// snapshot.Space (snapshot.QuotaAdmits, snapshot.FragmentationVerdict)
// applied to its Status; what only a page walk tells (free runs, page
// counts, what a compaction would free) is not known live.
type MemberSpace struct {
	Name     string `json:"name"`
	MemberID string `json:"memberID"`
	Endpoint string `json:"endpoint"`
	// Error is why the member did not answer; the verdict is then absent.
	Error string `json:"error,omitempty"`
	// DBSizeBytes, InUseBytes and FreeBytes are the backend's size, the
	// bytes in use and the rest.
	DBSizeBytes int64 `json:"dbSizeBytes"`
	InUseBytes  int64 `json:"inUseBytes"`
	FreeBytes   int64 `json:"freeBytes"`
	// QuotaBytes is the quota judged against; QuotaSource says whose:
	// "member" (its Status, etcd 3.6 and later) or "flag" (--quota).
	QuotaBytes       int64   `json:"quotaBytes"`
	QuotaSource      string  `json:"quotaSource"`
	QuotaUsedPercent float64 `json:"quotaUsedPercent"`
	HeadroomBytes    int64   `json:"headroomBytes"`
	// OverQuota is true when etcd refuses every write (snapshot.Space);
	// MaxPutBytes is the largest key plus value a Put may still carry,
	// -1 for none.
	OverQuota   bool  `json:"overQuota"`
	MaxPutBytes int64 `json:"maxPutBytes"`
	// NoSpaceAlarm is true when the member has NOSPACE raised
	// (AlarmList).
	NoSpaceAlarm bool `json:"noSpaceAlarm"`
	// FragmentationPercent, FragmentationAlert and FragmentationRule are
	// snapshot.Space's.
	FragmentationPercent float64 `json:"fragmentationPercent"`
	FragmentationAlert   string  `json:"fragmentationAlert"`
	FragmentationRule    string  `json:"fragmentationRule"`
}

// Space is the quota verdict of every member.
type Space struct {
	SchemaVersion  int           `json:"schemaVersion"`
	Source         string        `json:"source"`
	ReadAtRevision int64         `json:"readAtRevision"`
	Members        []MemberSpace `json:"members"`
}

// SpaceOf judges every member of st against quotaBytes, or against the
// quota the member reports when preferMember is true and it reports one.
// quotaBytes 0 means snapshot.DefaultQuotaBytes.
func SpaceOf(st *Status, quotaBytes int64, preferMember bool) *Space {
	quotaBytes = cmp.Or(max(quotaBytes, 0), snapshot.DefaultQuotaBytes)
	sp := &Space{SchemaVersion: SpaceSchemaVersion, Source: SourceLive, ReadAtRevision: st.ReadAtRevision, Members: []MemberSpace{}}
	for _, m := range st.Members {
		ms := MemberSpace{Name: m.Name, MemberID: m.MemberID, Endpoint: m.Endpoint, Error: m.Error}
		if m.Error != "" {
			sp.Members = append(sp.Members, ms)
			continue
		}
		q, src := quotaBytes, "flag"
		if preferMember && m.QuotaBytes > 0 {
			q, src = m.QuotaBytes, "member"
		}
		ms.DBSizeBytes, ms.InUseBytes, ms.FreeBytes = m.DBSizeBytes, m.InUseBytes, m.DBSizeBytes-m.InUseBytes
		ms.QuotaBytes, ms.QuotaSource = q, src
		ms.QuotaUsedPercent = 100 * float64(m.DBSizeBytes) / float64(q)
		ms.HeadroomBytes = q - m.DBSizeBytes
		ms.OverQuota = !snapshot.QuotaAdmits(m.DBSizeBytes, snapshot.LeaseGrantCostBytes, q)
		ms.MaxPutBytes = max(ms.HeadroomBytes-snapshot.PutOverheadBytes-1, -1)
		for _, a := range m.Alarms {
			ms.NoSpaceAlarm = ms.NoSpaceAlarm || a == "NOSPACE"
		}
		ms.FragmentationPercent = m.FragmentationPercent
		ms.FragmentationAlert, ms.FragmentationRule = snapshot.FragmentationVerdict(m.FragmentationPercent, m.DBSizeBytes, q)
		sp.Members = append(sp.Members, ms)
	}
	return sp
}
