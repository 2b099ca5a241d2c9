package watchload

import (
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchEvent is one event of a watch as the validator checks it, whatever
// client delivered it: the model's Reflector makes it from an etcd event
// (appendWatchEvents), a client-go informer's Observer from a Kubernetes
// watch event. It holds only what the checks against the recorded history
// use; the prevKV checks need the etcd event itself and are the model's
// cache's (cache.apply), since kube-apiserver does not pass prevKV on.
type WatchEvent struct {
	// Key is the etcd key, e.g. /registry/pods/ns-1/pod-1. The validator
	// keeps it until the history covers the event, so it must not be
	// modified afterwards; it may alias an etcd response's key.
	Key []byte
	// Revision is the revision of the write: the key's mod_revision, or
	// the object's resourceVersion as an int64.
	Revision int64
	// Type is a put (create or update) or a delete.
	Type EventType
	// Create is true for a put that created the key (etcd: create_revision
	// equals mod_revision; client-go: an ADDED event). The validator
	// needs only this, not the create revision itself.
	Create bool
}

// EventType is what a WatchEvent did to its key, in etcd's terms
// (mvccpb.Event_EventType).
type EventType uint8

// The event types. The zero value is a put, as etcd's is.
const (
	// EventPut: the key was created or updated.
	EventPut EventType = iota
	// EventDelete: the key was deleted.
	EventDelete
)

// appendWatchEvents appends to dst the WatchEvents of evs, the events of
// one etcd watch response, in order, and returns the extended slice; the
// keys alias evs'. It is the one place the model turns etcd events into
// WatchEvents.
func appendWatchEvents(dst []WatchEvent, evs []*clientv3.Event) []WatchEvent {
	for _, ev := range evs {
		typ := EventPut
		if ev.Type == mvccpb.DELETE {
			typ = EventDelete
		}
		dst = append(dst, WatchEvent{Key: ev.Kv.Key, Revision: ev.Kv.ModRevision, Type: typ, Create: ev.IsCreate()})
	}
	return dst
}
