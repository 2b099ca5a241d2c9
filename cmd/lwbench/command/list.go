package command

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

type listOptions struct {
	out       outputOptions
	target    targetOptions
	load      watchload.ListOptions
	objects   []int
	pageSizes []string
	flags     *pflag.FlagSet
}

func (o *listOptions) AddFlags(fs *pflag.FlagSet) {
	o.out.AddFlags(fs, false)
	o.target.AddFlags(fs)
	d := watchload.ListOptions{}.Defaults()
	fs.StringVar(&o.load.Prefix, "prefix", "", fmt.Sprintf("Kubernetes etcd prefix (default %s embedded, %s with --endpoints)", keyspace.DefaultPrefix, externalDefaultPrefix))
	fs.StringVar(&o.load.Resource, "resource", d.Resource, "resource to create and list: pods or configmaps")
	fs.IntSliceVar(&o.objects, "objects", d.Objects, "object counts to measure at, ascending")
	fs.StringSliceVar(&o.pageSizes, "page-sizes", []string{"500", "10000", "none"}, "page sizes of full and keys-only lists (none: unpaginated)")
	fs.StringSliceVar(&o.load.Modes, "modes", d.Modes, "list modes: full, keys-only, count-only, stream")
	fs.IntVar(&o.load.Repeats, "repeats", d.Repeats, "lists per row")
	fs.BoolVar(&o.load.Serializable, "serializable", false, "serializable reads (no quorum round)")
	fs.IntVar(&o.load.Namespaces, "namespaces", d.Namespaces, "namespaces the objects are spread across")
	fs.Uint64Var(&o.load.Seed, "seed", 1, "seed of the objects")
	o.load.Concurrency = d.Concurrency
	o.flags = fs
}

// Validate checks the flags; watchload.ListOptions.Validate checks the
// load's, each error named by its flag (flagErrors).
func (o *listOptions) Validate() error {
	if err := o.target.Validate(); err != nil {
		return err
	}
	if o.load.Prefix == "" {
		o.load.Prefix = keyspace.DefaultPrefix
		if len(o.target.endpoints) > 0 {
			o.load.Prefix = externalDefaultPrefix
		}
	}
	o.load.Objects = o.objects
	o.load.PageSizes = nil
	for _, s := range o.pageSizes {
		if s == "none" {
			o.load.PageSizes = append(o.load.PageSizes, 0)
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			return cli.FlagErrorf("--page-sizes: %q is not a positive number or none", s)
		}
		o.load.PageSizes = append(o.load.PageSizes, n)
	}
	return flagErrors(o.flags, o.load.Validate())
}

// newListCommand returns `lwbench list`; runF replaces the run in flag
// tests.
func newListCommand(runF func(*cobra.Command, *listOptions) error) *cobra.Command {
	o := &listOptions{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Measure LIST cost by object count, page size and mode (full, keys-only, count-only, stream)",
		Long: `list grows one resource to each of --objects (objects encoded as
kube-apiserver stores them) and at each count lists it --repeats times per mode
and page size: full pages pinned to the first page's revision (client-go's pager
uses 500, the watch cache 10000), keys only, count only, and one RangeStream.`,
	}
	return newLoadCommand(cmd, o, &o.out, runF, runList)
}

func runList(ctx context.Context, o *listOptions, out, errOut io.Writer) error {
	if err := o.out.prepare(); err != nil {
		return err
	}
	con := newConsole(errOut)
	o.load.Logf = con.Logf
	target, done, err := o.target.openGuarded(ctx, o.load.Prefix, con.Logf)
	defer done()
	if err != nil {
		return err
	}
	res, err := watchload.List(ctx, target, o.load)
	if err != nil {
		return err
	}
	return o.out.write(out, errOut, o.out.table(makeListTextTable(res), makeListTable(res)), res, nil, report.ListBenchstat(res))
}
