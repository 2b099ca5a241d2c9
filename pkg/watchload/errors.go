package watchload

import "errors"

// ErrObjectNotFound is returned by a Kubernetes write when the object it
// updates or deletes no longer exists in etcd.
var ErrObjectNotFound = errors.New("object not found")

// ErrObjectExists is returned by a Kubernetes create when the key already
// exists in etcd.
var ErrObjectExists = errors.New("object already exists")

// ErrViolations is wrapped by commands when a run broke a watch guarantee.
var ErrViolations = errors.New("watch guarantees violated")
