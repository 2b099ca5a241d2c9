package watchload

import (
	"context"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubestore/etcdkit/internal/fieldcheck"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/report"
)

// The LIST modes of List.
const (
	// ListModeFull reads keys and values in pages pinned to the first
	// page's revision, as a paginated LIST does.
	ListModeFull = "full"
	// ListModeKeysOnly reads keys only (etcd v3.7 serves it from the
	// index alone).
	ListModeKeysOnly = "keys-only"
	// ListModeCountOnly asks for the count only, as kube-apiserver's
	// object count does.
	ListModeCountOnly = "count-only"
	// ListModeStream reads everything in one RangeStream (etcd v3.7;
	// kube-apiserver's EtcdRangeStream gate).
	ListModeStream = "stream"
)

// listModes lists every mode.
var listModes = []string{ListModeFull, ListModeKeysOnly, ListModeCountOnly, ListModeStream}

// ListOptions shape a LIST cost run. Zero fields take their defaults
// (Defaults).
type ListOptions struct {
	// Prefix is the --etcd-prefix the objects go under.
	Prefix string
	// Resource is "pods" or "configmaps".
	Resource string
	// Objects are the object counts to measure at, ascending; the
	// resource grows from one to the next.
	Objects []int
	// PageSizes are the limits per range request; 0 is unpaginated.
	// They apply to full and keys-only lists.
	PageSizes []int64
	// Modes are the list modes.
	Modes []string
	// Repeats is the number of lists per row.
	Repeats int
	// Serializable reads from the member's local state without a quorum
	// round.
	Serializable bool
	// Namespaces the objects are spread across; Concurrency the parallel
	// creates while seeding.
	Namespaces, Concurrency int
	// Seed makes the objects reproducible.
	Seed uint64
	// Logf receives one line per phase.
	Logf func(format string, args ...any)
}

// Defaults returns o with zero fields set.
func (o ListOptions) Defaults() ListOptions {
	if o.Prefix == "" {
		o.Prefix = keyspace.DefaultPrefix
	}
	if o.Resource == "" {
		o.Resource = ResourcePods
	}
	if len(o.Objects) == 0 {
		o.Objects = []int{1000, 10000}
	}
	if len(o.PageSizes) == 0 {
		o.PageSizes = []int64{DefaultPageSize, CacherPageSize, 0}
	}
	if len(o.Modes) == 0 {
		o.Modes = listModes
	}
	if o.Repeats == 0 {
		o.Repeats = 5
	}
	if o.Namespaces == 0 {
		o.Namespaces = 10
	}
	if o.Concurrency == 0 {
		o.Concurrency = 16
	}
	return o
}

// Validate reports every invalid field of o, with its field path, as an
// error wrapping a field.ErrorList. Call it after Defaults.
func (o ListOptions) Validate() error {
	var errs field.ErrorList
	errs = append(errs, validatePrefix(o.Prefix, field.NewPath("prefix"))...)
	if o.Resource != ResourcePods && o.Resource != ResourceConfigMaps {
		errs = append(errs, field.NotSupported(field.NewPath("resource"), o.Resource, []string{ResourcePods, ResourceConfigMaps}))
	}
	errs = append(errs, fieldcheck.Ascending(o.Objects, true, field.NewPath("objects"))...)
	for i, p := range o.PageSizes {
		errs = append(errs, fieldcheck.NonNegative(p, field.NewPath("pageSizes").Index(i))...)
	}
	for i, m := range o.Modes {
		if !slices.Contains(listModes, m) {
			errs = append(errs, field.NotSupported(field.NewPath("modes").Index(i), m, listModes))
		}
	}
	errs = append(errs, fieldcheck.Positive(o.Repeats, field.NewPath("repeats"))...)
	errs = append(errs, fieldcheck.Positive(o.Namespaces, field.NewPath("namespaces"))...)
	errs = append(errs, fieldcheck.Positive(o.Concurrency, field.NewPath("concurrency"))...)
	return errs.ToAggregate()
}

