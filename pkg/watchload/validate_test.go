package watchload

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const testPrefix = "/registry/pods/"

// hist returns a recorder whose history under testPrefix holds entries,
// complete up to watermark.
func hist(t *testing.T, watermark int64, entries ...histEntry) *Recorder {
	t.Helper()
	rec := NewRecorder(nil, []string{testPrefix})
	for _, e := range entries {
		if err := rec.hist[0].append(e); err != nil {
			t.Fatal(err)
		}
	}
	rec.watermark.Store(watermark)
	return rec
}

func put(rev int64, key string) histEntry {
	return histEntry{rev: rev, key: testPrefix + key, put: true}
}
func create(rev int64, key string) histEntry {
	return histEntry{rev: rev, key: testPrefix + key, put: true, create: true}
}
func del(rev int64, key string) histEntry { return histEntry{rev: rev, key: testPrefix + key} }

// event turns a history entry into the watch event etcd would send.
func event(e histEntry) *clientv3.Event {
	kv := &mvccpb.KeyValue{Key: []byte(e.key), ModRevision: e.rev, CreateRevision: 1}
	if e.create {
		kv.CreateRevision = e.rev
	}
	typ := mvccpb.PUT
	if !e.put {
		typ = mvccpb.DELETE
	}
	return &clientv3.Event{Type: typ, Kv: kv}
}

// watchEvent turns a history entry into the WatchEvent a watch would
// deliver.
func watchEvent(e histEntry) WatchEvent {
	ev := WatchEvent{Key: []byte(e.key), Revision: e.rev, Create: e.create}
	if !e.put {
		ev.Type = EventDelete
	}
	return ev
}

// step is one thing a watch delivers: a response of events, or a progress
// notification (progress > 0); or the start of the next watch (session >
// 0, its start revision).
type step struct {
	events   []histEntry
	progress int64
	session  int64
}

func resp(es ...histEntry) step { return step{events: es} }
func progress(rev int64) step   { return step{progress: rev} }
func watchFrom(rev int64) step  { return step{session: rev} }
func deliver(v *validator, steps []step) {
	for _, s := range steps {
		v.drain()
		if s.session > 0 {
			v.startSession(s.session)
			continue
		}
		if s.progress > 0 {
			v.progress(s.progress)
			continue
		}
		evs := make([]WatchEvent, len(s.events))
		for i, e := range s.events {
			evs[i] = watchEvent(e)
		}
		v.events(evs)
	}
	v.finish()
}

// TestValidatorCatchesPlantedViolations plants one violation of each
// guarantee in an otherwise correct watch and checks that the validator
// reports it, with its revision.
func TestValidatorCatchesPlantedViolations(t *testing.T) {
	history := []histEntry{create(10, "a"), create(11, "b"), put(12, "a"), put(13, "b"), create(14, "c"), create(14, "d"), del(15, "a")}
	tests := []struct {
		name     string
		from     int64
		steps    []step
		wantKind ViolationKind // "" means no violation at all
		wantRev  int64
	}{
		{name: "correct watch", from: 10, steps: []step{resp(history[0]), resp(history[1], history[2]), resp(history[3]), progress(13),
			resp(history[4], history[5]), resp(history[6]), progress(15)}},
		{name: "correct resumed watch", from: 12, steps: []step{resp(history[2], history[3]), progress(14 - 1), resp(history[4], history[5])}},
		{name: "ordered", from: 10, steps: []step{resp(history[0], history[2]), resp(history[1])}, wantKind: ViolationOrdered, wantRev: 11},
		{name: "unique, in a row", from: 10, steps: []step{resp(history[0], history[1], history[1])}, wantKind: ViolationUnique, wantRev: 11},
		{name: "unique, within a revision", from: 14, steps: []step{resp(history[4], history[5], history[4])}, wantKind: ViolationUnique, wantRev: 14},
		{name: "atomic", from: 14, steps: []step{resp(history[4]), resp(history[5])}, wantKind: ViolationAtomic, wantRev: 14},
		{name: "reliable", from: 10, steps: []step{resp(history[0], history[1]), resp(history[3])}, wantKind: ViolationReliable, wantRev: 12},
		{name: "reliable, within a revision", from: 14, steps: []step{resp(history[5], history[6])}, wantKind: ViolationReliable, wantRev: 14},
		{name: "reliable, before a progress notification", from: 10, steps: []step{resp(history[0]), progress(12)}, wantKind: ViolationReliable, wantRev: 11},
		{name: "resumable", from: 12, steps: []step{resp(history[3])}, wantKind: ViolationResumable, wantRev: 13},
		{name: "bookmarkable, event after progress", from: 10, steps: []step{resp(history[0]), progress(12), resp(history[1])}, wantKind: ViolationBookmarkable, wantRev: 11},
		{name: "bookmarkable, progress backwards", from: 10, steps: []step{resp(history[0], history[1]), progress(12), progress(11)}, wantKind: ViolationBookmarkable, wantRev: 11},
		{name: "unexpected key", from: 10, steps: []step{resp(history[0], put(11, "zz"))}, wantKind: ViolationUnexpected, wantRev: 11},
		{name: "unexpected type", from: 15, steps: []step{resp(put(15, "a"))}, wantKind: ViolationUnexpected, wantRev: 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := hist(t, 15, history...)
			vs := &Violations{}
			v := newValidator(7, rec, testPrefix, vs)
			v.startSession(tt.from)
			deliver(v, tt.steps)
			if tt.wantKind == "" {
				if n := vs.Total(); n != 0 {
					t.Fatalf("got %d violations %+v, want none", n, vs.Samples())
				}
				return
			}
			if vs.Count(tt.wantKind) == 0 {
				t.Fatalf("got %+v, want a %s violation", vs.Samples(), tt.wantKind)
			}
			for _, x := range vs.Samples() {
				if x.Kind != tt.wantKind {
					continue
				}
				if x.Revision != tt.wantRev || x.Watcher != 7 {
					t.Errorf("%s violation at revision %d by watcher %d, want revision %d by watcher 7", x.Kind, x.Revision, x.Watcher, tt.wantRev)
				}
				return
			}
		})
	}
}

