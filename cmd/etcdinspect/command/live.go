package command

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdclient"
	"github.com/kubestore/etcdkit/pkg/live"
)

// liveOptions are the connection flags of a command that reads a running
// cluster instead of a FILE (etcdctl's names: internal/etcdclient).
type liveOptions struct {
	conn etcdclient.Flags
}

func (o *liveOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.conn.Endpoints, "endpoints", nil,
		"read a running cluster at these etcd client URLs (comma-separated) instead of a FILE; read-only requests only")
	fs.DurationVar(&o.conn.DialTimeout, "dial-timeout", 5*time.Second, "timeout to connect to --endpoints")
	o.conn.AddSecurityFlags(fs)
}

// enabled reports whether the command reads a running cluster.
func (o *liveOptions) enabled() bool { return len(o.conn.Endpoints) > 0 }

// args accepts one FILE, or none with --endpoints: both, or neither, is a
// usage error naming them.
func (o *liveOptions) args(cmd *cobra.Command, args []string) error {
	switch {
	case o.enabled() && len(args) > 0:
		return cli.FlagErrorf("FILE %q and --endpoints cannot be used together: give a file to read offline, or --endpoints to read a running cluster", args[0])
	case o.enabled():
		return nil
	}
	return cli.ExactArgs(1)(cmd, args)
}

func (o *liveOptions) Validate() error {
	if err := o.conn.Validate(); err != nil {
		return cli.FlagErrorf("%v", err)
	}
	return nil
}

// connect checks that an endpoint answers as an etcd server, naming the
// cause when none does (etcdclient.Check: refused, timeout, TLS, not
// etcd), and returns a client and its close.
func (o *liveOptions) connect(ctx context.Context) (*clientv3.Client, func(), error) {
	cfg, err := o.conn.Config()
	if err != nil {
		return nil, nil, cli.FlagErrorf("%v", err)
	}
	if err := etcdclient.Check(ctx, cfg); err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("connect to --endpoints: %w", ctx.Err())
		}
		return nil, nil, fmt.Errorf("--endpoints: %w", err)
	}
	cfg.Context = ctx
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	return c, func() { c.Close() }, nil
}

// connectForKeys is connect for the modes that read keys (usage, keys):
// it also reads every member's server version and refuses servers whose
// keys_only Ranges read values from disk (live.CheckVersions) unless
// allowValueReads. The versions are returned for the read's options.
func (o *liveOptions) connectForKeys(ctx context.Context, allowValueReads bool) (*clientv3.Client, []string, func(), error) {
	c, done, err := o.connect(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	versions, err := live.ServerVersions(ctx, c, o.conn.Endpoints, o.conn.DialTimeout)
	if err == nil {
		err = live.CheckVersions(versions, allowValueReads)
		if err != nil {
			err = fmt.Errorf("%w: refusing to load it; pass --allow-value-reads to read anyway", err)
		}
	}
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	return c, versions, done, nil
}
