// Package exporter serves what fills a live etcd cluster as Prometheus
// metrics: periodic scans with pkg/live's read-only requests, the last
// successful scan's figures exported by a prometheus.Collector.
//
// # Scans
//
// A full scan (every Options.Interval) is live.ReadStatus (Status of
// every member, MemberList, AlarmList, and about 40 count_only Ranges of
// one key bisecting the compact revision) and live.ReadUsage: every key
// with keys_only Ranges of MaxKeysPerRequest keys at one revision, the
// same at the compact revision for the revisions kept, and, with
// Options.Values, the values (a full Range of values). Its Ranges number
// 1 + 2 x (1 + about log2(revision)) (the compact revision is bisected
// twice, once by each read) plus the pages: keys / MaxKeysPerRequest
// rounded up, at each of the two revisions.
//
// A count scan (every Options.CountInterval, between full scans) is
// live.ReadStatus (2 + about log2(revision) Ranges) and one count_only
// Range per resource the last full scan found, plus one per top namespace
// holding objects of it, all at the revision of the first: it updates
// etcdinspect_objects only. A
// namespace or resource that appeared since the last full scan is
// counted in its resource's OtherNamespace, or not at all, until the
// next full scan; a count_only Range counts every key under the
// resource's prefix, keys of no object's shape included.
//
// A scan is bounded by its interval. A failed scan changes no figure: it
// counts in etcdinspect_scan_errors_total, and
// etcdinspect_last_successful_scan_timestamp_seconds tells how old the
// figures are. Exporter.Health turns false when they are older than
// Options.StaleIntervals intervals.
//
// # Metrics
//
// Names follow Prometheus' conventions (base units, _bytes, _seconds,
// _total only on counters, an _info metric) and labels kube-state-
// metrics' (group, resource, namespace). Namespaces beyond the top
// Options.TopNamespaces, ranked by value bytes (by objects without
// values), are summed under namespace OtherNamespace. History value
// bytes are an estimate, labelled method="estimate": per usage row, the
// revisions kept beyond the live ones times the mean live value size;
// the exact figure needs a replay of the history (etcdinspect usage on a
// snapshot).
//
// # Cost
//
// Every request a scan sends is counted (etcdinspect_scan_requests,
// _read_keys, _read_bytes for the last successful scan of each kind;
// _total counters for every scan). The exporter never sends HashKV, a
// write, a compaction, a defragmentation or a lease request.
package exporter
