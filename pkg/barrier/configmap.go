package barrier

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kubestore/etcdkit/pkg/shard"
)

// ConfigMap is a barrier kept in one ConfigMap of a Kubernetes cluster,
// for workers run as an Indexed Job: worker i's arrival at point p is the
// data key "<p>.<i>" holding its arrival time (RFC 3339, UTC), its abort
// "abort.<i>" holding why. Workers write with optimistic concurrency (a
// read, then an update at the read's resourceVersion, again on Conflict)
// and create the ConfigMap if it is missing; they wait by a watch of that
// one object (fieldSelector metadata.name), so RBAC can confine them to
// it by resourceNames. Use a ConfigMap unique to one run: arrivals left
// by an earlier run in the same ConfigMap count as arrivals of this one.
//
// A ConfigMap holds at most 1 MiB (corev1.MaxSecretSize, which
// ConfigMap validation shares): about 20,000 arrivals of 50 bytes.
type ConfigMap struct {
	c         kubernetes.Interface
	namespace string
	name      string
	shard     shard.Shard
	now       func() time.Time
	// backoff paces the retries of an update that met a Conflict.
	backoff wait.Backoff
	// relistPause is the pause before a list that follows a watch's
	// error (other than 410 Gone, which relists at once).
	relistPause time.Duration
}

var _ Barrier = (*ConfigMap)(nil)

// conflictBackoff paces a worker's retries after a Conflict: every worker
// of a load may arrive within the same milliseconds and each update but
// one of a round conflicts, so the retries are jittered (up to twice the
// step) and go on for about a minute (30 steps capped at 2 s) rather than
// retry.DefaultRetry's five steps of 10 ms.
var conflictBackoff = wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 1, Steps: 30, Cap: 2 * time.Second}

// NewConfigMap returns worker s's view of the barrier kept in the
// ConfigMap namespace/name through c. It returns an error for an invalid
// shard, namespace (a DNS-1123 label) or name (a DNS-1123 subdomain).
func NewConfigMap(c kubernetes.Interface, namespace, name string, s shard.Shard) (*ConfigMap, error) {
	if err := validShard(s); err != nil {
		return nil, err
	}
	if err := validConfigMap(namespace, name); err != nil {
		return nil, err
	}
	return &ConfigMap{c: c, namespace: namespace, name: name, shard: s, now: time.Now,
		backoff: conflictBackoff, relistPause: time.Second}, nil
}

// ParseConfigMap reads "NAMESPACE/NAME" (as --barrier-configmap takes it)
// into its parts, with a one-line error naming what was wrong.
func ParseConfigMap(s string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok {
		return "", "", fmt.Errorf("barrier configmap %q: want NAMESPACE/NAME", s)
	}
	if err := validConfigMap(namespace, name); err != nil {
		return "", "", err
	}
	return namespace, name, nil
}