// TestValidatorCountsLateEventsAsBookmarkViolations delivers a progress
// notification before the events it covers, as etcd v3.7.3 does to a
// watch created on a stream right after a progress request for that
// stream (TestReproProgressNotificationBeforeEvents; the README's
// partition-follower run reported it as 548 lost and 548 duplicated
// events). Events that arrive late are bookmark violations, not lost and
// then duplicated; events that never arrive are lost.
func TestValidatorCountsLateEventsAsBookmarkViolations(t *testing.T) {
	history := []histEntry{create(10, "a"), create(11, "b"), put(12, "a"), put(13, "b"), create(14, "c"), create(14, "d"), del(15, "a")}
	tests := []struct {
		name  string
		steps []step
		want  map[ViolationKind]int64 // every other kind: 0
	}{
		{name: "every covered event delivered after the progress notification",
			steps: []step{progress(13), resp(history[0]), resp(history[1], history[2]), resp(history[3]), resp(history[4], history[5]), resp(history[6])},
			want:  map[ViolationKind]int64{ViolationBookmarkable: 4}},
		{name: "covered events never delivered, the watch goes on",
			steps: []step{progress(13), resp(history[4], history[5]), resp(history[6])},
			want:  map[ViolationKind]int64{ViolationReliable: 4, ViolationResumable: 1}},
		{name: "some delivered late, the rest skipped by a later event",
			steps: []step{progress(13), resp(history[0]), resp(history[4], history[5])},
			want:  map[ViolationKind]int64{ViolationBookmarkable: 1, ViolationReliable: 3}},
		{name: "some delivered late, then the watch ends",
			steps: []step{progress(13), resp(history[0], history[1]), watchFrom(14), resp(history[4], history[5]), resp(history[6])},
			want:  map[ViolationKind]int64{ViolationBookmarkable: 2, ViolationReliable: 2}},
		{name: "some delivered late, then the run ends",
			steps: []step{progress(13), resp(history[0], history[1], history[2])},
			want:  map[ViolationKind]int64{ViolationBookmarkable: 3, ViolationReliable: 1}},
	}
	kinds := []ViolationKind{ViolationOrdered, ViolationUnique, ViolationAtomic, ViolationReliable, ViolationResumable, ViolationBookmarkable, ViolationUnexpected}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := &Violations{}
			v := newValidator(3, hist(t, 15, history...), testPrefix, vs)
			v.startSession(10)
			deliver(v, tt.steps)
			for _, k := range kinds {
				if got := vs.Count(k); got != tt.want[k] {
					t.Errorf("%s violations: got %d, want %d (%+v)", k, got, tt.want[k], vs.Samples())
				}
			}
		})
	}
}

