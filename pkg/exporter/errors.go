package exporter

import "errors"

// ErrNoFullScan is returned by Exporter.Scan(KindCount) before a full scan
// succeeded: a count scan counts what the last full scan found.
var ErrNoFullScan = errors.New("no successful full scan yet: a count scan counts the resources and namespaces a full scan found")