// validConfigMap returns an error unless namespace and name are a
// namespace's and a ConfigMap's valid names
// (k8s.io/apimachinery/pkg/api/validation ValidateNamespaceName and
// NameIsDNSSubdomain).
func validConfigMap(namespace, name string) error {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return fmt.Errorf("barrier configmap namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("barrier configmap name %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// String is "NAMESPACE/NAME", the ConfigMap the barrier is kept in.
func (b *ConfigMap) String() string { return b.namespace + "/" + b.name }

// Wait records this worker's arrival at point in the ConfigMap, then
// lists and watches the ConfigMap until every worker has arrived or one
// has aborted. A watch that ends, or fails (410 Gone after a compaction
// included), is followed by a new list.
func (b *ConfigMap) Wait(ctx context.Context, point string) (time.Time, error) {
	if err := checkPoint(point); err != nil {
		return time.Time{}, err
	}
	if err := b.set(ctx, fmt.Sprintf("%s.%d", point, b.shard.Index), formatTime(b.now())); err != nil {
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
		return time.Time{}, fmt.Errorf("barrier configmap %s: record arrival at %s: %w", b, point, err)
	}
	sel := fields.OneTermEqualSelector("metadata.name", b.name).String()
	cms := b.c.CoreV1().ConfigMaps(b.namespace)
	for {
		list, err := cms.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			if ctx.Err() != nil {
				// client-go's rate limiter says it would pass the
				// deadline, without ctx's error.
				return time.Time{}, ctx.Err()
			}
			return time.Time{}, fmt.Errorf("barrier configmap %s: read arrivals at %s: %w", b, point, err)
		}
		if len(list.Items) == 0 {
			return time.Time{}, fmt.Errorf("barrier configmap %s: deleted while waiting at %s", b, point)
		}
		if t, done, err := b.arrivals(&list.Items[0], point); done || err != nil {
			return t, err
		}
		w, err := cms.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			if ctx.Err() != nil {
				return time.Time{}, ctx.Err()
			}
			if !b.pause(ctx) {
				return time.Time{}, ctx.Err()
			}
			continue
		}
		t, done, gone, err := b.watch(ctx, w, point)
		w.Stop()
		if done || err != nil {
			return t, err
		}
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
		// The watch ended: at once after 410 Gone (the list's
		// resourceVersion was compacted), after a pause otherwise.
		if !gone && !b.pause(ctx) {
			return time.Time{}, ctx.Err()
		}
	}
}

// pause waits relistPause, reporting false when ctx ends first.
func (b *ConfigMap) pause(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(b.relistPause):
		return true
	}
}

// watch follows w until the arrivals at point are complete (done), an
// abort, a deletion of the ConfigMap or ctx's end (err), or the watch
// ends otherwise (neither; gone when it ended with 410 Gone).
func (b *ConfigMap) watch(ctx context.Context, w watch.Interface, point string) (_ time.Time, done, gone bool, _ error) {
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return time.Time{}, false, false, ctx.Err()
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return time.Time{}, false, false, nil
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
			cm, isCM := ev.Object.(*corev1.ConfigMap)
			if !isCM || cm.Name != b.name {
				continue
			}
			if t, done, err := b.arrivals(cm, point); done || err != nil {
				return t, done, false, err
			}
		case watch.Deleted:
			return time.Time{}, false, false, fmt.Errorf("barrier configmap %s: deleted while waiting at %s", b, point)
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			return time.Time{}, false, apierrors.IsGone(err) || apierrors.IsResourceExpired(err), nil
		}
	}
}

// arrivals reads the arrivals at point from cm's data: done with the
// latest arrival when every worker has arrived, an abort (the lowest
// index's) or a malformed key as the error. Keys of other points are
// ignored.
func (b *ConfigMap) arrivals(cm *corev1.ConfigMap, point string) (time.Time, bool, error) {
	a := newArrivals(b.shard.Count)
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var abort error
	abortIndex := -1
	for _, k := range keys {
		p, idx, ok := strings.Cut(k, ".")
		if !ok || (p != point && p != abortPoint) {
			continue
		}
		i, err := strconv.Atoi(idx)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("barrier configmap %s: key %s: worker index %q is not a number", b, k, idx)
		}
		if p == abortPoint {
			if abortIndex < 0 || i < abortIndex {
				abort, abortIndex = abortError(i, cm.Data[k]), i
			}
			continue
		}
		t, err := parseTime(cm.Data[k])
		if err != nil {
			return time.Time{}, false, fmt.Errorf("barrier configmap %s: key %s: arrival time: %w", b, k, err)
		}
		if err := a.add(i, t); err != nil {
			return time.Time{}, false, err
		}
	}
	if abort != nil {
		return time.Time{}, false, abort
	}
	if a.complete() {
		return a.latest, true, nil
	}
	return time.Time{}, false, nil
}

// Abort records this worker's abort with why in the ConfigMap.
func (b *ConfigMap) Abort(ctx context.Context, why string) error {
	if err := b.set(ctx, fmt.Sprintf("%s.%d", abortPoint, b.shard.Index), why); err != nil {
		return fmt.Errorf("barrier configmap %s: record abort: %w", b, err)
	}
	return nil
}

