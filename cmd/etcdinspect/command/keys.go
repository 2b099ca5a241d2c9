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
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

// keysSchemaVersion versions the JSON of `keys -w json`.
const keysSchemaVersion = 2

type keysOptions struct {
	prefix    string
	resource  string
	namespace string
}

func (o *keysOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.prefix, "prefix", "", "list keys starting with this etcd key prefix (e.g. /registry/pods/default/); use --etcd-prefix to set the Kubernetes prefix")
	fs.StringVar(&o.resource, "resource", "", "list objects of one resource: pods, deployments.apps, crontabs.stable.example.com, or its etcd path (minions)")
	fs.StringVarP(&o.namespace, "namespace", "n", "", "with --resource: only this namespace")
}

func (o *keysOptions) Validate() error {
	switch {
	case o.prefix != "" && o.resource != "":
		return cli.FlagErrorf("--prefix and --resource cannot be used together")
	case o.namespace != "" && o.resource == "":
		return cli.FlagErrorf("--namespace needs --resource")
	}
	return nil
}

func newKeysCommand(g *globalOptions) *cobra.Command {
	o := &keysOptions{}
	cmd := &cobra.Command{
		Use:   "keys FILE",
		Short: "List live keys with their Kubernetes identity, revisions, lease and value encoding",
		Long: `keys lists the live keys (their latest entry is not a tombstone) with
their Kubernetes resource, namespace and name, create and mod revision,
version, lease, the value's encoding and kind, and two sizes.

` + bytesHelp,
		Args: cli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
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
