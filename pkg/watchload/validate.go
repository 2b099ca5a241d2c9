package watchload

import (
	"bytes"
	"fmt"
	"sort"
	"sync"
)

// ViolationKind names a broken guarantee. The watch guarantees are etcd's
// (website content/en/docs/v3.7/learning/api_guarantees.md), checked as
// etcd's robustness tests check them (tests/robustness/validate/watch.go),
// per watch: one Watch call, from its start revision to its end.
type ViolationKind string

// The kinds of violation.
const (
	// ViolationOrdered: an event's revision is below the previous event's.
	ViolationOrdered ViolationKind = "ordered"
	// ViolationUnique: an event was delivered twice on one watch.
	ViolationUnique ViolationKind = "unique"
	// ViolationAtomic: the events of one revision were split over two
	// responses.
	ViolationAtomic ViolationKind = "atomic"
	// ViolationReliable: an event of the recorded history, inside the
	// range the watch covered (from its start revision to its last event
	// or progress notification), was never delivered: a lost event.
	ViolationReliable ViolationKind = "reliable"
	// ViolationResumable: the first event of a watch was not the first
	// event of the history at or after the watch's start revision.
	ViolationResumable ViolationKind = "resumable"
	// ViolationBookmarkable: an event at or below a progress notification's
	// revision arrived after it, or progress notifications went backwards
	// or below the last event.
	ViolationBookmarkable ViolationKind = "bookmarkable"
	// ViolationUnexpected: an event that the recorded history does not
	// hold at its revision, or holds with another type.
	ViolationUnexpected ViolationKind = "unexpected"
	// ViolationPrevKV: an event's prevKV (or its create flag) disagrees
	// with the watcher's cache, which Kubernetes relies on
	// (k8s.io/apiserver/pkg/storage/etcd3/event.go parseEvent).
	ViolationPrevKV ViolationKind = "prevKV"
	// ViolationCache: at the end, a watcher's cache differs from etcd's
	// state at the watcher's last revision.
	ViolationCache ViolationKind = "cache"
	// ViolationRecorderGap: the history recorder's whole-keyspace watch
	// skipped revisions: events lost on that watch.
	ViolationRecorderGap ViolationKind = "recorder-gap"
	// ViolationUnrecorded: etcd acknowledged a write whose revision the
	// history recorder never saw, although it recorded past it.
	ViolationUnrecorded ViolationKind = "unrecorded-write"
	// ViolationUnparsedResourceVersion: a watch event or bookmark from
	// kube-apiserver, or a WATCH from a resourceVersion it gave, carried
	// a resourceVersion that is not a revision, so it could not be
	// checked, nor an event timed (Observer.UnparsedResourceVersion).
	// Revision is 0.
	ViolationUnparsedResourceVersion ViolationKind = "unparsed-resourceVersion"
)

// Violation is one broken guarantee, with the revision where it happened.
type Violation struct {
	// Watcher is the watcher's id; -1 for the recorder.
	Watcher  int
	Kind     ViolationKind // the guarantee broken
	Revision int64         // where it happened
	Key      string        // the key involved, if any
	Detail   string        // what was seen
}

// Violations collects violations from every watcher: a count per kind and
// the first samples, in the order they were found. It is safe for
// concurrent use; the zero value keeps defaultViolationSamples samples.
type Violations struct {
	// MaxSamples bounds the samples kept; 0 means defaultViolationSamples.
	MaxSamples int

	mu      sync.Mutex
	counts  map[ViolationKind]int64
	samples []Violation
}

// defaultViolationSamples is how many violations a Violations keeps.
const defaultViolationSamples = 50

// Add counts x and keeps it if fewer than MaxSamples are kept.
func (v *Violations) Add(x Violation) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.counts == nil {
		v.counts = map[ViolationKind]int64{}
	}
	v.counts[x.Kind]++
	maxSamples := v.MaxSamples
	if maxSamples == 0 {
		maxSamples = defaultViolationSamples
	}
	if len(v.samples) < maxSamples {
		v.samples = append(v.samples, x)
	}
}

// Count returns the number of violations of kind.
func (v *Violations) Count(kind ViolationKind) int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.counts[kind]
}

// Total returns the number of violations of every kind.
func (v *Violations) Total() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	var n int64
	for _, c := range v.counts {
		n += c
	}
	return n
}

// Samples returns the kept violations ordered by revision, then watcher.
func (v *Violations) Samples() []Violation {
	v.mu.Lock()
	out := append([]Violation(nil), v.samples...)
	v.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Revision != out[j].Revision {
			return out[i].Revision < out[j].Revision
		}
		return out[i].Watcher < out[j].Watcher
	})
	return out
}

