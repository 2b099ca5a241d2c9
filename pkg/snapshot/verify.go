package snapshot

import (
	"context"
	"fmt"
	"sync"
)

// Restore says what `etcdutl snapshot restore` does with a file whose
// trailer is t (etcdutl/snapshot/v3_snapshot.go saveDB): it checks the
// SHA-256 of a file that has one and refuses a mismatch ("expected sha256
// ..., got ...") unless --skip-hash-check is given, and refuses a file
// without one ("snapshot missing hash but --skip-hash-check=false") unless
// --skip-hash-check is given.
func (t Trailer) Restore() string {
	switch t {
	case TrailerValid:
		return "the sha256 trailer matches the bytes before it: `etcdutl snapshot restore` checks it and restores"
	case TrailerInvalid:
		return "the sha256 trailer does not match the bytes before it (the file was modified or truncated after " +
			"`etcdctl snapshot save`): `etcdutl snapshot restore` refuses it (\"expected sha256 ..., got ...\"); " +
			"--skip-hash-check restores the damaged bytes"
	}
	return "no sha256 trailer (a member's db, or a copy of one): `etcdutl snapshot restore` refuses it " +
		"(\"snapshot missing hash but --skip-hash-check=false\") unless given --skip-hash-check"
}

// VerifySchemaVersion versions the JSON of Verification.
const VerifySchemaVersion = 1

// Verification is a restore-readiness verdict on one file.
type Verification struct {
	// SchemaVersion is VerifySchemaVersion.
	SchemaVersion int `json:"schemaVersion"`
	// Path is the file read.
	Path string `json:"path"`
	// Ready is set when `etcdutl snapshot restore` would restore the file
	// as saved: its trailer is valid or absent (then --skip-hash-check is
	// needed: NeedsSkipHashCheck) and the bbolt consistency check is
	// clean.
	Ready bool `json:"ready"`
	// NeedsSkipHashCheck is set when the file has no trailer.
	NeedsSkipHashCheck bool `json:"needsSkipHashCheck"`
	// SnapshotTrailer is the trailer's state and Restore what etcdutl
	// does with it (Trailer.Restore).
	SnapshotTrailer Trailer `json:"snapshotTrailer"`
	Restore         string  `json:"restore"`
	// Check is the bbolt consistency check.
	Check *Check `json:"check"`
	// Revision is the current revision (Status.Revision) and
	// ConsistentIndex the raft index the file has applied: a restored
	// cluster starts there.
	Revision        int64  `json:"revision"`
	ConsistentIndex uint64 `json:"consistentIndex"`
}

// Verify checks whether the file can be restored: the snapshot trailer
// and the consistency check, run concurrently, and the current revision.
// Errors are those of Open's reads and ctx's; a failed check or a
// mismatched trailer is a verdict, not an error.
func (db *DB) Verify(ctx context.Context) (*Verification, error) {
	var (
		wg       sync.WaitGroup
		check    *Check
		checkErr error
	)
	wg.Add(1)
	go func() { defer wg.Done(); check, checkErr = db.check(ctx) }()
	trailer, err := db.verifyTrailer(ctx)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if checkErr != nil {
		return nil, checkErr
	}
	m, err := db.Meta()
	if err != nil {
		return nil, err
	}
	last, err := db.LastRevision(ctx)
	if err != nil {
		return nil, err
	}
	return &Verification{
		SchemaVersion:      VerifySchemaVersion,
		Path:               db.path,
		Ready:              check.OK && trailer != TrailerInvalid,
		NeedsSkipHashCheck: trailer == TrailerAbsent,
		SnapshotTrailer:    trailer,
		Restore:            trailer.Restore(),
		Check:              check,
		Revision:           max(last, m.FinishedCompactRevision, m.ScheduledCompactRevision),
		ConsistentIndex:    m.ConsistentIndex,
	}, nil
}

// Verdict is the verification in one line: ready or not, the trailer,
// the check and the revision.
func (v *Verification) Verdict() string {
	ready := "ready to restore"
	switch {
	case !v.Ready:
		ready = "NOT ready to restore"
	case v.NeedsSkipHashCheck:
		ready = "ready to restore with --skip-hash-check"
	}
	trailer := map[Trailer]string{TrailerValid: "sha256 trailer matches", TrailerInvalid: "sha256 trailer does NOT match",
		TrailerAbsent: "no sha256 trailer"}[v.SnapshotTrailer]
	check := "consistency check ok"
	if !v.Check.OK {
		check = fmt.Sprintf("consistency check found %d errors", v.Check.ErrorCount)
	}
	return fmt.Sprintf("%s: %s: %s, %s, revision %d, consistent index %d", v.Path, ready, trailer, check, v.Revision, v.ConsistentIndex)
}
