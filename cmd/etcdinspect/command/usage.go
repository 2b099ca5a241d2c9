package command

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/live"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// usageSchemaVersion versions the JSON of `usage -w json`.
const usageSchemaVersion = 2

type usageOptions struct {
	by  string
	top int

	live              liveOptions
	values            bool
	allowValueReads   bool
	maxKeysPerRequest int64
	member            string
	// method is live.ScanPages when --max-keys-per-request is given,
	// else "" (live.ScanMethodFor the servers).
	method  live.ScanMethod
	history string
}

func (o *usageOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.by, "by", string(snapshot.ByResource), "group rows by resource|namespace|group")
	fs.IntVar(&o.top, "top", 0, "show only the N largest rows (0: all); the total still counts every key")
	o.live.AddFlags(fs)
	fs.BoolVar(&o.values, "values", false, "with --endpoints: read the values too (a full Range of values) for the value and entry bytes")
	fs.BoolVar(&o.allowValueReads, "allow-value-reads", false,
		"with --endpoints: read from etcd before 3.7, whose keys_only Ranges read every value from disk (etcd issue 20386)")
	fs.Int64Var(&o.maxKeysPerRequest, "max-keys-per-request", live.DefaultMaxKeysPerRequest, "with --endpoints: keys per Range page; given, etcd 3.7 is read in pages too instead of one RangeStream")
	fs.StringVar(&o.member, "member", "", memberFlagUsage)
	fs.StringVar(&o.history, "history", string(live.HistoryEstimate),
		"with --endpoints: history bytes by estimate (revisions kept less one times the current entry bytes, with --values) "+
			"or exact (read the entries kept at the compact revision and replay a watch from it: a read of every revision since)")
}

func (o *usageOptions) Validate() error {
	if err := validateBy(o.by); err != nil {
		return err
	}
	if o.top < 0 {
		return cli.FlagErrorf("--top must not be negative")
	}
	if !o.live.enabled() && (o.values || o.allowValueReads) {
		return cli.FlagErrorf("--values and --allow-value-reads need --endpoints")
	}
	if o.maxKeysPerRequest <= 0 {
		return cli.FlagErrorf("--max-keys-per-request must be positive")
	}
	switch live.HistoryMethod(o.history) {
	case live.HistoryEstimate, live.HistoryExact:
	default:
		return cli.FlagErrorf("--history %q is not one of estimate|exact", o.history)
	}
	if !o.live.enabled() && (o.member != "" || o.history != string(live.HistoryEstimate)) {
		return cli.FlagErrorf("--member and --history need --endpoints (offline, usage counts history exactly from the file)")
	}
	return o.live.Validate()
}

// validateBy checks a --by flag value.
func validateBy(by string) error {
	switch snapshot.Dimension(by) {
	case snapshot.ByResource, snapshot.ByNamespace, snapshot.ByGroup:
		return nil
	}
	return cli.FlagErrorf("--by %q is not one of resource|namespace|group", by)
}

