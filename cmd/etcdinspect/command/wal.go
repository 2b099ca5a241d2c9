package command

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/output"
	"github.com/kubestore/etcdkit/pkg/snapshot"
	"github.com/kubestore/etcdkit/pkg/wal"
)

type walOptions struct {
	by                           string
	top                          int
	maxRecordBytes, maxSnapBytes int64
}

func (o *walOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.by, "by", string(snapshot.ByResource), "group the writes by resource|namespace|group")
	fs.IntVar(&o.top, "top", 10, "show the N most written keys (0: all, as usage's --top)")
	fs.Var(newByteSize(&o.maxRecordBytes, wal.DefaultMaxRecordBytes), "max-record-bytes",
		"largest WAL record to decode: bytes, or with a unit (32MiB); raise it for a member run with --max-request-bytes above 10 MiB")
	fs.Var(newByteSize(&o.maxSnapBytes, wal.DefaultMaxSnapBytes), "max-snap-bytes",
		"largest .snap file to read: bytes, or with a unit (1GiB)")
}

// maxLimitBytes bounds --max-record-bytes and --max-snap-bytes: what one
// record or one .snap file may cost in memory.
const maxLimitBytes = 1 << 40

func (o *walOptions) Validate() error {
	if err := validateBy(o.by); err != nil {
		return err
	}
	if o.top < 0 {
		return cli.FlagErrorf("--top must not be negative")
	}
	for _, f := range []struct {
		name string
		n    int64
	}{{"--max-record-bytes", o.maxRecordBytes}, {"--max-snap-bytes", o.maxSnapBytes}} {
		if f.n <= 0 || f.n > maxLimitBytes {
			return cli.FlagErrorf("%s must be more than 0 and at most 1 TiB, got %d bytes", f.name, f.n)
		}
	}
	return nil
}

func newWALCommand(g *globalOptions) *cobra.Command {
	o := &walOptions{}
	cmd := &cobra.Command{
		Use:   "wal DIR",
		Short: "Decode a member's WAL and snap files: who writes what, by Kubernetes resource; term, commit, damage",
		Long: `wal reads the write-ahead log of an etcd member (DIR is a data directory,
its member directory, member/wal or member/snap) read-only, without
repairing or truncating anything, and maps every request onto Kubernetes'
key space:

  - term, vote and commit index (the last HardState), the first and last
    entry index, the last snapshot index, the segments and .snap files;
  - entries per request kind (put, txn, deleteRange, compaction,
    leaseGrant, auth..., confChange, empty: a new leader's no-op);
  - requested writes per resource, namespace or group (--by): a WAL holds
    requests; a write requested is a put or a delete, of a Put or
    DeleteRange request or of a Txn's success branch (kube-apiserver
    writes in the success branch). "key+value bytes" are the key and
    value bytes the requests carry; "value bytes" the values alone (the
    objects as kube-apiserver stores them);
  - applied writes per resource, namespace or group, beside them: which
    writes changed the store, and which failed (a compare that chose the
    other branch, such as a kube-apiserver delete with a stale
    mod_revision, a request etcd refused, a delete of no key). The WAL
    does not record outcomes: they are decided by replaying the requests
    from entry 1 on an empty store, as etcd applies them, and checking
    the revision reached at the db's consistent index against the db
    (member/snap/db). Where that is not possible (a WAL whose first
    segments were purged, a restored member, a missing entry, a value
    compare, auth or an alarm), the rest is "not decided", with the
    reason;
  - the most written keys, compactions and their revisions, lease grants
    and revokes, member changes, writes over index ranges;
  - faults: torn tails, crc mismatches, undecodable frames, missing
    segments and index gaps, each with its file and byte offset. Reading
    goes on past a bad record where the framing allows.

Files are opened read-only and without blocking; a segment or .snap that
is not a regular file (a FIFO, a directory, a device), cannot be read, or
is too large is a fault, and a symbolic link to a regular file is followed
and named. Memory is bounded by one record (--max-record-bytes, decoded
into a few copies) or one .snap file (--max-snap-bytes) at a time, and
64 MiB of entries awaiting a commit (those read past it are counted as
"notCounted", a fault), plus what is counted: the distinct keys, the
faults.

It exits 1 after printing when it finds faults, naming each on stderr, and
130 when interrupted (SIGINT, SIGTERM), even after printing.`,
		Args: cli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return runWAL(cmd, g, o, args[0], cmd.OutOrStdout())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runWAL(cmd *cobra.Command, g *globalOptions, o *walOptions, path string, out io.Writer) error {
	top := o.top
	if top == 0 {
		top = math.MaxInt
	}
	ctx := cmd.Context()
	rep, err := wal.Read(ctx, path, wal.Options{Parser: g.parser(), TopKeys: top,
		MaxRecordBytes: o.maxRecordBytes, MaxSnapBytes: o.maxSnapBytes})
	if err != nil {
		return err
	}
	// A signal that lands after the reading still ends the command as
	// interrupted (exit 130): no report, or one the caller must not trust
	// to be whole.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("before printing the report: %w", err)
	}
	dim := snapshot.Dimension(o.by)
	tables, notes := makeWALTables(g, rep, dim)
	if err := g.writeTables(ctx, out, makeWALTable(rep, dim), tables, notes, rep); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("while printing the report: %w", err)
	}
	if len(rep.Faults) > 0 {
		tooLarge := false
		for _, f := range rep.Faults {
			fmt.Fprintf(cmd.ErrOrStderr(), "fault: %s\n", f.Error())
			tooLarge = tooLarge || f.Kind == wal.FaultTooLarge
		}
		if tooLarge {
			fmt.Fprintf(cmd.ErrOrStderr(), "hint: --max-record-bytes (now %d) and --max-snap-bytes (now %d) raise the limits\n", o.maxRecordBytes, o.maxSnapBytes)
		}
		return fmt.Errorf("%s: %d faults in the WAL", rep.WALDir, len(rep.Faults))
	}
	return nil
}

