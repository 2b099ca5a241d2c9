package exporter

import (
	"cmp"
	"maps"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// Metric names and their labels. Figures of the key space carry
// kube-state-metrics' group, resource and namespace; member figures member
// (the member's name) and endpoint; scan figures kind (KindFull,
// KindCount).
var (
	keyLabels    = []string{"group", "resource", "namespace"}
	memberLabels = []string{"member", "endpoint"}
	kindLabels   = []string{"kind"}

	descExporterInfo = prometheus.NewDesc("etcdinspect_exporter_info",
		"The exporter: its version and whether full scans read values (values=\"true\"): 1.",
		[]string{"version", "values"}, nil)
	descObjects = prometheus.NewDesc("etcdinspect_objects",
		"Live keys (objects) per group, resource and namespace: from the last count scan, or the last full scan when newer. "+
			"resource \"_<class>\" holds keys that are no API object; namespace \"_other\" the namespaces beyond --top-namespaces.",
		keyLabels, nil)
	descRevisions = prometheus.NewDesc("etcdinspect_revisions",
		"Revisions kept (entries in etcd's key bucket) of the live keys, from the last full scan: version now minus version at the compact revision, "+
			"plus the entry kept there; a lower bound when keys were deleted after the compact revision.",
		keyLabels, nil)
	descValueBytes = prometheus.NewDesc("etcdinspect_value_bytes",
		"Value bytes from the last full scan with --values: state=\"live\" the live values (method=\"exact\"), "+
			"state=\"history\" the revisions kept that are not live times the mean live value size (method=\"estimate\").",
		append(slices.Clone(keyLabels), "state", "method"), nil)
	descMemberInfo = prometheus.NewDesc("etcdinspect_member_info",
		"A member as its Status reports it: 1.", []string{"member", "member_id", "endpoint", "version"}, nil)
	descMemberUp = prometheus.NewDesc("etcdinspect_member_up",
		"Whether the member answered Status in the last successful scan (1) or not (0).", memberLabels, nil)
	descDBSize = prometheus.NewDesc("etcdinspect_member_db_size_bytes",
		"The member's backend size (bbolt's high-water mark: what the quota checks).", memberLabels, nil)
	descDBInUse = prometheus.NewDesc("etcdinspect_member_db_size_in_use_bytes",
		"The bytes in use within the member's backend.", memberLabels, nil)
	descQuota = prometheus.NewDesc("etcdinspect_member_quota_bytes",
		"The member's backend quota: its --quota-backend-bytes as its Status reports it (etcd 3.6 and later), else the exporter's --quota.",
		memberLabels, nil)
	descMemberRevision = prometheus.NewDesc("etcdinspect_member_revision",
		"The member's current revision.", memberLabels, nil)
	descCurrentRevision = prometheus.NewDesc("etcdinspect_current_revision",
		"The cluster's revision at the last successful scan (the header revision of its first Range).", nil, nil)
	descCompactRevision = prometheus.NewDesc("etcdinspect_compact_revision",
		"The revision of the cluster's last completed compaction (0: none), at the last successful scan.", nil, nil)
	descScanRevision = prometheus.NewDesc("etcdinspect_scan_revision",
		"The revision the last successful scan of the kind read the keys at.", kindLabels, nil)
	descLastSuccess = prometheus.NewDesc("etcdinspect_last_successful_scan_timestamp_seconds",
		"When the last successful scan of the kind ended (Unix time); the figures are that scan's.", kindLabels, nil)
	descScanDuration = prometheus.NewDesc("etcdinspect_scan_duration_seconds",
		"How long the last scan of the kind took, successful or not.", kindLabels, nil)
	descScans = prometheus.NewDesc("etcdinspect_scans_total",
		"Scans of the kind that ended, successful or not (a scan stopped by the exporter's shutdown does not count).", kindLabels, nil)
	descScanErrors = prometheus.NewDesc("etcdinspect_scan_errors_total",
		"Scans of the kind that failed; the figures stay those of the last successful scan.", kindLabels, nil)
	descScanRequests = prometheus.NewDesc("etcdinspect_scan_requests",
		"Requests the last successful scan of the kind sent etcd, by request (range, status, member_list, alarm_list).",
		[]string{"kind", "request"}, nil)
	descScanKeys = prometheus.NewDesc("etcdinspect_scan_read_keys",
		"Keys the Ranges of the last successful scan of the kind returned (count_only Ranges return none).", kindLabels, nil)
	descScanBytes = prometheus.NewDesc("etcdinspect_scan_read_bytes",
		"Bytes of the responses to the last successful scan of the kind, as marshalled.", kindLabels, nil)
	descRequests = prometheus.NewDesc("etcdinspect_requests_total",
		"Requests every scan of the kind sent etcd, by request.", []string{"kind", "request"}, nil)
	descReadKeys = prometheus.NewDesc("etcdinspect_read_keys_total",
		"Keys every scan of the kind read.", kindLabels, nil)
	descReadBytes = prometheus.NewDesc("etcdinspect_read_bytes_total",
		"Bytes of the responses to every scan of the kind.", kindLabels, nil)
)

var _ prometheus.Collector = (*Exporter)(nil)

// Describe sends every metric's descriptor.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descExporterInfo, descObjects, descRevisions, descValueBytes, descMemberInfo, descMemberUp,
		descDBSize, descDBInUse, descQuota, descMemberRevision, descCurrentRevision, descCompactRevision, descScanRevision,
		descLastSuccess, descScanDuration, descScans, descScanErrors, descScanRequests, descScanKeys, descScanBytes,
		descRequests, descReadKeys, descReadBytes} {
		ch <- d
	}
}

