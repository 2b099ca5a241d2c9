// Package command holds etcdinspect's cobra commands, one file each.
package command

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/internal/progress"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// progressMinBytes is the file size from which a scan draws a progress bar
// (on a terminal only).
const progressMinBytes = 64 << 20

// globalOptions are the flags every subcommand shares.
type globalOptions struct {
	format      output.Format
	formatValue *output.FormatValue
	prefixes    []string
	lockTimeout time.Duration
	workers     int
	memStats    bool

	heap *progress.HeapSampler
}

func (o *globalOptions) AddFlags(fs *pflag.FlagSet) {
	o.formatValue = output.NewFormatValue(&o.format, output.FormatTable)
	fs.VarP(o.formatValue, "write-out", "w", "output format: "+o.formatValue.Names())
	usage := "Kubernetes etcd prefix (kube-apiserver --etcd-prefix); repeatable; default: detect " + strings.Join(keyspace.KnownPrefixes, ", ")
	fs.StringSliceVar(&o.prefixes, "prefix", nil, usage)
	fs.StringSliceVar(&o.prefixes, "etcd-prefix", nil, "same as --prefix (on keys, --prefix filters keys instead)")
	fs.DurationVar(&o.lockTimeout, "lock-timeout", 2*time.Second,
		"how long to wait for a file held by a running etcd member before giving up")
	fs.IntVar(&o.workers, "workers", 0, "goroutines scanning the key bucket (0: one per CPU)")
	fs.BoolVar(&o.memStats, "mem-stats", false, "print the peak Go heap and allocations as JSON on stderr at exit")
	_ = fs.MarkHidden("mem-stats")
}

func (o *globalOptions) Validate() error {
	for _, p := range o.prefixes {
		if !strings.HasPrefix(p, "/") || strings.TrimRight(p, "/") == "" {
			return cli.FlagErrorf("--prefix %q must start with '/' and name a path", p)
		}
	}
	if o.lockTimeout <= 0 {
		return cli.FlagErrorf("--lock-timeout must be positive")
	}
	if o.workers < 0 {
		return cli.FlagErrorf("--workers must not be negative")
	}
	return nil
}

func (o *globalOptions) parser() keyspace.Parser {
	prefixes := make([]string, len(o.prefixes))
	for i, p := range o.prefixes {
		prefixes[i] = strings.TrimRight(p, "/")
	}
	return keyspace.Parser{Prefixes: prefixes}
}

// open opens path read-only; see openAll.
func (o *globalOptions) open(cmd *cobra.Command, path string) (*snapshot.DB, func(), error) {
	dbs, done, err := o.openAll(cmd, path)
	if err != nil {
		return nil, nil, err
	}
	return dbs[0], done, nil
}

// openAll opens every path read-only. When stderr is a terminal and the
// files together are large, their scans advance one progress bar there
// until the returned close runs; close also closes the files.
func (o *globalOptions) openAll(cmd *cobra.Command, paths ...string) ([]*snapshot.DB, func(), error) {
	var prog *snapshot.Progress
	if progress.IsTerminal(cmd.ErrOrStderr()) {
		prog = &snapshot.Progress{}
	}
	var dbs []*snapshot.DB
	closeAll := func() {
		for _, db := range dbs {
			db.Close()
		}
	}
	var size int64
	for _, p := range paths {
		db, err := snapshot.OpenContext(cmd.Context(), p, snapshot.Options{LockTimeout: o.lockTimeout, Workers: o.workers, Progress: prog})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		dbs = append(dbs, db)
		size += db.SizeBytes()
	}
	var bar *progress.Bar
	if prog != nil && size >= progressMinBytes {
		bar = progress.Start(cmd.ErrOrStderr(), "scanning "+strings.Join(paths, " "), prog.Load)
	}
	return dbs, func() {
		if bar != nil {
			bar.Stop()
		}
		closeAll()
	}, nil
}

// NewRootCommand returns a fresh etcdinspect command tree.
func NewRootCommand() *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:   "etcdinspect",
		Short: "Inspect etcd database files and snapshots offline, read-only, in Kubernetes terms",
		Long: `etcdinspect reads an etcd database (a member's member/snap/db, a data
directory, or a file written by 'etcdctl snapshot save') without starting etcd
and without modifying the file, maps every key onto Kubernetes' key space and
explains where the bytes go: live objects, history not yet compacted,
tombstones and free pages.`,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if err := g.Validate(); err != nil {
				return err
			}
			if g.memStats {
				g.heap = progress.SampleHeap()
			}
			return nil
		},
		PersistentPostRun: func(cmd *cobra.Command, _ []string) {
			if g.heap != nil {
				b, _ := json.Marshal(g.heap.Stop())
				fmt.Fprintf(cmd.ErrOrStderr(), "%s\n", b)
				g.heap = nil
			}
		},
	}
	cli.PrepareRoot(root)
	g.AddFlags(root.PersistentFlags())
	root.RegisterFlagCompletionFunc("write-out", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return g.formatValue.Allowed(), cobra.ShellCompDirectiveNoFileComp
	})
	root.AddCommand(newStatusCommand(g), newUsageCommand(g), newKeysCommand(g), newGetCommand(g),
		newHistoryCommand(g), newCompactionCommand(g), newLeasesCommand(g), newMetaCommand(g), newDiffCommand(g),
		newWALCommand(g), newSpaceCommand(g), newMembersCommand(g), newVerifyCommand(g), newVersionCommand(g),
		newExporterCommand(g))
	return root
}

// numericFrom marks every column from i on as numeric.
func numericFrom(header []string, i int) []bool {
	n := make([]bool, len(header))
	for j := i; j < len(n); j++ {
		n[j] = true
	}
	return n
}