// set puts key = value into the ConfigMap's data: a get and an update at
// the got resourceVersion, repeated on Conflict (another worker updated
// it in between); a create when the ConfigMap is missing, followed by the
// update path when another worker created it first (AlreadyExists).
func (b *ConfigMap) set(ctx context.Context, key, value string) error {
	cms := b.c.CoreV1().ConfigMaps(b.namespace)
	return retry.OnError(b.backoff, func(err error) bool {
		return ctx.Err() == nil && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err))
	}, func() error {
		cm, err := cms.Get(ctx, b.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: b.name, Namespace: b.namespace, Labels: map[string]string{
					"app.kubernetes.io/name":      "lwbench",
					"app.kubernetes.io/component": "barrier",
				}},
				Data: map[string]string{key: value},
			}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[key] = value
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}

// DeleteConfigMap deletes the barrier's ConfigMap namespace/name through
// c, once every worker is done with it; a ConfigMap already gone is no
// error.
func DeleteConfigMap(ctx context.Context, c kubernetes.Interface, namespace, name string) error {
	if err := validConfigMap(namespace, name); err != nil {
		return err
	}
	err := c.CoreV1().ConfigMaps(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("barrier configmap %s/%s: delete: %w", namespace, name, err)
	}
	return nil
}

// FollowConfigMap watches the barrier kept in the ConfigMap
// namespace/name of a load of count workers without taking part, and
// calls onMet once for each point every worker has reached, in the order
// the points complete, with the latest arrival; an abort ends it with
// ErrAborted. A ConfigMap not created yet (the first worker creates it) is
// waited for. It returns when ctx ends (nil). `lwbench scrape` uses it to
// know the load's phase.
func FollowConfigMap(ctx context.Context, c kubernetes.Interface, namespace, name string, count int, onMet func(point string, latest time.Time)) error {
	if err := validConfigMap(namespace, name); err != nil {
		return err
	}
	if count < 1 {
		return fmt.Errorf("barrier configmap %s/%s: follow %d workers", namespace, name, count)
	}
	f := newFollower(count, onMet)
	apply := func(cm *corev1.ConfigMap) error {
		keys := make([]string, 0, len(cm.Data))
		for k := range cm.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p, idx, ok := strings.Cut(k, ".")
			if !ok {
				continue
			}
			i, err := strconv.Atoi(idx)
			if err != nil {
				return fmt.Errorf("barrier configmap %s/%s: key %s: worker index %q is not a number", namespace, name, k, idx)
			}
			if err := f.apply(p, i, cm.Data[k]); err != nil {
				return fmt.Errorf("barrier configmap %s/%s: %w", namespace, name, err)
			}
		}
		return nil
	}
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	cms := c.CoreV1().ConfigMaps(namespace)
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
			return true
		}
	}
	for ctx.Err() == nil {
		list, err := cms.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("barrier configmap %s/%s: read: %w", namespace, name, err)
		}
		for i := range list.Items {
			if err := apply(&list.Items[i]); err != nil {
				return err
			}
		}
		w, err := cms.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			if !pause() {
				return nil
			}
			continue
		}
		gone := false
	events:
		for {
			select {
			case <-ctx.Done():
				w.Stop()
				return nil
			case ev, ok := <-w.ResultChan():
				if !ok {
					break events
				}
				switch ev.Type {
				case watch.Added, watch.Modified:
					if cm, isCM := ev.Object.(*corev1.ConfigMap); isCM && cm.Name == name {
						if err := apply(cm); err != nil {
							w.Stop()
							return err
						}
					}
				case watch.Error:
					err := apierrors.FromObject(ev.Object)
					gone = apierrors.IsGone(err) || apierrors.IsResourceExpired(err)
					break events
				}
			}
		}
		w.Stop()
		if !gone && !pause() {
			return nil
		}
	}
	return nil
}