// makeWALTable lays the report out as one table of section/name rows
// with a count, a byte figure (in bytes) and a detail column: the CSV, for
// a program. A person reads makeWALTables.
func makeWALTable(r *wal.Report, dim snapshot.Dimension) output.Table {
	t := output.Table{Header: []string{"section", "name", "count", "bytes", "detail"}}
	t.Numeric = []bool{false, false, true, true, false}
	add := func(section, name string, count, bytes any, detail string) {
		c, b := "", ""
		if count != nil {
			c = fmt.Sprint(count)
		}
		if bytes != nil {
			b = fmt.Sprint(bytes)
		}
		t.Rows = append(t.Rows, []string{section, name, c, b, detail})
	}
	add("member", "node ID", nil, nil, orDash(r.NodeID, "-"))
	add("member", "cluster ID", nil, nil, orDash(r.ClusterID, "-"))
	add("state", "term", r.HardState.Term, nil, "")
	add("state", "vote", nil, nil, r.HardState.Vote)
	add("state", "commit index", r.HardState.Commit, nil, "")
	add("log", "first index", r.FirstIndex, nil, "")
	add("log", "last index", r.LastIndex, nil, fmt.Sprintf("term %d", r.LastTerm))
	add("log", "entries", r.Entries, nil, fmt.Sprintf("%d uncommitted, %d overwritten", r.UncommittedEntries, r.OverwrittenEntries))
	if s := r.LastSnapshot; s != nil {
		add("log", "last snapshot", s.Index, nil, fmt.Sprintf("term %d", s.Term))
	}
	for _, s := range r.Segments {
		detail := fmt.Sprintf("records; entries %d-%d; file %d bytes", s.FirstEntry, s.LastEntry, s.SizeBytes)
		if s.Link != "" {
			detail += "; symbolic link to " + s.Link
		}
		add("segment", s.Name, s.Records, s.UsedBytes, detail)
	}
	for _, s := range r.SnapFiles {
		detail := fmt.Sprintf("index %d term %d voters %s", s.Index, s.Term, orDash(strings.Join(s.Voters, ","), "-"))
		if !s.OK {
			detail = "not valid: see faults"
		}
		if s.Link != "" {
			detail += "; symbolic link to " + s.Link
		}
		add("snap file", s.Name, nil, s.SizeBytes, detail)
	}
	for _, k := range r.Kinds {
		add("kind", k.Kind, k.Entries, k.EntryBytes, "entries; entry data bytes")
	}
	rows, tot := r.By(dim), r.Total
	for _, w := range rows {
		add("requested writes by "+string(dim), writeLabel(w, dim), w.RequestedWrites, w.KeyValueBytes,
			fmt.Sprintf("keys %d puts %d deletes %d value bytes %d", w.Keys, w.RequestedPuts, w.RequestedDeletes, w.ValueBytes))
	}
	add("requested writes", "TOTAL", tot.RequestedWrites, tot.KeyValueBytes,
		fmt.Sprintf("keys %d puts %d deletes %d value bytes %d", tot.Keys, tot.RequestedPuts, tot.RequestedDeletes, tot.ValueBytes))
	for _, w := range rows {
		add("applied writes by "+string(dim), writeLabel(w, dim), w.AppliedWrites, nil, appliedDetail(w))
	}
	add("applied writes", "TOTAL", tot.AppliedWrites, nil, appliedDetail(tot))
	add("outcomes", "decided through index", r.Replay.DecidedThroughIndex, nil, replayDetail(r.Replay))
	for _, k := range r.TopKeys {
		add("top key", k.Key, k.RequestedWrites, k.KeyValueBytes, fmt.Sprintf("%s; requested puts %d deletes %d; applied %d; last index %d",
			k.Resource, k.RequestedPuts, k.RequestedDeletes, k.AppliedWrites, k.LastIndex))
	}
	if r.Txn.Txns > 0 {
		var cmps []string
		for _, c := range slices.Sorted(maps.Keys(r.Txn.Compares)) {
			cmps = append(cmps, fmt.Sprintf("%s=%d", c, r.Txn.Compares[c]))
		}
		add("txn", "txns", r.Txn.Txns, nil, fmt.Sprintf("compares %s; success ops %d, failure ops %d (%d writes, %d applied)",
			orDash(strings.Join(cmps, " "), "none"), r.Txn.SuccessOps, r.Txn.FailureOps, r.Txn.FailureWrites, r.Txn.FailureWritesApplied))
	}
	for _, c := range r.Compactions {
		add("compaction", fmt.Sprintf("revision %d", c.Revision), nil, nil, fmt.Sprintf("index %d term %d physical %v", c.Index, c.Term, c.Physical))
	}
	l := r.Leases
	add("leases", "grants", l.Grants, nil, fmt.Sprintf("ttl %d-%d s", l.MinTTLSeconds, l.MaxTTLSeconds))
	add("leases", "revokes", l.Revokes, nil, fmt.Sprintf("%d of leases granted in this WAL", l.RevokedGranted))
	add("leases", "checkpoints", l.Checkpoints, nil, "")
	add("leases", "puts with a lease", l.PutsWithLease, nil, "")
	for _, m := range r.MemberChanges {
		detail := []string{fmt.Sprintf("index %d term %d", m.Index, m.Term)}
		if m.NodeID != "" {
			detail = append(detail, "member "+m.NodeID)
		}
		if m.Detail != "" {
			detail = append(detail, m.Detail)
		}
		add("member change", m.Change, nil, nil, strings.Join(detail, "; "))
	}
	for _, p := range r.Series {
		add("series", fmt.Sprintf("%d-%d", p.FirstIndex, p.LastIndex), p.RequestedWrites, p.KeyValueBytes, fmt.Sprintf("%d entries", p.Entries))
	}
	for _, f := range r.Faults {
		add("fault", string(f.Kind), nil, nil, fmt.Sprintf("%s offset %d: %s", f.File, f.Offset, f.Message))
	}
	return t
}