// List measures what LISTs of one resource cost as it grows: for each
// object count, it creates objects up to that count (encoded as
// kube-apiserver stores them), then lists Repeats times in each mode and
// page size, timing each whole list. The prefix must hold none of the
// resource's seeded names.
func List(ctx context.Context, t Target, o ListOptions) (*report.ListResult, error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := NewSession(t, time.Now(), o.Logf)
	defer s.Close()
	s.SampleSelf(ctx)
	logf := s.logf
	res := &report.ListResult{
		Kind: report.KindList, SchemaVersion: report.ListSchemaVersion, StartedAt: s.epoch.UTC(), Target: s.reportTarget(),
		Scenario: report.ListScenario{Prefix: o.Prefix, Resource: o.Resource, Objects: o.Objects, PageSizes: o.PageSizes,
			Modes: o.Modes, Repeats: o.Repeats, Serializable: o.Serializable, Seed: o.Seed},
	}
	c, err := s.DialAdmin(ctx)
	if err != nil {
		return nil, err
	}
	if res.Target.EtcdVersion, err = s.EtcdVersion(ctx); err != nil {
		return nil, err
	}
	wl, err := NewKubernetesWorkload(KubernetesWorkloadOptions{Prefix: o.Prefix, Namespaces: o.Namespaces, Workers: 1, Seed: o.Seed})
	if err != nil {
		return nil, err
	}
	prefix := ResourcePrefix(o.Prefix, o.Resource)
	have := 0
	for _, n := range o.Objects {
		logf("creating %s %d..%d", o.Resource, have, n)
		if err := wl.SeedRange(ctx, []KV{c}, o.Resource, have, n, o.Concurrency); err != nil {
			return nil, err
		}
		have = n
		for _, mode := range o.Modes {
			sizes := o.PageSizes
			if mode == ListModeCountOnly || mode == ListModeStream {
				sizes = []int64{0}
			}
			for _, size := range sizes {
				row, err := measureList(ctx, c, prefix, mode, size, o.Repeats, o.Serializable)
				if err != nil {
					return nil, err
				}
				row.Objects = n
				res.Rows = append(res.Rows, row)
				logf("%d %s, %s, page size %d: p50 %.2f ms", n, o.Resource, mode, size, row.Latency.P50Ms)
			}
		}
	}
	res.Self = s.SelfStats(ctx)
	return res, nil
}

func measureList(ctx context.Context, c *clientv3.Client, prefix, mode string, pageSize int64, repeats int, serializable bool) (report.ListRow, error) {
	row := report.ListRow{Mode: mode, PageSize: pageSize, Lists: repeats}
	h := newHistogram()
	end := clientv3.GetPrefixRangeEnd(prefix)
	for range repeats {
		var pages int
		var objects, bytes int64
		start := time.Now()
		err := func() error {
			base := []clientv3.OpOption{clientv3.WithRange(end)}
			if serializable {
				base = append(base, clientv3.WithSerializable())
			}
			switch mode {
			case ListModeCountOnly:
				resp, err := c.Get(ctx, prefix, append(base, clientv3.WithCountOnly())...)
				if err != nil {
					return err
				}
				pages, objects, bytes = 1, resp.Count, int64(proto.Size((*pb.RangeResponse)(resp)))
				return nil
			case ListModeStream:
				stream, err := c.GetStream(ctx, prefix, base...)
				if err != nil {
					return err
				}
				for chunk := range stream {
					if err := chunk.Err(); err != nil {
						return err
					}
					pages++
					objects += int64(len(chunk.Kvs))
					bytes += int64(proto.Size(chunk.RangeResponse))
				}
				return nil
			}
			key := prefix
			var rev int64
			for {
				opts := append([]clientv3.OpOption(nil), base...)
				if pageSize > 0 {
					opts = append(opts, clientv3.WithLimit(pageSize))
				}
				if rev > 0 {
					opts = append(opts, clientv3.WithRev(rev))
				}
				if mode == ListModeKeysOnly {
					opts = append(opts, clientv3.WithKeysOnly())
				}
				resp, err := c.Get(ctx, key, opts...)
				if err != nil {
					return err
				}
				pages++
				objects += int64(len(resp.Kvs))
				bytes += rangeBytes(resp)
				rev = resp.Header.Revision
				if !resp.More || len(resp.Kvs) == 0 {
					return nil
				}
				key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
			}
		}()
		if err != nil {
			if ctx.Err() != nil {
				return row, ctx.Err()
			}
			row.Errors++
			continue
		}
		h.record(time.Since(start))
		row.Pages, row.ObjectsReturned, row.ResponseBytes = pages, objects, bytes
	}
	row.Latency = h.summary()
	if p50 := row.Latency.P50Ms; p50 > 0 {
		row.ObjectsPerSecond = float64(row.ObjectsReturned) / (p50 / 1000)
		row.MegabytesPerSecond = float64(row.ResponseBytes) / 1e6 / (p50 / 1000)
	}
	return row, nil
}
