package kubeload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestore/etcdkit/internal/clockwait"
	"github.com/kubestore/etcdkit/internal/parallel"
	"github.com/kubestore/etcdkit/pkg/report"
	"github.com/kubestore/etcdkit/pkg/shard"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// LoadOptions shape a Load.
type LoadOptions struct {
	// Pods are seeded, spread across Namespaces namespaces (10).
	Pods, Namespaces int
	// Mix is the writes' mix (watchload.DefaultMix's kinds by default);
	// every write goes to a pod.
	Mix watchload.Mix
	// Workers are the API writers, each a client of its own (16); the
	// seeding uses them all.
	Workers int
	// Seed makes the objects and writes reproducible (1).
	Seed uint64
	// RunID names the namespaces (lwbench-<RunID>-N, on a shared cluster
	// lwbench-<RunID>-ns-N) and is RunLabel's value there; "" means 8
	// random hex digits.
	RunID string
	// NamespaceDeleteTimeout bounds Close's wait for a shared cluster's
	// namespaces to be gone; 0 means DefaultNamespaceDeleteTimeout.
	NamespaceDeleteTimeout time.Duration
	// Logf, if set, receives what the load could not do but went on
	// without.
	Logf func(format string, args ...any)
	// Shard is this process's part of a Load divided among worker
	// processes (pkg/experiment's Common.Shard); the zero value and
	// shard.Whole: undivided. Every worker plans the same pods (RunID
	// must then be given, the same in each), shard 0 alone seeds them;
	// the others only watch, list and validate.
	Shard shard.Shard
	// Meet waits at a barrier point of a divided Load until every worker
	// has arrived there (pkg/experiment's barrier points); required when
	// Shard.Count > 1. NewLoad meets at "recording" (every worker's
	// history recorder runs: none misses a seeded pod) and "seeded"
	// (shard 0's seeding is done).
	Meet func(ctx context.Context, point string) error
}

// divided reports whether the options are one worker's of a Load
// divided among workers.
func (o LoadOptions) divided() bool { return o.Shard.Count > 1 }