// validator checks one watcher's watches as they arrive. Checks that need
// only the stream (ordered, unique within a response, atomic,
// bookmarkable) run when a response arrives; checks against the recorded
// history (reliable, resumable, unique across responses, unexpected) run
// once the recorder has recorded the revision, so events that arrive
// before the recorder has them wait in a queue, bounded by how far the
// recorder lags. An event that arrives after a progress notification
// covering it is a bookmark violation, not a lost event: whether an event
// is lost is settled when a later event skips it or the watch ends (etcd
// v3.7.3 can send a progress notification ahead of a new watch's events:
// TestReproProgressNotificationBeforeEvents). It is used by one goroutine
// at a time.
type validator struct {
	watcher int
	hist    *history  // nil: no history checks
	rec     *Recorder // watermark of hist
	viol    *Violations

	// Checks on arrival, for the current watch.
	sessionFrom  int64
	lastEventRev int64
	lastKey      []byte
	lastProgress int64

	// Checks against the history, which may lag behind arrival.
	cursor    int64
	first     bool
	checkFrom int64
	// owed is the highest progress notification checked on the current
	// watch: the events of the history up to it that the watch has not
	// delivered yet are owed. Delivered late, each is a bookmark violation
	// (counted on arrival), not a lost event; still undelivered when a
	// later event skips them or the watch ends, they are lost.
	owed       int64
	queue      []vItem
	qHead      int
	unverified int64
}

type vItemKind uint8

const (
	itemSession vItemKind = iota
	itemEvent
	itemProgress
)

type vItem struct {
	kind        vItemKind
	rev         int64 // session: start revision
	key         []byte
	put, create bool
	skip        bool // already reported on arrival; not matched again
}

func newValidator(watcher int, rec *Recorder, prefix string, viol *Violations) *validator {
	v := &validator{watcher: watcher, rec: rec, viol: viol}
	if rec != nil {
		v.hist = rec.history(prefix)
	}
	return v
}

func (v *validator) add(kind ViolationKind, rev int64, key, detail string) {
	v.viol.Add(Violation{Watcher: v.watcher, Kind: kind, Revision: rev, Key: key, Detail: detail})
}

// startSession begins a new watch from revision from.
func (v *validator) startSession(from int64) {
	v.sessionFrom, v.lastEventRev, v.lastKey, v.lastProgress = from, 0, nil, 0
	v.push(vItem{kind: itemSession, rev: from})
}

// events checks the events of one response, in order.
func (v *validator) events(evs []WatchEvent) {
	for i := range evs {
		ev := &evs[i]
		rev := ev.Revision
		skip := false
		switch {
		case rev < v.lastEventRev:
			v.add(ViolationOrdered, rev, string(ev.Key), fmt.Sprintf("after an event at revision %d", v.lastEventRev))
			skip = true
		case rev == v.lastEventRev:
			if i == 0 {
				v.add(ViolationAtomic, rev, string(ev.Key), "revision continued in a new response")
			}
			if bytes.Equal(ev.Key, v.lastKey) {
				v.add(ViolationUnique, rev, string(ev.Key), "delivered twice in a row")
				skip = true
			}
		}
		if rev <= v.lastProgress {
			v.add(ViolationBookmarkable, rev, string(ev.Key), fmt.Sprintf("delivered after a progress notification at %d on the watch from %d", v.lastProgress, v.sessionFrom))
		}
		if rev >= v.lastEventRev {
			v.lastEventRev, v.lastKey = rev, ev.Key
		}
		v.push(vItem{kind: itemEvent, rev: rev, key: ev.Key, put: ev.Type == EventPut, create: ev.Create, skip: skip})
	}
}

// progress checks a progress notification at revision rev.
func (v *validator) progress(rev int64) {
	if rev < v.lastProgress || rev < v.lastEventRev {
		v.add(ViolationBookmarkable, rev, "", fmt.Sprintf("progress notification below an earlier one (%d) or the last event (%d)", v.lastProgress, v.lastEventRev))
	}
	v.lastProgress = max(v.lastProgress, rev)
	v.push(vItem{kind: itemProgress, rev: rev})
}

func (v *validator) ready(it *vItem, watermark int64) bool {
	if it.kind == itemSession {
		return it.rev-1 <= watermark
	}
	return it.rev <= watermark
}

func (v *validator) push(it vItem) {
	if v.hist == nil {
		return
	}
	if v.qHead == len(v.queue) && v.ready(&it, v.rec.Watermark()) {
		v.check(&it)
		return
	}
	v.queue = append(v.queue, it)
}