// appliedDetail is the detail of an applied writes row: what became of the
// writes requested that were not applied.
func appliedDetail(w wal.WriteRow) string {
	return fmt.Sprintf("puts %d deletes %d; failed %d; not decided %d", w.AppliedPuts, w.AppliedDeletes, w.FailedWrites, w.NotDecidedWrites)
}

// outcomesNote says, below the tables, how the outcomes were decided, or
// why they were not, and from which entry on.
func outcomesNote(r wal.Replay) string {
	switch {
	case r.NotDecided != "" && r.DecidedThroughIndex == 0:
		return "Outcomes not decided: " + r.NotDecided + "."
	case r.NotDecided != "":
		return fmt.Sprintf("Outcomes decided through entry %d, not after it: %s.", r.DecidedThroughIndex, r.NotDecided)
	}
	return fmt.Sprintf("Outcomes: replayed from entry 1 to revision %d; checked: revision %d at the db's consistent index %d.", r.Revision, r.DBRevision, r.ConsistentIndex)
}

// replayDetail says how the outcomes were decided, or why they were not.
func replayDetail(r wal.Replay) string {
	switch {
	case r.NotDecided != "" && r.DecidedThroughIndex == 0:
		return "not decided: " + r.NotDecided
	case r.NotDecided != "":
		return "not decided after it: " + r.NotDecided
	}
	return fmt.Sprintf("replayed from entry 1 to revision %d; checked: revision %d at the db's consistent index %d", r.Revision, r.DBRevision, r.ConsistentIndex)
}