func (o LoadOptions) defaults() LoadOptions {
	if o.Namespaces <= 0 {
		o.Namespaces = 10
	}
	if o.Mix == (watchload.Mix{}) {
		o.Mix = watchload.DefaultMix
	}
	if o.Workers <= 0 {
		o.Workers = 16
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.RunID == "" {
		o.RunID = fmt.Sprintf("%08x", rand.Uint32())
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.NamespaceDeleteTimeout <= 0 {
		o.NamespaceDeleteTimeout = DefaultNamespaceDeleteTimeout
	}
	return o
}

// Load is pods seeded through kube-apiserver with etcd's history of them
// recorded from the end of the seeding on: the part of an experiment's
// load through the real stack that its cases share, as an experiment's
// load of the etcd-direct model is. Each case (StartCase) has client-go
// informers and writers of its own, validated against the one history.
// On a cluster lwbench does not own (Stack.Shared) it keeps to namespaces
// of its own as a run does (NewClients): refused if one exists, every object labelled
// RunLabel, informers, lists and watches selecting on it, the history and
// the final comparison confined to those namespaces, and Close deletes
// exactly them. A Load is used by one goroutine.
type Load struct {
	st         Stack
	s          *watchload.Session
	admin      *clientv3.Client // s's maintenance connection
	rec        *watchload.Recorder
	logf       func(string, ...any)
	wl         *APIWorkload
	workers    int
	podsPrefix string
	seededAt   int64
	lister     kubernetes.Interface // ListPage's client, made on first use
	scope      *sharedScope         // on a shared cluster; nil otherwise
	deleteWait time.Duration        // Close's bound on a shared cluster
	shard      shard.Shard          // this worker's part; shard.Whole undivided
}

// NewLoad starts s's history recorder of st's pods prefix from etcd's
// next revision, then seeds o.Pods pods through st's apiservers with
// client-go (in namespaces lwbench-<RunID>-N, which it creates). s is
// the experiment's Session on st.Etcd, of which the Load opens a
// maintenance connection and the recorder; closing s closes them.
//
// Divided among workers (o.Shard), every worker starts its recorder, they
// meet (o.Meet "recording"), shard 0 seeds, and they meet again
// ("seeded"); it is an error to divide a Load without o.RunID or o.Meet.
func NewLoad(ctx context.Context, s *watchload.Session, st Stack, o LoadOptions) (*Load, error) {
	installGates()
	if o.divided() && (o.RunID == "" || o.Meet == nil) {
		return nil, fmt.Errorf("worker %s: a Load divided among workers needs the run ID every worker shares and a barrier (kubeload.LoadOptions.RunID, Meet)", o.Shard)
	}
	o = o.defaults()
	if o.Shard.Count == 0 {
		o.Shard = shard.Whole
	}
	if st.EtcdPrefix == "" {
		st.EtcdPrefix = "/registry"
	}
	nsPrefix := "lwbench-" + o.RunID + "-"
	if st.Shared {
		nsPrefix += "ns-" // as a run's
	}
	plan, err := watchload.NewKubernetesWorkload(watchload.KubernetesWorkloadOptions{
		Prefix: st.EtcdPrefix, Namespaces: o.Namespaces, Pods: o.Pods, Mix: o.Mix,
		ResourceMix: watchload.ResourceMix{PodsPercent: 100}, Workers: o.Workers, Seed: o.Seed,
		NamespacePrefix: nsPrefix,
	})
	if err != nil {
		return nil, err
	}
	wl, err := NewAPIWorkload(st.Connections, plan, o.Workers, o.Seed)
	if err != nil {
		return nil, err
	}
	l := &Load{st: st, s: s, wl: wl, workers: o.Workers, podsPrefix: watchload.ResourcePrefix(st.EtcdPrefix, watchload.ResourcePods), logf: o.Logf,
		deleteWait: o.NamespaceDeleteTimeout, shard: o.Shard}
	if st.Shared {
		sc := newSharedScope(o.RunID, st.EtcdPrefix, plan)
		l.scope = &sc
		if err := refuseExisting(ctx, st.RESTConfig, plan.Namespaces()); err != nil {
			return nil, err
		}
		wl.OwnNamespaces(map[string]string{RunLabel: sc.id})
	}
	if l.admin, err = s.DialAdmin(ctx); err != nil {
		return nil, err
	}
	head, err := l.admin.Get(ctx, l.podsPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("read etcd's revision: %w", err)
	}
	var within []string
	fallback := ""
	if l.scope != nil {
		// A shared cluster's etcd user may not watch the whole key space.
		within, fallback = l.scope.within(l.podsPrefix), st.EtcdPrefix+"/"
	}
	// The history starts before the seeding: an informer may list from
	// the watch cache at resourceVersion "0" (any), a state the cache
	// holds from before the last seeded pods, and watch from there, so
	// that the seeding's last creates reach it as events. The recorder
	// outlives ctx's cancellation until the Session closes.
	if l.rec, err = s.StartRecorderWithin(context.WithoutCancel(ctx), []string{l.podsPrefix}, within, fallback, head.Header.Revision+1); err != nil {
		return nil, err
	}
	if o.divided() {
		if err := o.Meet(ctx, "recording"); err != nil {
			return l, err
		}
	}
	if o.Shard.Index == 0 {
		if _, err := wl.Seed(ctx, o.Workers); err != nil {
			return l, fmt.Errorf("seed %d pods through kube-apiserver: %w", o.Pods, err)
		}
	}
	if o.divided() {
		if err := o.Meet(ctx, "seeded"); err != nil {
			return l, err
		}
	}
	seeded, err := l.admin.Get(ctx, l.podsPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return l, fmt.Errorf("read etcd's revision: %w", err)
	}
	l.seededAt = seeded.Header.Revision
	return l, nil
}

// Close deletes, on a shared cluster, exactly the namespaces the Load
// created, their objects first (as a run does at its end), waits for them to
// be gone, and returns what it did; elsewhere it does nothing and returns
// nil (the namespaces stay, with the cluster lwbench owns). NewLoad
// returns the Load with its error when it created namespaces before it
// failed: Close it too. Divided, shard 0 created the namespaces and alone
// deletes them; call its Close once every worker is done with the Load.
func (l *Load) Close(ctx context.Context) *report.Cleanup {
	if l == nil || l.scope == nil || l.shard.Index != 0 {
		return nil
	}
	return deleteNamespaces(context.WithoutCancel(ctx), l.st.RESTConfig, l.wl.CreatedNamespaces(), l.scope.selector, l.deleteWait, l.logf)
}

// DeletePods deletes every pod in the namespaces the Load created (grace
// period 0: no kubelet runs them; the cases' creates included) and
// returns how many it listed there first: the end of a Load on
// kube-apiservers of lwbench's own that a later Load shares (an
// experiment divided among workers through its coordinator's
// kube-apiservers, one --etcd-prefix for all its loads), so that the
// later Load's LISTs read its own pods alone. The namespaces stay: no
// namespace controller runs there to finalize their deletion. Divided,
// only shard 0 created namespaces; elsewhere it deletes nothing.
func (l *Load) DeletePods(ctx context.Context) (int, error) {
	cs, err := kubernetes.NewForConfig(clientConfig(l.st.RESTConfig))
	if err != nil {
		return 0, err
	}
	zero := int64(0)
	deleted := 0
	for _, ns := range l.wl.CreatedNamespaces() {
		pods := cs.CoreV1().Pods(ns)
		list, err := pods.List(ctx, l.listOptions())
		if err != nil {
			return deleted, fmt.Errorf("list the pods of %s: %w", ns, err)
		}
		deleted += len(list.Items)
		if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, l.listOptions()); err != nil {
			return deleted, fmt.Errorf("delete the pods of %s: %w", ns, err)
		}
	}
	return deleted, nil
}

// listOptions are the options of every LIST and WATCH of the Load's pods:
// on a shared cluster, only the Load's objects.
func (l *Load) listOptions() metav1.ListOptions {
	if l.scope == nil {
		return metav1.ListOptions{}
	}
	return metav1.ListOptions{LabelSelector: l.scope.selector}
}

// SeededAt is etcd's revision once the seeding was done.
func (l *Load) SeededAt() int64 { return l.seededAt }

// Stack is the stack the load runs through.
func (l *Load) Stack() Stack { return l.st }

// CaseOptions shape one Case of a Load.
type CaseOptions struct {
	// Informers are client-go informers of the pods in every namespace,
	// each on a client (and connection) of its own.
	Informers int
	// WatchList is client-go's WatchListClient gate of the informers
	// (nil: client-go's default, on since 1.35).
	WatchList *bool
	// PageSize, when set, is the limit of every LIST page the informers
	// send, as client-go's Reflector.WatchListPageSize sets it (0:
	// unpaginated); nil leaves the pages to client-go (500, or none where
	// the reflector chooses to read the watch cache,
	// k8s.io/client-go/tools/cache/reflector.go list). It does not apply
	// to a WATCHLIST.
	PageSize *int64
	// SyncTimeout bounds the wait until every informer has synced.
	SyncTimeout time.Duration
	// RingCapacity is how many revisions back an event can be joined
	// with its write (watchload.Session.NewEnv).
	RingCapacity int64
}

// Case is one case of a Load, the real stack's watchload.ClientSet:
// client-go informers and API writers of its own on an Env of its own,
// over the Load's history recorder. The phases are methods, in this
// order, as watchload.Case's:
//
//	Load.StartCase   the Env, the informers synced
//	Write            the writers, open loop, through kube-apiserver
//	StopWrites       end the writes and count them
//	Confirm          wait until every informer's cache equals etcd at a revision
//	Validate         stop the informers, complete their validation
//	Close            stop what runs
//
// Hold, Release and HoldAll hold informers back at any time in between.
// A Case is used by one goroutine; its informers and writers run on their
// own until Validate or Close.
type Case struct {
	l       *Load
	env     *watchload.Env
	set     *InformerSet
	writing *watchload.Writing // nil when no writes run
	final   int64              // the revision Confirm waited for
}

// StartCase starts o.Informers informers of the Load's pods and waits
// until every one has synced. They run under a context of their own,
// outliving ctx's cancellation until Validate or Close. It returns an
// error if one has not synced within o.SyncTimeout or ctx ends; the case
// is then closed.
func (l *Load) StartCase(ctx context.Context, o CaseOptions) (*Case, error) {
	c := &Case{l: l, env: l.s.NewEnv(o.RingCapacity, l.workers)}
	resources := make([]string, o.Informers)
	for i := range resources {
		resources[i] = watchload.ResourcePods
	}
	var err error
	c.set, err = NewInformerSet(l.st.Connections, c.env, l.st.EtcdPrefix, resources, o.WatchList)
	if err != nil {
		return nil, err
	}
	if l.scope != nil {
		c.set.SelectLabels(l.scope.selector)
	}
	if o.PageSize != nil {
		for _, in := range c.set.Informers {
			ps := *o.PageSize
			in.lw.pageSize = &ps
		}
	}
	if err := c.set.Start(ctx, o.SyncTimeout); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Env returns the case's Env.
func (c *Case) Env() *watchload.Env { return c.env }

// Set returns the case's informers as a set; informer i has ID i.
func (c *Case) Set() *InformerSet { return c.set }

// Informers returns the case's informers as watchload.Informers;
// informer i has ID i.
func (c *Case) Informers() []watchload.Informer {
	out := make([]watchload.Informer, len(c.set.Informers))
	for i := range out {
		out[i] = caseInformer{c: c, i: i}
	}
	return out
}

// RequestProgress does nothing: client-go's informers learn the store's
// revision from kube-apiserver's bookmarks, on its own schedule.
func (c *Case) RequestProgress(context.Context) {}

var _ watchload.ClientSet = (*Case)(nil)

// caseInformer is informer i of a Case, as a watchload.Informer.
type caseInformer struct {
	c *Case
	i int
}

func (a caseInformer) ID() int             { return a.i }
func (a caseInformer) Hold()               { a.c.set.Hold(a.i) }
func (a caseInformer) Release()            { a.c.set.Release(a.i) }
func (a caseInformer) LastRevision() int64 { return a.c.set.LastRevision(a.i) }

// Relists are the informer's LIST phases after its first (relistsOf
// over its requests): only those that listed.
func (a caseInformer) Relists() []report.Relist {
	var rs []Request
	for _, r := range a.c.set.Requests() {
		if r.Informer == a.i {
			rs = append(rs, r)
		}
	}
	return relistsOf(a.i, a.c.set.Informers[a.i].Resource, rs)
}

// Write starts the Load's writers on the case's Env (watchload.StartWriting
// with o; o.Workers 0 means the Load's), under a context derived from
// parent, until their schedule is done, parent ends, or StopWrites,
// Validate or Close.
func (c *Case) Write(parent context.Context, o watchload.WriterOptions) error {
	if o.Workers <= 0 {
		o.Workers = c.l.workers
	}
	w, err := watchload.StartWriting(parent, c.env, []watchload.KV{nil}, c.l.wl, o)
	if err != nil {
		return err
	}
	c.writing = w
	return nil
}

// StopWrites ends the writes at once and returns what the writers did,
// with the latency of every write the Env recorded; zero if none ran or
// they were stopped before.
func (c *Case) StopWrites() report.WriteStats {
	ws := c.writing.StopMeasured(c.env)
	c.writing = nil
	return ws
}

// HoldAll holds every informer (InformerSet.Hold), all at once, waits
// until each one's watch has ended, and returns the highest revision any
// of them will resume after: a compaction above it + 1 makes every resumed
// watch that reaches etcd fail. It returns ctx's error if ctx ends first;
// the informers stay held until Release either way.
func (c *Case) HoldAll(ctx context.Context) (int64, error) {
	for i := range c.set.Informers {
		c.set.Hold(i)
	}
	var held int64
	for i, in := range c.set.Informers {
		for in.lw.watching() {
			if !clockwait.SleepReal(ctx, 5*time.Millisecond) {
				return 0, ctx.Err()
			}
		}
		held = max(held, c.set.LastRevision(i))
	}
	return held, nil
}

// Confirm waits until every informer's cache equals etcd's pods at
// revision rev (their keys and mod_revisions), or at a later revision if
// the store moved after rev (a write whose request was cancelled when the
// writes stopped may still commit), or timeout passes; it reports the
// differences of those that did not as cache violations and returns how
// many did not. Validate then waits for the history to reach the revision
// confirmed.
func (c *Case) Confirm(ctx context.Context, rev int64, timeout time.Duration) (unsynced int) {
	unsynced, c.final = confirm(ctx, c.l.admin, c.set, c.l.st.EtcdPrefix, c.l.scope, rev, timeout, c.l.logf)
	return unsynced
}

// Validate stops the writes and the informers, waits (up to 30 s) until
// the Load's history covers the confirmed revision, completes every
// informer's validation against it and counts the violations
// (watchload.ValidationOf; unsynced is what Confirm returned). Its error
// is always nil: the informers' caches were compared with etcd by
// Confirm.
func (c *Case) Validate(ctx context.Context, unsynced int) (report.Validation, error) {
	c.StopWrites()
	c.set.Stop()
	if last := max(c.final, c.set.LastRevisionOfAll()); c.final > 0 {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := c.l.rec.WaitFor(wctx, last, 100*time.Millisecond); err != nil {
			c.l.logf("history recorder did not reach revision %d: %v", last, err)
		}
		cancel()
	}
	var unverified int64
	for _, in := range c.set.Informers {
		unverified += in.lw.obs.Finish()
	}
	return watchload.ValidationOf(c.env, unsynced, unverified, 0), nil
}

// Close ends the writes and the informers and waits for the informers. It
// may be called more than once.
func (c *Case) Close() {
	c.StopWrites()
	if c.set != nil {
		c.set.Stop()
	}
}

// UpdatePods patches the status of the Load's seeded pods n times in all,
// round robin, with concurrency patches in flight, each a change (the
// status message carries the update's number) and so one revision, and
// returns the revisions (the resourceVersions kube-apiserver returned),
// in no particular order. Pods a case deleted are not seeded pods' names
// any more; call it before any case writes.
func (l *Load) UpdatePods(ctx context.Context, n, concurrency int) ([]int64, error) {
	var pods []watchload.Op
	for _, op := range l.wl.seeded {
		if op.Resource == watchload.ResourcePods {
			pods = append(pods, op)
		}
	}
	if len(pods) == 0 {
		return nil, errors.New("no seeded pods to update")
	}
	concurrency = max(min(concurrency, len(l.wl.clients)), 1)
	revs := make([]int64, n)
	err := parallel.Each(ctx, concurrency, n, func(ctx context.Context, w, i int) error {
		p := pods[i%len(pods)]
		patch := fmt.Sprintf(`{"status":{"message":"lwbench update %d"}}`, i)
		got, err := l.wl.clients[w].CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		if err != nil {
			return fmt.Errorf("patch the status of pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		revs[i] = revisionOf(got.ResourceVersion)
		return nil
	})
	return revs, err
}

// WatchResult is what a WATCH of the Load's pods from a resourceVersion
// delivered (WatchFrom).
type WatchResult struct {
	// Revisions are the resourceVersions of its events, in order
	// (bookmarks apart).
	Revisions []int64
	// Bookmarks counts its bookmarks; Bytes its response bytes.
	Bookmarks int64
	Bytes     int64
	// Expired is true when kube-apiserver answered 410: the
	// resourceVersion is compacted in etcd or older than its watch cache
	// holds ("too old resource version"); the watch delivered nothing.
	Expired bool
}

// WatchFrom watches the Load's pods in every namespace from
// resourceVersion rv (events after it, with bookmarks allowed), as a
// reflector resumes its watch, until an event at or past until arrives,
// kube-apiserver answers 410, or ctx ends (an error).
func (l *Load) WatchFrom(ctx context.Context, rv, until int64) (WatchResult, error) {
	var res WatchResult
	cs, err := kubernetes.NewForConfig(clientConfig(l.st.RESTConfig))
	if err != nil {
		return res, err
	}
	r := &openRequest{}
	wctx, cancel := context.WithCancel(withRequest(ctx, r))
	defer cancel()
	opts := l.listOptions()
	opts.ResourceVersion, opts.AllowWatchBookmarks = strconv.FormatInt(rv, 10), true
	w, err := cs.CoreV1().Pods("").Watch(wctx, opts)
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		res.Expired = true
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("watch pods from resourceVersion %d: %w", rv, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return res, fmt.Errorf("watch pods from resourceVersion %d ended at %v, before %d", rv, res.last(), until)
			}
			res.Bytes = r.bytes.Load()
			switch ev.Type {
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					res.Expired = true
					return res, nil
				}
				return res, fmt.Errorf("watch pods from resourceVersion %d: %w", rv, err)
			case watch.Bookmark:
				res.Bookmarks++
			default:
				m, err := meta.Accessor(ev.Object)
				if err != nil {
					continue
				}
				rev := revisionOf(m.GetResourceVersion())
				res.Revisions = append(res.Revisions, rev)
				if rev >= until {
					return res, nil
				}
			}
		}
	}
}

// last is the newest revision delivered, 0 if none.
func (r WatchResult) last() int64 {
	if len(r.Revisions) == 0 {
		return 0
	}
	return r.Revisions[len(r.Revisions)-1]
}

// ListResult is one LIST of the Load's pods (ListPods).
type ListResult struct {
	// Pages are its requests, Objects the pods listed, Bytes the response
	// bytes, Duration from the first request to the last page.
	Pages    int
	Objects  int64
	Bytes    int64
	Duration time.Duration
}

// ListPage reads one page of the Load's pods in every namespace, at most
// limit of them (0: all): the first at the latest revision (cont "", a
// consistent read), or the one after cont, a continue token of the page
// before, as client-go's pager sends them. It returns the page's pods,
// its response bytes and the next page's continue token ("" at the end);
// expired is true when kube-apiserver answered 410 because cont's revision
// is compacted (or no longer in the watch cache's snapshots): the list
// must start again (k8s.io/apiserver/pkg/storage/etcd3/store.go GetList;
// client-go's pager then lists once without a limit,
// k8s.io/client-go/tools/pager/pager.go FullListIfExpired).
func (l *Load) ListPage(ctx context.Context, cont string, limit int64) (objects, bytes int64, next string, expired bool, err error) {
	if l.lister == nil {
		if l.lister, err = kubernetes.NewForConfig(clientConfig(l.st.RESTConfig)); err != nil {
			return 0, 0, "", false, err
		}
	}
	r := &openRequest{}
	opts := l.listOptions()
	opts.Limit, opts.Continue = limit, cont
	list, err := l.lister.CoreV1().Pods("").List(withRequest(ctx, r), opts)
	if cont != "" && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) {
		return 0, r.bytes.Load(), "", true, nil
	}
	if err != nil {
		return 0, r.bytes.Load(), "", false, fmt.Errorf("list pods: %w", err)
	}
	return int64(len(list.Items)), r.bytes.Load(), list.Continue, false, nil
}

// ListPods lists the Load's pods in every namespace at the latest
// revision (resourceVersion "", a consistent read), in pages of limit
// with their continue tokens as client-go's pager sends them (0:
// unpaginated).
func (l *Load) ListPods(ctx context.Context, limit int64) (ListResult, error) {
	var res ListResult
	cs, err := kubernetes.NewForConfig(clientConfig(l.st.RESTConfig))
	if err != nil {
		return res, err
	}
	start := time.Now()
	cont := ""
	for {
		r := &openRequest{}
		opts := l.listOptions()
		opts.Limit, opts.Continue = limit, cont
		list, err := cs.CoreV1().Pods("").List(withRequest(ctx, r), opts)
		if err != nil {
			return res, fmt.Errorf("list pods (page %d): %w", res.Pages+1, err)
		}
		res.Pages++
		res.Objects += int64(len(list.Items))
		res.Bytes += r.bytes.Load()
		cont = list.Continue
		if cont == "" {
			break
		}
	}
	res.Duration = time.Since(start)
	return res, nil
}