func newUsageCommand(g *globalOptions) *cobra.Command {
	o := &usageOptions{}
	cmd := &cobra.Command{
		Use:   "usage FILE | --endpoints URLS",
		Short: "Break the key bucket down by Kubernetes resource or namespace: objects, live bytes, history, tombstones",
		Long: `usage scans the key bucket once and sums, per Kubernetes resource (or
namespace, or API group), the live objects, their bytes, the revisions not
yet compacted and the tombstones. Keys outside the Kubernetes prefix,
compact_rev_key and keys of no known shape get rows of their own, labelled
alike in every --by.

With --endpoints it reads a running cluster instead, read-only, at one
revision: every key with keys_only Ranges (objects, and revisions kept per
key: its version now minus its version at the compact revision, plus the
entry kept there; keys deleted since make it a lower bound), and with
--values the values too (live value and entry bytes, and history bytes
estimated as revisions kept less one times the current entry bytes,
labelled estimate). --history exact counts history bytes, revisions and
tombstones exactly: it reads the entries kept at the compact revision and
replays a watch from there to the revision read, which costs the member
a read of every revision since the compaction. The keys are read from one
member, --member (name, ID or URL), by default a follower. etcd before 3.7
reads every value from disk to answer a keys_only Range (etcd issue
20386): usage refuses such servers unless --allow-value-reads. SIGINT
during the scan prints what was read, marked partial, and exits 130.

` + bytesHelp,
		Args: o.live.args,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if o.live.enabled() {
				if cmd.Flags().Changed("max-keys-per-request") {
					o.method = live.ScanPages
				}
				return runLiveUsage(cmd, g, o, cmd.OutOrStdout())
			}
			return runUsage(cmd, g, o, args[0], cmd.OutOrStdout())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// usageResult is the JSON of `usage -w json`.
type usageResult struct {
	SchemaVersion int                 `json:"schemaVersion"`
	Path          string              `json:"path"`
	By            snapshot.Dimension  `json:"by"`
	Prefixes      []string            `json:"prefixes"`
	Rows          []snapshot.UsageRow `json:"rows"`
	// Others sums the rows --top left out, so that rows, others and total
	// reconcile; absent without --top.
	Others *snapshot.UsageRow `json:"others,omitempty"`
	Total  snapshot.UsageRow  `json:"total"`
}

func runUsage(cmd *cobra.Command, g *globalOptions, o *usageOptions, path string, out io.Writer) error {
	db, done, err := g.open(cmd, path)
	if err != nil {
		return err
	}
	u, err := db.Usage(cmd.Context(), g.parser())
	done()
	if err != nil {
		return err
	}
	if bad := u.PrefixesWithoutResources(); len(g.prefixes) > 0 && len(bad) > 0 {
		return notAPrefix(bad[0])
	}
	dim := snapshot.Dimension(o.by)
	rows, others := topRows(u.By(dim), o.top)
	res := usageResult{SchemaVersion: usageSchemaVersion, Path: db.Path(), By: dim, Prefixes: u.Prefixes, Rows: rows, Others: others, Total: u.Total}
	t, notes := makeUsageTable(g, dim, u.Prefixes, rows, others, u.Total)
	return g.write(cmd.Context(), out, t, notes, res)
}

// topRows keeps the top rows and sums the others, nil when none are
// left out.
func topRows(rows []snapshot.UsageRow, top int) ([]snapshot.UsageRow, *snapshot.UsageRow) {
	if top <= 0 || len(rows) <= top {
		return rows, nil
	}
	others := &snapshot.UsageRow{}
	for _, r := range rows[top:] {
		others.Objects += r.Objects
		others.LiveEntryBytes += r.LiveEntryBytes
		others.LiveValueBytes += r.LiveValueBytes
		others.Revisions += r.Revisions
		others.HistoryEntryBytes += r.HistoryEntryBytes
		others.Tombstones += r.Tombstones
	}
	return rows[:top], others
}

// notAPrefix is the usage error for a --prefix that holds keys but no
// resource directory: usage would count its namespaces (or names) as
// resources. When it is a resource's directory below a prefix
// (/registry/pods), the error names the prefix to give instead.
func notAPrefix(prefix string) error {
	hint := "give kube-apiserver's --etcd-prefix (default /registry), or leave --prefix out to detect it"
	for i := strings.LastIndex(prefix, "/"); i > 0; i = strings.LastIndex(prefix[:i], "/") {
		if keyspace.IsResourcePath(prefix[i+1:]) {
			hint = fmt.Sprintf("it is the directory of %s under %s: give --prefix %s (keys --prefix %s/ lists its keys)",
				prefix[i+1:], prefix[:i], prefix[:i], prefix)
			break
		}
	}
	return cli.FlagErrorf("--prefix %q is not an etcd prefix of the Kubernetes key space: it holds keys but no resource directory "+
		"(pods, namespaces, <group>/<resource>, ...), so usage would count its namespaces as resources; %s", prefix, hint)
}

// makeUsageTable lays usage rows out with a total row last. For a person
// (table, markdown) with one prefix, rows by resource carry the resource
// alone and the etcd paths that are not the resource's name (nodes in
// minions) go below as notes; CSV, or several prefixes, keep the etcd
// path column.
func makeUsageTable(g *globalOptions, dim snapshot.Dimension, prefixes []string, rows []snapshot.UsageRow, others *snapshot.UsageRow,
	total snapshot.UsageRow) (output.Table, []string) {
	var t output.Table
	human := g.human()
	pathColumn := !human || len(prefixes) != 1
	switch {
	case dim == snapshot.ByNamespace:
		t.Header = []string{"namespace"}
	case dim == snapshot.ByGroup:
		t.Header = []string{"group"}
	case pathColumn:
		t.Header = []string{"resource", "etcd path"}
	default:
		t.Header = []string{"resource"}
	}
	nLabels := len(t.Header)
	t.Header = append(t.Header, "objects", g.sizeHeader("live", "live entry bytes"), g.sizeHeader("values", "live value bytes"),
		"revisions", g.sizeHeader("history", "history entry bytes"), "tombstones")
	t.Numeric = numericFrom(t.Header, nLabels)
	var renamed []string
	for _, r := range rows {
		var labels []string
		switch dim {
		case snapshot.ByNamespace:
			labels = []string{namespaceLabel(r.Class, r.Namespace)}
		case snapshot.ByGroup:
			labels = []string{groupLabel(r)}
		default:
			labels = resourceLabels(r)
			if !pathColumn {
				labels, renamed = oneLabel(r, labels, renamed)
			}
		}
		t.Rows = append(t.Rows, append(labels, numbers(g, r)...))
	}
	if others != nil {
		otherLabels := make([]string, nLabels)
		otherLabels[0] = "(other rows)"
		t.Rows = append(t.Rows, append(otherLabels, numbers(g, *others)...))
	}
	totalLabels := make([]string, nLabels)
	totalLabels[0] = "TOTAL"
	t.Rows = append(t.Rows, append(totalLabels, numbers(g, total)...))
	if !human {
		return t, nil
	}
	notes := []string{"live: the live keys' entry bytes (revision key and KeyValue); values: their values alone; " +
		"history: the entry bytes of older revisions and tombstones, what a compaction may remove."}
	if !pathColumn && dim != snapshot.ByNamespace && dim != snapshot.ByGroup {
		notes = append(notes, "Prefix: "+prefixes[0]+".")
		if len(renamed) > 0 {
			notes = append(notes, "Stored under another name: "+strings.Join(renamed, ", ")+".")
		}
	}
	return t, notes
}

// oneLabel folds a row's resource and etcd path labels into one: the
// resource, with the path for rows that are not objects of a resource
// (outside the prefix, unrecognised). A resource stored under another
// name than its own (nodes in minions) is added to renamed.
func oneLabel(r snapshot.UsageRow, labels, renamed []string) ([]string, []string) {
	switch {
	case !r.Class.IsObject() && r.Class != keyspace.ClassMasterLease && r.Class != keyspace.ClassRangeAllocation:
		if labels[1] != "-" && labels[1] != keyspace.CompactRevKey {
			return []string{labels[0] + " " + labels[1]}, renamed
		}
	case r.Path != r.Resource && r.Path != r.Group+"/"+r.Resource:
		renamed = append(renamed, labels[0]+" in "+labels[1])
	}
	return labels[:1], renamed
}

func numbers(g *globalOptions, r snapshot.UsageRow) []string {
	return []string{fmt.Sprint(r.Objects), g.bytes(r.LiveEntryBytes), g.bytes(r.LiveValueBytes), fmt.Sprint(r.Revisions),
		g.bytes(r.HistoryEntryBytes), fmt.Sprint(r.Tombstones)}
}

// bytesHelp explains the two byte figures the commands report.
const bytesHelp = `Entry bytes are what the file holds per revision: the 17-byte revision
key plus the marshalled mvccpb.KeyValue (key, value, create and mod
revision, version, lease). Value bytes are the value alone: the object as
kube-apiserver stores it and serves it (its protobuf or JSON, or the
ciphertext when encrypted at rest). Neither counts bbolt's page overhead.`

func orDash(s, dash string) string {
	if s == "" {
		return dash
	}
	return s
}

// resourceLabels names a row by kubectl's resource.group spelling and the
// etcd path under its prefix; keys that are not objects get their class.
func resourceLabels(r snapshot.UsageRow) []string {
	return labels(r.Class, r.Prefix, r.Group, r.Resource, r.Path)
}

func labels(class keyspace.Class, prefix, group, resource, path string) []string {
	k := keyspace.Key{Class: class, Group: group, Resource: resource}
	switch class {
	case keyspace.ClassObject, keyspace.ClassMasterLease, keyspace.ClassRangeAllocation:
		return []string{k.GroupResource(), prefix + "/" + path}
	case keyspace.ClassCompactRevKey:
		return []string{snapshot.ResourceLabel(k), keyspace.CompactRevKey}
	case keyspace.ClassUnrecognised:
		return []string{snapshot.ResourceLabel(k), prefix + "/" + path}
	}
	return []string{snapshot.ResourceLabel(k), "-"}
}

// groupLabel names a group row: "(core)" for the core group; keys that
// are not objects get their class as rows by resource do.
func groupLabel(r snapshot.UsageRow) string {
	if r.Class.IsObject() {
		return orDash(r.Group, "(core)")
	}
	return snapshot.ResourceLabel(keyspace.Key{Class: r.Class})
}

// namespaceLabel names a namespace row: "(cluster-scoped)" for objects
// without one; keys that are not objects get their class as rows by
// resource do.
func namespaceLabel(class keyspace.Class, ns string) string {
	if class.IsObject() {
		return orDash(ns, "(cluster-scoped)")
	}
	return snapshot.ResourceLabel(keyspace.Key{Class: class})
}
