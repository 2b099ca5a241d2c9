package command

import (
	"context"
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

// keysSchemaVersion versions the JSON of `keys -w json`.
const keysSchemaVersion = 2

type keysOptions struct {
	prefix    string
	resource  string
	namespace string

	live              liveOptions
	values            bool
	allowValueReads   bool
	maxKeysPerRequest int64
	member            string
	// method is live.ScanPages when --max-keys-per-request is given,
	// else "" (live.ScanMethodFor the servers).
	method live.ScanMethod
}

func (o *keysOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.prefix, "prefix", "", "list keys starting with this etcd key prefix (e.g. /registry/pods/default/); use --etcd-prefix to set the Kubernetes prefix")
	fs.StringVar(&o.resource, "resource", "", "list objects of one resource: pods, deployments.apps, crontabs.stable.example.com, or its etcd path (minions)")
	fs.StringVarP(&o.namespace, "namespace", "n", "", "with --resource: only this namespace")
	o.live.AddFlags(fs)
	fs.BoolVar(&o.values, "values", false, "with --endpoints: read the values too (Ranges with values) for the value and entry bytes, encoding and kind")
	fs.BoolVar(&o.allowValueReads, "allow-value-reads", false,
		"with --endpoints: read from etcd before 3.7, whose keys_only Ranges read every value from disk (etcd issue 20386)")
	fs.Int64Var(&o.maxKeysPerRequest, "max-keys-per-request", live.DefaultMaxKeysPerRequest, "with --endpoints: keys per Range page; given, etcd 3.7 is read in pages too instead of one RangeStream")
	fs.StringVar(&o.member, "member", "", memberFlagUsage)
}

func (o *keysOptions) Validate() error {
	switch {
	case o.prefix != "" && o.resource != "":
		return cli.FlagErrorf("--prefix and --resource cannot be used together")
	case o.namespace != "" && o.resource == "":
		return cli.FlagErrorf("--namespace needs --resource")
	case !o.live.enabled() && (o.values || o.allowValueReads || o.member != ""):
		return cli.FlagErrorf("--values, --allow-value-reads and --member need --endpoints")
	case o.maxKeysPerRequest <= 0:
		return cli.FlagErrorf("--max-keys-per-request must be positive")
	}
	return o.live.Validate()
}

