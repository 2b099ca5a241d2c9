package revision

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrInvalidResourceVersion is returned by ParseResourceVersion for a string
// that is not "", "0" or a decimal unsigned integer; kube-apiserver answers
// such a request with 400 (storage.NewInvalidError).
var ErrInvalidResourceVersion = errors.New("invalid resourceVersion")

// ObjectResourceVersion returns the metadata.resourceVersion kube-apiserver
// serves for an object whose key has the given mod_revision: its decimal
// form (k8s.io/apiserver/pkg/storage/etcd3/store.go decodes every object with
// kv.ModRevision; APIObjectVersioner.UpdateObject formats it). A mod_revision
// of 0, which no stored key has, gives "", as UpdateObject does.
func ObjectResourceVersion(modRevision int64) string {
	if modRevision <= 0 {
		return ""
	}
	return strconv.FormatInt(modRevision, 10)
}

// ListResourceVersion returns the metadata.resourceVersion of a list read at
// the given etcd response header revision. It is the store revision at read
// time, not the largest mod_revision among the items
// (k8s.io/apiserver/pkg/storage/etcd3/store.go GetList passes
// getResp.Header.Revision to versioner.UpdateList). kube-apiserver refuses
// revision 0 for a list; this returns "" for it.
func ListResourceVersion(headerRevision int64) string {
	return ObjectResourceVersion(headerRevision)
}

// ParseResourceVersion parses a resourceVersion as
// APIObjectVersioner.ParseResourceVersion does
// (k8s.io/apiserver/pkg/storage/api_object_versioner.go): "" and "0" both
// mean 0 ("any" or "most recent", depending on the request), anything else
// must be a decimal uint64. Values above math.MaxInt64, which no etcd
// revision reaches, and every other string fail with
// ErrInvalidResourceVersion.
func ParseResourceVersion(rv string) (int64, error) {
	if rv == "" || rv == "0" {
		return 0, nil
	}
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w %q: %v", ErrInvalidResourceVersion, rv, errors.Unwrap(err))
	}
	if v > 1<<63-1 {
		return 0, fmt.Errorf("%w %q: beyond the largest etcd revision", ErrInvalidResourceVersion, rv)
	}
	return int64(v), nil
}

// Compacted reports whether a read or watch at revision rev fails with
// ErrCompacted once the store has been compacted at compactRevision: exactly
// when rev < compactRevision, and never for rev <= 0, which means "latest" to
// a range and "from now" to a watch (server/storage/mvcc/kvstore_txn.go
// rangeKeys; server/storage/mvcc/watchable_store.go chooseAll).
func Compacted(rev, compactRevision int64) bool {
	return rev > 0 && rev < compactRevision
}
