package command

import (
	"errors"
	"regexp"
	"strings"
	"unicode"

	"github.com/spf13/pflag"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubestore/etcdkit/internal/cli"
)

// fieldFlags maps the field paths that the options' Validate methods
// report (pkg/watchload, pkg/experiment; list indexes removed) to the
// flags that set them, where the flag is not the path in kebab case
// (writeRate: --write-rate, eventTTL: --event-ttl). One table serves
// every command: a setting has one flag name across lwbench (see
// flagAliases for the old names).
var fieldFlags = map[string][]string{
	"connections":       {"conns"},
	"writerConnections": {"writer-conns"},
	"configMaps":        {"configmaps"},
	"mix":               {"create-percent", "update-percent", "delete-percent"},
	"faults.kind":       {"fault"},
	"faults.at":         {"fault-at"},
	"faults.duration":   {"fault-duration"},
	"concurrency":       {"writer-concurrency"}, // catchup's and defrag-stall's writers
}

// listIndex matches a list index in a field path: objects[1].
var listIndex = regexp.MustCompile(`\[[0-9]+\]`)

// flagsOf returns the flags of fs that set the field at path, or nil if
// none does (a field no flag of the command sets).
func flagsOf(fs *pflag.FlagSet, path string) []string {
	p := listIndex.ReplaceAllString(path, "")
	names, ok := fieldFlags[p]
	if !ok {
		names = []string{kebab(p)}
	}
	for _, n := range names {
		if fs.Lookup(n) == nil {
			return nil
		}
	}
	return names
}

// kebab turns a field path into a flag name: writeRate -> write-rate,
// eventTTL -> event-ttl, probe.rate -> probe-rate.
func kebab(path string) string {
	var b strings.Builder
	rs := []rune(path)
	for i, r := range rs {
		switch {
		case r == '.':
			b.WriteByte('-')
		case unicode.IsUpper(r):
			// A word starts at an upper-case letter after a lower-case
			// one, or before a lower-case one inside an acronym.
			if i > 0 && (unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1]))) {
				b.WriteByte('-')
			}
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// flagErrors turns an error of an options' Validate into a usage error
// (exit code 2) that names each field by its flag in fs:
// "--write-rate: Invalid value: NaN: must be finite and positive", the
// errors of several fields joined by "; ". A field no flag sets keeps its
// path; an error that carries no field errors is returned as a usage
// error unchanged.
func flagErrors(fs *pflag.FlagSet, err error) error {
	if err == nil {
		return nil
	}
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) {
		return &cli.FlagError{Err: err}
	}
	var msgs []string
	for _, e := range agg.Errors() {
		var fe *field.Error
		if !errors.As(e, &fe) {
			msgs = append(msgs, e.Error())
			continue
		}
		name := fe.Field
		if flags := flagsOf(fs, fe.Field); flags != nil {
			name = "--" + strings.Join(flags, ", --")
		}
		msgs = append(msgs, name+": "+fe.ErrorBody())
	}
	return &cli.FlagError{Err: &fieldFlagError{msg: strings.Join(msgs, "; "), err: err}}
}

// fieldFlagError is the message of flagErrors over the field errors it
// was made from (errors.As finds them).
type fieldFlagError struct {
	msg string
	err error
}

func (e *fieldFlagError) Error() string { return e.msg }
func (e *fieldFlagError) Unwrap() error { return e.err }

// deprecatedAlias adds alias to fs as a hidden, deprecated second name of
// the flag name: both set the same value, and using alias prints pflag's
// "Flag --alias has been deprecated, use --name instead" on stderr. The
// names lwbench's commands used before one name per setting (put --rate,
// watch --put-rate: --write-rate) stay accepted this way.
func deprecatedAlias(fs *pflag.FlagSet, alias, name string) {
	f := fs.Lookup(name)
	fs.Var(f.Value, alias, f.Usage)
	if err := fs.MarkDeprecated(alias, "use --"+name+" instead"); err != nil {
		panic(err) // alias was just defined
	}
}