func newKeysCommand(g *globalOptions) *cobra.Command {
	o := &keysOptions{}
	cmd := &cobra.Command{
		Use:   "keys FILE | --endpoints URLS",
		Short: "List live keys with their Kubernetes identity, revisions, lease and value encoding",
		Long: `keys lists the live keys (their latest entry is not a tombstone) with
their Kubernetes resource, namespace and name, create and mod revision,
version, lease, the value's encoding and kind, and two sizes.

With --endpoints it reads a running cluster instead, read-only, at one
revision: keys_only Ranges of the keys under --prefix (every key without
it), page by page, for the same rows without the sizes, encoding and kind;
--values reads the values too (what a full read of them costs). etcd
before 3.7 reads every value from disk to answer a keys_only Range (etcd
issue 20386): keys refuses such servers unless --allow-value-reads.

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
				return runLiveKeys(cmd, g, o, cmd.OutOrStdout())
			}
			return runKeys(cmd, g, o, args[0], cmd.OutOrStdout())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// keysResult is the JSON of `keys -w json`.
type keysResult struct {
	SchemaVersion int                `json:"schemaVersion"`
	Path          string             `json:"path"`
	Keys          []snapshot.KeyInfo `json:"keys"`
}

func runKeys(cmd *cobra.Command, g *globalOptions, o *keysOptions, path string, out io.Writer) error {
	db, done, err := g.open(cmd, path)
	if err != nil {
		return err
	}
	keys, err := db.Keys(cmd.Context(), g.parser(), snapshot.KeyFilter{Prefix: o.prefix, Resource: o.resource, Namespace: o.namespace})
	done()
	if err != nil {
		return err
	}
	res := keysResult{SchemaVersion: keysSchemaVersion, Path: db.Path(), Keys: keys}
	return g.writeTables(cmd.Context(), out, makeKeysTable(g, keys), makeKeysTablesByResource(g, keys), nil, res)
}

func makeKeysTable(g *globalOptions, keys []snapshot.KeyInfo) output.Table {
	t := output.Table{Header: []string{"key", "resource", "namespace", "name", "create rev", "mod rev", "version", "lease",
		g.sizeHeader("value", "value bytes"), g.sizeHeader("entry", "entry bytes"), "encoding", "kind"}}
	t.Numeric = numericFrom(t.Header, 4)
	t.Numeric[10], t.Numeric[11] = false, false
	for _, k := range keys {
		kind := strings.TrimPrefix(k.APIVersion+"/"+k.Kind, "/")
		if k.Encoding == keyspace.EncodingEncrypted {
			kind = fmt.Sprintf("%s:%s key %s", k.Encoding, k.EncryptionProvider, k.EncryptionKey)
		}
		res := snapshot.ResourceLabel(keyspace.Key{Class: k.Class, Group: k.Group, Resource: k.Resource})
		lease := "-"
		if k.Lease != 0 {
			lease = fmt.Sprintf("%x", k.Lease)
		}
		t.Rows = append(t.Rows, []string{k.Key, res, orDash(k.Namespace, "-"), k.Name, fmt.Sprint(k.CreateRevision),
			fmt.Sprint(k.ModRevision), fmt.Sprint(k.Version), lease, g.bytes(k.ValueBytes), g.bytes(k.EntryBytes), string(k.Encoding), orDash(kind, "-")})
	}
	return t
}

// makeKeysTablesByResource is the keys as a person reads them (table and
// markdown): one table per resource, in the order of the keys, headed by
// the resource and naming each object namespace/name (a cluster-scoped
// one by name, a key outside the Kubernetes prefix by the key itself),
// then its revisions, lease, sizes, encoding and kind. The key, group,
// resource and apiVersion, which the table's header and names already
// say, are in CSV and JSON (makeKeysTable); leaving them out keeps the
// tables within maxTableColumns for the names a cluster holds.
func makeKeysTablesByResource(g *globalOptions, keys []snapshot.KeyInfo) []output.Table {
	var tables []output.Table
	index := map[string]int{}
	for _, k := range keys {
		res := snapshot.ResourceLabel(keyspace.Key{Class: k.Class, Group: k.Group, Resource: k.Resource})
		i, ok := index[res]
		if !ok {
			t := output.Table{Header: []string{res, "create rev", "mod rev", "version", "lease", g.sizeHeader("value", "value bytes"),
				g.sizeHeader("entry", "entry bytes"), "encoding", "kind"}}
			t.Numeric = numericFrom(t.Header, 1)
			t.Numeric[7], t.Numeric[8] = false, false
			tables = append(tables, t)
			i = len(tables) - 1
			index[res] = i
		}
		name := k.Name
		switch {
		case k.Name == "" || k.Class == keyspace.ClassOutside || k.Class == keyspace.ClassUnrecognised:
			name = k.Key
		case k.Namespace != "":
			name = k.Namespace + "/" + k.Name
		}
		kind := k.Kind
		if k.Encoding == keyspace.EncodingEncrypted {
			kind = fmt.Sprintf("%s key %s", k.EncryptionProvider, k.EncryptionKey)
		}
		lease := "-"
		if k.Lease != 0 {
			lease = fmt.Sprintf("%x", k.Lease)
		}
		tables[i].Rows = append(tables[i].Rows, []string{name, fmt.Sprint(k.CreateRevision), fmt.Sprint(k.ModRevision),
			fmt.Sprint(k.Version), lease, g.bytes(k.ValueBytes), g.bytes(k.EntryBytes), string(k.Encoding), orDash(kind, "-")})
	}
	return tables
}

// liveKeyInfo is a key read live: snapshot.KeyInfo, whose value fields
// (shadowed here) are present only when values were read.
type liveKeyInfo struct {
	snapshot.KeyInfo
	ValueBytes *int64             `json:"valueBytes,omitempty"`
	EntryBytes *int64             `json:"entryBytes,omitempty"`
	Encoding   *keyspace.Encoding `json:"encoding,omitempty"`
	APIVersion *string            `json:"apiVersion,omitempty"`
	Kind       *string            `json:"kind,omitempty"`
}

// liveKeysResult is the JSON of `keys --endpoints -w json`: keysResult's
// shape, with source and the revision read at instead of a path.
type liveKeysResult struct {
	SchemaVersion  int      `json:"schemaVersion"`
	Source         string   `json:"source"`
	Endpoints      []string `json:"endpoints"`
	ReadAtRevision int64    `json:"readAtRevision"`
	Values         bool     `json:"values"`
	// Member is the member the keys were read from.
	Member liveMember `json:"member"`
	// Partial is true when SIGINT interrupted the scan: keys holds the
	// first keys, in key order, read until then.
	Partial bool          `json:"partial,omitempty"`
	Keys    []liveKeyInfo `json:"keys"`
}

func runLiveKeys(cmd *cobra.Command, g *globalOptions, o *keysOptions, out io.Writer) error {
	ctx := cmd.Context()
	c, versions, member, done, err := o.live.connectForKeys(ctx, o.allowValueReads, o.member)
	if err != nil {
		return err
	}
	defer done()
	prog, stopBar := startBar(cmd, "reading the keys of "+member.Name)
	ks, err := live.ReadKeys(ctx, c, live.KeysOptions{Parser: g.parser(), Filter: snapshot.KeyFilter{Prefix: o.prefix, Resource: o.resource,
		Namespace: o.namespace}, Values: o.values, AllowValueReads: o.allowValueReads, MaxKeysPerRequest: o.maxKeysPerRequest, Versions: versions, Method: o.method,
		Progress: prog, Partial: true})
	stopBar()
	if err != nil && (ks == nil || !ks.Partial) {
		return err
	}
	res := liveKeysResult{SchemaVersion: keysSchemaVersion, Source: live.SourceLive, Endpoints: o.live.conn.Endpoints,
		ReadAtRevision: ks.ReadAtRevision, Values: ks.Values, Member: readFrom(member, ks.MemberID), Partial: ks.Partial, Keys: []liveKeyInfo{}}
	for _, k := range ks.Keys {
		lk := liveKeyInfo{KeyInfo: k}
		if ks.Values {
			lk.ValueBytes, lk.EntryBytes, lk.Encoding, lk.APIVersion, lk.Kind = &k.ValueBytes, &k.EntryBytes, &k.Encoding, &k.APIVersion, &k.Kind
		}
		res.Keys = append(res.Keys, lk)
	}
	t, tables := makeKeysTable(g, ks.Keys), makeKeysTablesByResource(g, ks.Keys)
	if !ks.Values {
		// The last four columns of both: value and entry bytes,
		// encoding and kind.
		t = dropLastColumns(t, 4)
		for i := range tables {
			tables[i] = dropLastColumns(tables[i], 4)
		}
	}
	var notes []string
	if g.human() {
		notes = append(notes, fmt.Sprintf("Source: live, read at revision %d.", ks.ReadAtRevision), res.Member.note())
		if !ks.Values {
			notes = append(notes, "Sizes, encoding and kind are read only with --values.")
		}
	}
	if ks.Partial {
		return writePartial(ctx, g, out, fmt.Sprintf("the keys at revision %d", ks.ReadAtRevision), err, func(ctx context.Context) error {
			return g.writeTables(ctx, out, t, tables, notes, res)
		})
	}
	return g.writeTables(ctx, out, t, tables, notes, res)
}

// dropLastColumns returns t without its last n columns.
func dropLastColumns(t output.Table, n int) output.Table {
	keep := len(t.Header) - n
	out := output.Table{Header: t.Header[:keep]}
	if t.Numeric != nil {
		out.Numeric = t.Numeric[:keep]
	}
	for _, r := range t.Rows {
		out.Rows = append(out.Rows, r[:keep])
	}
	return out
}