// TestValidatorWaitsForTheHistory delivers events before the recorder has
// them: they wait, and are checked once the watermark passes them.
func TestValidatorWaitsForTheHistory(t *testing.T) {
	rec := hist(t, 9)
	vs := &Violations{}
	v := newValidator(0, rec, testPrefix, vs)
	v.startSession(10)
	v.events([]WatchEvent{watchEvent(create(10, "a")), watchEvent(create(12, "c"))})
	if len(v.queue)-v.qHead != 2 { // the session start (from 10) needed only revision 9
		t.Fatalf("queued %d items, want the 2 events", len(v.queue)-v.qHead)
	}
	for _, e := range []histEntry{create(10, "a"), create(11, "b"), create(12, "c")} {
		rec.hist[0].append(e)
	}
	rec.watermark.Store(12)
	v.drain()
	if len(v.queue) != 0 {
		t.Fatalf("%d items still queued after the watermark passed them", len(v.queue))
	}
	if got := vs.Count(ViolationReliable); got != 1 || vs.Samples()[0].Revision != 11 {
		t.Errorf("lost events %d %+v, want revision 11", got, vs.Samples())
	}
	// Events beyond the history at the end are unverified, not violations.
	v.events([]WatchEvent{watchEvent(create(13, "d"))})
	v.finish()
	if v.unverified != 1 || vs.Total() != 1 {
		t.Errorf("unverified %d, violations %d: want 1 unverified event and no new violation", v.unverified, vs.Total())
	}
}

// TestRecorderReportsGaps feeds the recorder a revision sequence with a
// hole: a whole-keyspace watch must see every revision.
func TestRecorderReportsGaps(t *testing.T) {
	rec := NewRecorder(nil, []string{testPrefix})
	rec.lastRev = 4
	for _, e := range []histEntry{create(5, "a"), put(6, "a"), put(9, "a")} {
		if err := rec.record(event(e), true); err != nil {
			t.Fatal(err)
		}
	}
	// Keys outside the prefixes advance the revision but are not kept.
	if err := rec.record(&clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("compact_rev_key"), ModRevision: 10}}, true); err != nil {
		t.Fatal(err)
	}
	if gaps := rec.Gaps(); len(gaps) != 1 || gaps[0] != (RevisionGap{From: 7, To: 8}) {
		t.Errorf("gaps %+v, want 7..8", gaps)
	}
	if n := rec.hist[0].len(); n != 3 || rec.Events() != 3 {
		t.Errorf("history holds %d events (counted %d), want 3", n, rec.Events())
	}
	if i := rec.hist[0].search(7); i != 2 {
		t.Errorf("search(7) = %d, want 2 (the event at 9)", i)
	}
}

func TestApplyChecksPrevKV(t *testing.T) {
	env := NewEnv(time.Now(), 0, 1, nil)
	r := NewReflector(env, ReflectorOptions{Prefix: "/p/"})
	r.cache.items = map[string]*cacheEntry{"/p/a": {rev: 5}}
	ev := func(typ mvccpb.Event_EventType, key string, create, mod, prev int64) *clientv3.Event {
		e := &clientv3.Event{Type: typ, Kv: &mvccpb.KeyValue{Key: []byte(key), CreateRevision: create, ModRevision: mod}}
		if prev != 0 {
			e.PrevKv = &mvccpb.KeyValue{Key: []byte(key), ModRevision: prev}
		}
		return e
	}
	r.cache.apply(ev(mvccpb.PUT, "/p/a", 2, 6, 5)) // consistent update
	if n := env.Violations.Total(); n != 0 {
		t.Fatalf("consistent update flagged: %+v", env.Violations.Samples())
	}
	r.cache.apply(ev(mvccpb.PUT, "/p/a", 2, 8, 7))     // an update at 7 was missed
	r.cache.apply(ev(mvccpb.PUT, "/p/b", 9, 9, 0))     // create: fine
	r.cache.apply(ev(mvccpb.PUT, "/p/b", 10, 10, 0))   // created twice
	r.cache.apply(ev(mvccpb.DELETE, "/p/c", 0, 11, 3)) // delete of an unknown key
	r.cache.apply(ev(mvccpb.PUT, "/p/b", 10, 12, 0))   // update without prevKV: missing, not a violation
	if got := env.Violations.Count(ViolationPrevKV); got != 3 {
		t.Fatalf("prevKV violations = %d, want 3: %+v", got, env.Violations.Samples())
	}
	if got := env.Violations.Samples()[0].Revision; got != 8 {
		t.Errorf("first violation at revision %d, want 8", got)
	}
	if got := r.cache.prevKVMiss.Load(); got != 1 {
		t.Errorf("prevKV missing %d, want 1", got)
	}
}

