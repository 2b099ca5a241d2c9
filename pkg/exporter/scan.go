package exporter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/live"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// OtherNamespace is the namespace label of the namespaces beyond the top
// Options.TopNamespaces, summed (kube-state-metrics' cardinality cap).
const OtherNamespace = "_other"

// Series identifies a metric series of the key space: kube-state-metrics'
// group, resource and namespace labels. Namespace is "" for a
// cluster-scoped resource, OtherNamespace for the namespaces beyond the
// cap. Rows that hold no API object are Resource "_" plus their class
// ("_outside", "_compact-rev-key", "_unrecognised"), Group "".
type Series struct {
	Group, Resource, Namespace string
}

// Figures are one series' numbers from a full scan. LiveValueBytes and
// HistoryValueBytes are known only when values were read.
type Figures struct {
	// Objects counts the live keys.
	Objects int64
	// Revisions counts the revisions kept (live.Usage: a lower bound when
	// keys were deleted after the compact revision).
	Revisions int64
	// LiveValueBytes sums the live values (exact).
	LiveValueBytes int64
	// HistoryValueBytes estimates the values of the revisions kept that
	// are not live: (Revisions - Objects) times the series' mean live
	// value size, per usage row.
	HistoryValueBytes float64
}

// FullResult is a full scan's key space by Series.
type FullResult struct {
	// ReadAtRevision is the revision the keys were read at;
	// CompactRevision the one revisions kept were counted from.
	ReadAtRevision, CompactRevision int64
	// Values reports whether value bytes were read.
	Values bool
	Series map[Series]Figures
	// Top are the namespaces that keep their own label, by bytes (by
	// objects without values) then name.
	Top []string
	// targets are the count_only Ranges of the next count scans.
	targets []countTarget
}

// countTarget is one count_only Range of a count scan: the keys of one
// resource (under one prefix), and of each of its top namespaces.
type countTarget struct {
	// key is "<prefix>/<path>/"; the Range covers every key under it.
	key      string
	group    string
	resource string
	// namespaces are the top namespaces in which the full scan found
	// objects of the resource; empty for a cluster-scoped resource.
	namespaces []string
	namespaced bool
}

// seriesOf labels a usage row.
func seriesOf(r snapshot.UsageRow) Series {
	if !r.Class.IsObject() {
		return Series{Resource: "_" + string(r.Class)}
	}
	return Series{Group: r.Group, Resource: r.Resource, Namespace: r.Namespace}
}

// aggregate sums u's rows by Series, namespaces beyond the top n (0: no
// cap) as OtherNamespace, and plans the count scans.
func aggregate(u *live.Usage, n int) *FullResult {
	res := &FullResult{ReadAtRevision: u.ReadAtRevision, CompactRevision: u.CompactRevision, Values: u.Values,
		Series: map[Series]Figures{}}
	// Rank the namespaces by bytes (live and estimated history), or by
	// objects without values.
	weight := map[string]float64{}
	for _, r := range u.Rows {
		if !r.Class.IsObject() || r.Namespace == "" {
			continue
		}
		if u.Values {
			weight[r.Namespace] += float64(r.LiveValueBytes) + historyEstimate(r)
		} else {
			weight[r.Namespace] += float64(r.Objects)
		}
	}
	ranked := slices.SortedFunc(maps.Keys(weight), func(a, b string) int {
		return cmp.Or(cmp.Compare(weight[b], weight[a]), cmp.Compare(a, b))
	})
	if n > 0 && len(ranked) > n {
		ranked = ranked[:n]
	}
	res.Top = ranked
	top := map[string]bool{}
	for _, ns := range ranked {
		top[ns] = true
	}
	targets := map[string]*countTarget{}
	for _, r := range u.Rows {
		s := seriesOf(r)
		if s.Namespace != "" && !top[s.Namespace] {
			s.Namespace = OtherNamespace
		}
		f := res.Series[s]
		f.Objects += r.Objects
		f.Revisions += r.Revisions
		if u.Values {
			f.LiveValueBytes += r.LiveValueBytes
			f.HistoryValueBytes += historyEstimate(r)
		}
		res.Series[s] = f
		if r.Class.IsObject() {
			key := r.Prefix + "/" + r.Path + "/"
			t, ok := targets[key]
			if !ok {
				t = &countTarget{key: key, group: r.Group, resource: r.Resource}
				targets[key] = t
			}
			t.namespaced = t.namespaced || r.Namespace != ""
			if top[r.Namespace] && !slices.Contains(t.namespaces, r.Namespace) {
				t.namespaces = append(t.namespaces, r.Namespace)
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(targets)) {
		t := targets[key]
		slices.Sort(t.namespaces)
		res.targets = append(res.targets, *t)
	}
	return res
}

// historyEstimate is the value bytes of a row's revisions kept that are
// not live, estimated as that many times the row's mean live value size.
func historyEstimate(r snapshot.UsageRow) float64 {
	if r.Objects == 0 || r.Revisions <= r.Objects {
		return 0
	}
	return float64(r.Revisions-r.Objects) * float64(r.LiveValueBytes) / float64(r.Objects)
}

// CountResult is a count scan: the objects per Series of the resources
// and top namespaces the last full scan found, from count_only Ranges.
type CountResult struct {
	ReadAtRevision int64
	Objects        map[Series]int64
}

// countScan asks one count_only Range per target resource and one per
// its top namespace, all at the revision of the first (serializable
// after it), and returns the objects per Series: a namespaced resource's
// OtherNamespace is its count less its top namespaces'.
func countScan(ctx context.Context, c live.Client, targets []countTarget) (*CountResult, error) {
	res := &CountResult{Objects: map[Series]int64{}}
	count := func(key string) (int64, error) {
		opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(key)), clientv3.WithCountOnly()}
		if res.ReadAtRevision > 0 {
			opts = append(opts, clientv3.WithRev(res.ReadAtRevision), clientv3.WithSerializable())
		}
		resp, err := c.Get(ctx, key, opts...)
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			} else if errors.Is(err, rpctypes.ErrPermissionDenied) {
				err = fmt.Errorf("%w: the user's role needs read access to the prefix %q", err, key)
			}
			return 0, fmt.Errorf("count the keys under %q: %w", key, err)
		}
		if res.ReadAtRevision == 0 {
			res.ReadAtRevision = resp.Header.Revision
		}
		return resp.Count, nil
	}
	for _, t := range targets {
		total, err := count(t.key)
		if err != nil {
			return nil, err
		}
		if !t.namespaced {
			res.Objects[Series{Group: t.group, Resource: t.resource}] += total
			continue
		}
		other := total
		for _, ns := range t.namespaces {
			n, err := count(t.key + ns + "/")
			if err != nil {
				return nil, err
			}
			res.Objects[Series{Group: t.group, Resource: t.resource, Namespace: ns}] += n
			other -= n
		}
		if other != 0 {
			res.Objects[Series{Group: t.group, Resource: t.resource, Namespace: OtherNamespace}] += other
		}
	}
	return res, nil
}
