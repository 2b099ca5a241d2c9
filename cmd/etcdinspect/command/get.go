package command

import (
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/snapshot"
)

type getOptions struct {
	revision    int64
	output      string
	showSecrets bool
}

func (o *getOptions) AddFlags(fs *pflag.FlagSet) {
	fs.Int64Var(&o.revision, "revision", 0, "read the key as of this revision (0: latest); below the compact revision is an error")
	fs.StringVarP(&o.output, "output", "o", "yaml", "object format: yaml|json|raw (the stored bytes); -w instead prints the entry's fields")
	fs.BoolVar(&o.showSecrets, "show-secrets", false, "print Secrets' data instead of REDACTED (and allow -o raw for them)")
}

func (o *getOptions) Validate() error {
	switch o.output {
	case "yaml", "json", "raw":
	default:
		return cli.FlagErrorf("--output %q is not one of yaml|json|raw", o.output)
	}
	if o.revision < 0 {
		return cli.FlagErrorf("--revision must not be negative")
	}
	return nil
}

func newGetCommand(g *globalOptions) *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get FILE KEY",
		Short: "Print one object decoded as kube-apiserver serves it (resourceVersion from mod_revision)",
		Long: `get reads KEY at its latest revision (or at --revision) and prints the
object decoded with Kubernetes' own scheme for built-in types and as JSON (or
CBOR) for custom resources, with metadata.resourceVersion set from the key's
mod_revision as kube-apiserver does. Secret data is REDACTED unless
--show-secrets. A value encrypted at rest is reported with its provider and
key name. With -w table|markdown|csv|json the entry's fields are printed
instead (json includes the decoded object).`,
		Args: cli.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return runGet(cmd, g, o, args[0], args[1], cmd.OutOrStdout())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runGet(cmd *cobra.Command, g *globalOptions, o *getOptions, path, key string, out io.Writer) error {
	// -o raw prints the stored bytes: it never decodes them.
	var codec *keyspace.Codec
	if o.output != "raw" || cmd.Flags().Changed("write-out") {
		var err error
		if codec, err = keyspace.NewCodec(); err != nil {
			return err
		}
	}
	db, done, err := g.open(cmd, path)
	if err != nil {
		return err
	}
	obj, err := db.Get(cmd.Context(), key, snapshot.GetOptions{Revision: o.revision, Codec: codec, ShowSecrets: o.showSecrets, Parser: g.parser()})
	done()
	if err != nil {
		return err
	}
	if cmd.Flags().Changed("write-out") {
		return output.Write(out, g.format, makeGetTable(obj), obj)
	}
	if o.output == "raw" {
		if obj.Secret && !o.showSecrets {
			return fmt.Errorf("%s: %q is a Secret: its raw value is printed only with --show-secrets", obj.Path, key)
		}
		_, err := out.Write(obj.Value)
		return err
	}
	var doc any = obj.Object
	switch {
	case obj.Object != nil:
	case !obj.Encrypted && (obj.Encoding == keyspace.EncodingOther || obj.Encoding == keyspace.EncodingEmpty) && utf8.Valid(obj.Value):
		// Plain text, such as compact_rev_key's decimal revision.
		doc = map[string]any{"key": key, "modRevision": obj.ModRevision, "value": string(obj.Value)}
	default:
		if !obj.Encrypted {
			return fmt.Errorf("%s: %q: cannot decode its %s value: %s (-o raw prints the stored bytes)", obj.Path, key, obj.Encoding, obj.DecodeError)
		}
		doc = map[string]any{"key": key, "encrypted": true, "encryptionProvider": obj.EncryptionProvider,
			"encryptionVersion": obj.EncryptionVersion, "encryptionKey": obj.EncryptionKey,
			"modRevision": obj.ModRevision, "valueBytes": obj.ValueBytes}
	}
	var b []byte
	if o.output == "json" {
		b, err = json.MarshalIndent(doc, "", "  ")
		b = append(b, '\n')
	} else {
		b, err = yaml.Marshal(doc)
	}
	if err != nil {
		return fmt.Errorf("%s: %q: print as %s: %w", obj.Path, key, o.output, err)
	}
	_, err = out.Write(b)
	return err
}

func makeGetTable(o *snapshot.Object) output.Table {
	rows := [][]string{
		{"key", o.Key},
		{"mod revision", fmt.Sprint(o.ModRevision)},
		{"create revision", fmt.Sprint(o.CreateRevision)},
		{"version", fmt.Sprint(o.Version)},
		{"lease", fmt.Sprintf("%x", o.Lease)},
		{"value bytes", fmt.Sprint(o.ValueBytes)},
		{"resource version", o.ResourceVersion},
		{"encoding", string(o.Encoding)},
		{"api version", orDash(o.APIVersion, "-")},
		{"kind", orDash(o.Kind, "-")},
		{"encrypted", fmt.Sprint(o.Encrypted)},
	}
	if o.Encrypted {
		rows = append(rows, []string{"encryption", fmt.Sprintf("%s %s key %s", o.EncryptionProvider, o.EncryptionVersion, o.EncryptionKey)})
	}
	if o.DecodeError != "" {
		rows = append(rows, []string{"decode error", o.DecodeError})
	}
	rows = append(rows, []string{"redacted", fmt.Sprint(o.Redacted)},
		[]string{"current revision", fmt.Sprint(o.CurrentRevision)}, []string{"compact revision", fmt.Sprint(o.CompactRevision)})
	return output.Table{Header: []string{"field", "value"}, Rows: rows}
}