// writeLabel names a write row as usage names its rows.
func writeLabel(w wal.WriteRow, dim snapshot.Dimension) string {
	switch dim {
	case snapshot.ByNamespace:
		return namespaceLabel(w.Class, w.Namespace)
	case snapshot.ByGroup:
		return groupLabel(snapshot.UsageRow{Class: w.Class, Group: w.Group})
	}
	l := labels(w.Class, w.Prefix, w.Group, w.Resource, w.Path)
	if l[1] == "-" {
		return l[0]
	}
	return l[0] + " (" + l[1] + ")"
}

// makeWALTables lays the report out for a person, as tables of their own
// within maxTableColumns, sizes in binary units: the member and its log;
// segments; .snap files; entries per request kind; writes requested and
// their outcomes per resource, namespace or group; the most written keys;
// transactions and leases; compactions; member changes; writes over index
// ranges; faults. Empty tables are left out. The notes below them carry
// the long texts: how the outcomes were decided or why not, the columns'
// meaning, member change details, symbolic links, fault messages.
func makeWALTables(g *globalOptions, r *wal.Report, dim snapshot.Dimension) ([]output.Table, []string) {
	var tables []output.Table
	var notes []string
	add := func(t output.Table) {
		if len(t.Rows) > 0 {
			tables = append(tables, t)
		}
	}

	log := output.Table{Header: []string{"member and log", "value"}}
	field := func(name, value string) { log.Rows = append(log.Rows, []string{name, value}) }
	field("node ID", orDash(r.NodeID, "-"))
	field("cluster ID", orDash(r.ClusterID, "-"))
	field("term", fmt.Sprint(r.HardState.Term))
	field("vote", r.HardState.Vote)
	field("commit index", fmt.Sprint(r.HardState.Commit))
	field("first index", fmt.Sprint(r.FirstIndex))
	field("last index", fmt.Sprintf("%d (term %d)", r.LastIndex, r.LastTerm))
	field("entries", fmt.Sprintf("%d (%d uncommitted, %d overwritten)", r.Entries, r.UncommittedEntries, r.OverwrittenEntries))
	if s := r.LastSnapshot; s != nil {
		field("last snapshot", fmt.Sprintf("%d (term %d)", s.Index, s.Term))
	}
	decided := "none"
	if r.Replay.DecidedThroughIndex > 0 {
		decided = fmt.Sprintf("entry %d", r.Replay.DecidedThroughIndex)
	}
	field("outcomes decided through", decided)
	add(log)
	notes = append(notes, outcomesNote(r.Replay))

	segs := output.Table{Header: []string{"segment", "records", "entries", "used", "size"}, Numeric: []bool{false, true, true, true, true}}
	for _, s := range r.Segments {
		entries := "-"
		if s.FirstEntry != 0 {
			entries = fmt.Sprintf("%d-%d", s.FirstEntry, s.LastEntry)
		}
		segs.Rows = append(segs.Rows, []string{s.Name, fmt.Sprint(s.Records), entries, g.bytes(s.UsedBytes), g.bytes(s.SizeBytes)})
		if s.Link != "" {
			notes = append(notes, fmt.Sprintf("Segment %s is a symbolic link to %s.", s.Name, s.Link))
		}
	}
	add(segs)

	snaps := output.Table{Header: []string{"snap file", "size", "index", "term", "voters"}, Numeric: []bool{false, true, true, true, true}}
	voters := map[string][]string{} // voter list -> .snap files
	var voterOrder []string
	for _, s := range r.SnapFiles {
		if !s.OK {
			snaps.Rows = append(snaps.Rows, []string{s.Name, g.bytes(s.SizeBytes), "-", "-", "-"})
			notes = append(notes, fmt.Sprintf("Snap file %s is not valid: see the faults.", s.Name))
		} else {
			snaps.Rows = append(snaps.Rows, []string{s.Name, g.bytes(s.SizeBytes), fmt.Sprint(s.Index), fmt.Sprint(s.Term), fmt.Sprint(len(s.Voters))})
			v := orDash(strings.Join(s.Voters, ", "), "none")
			if _, ok := voters[v]; !ok {
				voterOrder = append(voterOrder, v)
			}
			voters[v] = append(voters[v], s.Name)
		}
		if s.Link != "" {
			notes = append(notes, fmt.Sprintf("Snap file %s is a symbolic link to %s.", s.Name, s.Link))
		}
	}
	add(snaps)
	for _, v := range voterOrder {
		if len(voters) == 1 {
			notes = append(notes, "Voters of the snap files: "+v+".")
		} else {
			notes = append(notes, fmt.Sprintf("Voters of %s: %s.", strings.Join(voters[v], ", "), v))
		}
	}

	kinds := output.Table{Header: []string{"request kind", "entries", g.sizeHeader("data", "entry data bytes")}, Numeric: []bool{false, true, true}}
	for _, k := range r.Kinds {
		kinds.Rows = append(kinds.Rows, []string{k.Kind, fmt.Sprint(k.Entries), g.bytes(k.EntryBytes)})
	}
	add(kinds)

	tables = append(tables, makeWALWritesTable(g, r, dim, &notes))

	// Keys longer than fit beside the figures are numbered, and named
	// below.
	numbered := false
	for _, k := range r.TopKeys {
		numbered = numbered || utf8.RuneCountInString(output.Escape(k.Key)) > maxTopKeyColumns
	}
	top := output.Table{Header: []string{"top key", "requested", "deletes", "applied", "failed", "not decided", "key+value"},
		Numeric: []bool{false, true, true, true, true, true, true}}
	for i, k := range r.TopKeys {
		key := k.Key
		if numbered {
			key = fmt.Sprintf("key %d", i+1)
			notes = append(notes, fmt.Sprintf("Key %d: %s", i+1, k.Key))
		}
		top.Rows = append(top.Rows, []string{key, fmt.Sprint(k.RequestedWrites), fmt.Sprint(k.RequestedDeletes),
			fmt.Sprint(k.AppliedWrites), fmt.Sprint(k.FailedWrites), fmt.Sprint(k.NotDecidedWrites), g.bytes(k.KeyValueBytes)})
	}
	add(top)

	other := output.Table{Header: []string{"txns and leases", "value"}}
	if r.Txn.Txns > 0 {
		var cmps []string
		for _, c := range slices.Sorted(maps.Keys(r.Txn.Compares)) {
			cmps = append(cmps, fmt.Sprintf("%s=%d", c, r.Txn.Compares[c]))
		}
		other.Rows = append(other.Rows, []string{"txns", fmt.Sprint(r.Txn.Txns)},
			[]string{"compares", orDash(strings.Join(cmps, " "), "none")},
			[]string{"success branch ops", fmt.Sprint(r.Txn.SuccessOps)},
			[]string{"failure branch ops", fmt.Sprintf("%d (%d writes, %d applied)", r.Txn.FailureOps, r.Txn.FailureWrites, r.Txn.FailureWritesApplied)})
	}
	l := r.Leases
	other.Rows = append(other.Rows, []string{"lease grants", fmt.Sprintf("%d (ttl %d-%d s)", l.Grants, l.MinTTLSeconds, l.MaxTTLSeconds)},
		[]string{"lease revokes", fmt.Sprintf("%d (%d of leases granted in this WAL)", l.Revokes, l.RevokedGranted)},
		[]string{"lease checkpoints", fmt.Sprint(l.Checkpoints)},
		[]string{"puts with a lease", fmt.Sprint(l.PutsWithLease)})
	add(other)

	comp := output.Table{Header: []string{"compaction revision", "index", "term", "physical"}, Numeric: []bool{true, true, true, false}}
	for _, c := range r.Compactions {
		comp.Rows = append(comp.Rows, []string{fmt.Sprint(c.Revision), fmt.Sprint(c.Index), fmt.Sprint(c.Term), fmt.Sprint(c.Physical)})
	}
	add(comp)

	members := output.Table{Header: []string{"member change", "index", "term", "member"}, Numeric: []bool{false, true, true, false}}
	for _, m := range r.MemberChanges {
		members.Rows = append(members.Rows, []string{m.Change, fmt.Sprint(m.Index), fmt.Sprint(m.Term), orDash(m.NodeID, "-")})
		if m.Detail != "" {
			notes = append(notes, fmt.Sprintf("Member change at index %d (%s): %s.", m.Index, m.Change, m.Detail))
		}
	}
	add(members)

	series := output.Table{Header: []string{"entries by index", "entries", "requested", "key+value"}, Numeric: []bool{false, true, true, true}}
	for _, p := range r.Series {
		span := fmt.Sprintf("%d-%d", p.FirstIndex, p.LastIndex)
		if p.FirstIndex == p.LastIndex {
			span = fmt.Sprint(p.FirstIndex)
		}
		series.Rows = append(series.Rows, []string{span, fmt.Sprint(p.Entries),
			fmt.Sprint(p.RequestedWrites), g.bytes(p.KeyValueBytes)})
	}
	add(series)

	faults := output.Table{Header: []string{"#", "fault", "file", "offset"}, Numeric: []bool{true, false, false, true}}
	for i, f := range r.Faults {
		faults.Rows = append(faults.Rows, []string{fmt.Sprint(i + 1), string(f.Kind), f.File, fmt.Sprint(f.Offset)})
		notes = append(notes, fmt.Sprintf("Fault %d: %s", i+1, f.Message))
	}
	add(faults)
	return tables, notes
}