// objects returns the objects per Series as Collect exports them: the
// last full scan's, with the resources a newer count scan counted
// replaced by its counts; nil before a full scan succeeded. e.mu is held.
func (e *Exporter) objects() map[Series]int64 {
	if e.full == nil {
		return nil
	}
	objects := map[Series]int64{}
	for s, f := range e.full.Series {
		objects[s] = f.Objects
	}
	if e.count != nil {
		type gr struct{ group, resource string }
		counted := map[gr]bool{}
		for _, t := range e.full.targets {
			counted[gr{t.group, t.resource}] = true
		}
		for s := range objects {
			if counted[gr{s.Group, s.Resource}] {
				objects[s] = 0
			}
		}
		for s, n := range e.count.Objects {
			objects[s] = n
		}
	}
	return objects
}

// Collect sends the figures of the last successful scans.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	defer e.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descExporterInfo, 1, e.o.Version, strconv.FormatBool(e.o.Values))

	if e.full != nil {
		objects := e.objects()
		for _, s := range sortedSeries(objects) {
			gauge(descObjects, float64(objects[s]), s.Group, s.Resource, s.Namespace)
		}
		for _, s := range sortedSeries(e.full.Series) {
			f := e.full.Series[s]
			gauge(descRevisions, float64(f.Revisions), s.Group, s.Resource, s.Namespace)
			if e.full.Values {
				gauge(descValueBytes, float64(f.LiveValueBytes), s.Group, s.Resource, s.Namespace, "live", "exact")
				gauge(descValueBytes, f.HistoryValueBytes, s.Group, s.Resource, s.Namespace, "history", "estimate")
			}
		}
		gauge(descScanRevision, float64(e.full.ReadAtRevision), KindFull)
	}
	if e.count != nil {
		gauge(descScanRevision, float64(e.count.ReadAtRevision), KindCount)
	}
	if st := e.status; st != nil {
		gauge(descCurrentRevision, float64(st.ReadAtRevision))
		gauge(descCompactRevision, float64(st.CompactRevision))
		quota := cmp.Or(max(e.o.QuotaBytes, 0), snapshot.DefaultQuotaBytes)
		for _, m := range st.Members {
			name := cmp.Or(m.Name, m.MemberID)
			if m.Error != "" {
				gauge(descMemberUp, 0, name, m.Endpoint)
				continue
			}
			gauge(descMemberUp, 1, name, m.Endpoint)
			gauge(descMemberInfo, 1, name, m.MemberID, m.Endpoint, m.Version)
			gauge(descDBSize, float64(m.DBSizeBytes), name, m.Endpoint)
			gauge(descDBInUse, float64(m.InUseBytes), name, m.Endpoint)
			q := quota
			if m.QuotaBytes > 0 && !e.o.QuotaOverride {
				q = m.QuotaBytes
			}
			gauge(descQuota, float64(q), name, m.Endpoint)
			gauge(descMemberRevision, float64(m.Revision), name, m.Endpoint)
		}
	}
	for _, kind := range []string{KindFull, KindCount} {
		k := e.kinds[kind]
		if !k.lastSuccess.IsZero() {
			gauge(descLastSuccess, float64(k.lastSuccess.UnixNano())/1e9, kind)
			for _, r := range slices.Sorted(maps.Keys(k.lastCost.Requests)) {
				gauge(descScanRequests, float64(k.lastCost.Requests[r]), kind, r)
			}
			gauge(descScanKeys, float64(k.lastCost.KeysRead), kind)
			gauge(descScanBytes, float64(k.lastCost.ReadBytes), kind)
		}
		if k.scans > 0 {
			gauge(descScanDuration, k.lastDuration.Seconds(), kind)
		}
		counter(descScans, float64(k.scans), kind)
		counter(descScanErrors, float64(k.errors), kind)
		for _, r := range []string{RequestRange, RequestStatus, RequestMemberList, RequestAlarmList} {
			counter(descRequests, float64(k.totalCost.Requests[r]), kind, r)
		}
		counter(descReadKeys, float64(k.totalCost.KeysRead), kind)
		counter(descReadBytes, float64(k.totalCost.ReadBytes), kind)
	}
}

// sortedSeries returns m's keys in label order.
func sortedSeries[V any](m map[Series]V) []Series {
	return slices.SortedFunc(maps.Keys(m), func(a, b Series) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Namespace, b.Namespace))
	})
}
