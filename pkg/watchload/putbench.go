package watchload

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubestore/etcdkit/internal/fieldcheck"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/report"
)

// PutOptions shape an open-loop write load alone. Zero fields take their
// defaults (Defaults).
type PutOptions struct {
	// Prefix starts every raw key; with Kubernetes objects it is the
	// --etcd-prefix. Default "/lwbench/put/" or "/registry".
	Prefix string
	// Keys is the raw key space (etcd benchmark's --key-space-size), or
	// the pods seeded with Kubernetes objects.
	Keys int
	// KeySize pads raw keys to at least this many bytes.
	KeySize int
	// ValueSize > 0 puts raw values of that size with plain Puts, as etcd's
	// benchmark put does; 0 runs the Kubernetes workload (pods,
	// configmaps, events with kube-apiserver's transactions).
	ValueSize int
	// Sequential picks raw keys in turn instead of at random.
	Sequential bool
	// Total ops at Rate per second, by Workers workers (benchmark's
	// --clients) over Connections connections (--conns). A Rate above
	// what etcd sustains measures its throughput ceiling, with latency
	// from schedule that grows with the queue, as it would for clients.
	Total       int64
	Rate        float64 // scheduled ops per second
	Workers     int     // concurrent workers
	Connections int     // connections of the workers
	// Timeout bounds one op.
	Timeout time.Duration
	// Seed makes keys and objects reproducible.
	Seed uint64
	// Logf receives one line per phase.
	Logf func(format string, args ...any)
	// OnStatus, if set, is called every 500 ms with a live view.
	OnStatus func(LoadStatus)
}

// Defaults returns o with zero fields set.
func (o PutOptions) Defaults() PutOptions {
	if o.Prefix == "" {
		o.Prefix = BenchPrefix("/lwbench", "put", o.ValueSize, keyspace.DefaultPrefix)
	}
	if o.Keys == 0 {
		o.Keys = 1000
	}
	if o.Total == 0 {
		o.Total = 10000
	}
	if o.Rate == 0 {
		o.Rate = 1000
	}
	if o.Workers == 0 {
		o.Workers = 16
	}
	if o.Connections == 0 {
		o.Connections = 1
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	return o
}

// Validate reports every invalid field of o, with its field path (the
// names are the settings' names across lwbench's options: Total is writes,
// Rate writeRate, Workers writerConcurrency, Connections
// writerConnections), as an error wrapping a field.ErrorList. Call it
// after Defaults.
func (o PutOptions) Validate() error {
	var errs field.ErrorList
	errs = append(errs, fieldcheck.Positive(o.Keys, field.NewPath("keys"))...)
	errs = append(errs, fieldcheck.NonNegative(o.KeySize, field.NewPath("keySize"))...)
	errs = append(errs, fieldcheck.NonNegative(o.ValueSize, field.NewPath("valueSize"))...)
	errs = append(errs, validateSchedule(o.Total, o.Rate, field.NewPath("writes"), field.NewPath("writeRate"))...)
	errs = append(errs, validateWriterConcurrency(o.Workers, field.NewPath("writerConcurrency"))...)
	errs = append(errs, validateConnections(o.Connections, field.NewPath("writerConnections"))...)
	errs = append(errs, fieldcheck.AtMost(o.Connections, o.Workers, "the writer concurrency", field.NewPath("writerConnections"))...)
	errs = append(errs, fieldcheck.PositiveDuration(o.Timeout, field.NewPath("timeout"))...)
	return errs.ToAggregate()
}

// BenchPrefix is where a bench (put, watch) writes by default: under
// base/bench/ for raw values (valueSize not 0), and under kubernetes, a
// Kubernetes prefix, for its objects.
func BenchPrefix(base, bench string, valueSize int, kubernetes string) string {
	if valueSize != 0 {
		return base + "/" + bench + "/"
	}
	return kubernetes
}

// Put runs an open-loop write load and measures throughput and latency
// from schedule.
func Put(ctx context.Context, t Target, o PutOptions) (*report.PutResult, error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := NewSession(t, time.Now(), o.Logf)
	defer s.Close()
	s.SampleSelf(ctx)
	res := &report.PutResult{
		Kind: report.KindPut, SchemaVersion: report.PutSchemaVersion, StartedAt: s.epoch.UTC(), Target: s.reportTarget(),
		Scenario: report.PutScenario{
			Prefix: o.Prefix, Keys: o.Keys, KeySize: o.KeySize, ValueSize: o.ValueSize, Total: o.Total, RatePerSecond: o.Rate,
			Workers: o.Workers, Connections: o.Connections, Seed: o.Seed, SequentialKeys: o.Sequential,
		},
	}
	admin, version, err := s.writersAsAdmin(ctx, o.Connections)
	if err != nil {
		return nil, err
	}
	res.Target.EtcdVersion = version
	var wl Workload
	if o.ValueSize > 0 {
		wl = &rawWorkload{Prefix: o.Prefix, Keys: o.Keys, KeySize: o.KeySize, ValueSize: o.ValueSize, Sequential: o.Sequential, Seed: o.Seed}
	} else {
		kw, err := NewKubernetesWorkload(KubernetesWorkloadOptions{
			Prefix: o.Prefix, Namespaces: 10, Pods: o.Keys, ConfigMaps: o.Keys / 5, Events: o.Keys / 2,
			Mix: DefaultMix, ResourceMix: DefaultResourceMix, Workers: o.Workers, Seed: o.Seed,
		})
		if err != nil {
			return nil, err
		}
		s.logf("seeding %d pods, %d configmaps, %d events", o.Keys, o.Keys/5, o.Keys/2)
		if err := s.Seed(ctx, kw, o.Workers); err != nil {
			return nil, fmt.Errorf("seed objects: %w", err)
		}
		res.Scenario.KubernetesObjects = o.Keys + o.Keys/5 + o.Keys/2
		wl = kw
		if !t.Managed {
			// The events' leases are the put's own: revoke them at the end,
			// as run does, so that an --endpoints cluster keeps none of
			// them (the command deletes the keys it created).
			defer func() {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
				defer cancel()
				n, err := revokeLeases(cctx, admin, kw.Leases())
				s.logf("cleanup: revoked the %d leases the put granted", n)
				if err != nil {
					s.logf("cleanup: %v", err)
				}
			}()
		}
	}
	s.NewEnv(1024, o.Workers)
	s.ReportStatus(ctx, o.OnStatus, 500*time.Millisecond, 0, "putting")
	s.logf("putting %d ops at %.0f/s with %d workers over %d connections", o.Total, o.Rate, o.Workers, o.Connections)
	writing, err := s.Write(ctx, wl, WriterOptions{Rate: o.Rate, Total: o.Total, Workers: o.Workers, Timeout: o.Timeout}, "putting")
	if err != nil {
		return nil, err
	}
	res.Writes = writing.Wait()
	ctx, interrupted, cancel := s.AfterWrites(ctx)
	defer cancel()
	res.Interrupted = interrupted != nil
	res.Intervals = collectTimings(s.env, &res.Writes, nil)
	res.Self = s.SelfStats(ctx)
	if interrupted != nil {
		return res, interruptedAfterWrites("put", interrupted, res.Writes)
	}
	return res, nil
}