// maxTopKeyColumns is the longest key the top keys table shows in its
// cell within maxTableColumns; when one is longer, the keys are numbered
// and named in notes below.
const maxTopKeyColumns = 48

// makeWALWritesTable lays out the writes requested per resource,
// namespace or group (dim) with their outcomes, and a TOTAL row; notes
// get what the columns mean and, for one prefix, the prefix.
func makeWALWritesTable(g *globalOptions, r *wal.Report, dim snapshot.Dimension, notes *[]string) output.Table {
	rows := r.By(dim)
	label := string(dim)
	t := output.Table{Header: []string{label, "keys", "requested", "applied", "failed", "not decided",
		g.sizeHeader("key+value", "key+value bytes"), g.sizeHeader("values", "value bytes")}}
	t.Numeric = numericFrom(t.Header, 1)
	oneLabelOK := dim == snapshot.ByResource && len(r.Prefixes) == 1
	var renamed []string
	numbers := func(w wal.WriteRow) []string {
		return []string{fmt.Sprint(w.Keys), fmt.Sprint(w.RequestedWrites), fmt.Sprint(w.AppliedWrites), fmt.Sprint(w.FailedWrites),
			fmt.Sprint(w.NotDecidedWrites), g.bytes(w.KeyValueBytes), g.bytes(w.ValueBytes)}
	}
	for _, w := range rows {
		name := writeLabel(w, dim)
		if oneLabelOK {
			u := snapshot.UsageRow{Class: w.Class, Prefix: w.Prefix, Group: w.Group, Resource: w.Resource, Path: w.Path}
			var l []string
			l, renamed = oneLabel(u, resourceLabels(u), renamed)
			name = l[0]
		}
		t.Rows = append(t.Rows, append([]string{name}, numbers(w)...))
	}
	t.Rows = append(t.Rows, append([]string{"TOTAL"}, numbers(r.Total)...))
	*notes = append(*notes, "requested: the puts and deletes the requests carry (Txn success branches included); "+
		"applied: those that changed the store; failed: those that did not (a compare that chose the other branch, "+
		"a request etcd refused, a delete of no key); not decided: see Outcomes. key+value: the key and value bytes requested; values: the values alone.")
	if oneLabelOK {
		*notes = append(*notes, "Prefix: "+r.Prefixes[0]+".")
		if len(renamed) > 0 {
			*notes = append(*notes, "Stored under another name: "+strings.Join(renamed, ", ")+".")
		}
	}
	return t
}