// drain checks every queued item the history now covers.
func (v *validator) drain() {
	if v.qHead == len(v.queue) {
		return
	}
	wm := v.rec.Watermark()
	for v.qHead < len(v.queue) && v.ready(&v.queue[v.qHead], wm) {
		v.check(&v.queue[v.qHead])
		v.queue[v.qHead] = vItem{}
		v.qHead++
	}
	if v.qHead == len(v.queue) {
		v.queue, v.qHead = v.queue[:0], 0
	}
}

// finish checks what the history covers and counts the rest as unverified.
func (v *validator) finish() {
	v.drain()
	if v.hist != nil {
		v.settleOwed()
	}
	for _, it := range v.queue[v.qHead:] {
		if it.kind == itemEvent {
			v.unverified++
		}
	}
	v.queue, v.qHead = nil, 0
}

func (v *validator) check(it *vItem) {
	h := v.hist
	switch it.kind {
	case itemSession:
		v.settleOwed()
		v.cursor, v.first, v.checkFrom = h.search(it.rev), true, it.rev
	case itemProgress:
		// The events up to it.rev must have been delivered; those that
		// were not are settled when the watch delivers a later event or
		// ends, since etcd may still deliver them late (a bookmark
		// violation, reported on arrival).
		v.owed = max(v.owed, it.rev)
	case itemEvent:
		first := v.first
		v.first = false
		if it.skip {
			return
		}
		v.checkEvent(it, first)
	}
}

func (v *validator) checkEvent(it *vItem, first bool) {
	h := v.hist
	n := h.len()
	skipped := false
	for v.cursor < n {
		e := h.at(v.cursor)
		if e.rev >= it.rev {
			break
		}
		v.lost(e, fmt.Sprintf("next event delivered was at %d", it.rev))
		skipped = true
		v.cursor++
	}
	if v.cursor < n && h.at(v.cursor).rev == it.rev {
		j := v.cursor
		for j < n && h.at(j).rev == it.rev && h.at(j).key != string(it.key) {
			j++
		}
		if j < n && h.at(j).rev == it.rev {
			for ; v.cursor < j; v.cursor++ {
				v.lost(h.at(v.cursor), fmt.Sprintf("skipped within revision %d", it.rev))
				skipped = true
			}
			if e := h.at(j); e.put != it.put || e.create != it.create {
				v.add(ViolationUnexpected, it.rev, e.key, fmt.Sprintf("delivered as %s, recorded as %s", eventKind(it.put, it.create), eventKind(e.put, e.create)))
			}
			v.cursor = j + 1
			if first && skipped {
				v.add(ViolationResumable, it.rev, string(it.key), fmt.Sprintf("first event of a watch from %d is not the first recorded at or after it", v.checkFrom))
			}
			return
		}
	}
	if first && skipped {
		v.add(ViolationResumable, it.rev, string(it.key), fmt.Sprintf("first event of a watch from %d is not the first recorded at or after it", v.checkFrom))
	}
	if v.consumed(it) {
		v.add(ViolationUnique, it.rev, string(it.key), "delivered twice on one watch")
		return
	}
	v.add(ViolationUnexpected, it.rev, string(it.key), "not in the recorded history at this revision")
}

// settleOwed counts as lost the events of the history that a progress
// notification of the ending watch covered and the watch never delivered.
func (v *validator) settleOwed() {
	h := v.hist
	n := h.len()
	for v.cursor < n && h.at(v.cursor).rev <= v.owed {
		v.lost(h.at(v.cursor), fmt.Sprintf("progress notification at %d", v.owed))
		v.cursor++
	}
	v.owed = 0
}

// consumed reports whether the history entry of it lies before the cursor,
// that is, was delivered already. It looks back at most a bounded number
// of entries.
func (v *validator) consumed(it *vItem) bool {
	h := v.hist
	for i, steps := v.cursor-1, 0; i >= 0 && steps < 1<<16; i, steps = i-1, steps+1 {
		e := h.at(i)
		if e.rev < it.rev || e.rev < v.checkFrom {
			return false
		}
		if e.rev == it.rev && e.key == string(it.key) {
			return true
		}
	}
	return false
}

func (v *validator) lost(e *histEntry, detail string) {
	v.add(ViolationReliable, e.rev, e.key, fmt.Sprintf("%s never delivered on the watch from %d (%s)", eventKind(e.put, e.create), v.checkFrom, detail))
}

func eventKind(put, create bool) string {
	switch {
	case create:
		return "create"
	case put:
		return "update"
	}
	return "delete"
}
