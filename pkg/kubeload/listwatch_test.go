package kubeload

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubestore/etcdkit/pkg/watchload"
)

// newTestListWatch returns a listWatch of pods under /registry reporting
// into a fresh Env, whose Recorder has recorded nothing: every event the
// Observer is given stays unverified, so Finish counts them.
func newTestListWatch() (*listWatch, *watchload.Env) {
	rec := watchload.NewRecorder(nil, []string{"/registry/pods/"})
	env := watchload.NewEnv(time.Now(), 1024, 1, rec)
	lw := &listWatch{id: 2, resource: "pods", prefix: "/registry", log: &requestLog{}, env: env,
		obs: env.NewObserver(2, "/registry/pods/")}
	return lw, env
}

// TestWatchCountsUnparsedResourceVersions feeds one watch's events through
// the instrumented watch: an event or bookmark whose resourceVersion is
// not a revision ("" and "0" included) is counted and fails the
// validation, where it used to be dropped unchecked and uncounted; the
// other events reach the Observer.
func TestWatchCountsUnparsedResourceVersions(t *testing.T) {
	type ev struct {
		typ watch.EventType
		rv  string
	}
	tests := []struct {
		name             string
		events           []ev
		wantUnparsed     int64
		wantChecked      int64 // events the Observer was given
		wantLastRevision int64
	}{
		{name: "every resourceVersion a revision", events: []ev{{watch.Added, "10"}, {watch.Modified, "11"}, {watch.Bookmark, "11"}, {watch.Deleted, "12"}},
			wantChecked: 3, wantLastRevision: 12},
		{name: "an update's is text", events: []ev{{watch.Added, "10"}, {watch.Modified, "x11"}, {watch.Deleted, "12"}},
			wantUnparsed: 1, wantChecked: 2, wantLastRevision: 12},
		{name: "an update's is empty", events: []ev{{watch.Added, "10"}, {watch.Modified, ""}},
			wantUnparsed: 1, wantChecked: 1, wantLastRevision: 10},
		{name: "a delete's is 0", events: []ev{{watch.Added, "10"}, {watch.Deleted, "0"}},
			wantUnparsed: 1, wantChecked: 1, wantLastRevision: 10},
		{name: "a delete's is negative", events: []ev{{watch.Deleted, "-12"}},
			wantUnparsed: 1},
		{name: "a bookmark's is text", events: []ev{{watch.Added, "10"}, {watch.Bookmark, "eleven"}},
			wantUnparsed: 1, wantChecked: 1, wantLastRevision: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lw, env := newTestListWatch()
			lw.startWatch("9")
			inner := watch.NewFake()
			_, cancel := context.WithCancel(t.Context())
			w := &instrumentedWatch{lw: lw, r: lw.log.begin(Request{Verb: VerbWatch}), inner: inner, cancel: cancel,
				out: make(chan watch.Event), stop: make(chan struct{})}
			done := make(chan struct{})
			go func() {
				defer close(done)
				w.run()
			}()
			for _, e := range tt.events {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-1", Name: "a", ResourceVersion: e.rv}}
				inner.Action(e.typ, pod)
				<-w.out
			}
			inner.Stop()
			<-done
			checked := lw.obs.Finish()
			v := watchload.ValidationOf(env, 0, 0, 0)
			if v.UnparsedResourceVersions != tt.wantUnparsed || v.OK() != (tt.wantUnparsed == 0) {
				t.Errorf("unparsed resourceVersions %d, OK %v; want %d and %v (%s)", v.UnparsedResourceVersions, v.OK(), tt.wantUnparsed, tt.wantUnparsed == 0, v.Summary())
			}
			if checked != tt.wantChecked {
				t.Errorf("events given to the Observer %d, want %d", checked, tt.wantChecked)
			}
			if got := lw.LastRevision(); got != tt.wantLastRevision {
				t.Errorf("last revision %d, want %d", got, tt.wantLastRevision)
			}
			for _, x := range v.Violations {
				if x.Kind != string(watchload.ViolationUnparsedResourceVersion) || x.Watcher != 2 {
					t.Errorf("violation %+v, want only unparsed resourceVersions of informer 2", x)
				}
			}
		})
	}
}

// TestStartWatchResourceVersions: a WATCH from "" (the most recent) or
// "0" (any) names no start revision and is no error; one from text is
// counted.
func TestStartWatchResourceVersions(t *testing.T) {
	tests := []struct {
		rv           string
		wantUnparsed int64
	}{
		{"", 0}, {"0", 0}, {"17", 0}, {"seventeen", 1}, {"18446744073709551616", 1},
	}
	for _, tt := range tests {
		lw, env := newTestListWatch()
		lw.startWatch(tt.rv)
		if got := watchload.ValidationOf(env, 0, 0, 0).UnparsedResourceVersions; got != tt.wantUnparsed {
			t.Errorf("WATCH from %q: unparsed resourceVersions %d, want %d", tt.rv, got, tt.wantUnparsed)
		}
	}
}