func TestCompareCache(t *testing.T) {
	vs := &Violations{}
	state := map[string]int64{"/p/a": 12, "/p/b": 11, "/p/c": 3}
	cache := map[string]int64{"/p/a": 12, "/p/b": 9, "/p/d": 14}
	compareCache(vs, 2, 20, cache, state)
	var got []string
	for _, x := range vs.Samples() {
		got = append(got, fmt.Sprintf("%s@%d", x.Key, x.Revision))
	}
	want := "/p/c@3 /p/b@11 /p/d@14" // by revision
	if strings.Join(got, " ") != want || vs.Count(ViolationCache) != 3 {
		t.Errorf("cache mismatches %v, want %s", got, want)
	}
}

// TestAppendWatchEvents: the Reflector's etcd events become WatchEvents
// with the type and create flag etcd's event implies (a create is a put
// whose create_revision is its mod_revision).
func TestAppendWatchEvents(t *testing.T) {
	kv := func(key string, create, mod int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte(key), CreateRevision: create, ModRevision: mod}
	}
	evs := []*clientv3.Event{
		{Type: mvccpb.PUT, Kv: kv("/p/a", 7, 7)},
		{Type: mvccpb.PUT, Kv: kv("/p/a", 7, 8), PrevKv: kv("/p/a", 7, 7)},
		{Type: mvccpb.DELETE, Kv: kv("/p/a", 0, 9), PrevKv: kv("/p/a", 7, 8)},
	}
	want := []string{"/p/a@7 put create", "/p/a@8 put", "/p/a@9 delete"}
	prior := []WatchEvent{{Key: []byte("/p/z"), Revision: 1}}
	got := appendWatchEvents(prior, evs)
	if len(got) != 1+len(want) || string(got[0].Key) != "/p/z" {
		t.Fatalf("got %d events starting with %q, want the prior one and %d", len(got), got[0].Key, len(want))
	}
	for i, w := range want {
		ev := got[1+i]
		s := fmt.Sprintf("%s@%d %s", ev.Key, ev.Revision, map[EventType]string{EventPut: "put", EventDelete: "delete"}[ev.Type])
		if ev.Create {
			s += " create"
		}
		if s != w {
			t.Errorf("event %d: got %q, want %q", i, s, w)
		}
	}
}

// TestObserverCountsUnparsedResourceVersions: an event whose
// resourceVersion is not a revision is a counted violation that fails the
// validation, never a silent drop; the events around it are checked as
// usual.
func TestObserverCountsUnparsedResourceVersions(t *testing.T) {
	rec := hist(t, 12, create(10, "a"), put(11, "a"), put(12, "a"))
	env := NewEnv(time.Now(), 1024, 1, rec)
	o := env.NewObserver(4, testPrefix)
	o.StartWatch(10)
	o.Event(watchEvent(create(10, "a")), 0)
	o.UnparsedResourceVersion(testPrefix+"a", fmt.Errorf(`MODIFIED event: invalid resourceVersion "x"`))
	o.Event(watchEvent(put(12, "a")), 0)
	o.Finish()
	v := ValidationOf(env, 0, 0, 0)
	if v.UnparsedResourceVersions != 1 || v.OK() {
		t.Errorf("unparsed resourceVersions %d, OK %v; want 1 and not OK", v.UnparsedResourceVersions, v.OK())
	}
	// The event that was never checked is missing from the watch: lost.
	if v.Lost != 1 || len(v.Violations) != 2 {
		t.Fatalf("lost %d, violations %+v; want 1 lost (revision 11) and the unparsed one", v.Lost, v.Violations)
	}
	if x := v.Violations[0]; x.Kind != string(ViolationUnparsedResourceVersion) || x.Watcher != 4 || x.Key != testPrefix+"a" || !strings.Contains(x.Detail, `"x"`) {
		t.Errorf("first violation %+v, want the unparsed resourceVersion of watcher 4 at key %sa", x, testPrefix)
	}
}
