package command

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdclient"
	"github.com/kubestore/etcdkit/internal/progress"
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

// memberFlagUsage is the help of --member (usage and keys).
const memberFlagUsage = "with --endpoints: read the keys from this member (its name, member ID or client URL), " +
	"serializable at the revision pinned by the first Range; default a follower, so the leader is spared the reads"

// connectForKeys is connect for the modes that read keys (usage, keys):
// it reads every member's Status and checks their versions
// (checkForKeys), and picks the member to read (live.ChooseMember:
// member by name, ID or URL, or a follower). It returns a client of that
// member alone, the members' versions, the member, and a close of both
// clients. An unknown member is a usage error naming --member.
func (o *liveOptions) connectForKeys(ctx context.Context, allowValueReads bool, member string) (*clientv3.Client, []string,
	live.MemberStatus, func(), error) {
	c, done, err := o.connect(ctx)
	if err != nil {
		return nil, nil, live.MemberStatus{}, nil, err
	}
	fail := func(err error) (*clientv3.Client, []string, live.MemberStatus, func(), error) {
		done()
		return nil, nil, live.MemberStatus{}, nil, err
	}
	members, versions, err := o.checkForKeys(ctx, c, allowValueReads)
	if err != nil {
		return fail(err)
	}
	chosen, err := live.ChooseMember(members, member)
	switch {
	case errors.Is(err, live.ErrUnknownMember) && member != "":
		return fail(cli.FlagErrorf("--member %v", err))
	case err != nil:
		return fail(err)
	}
	cfg, err := o.conn.Config()
	if err != nil {
		return fail(cli.FlagErrorf("%v", err))
	}
	cfg.Endpoints, cfg.Context = []string{chosen.Endpoint}, ctx
	mc, err := clientv3.New(cfg)
	if err != nil {
		return fail(fmt.Errorf("connect to member %s at %s: %w", chosen.Name, chosen.Endpoint, err))
	}
	return mc, versions, chosen, func() { mc.Close(); done() }, nil
}

// checkForKeys reads every member's Status through c
// (live.MemberStatuses) and refuses servers whose keys_only Ranges read
// values from disk (live.CheckVersions) unless allowValueReads. It
// returns the members and the versions of those that answered.
func (o *liveOptions) checkForKeys(ctx context.Context, c *clientv3.Client, allowValueReads bool) ([]live.MemberStatus, []string, error) {
	members, err := live.MemberStatuses(ctx, c, o.conn.Endpoints, o.conn.DialTimeout)
	if err != nil {
		return nil, nil, err
	}
	var versions []string
	for _, m := range members {
		if m.Error == "" {
			versions = append(versions, m.Version)
		}
	}
	if err := live.CheckVersions(versions, allowValueReads); err != nil {
		return nil, nil, fmt.Errorf("%w: refusing to load it; pass --allow-value-reads to read anyway", err)
	}
	return members, versions, nil
}

// liveMember names the member a scan read, in the JSON of usage and keys.
type liveMember struct {
	Name     string `json:"name"`
	MemberID string `json:"memberID"`
	Endpoint string `json:"endpoint"`
	IsLeader bool   `json:"isLeader"`
}

// readFrom is the member a scan read, with the ID of the member that
// answered its Ranges (memberID, hex).
func readFrom(m live.MemberStatus, memberID string) liveMember {
	return liveMember{Name: m.Name, MemberID: cmp.Or(memberID, m.MemberID), Endpoint: m.Endpoint, IsLeader: m.IsLeader}
}

// note is the line of a table naming the member read.
func (m liveMember) note() string {
	role := "a follower"
	if m.IsLeader {
		role = "the leader"
	}
	return fmt.Sprintf("Read from member %s (%s, %s, ID %s), serializable after the first Range.", m.Name, m.Endpoint, role, m.MemberID)
}

// startBar draws a progress bar of a live scan on stderr when it is a
// terminal, and returns the Progress the scan advances (nil on any other
// stderr: nothing is drawn) and a stop that erases the bar, to call
// before the result is printed.
func startBar(cmd *cobra.Command, label string) (*live.Progress, func()) {
	if !progress.IsTerminal(cmd.ErrOrStderr()) {
		return nil, func() {}
	}
	p := &live.Progress{}
	bar := progress.Start(cmd.ErrOrStderr(), label, p.Load)
	return p, bar.Stop
}

// partialLine is the line printed above the table of a scan that SIGINT
// interrupted.
func partialLine(what string) string {
	return "PARTIAL: interrupted while reading " + what + ": the figures below count only what was read until then.\n"
}

// writePartial prints the result of a scan that ctx's end interrupted
// (the table or JSON of what it read, its partial line above a table),
// then returns err, ctx's error wrapped: the command exits 130.
func writePartial(ctx context.Context, g *globalOptions, out io.Writer, what string, err error, print func(context.Context) error) error {
	if g.human() {
		if _, werr := io.WriteString(out, partialLine(what)); werr != nil {
			return werr
		}
	}
	if perr := print(context.WithoutCancel(ctx)); perr != nil {
		return perr
	}
	return fmt.Errorf("printed what was read (partial): %w", err)
}
