package barrier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/pkg/shard"
)

// Etcd is a barrier kept under one key prefix of an etcd cluster: worker
// i's arrival at point p is the key <key>/<p>/<i> holding its arrival
// time (RFC 3339, UTC), its abort <key>/abort/<i> holding why. Keep the
// key outside the load's prefix (a load's informers and history recorder
// watch only under theirs) and unique to one run: arrivals left by an
// earlier run under the same key count as arrivals of this one.
type Etcd struct {
	c     *clientv3.Client
	key   string
	shard shard.Shard
	now   func() time.Time
}

var _ Barrier = (*Etcd)(nil)

// NewEtcd returns worker s's view of the barrier under key on c. It
// returns an error for an invalid shard or an empty key.
func NewEtcd(c *clientv3.Client, key string, s shard.Shard) (*Etcd, error) {
	if err := validShard(s); err != nil {
		return nil, err
	}
	key = strings.TrimRight(key, "/")
	if key == "" {
		return nil, errors.New("barrier: empty etcd key")
	}
	return &Etcd{c: c, key: key, shard: s, now: time.Now}, nil
}

// Key returns the barrier's key prefix, without a trailing slash.
func (b *Etcd) Key() string { return b.key }

// Wait puts this worker's arrival at point, then reads and watches the
// barrier's keys until every worker has arrived or one has aborted.
func (b *Etcd) Wait(ctx context.Context, point string) (time.Time, error) {
	if err := checkPoint(point); err != nil {
		return time.Time{}, err
	}
	self := fmt.Sprintf("%s/%s/%d", b.key, point, b.shard.Index)
	if _, err := b.c.Put(ctx, self, formatTime(b.now())); err != nil {
		return time.Time{}, fmt.Errorf("barrier %s: record arrival at %s: %w", b.key, point, err)
	}
	for {
		a := newArrivals(b.shard.Count)
		resp, err := b.c.Get(ctx, b.key+"/", clientv3.WithPrefix())
		if err != nil {
			return time.Time{}, fmt.Errorf("barrier %s: read arrivals at %s: %w", b.key, point, err)
		}
		for _, kv := range resp.Kvs {
			if err := b.apply(a, point, string(kv.Key), string(kv.Value)); err != nil {
				return time.Time{}, err
			}
		}
		if a.complete() {
			return a.latest, nil
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		t, done, err := b.watch(wctx, a, point, resp.Header.Revision+1)
		cancel()
		if done || err != nil {
			return t, err
		}
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
		// The watch ended (compacted, leader lost): read again.
	}
}

// watch follows the barrier's keys from rev until a is complete (done),
// an abort or ctx's end (err), or the watch ends otherwise (neither).
func (b *Etcd) watch(ctx context.Context, a *arrivals, point string, rev int64) (time.Time, bool, error) {
	for wr := range b.c.Watch(ctx, b.key+"/", clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if wr.Err() != nil {
			return time.Time{}, false, nil
		}
		for _, ev := range wr.Events {
			if ev.Type != clientv3.EventTypePut {
				continue
			}
			if err := b.apply(a, point, string(ev.Kv.Key), string(ev.Kv.Value)); err != nil {
				return time.Time{}, false, err
			}
		}
		if a.complete() {
			return a.latest, true, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return time.Time{}, false, err
	}
	return time.Time{}, false, nil
}

// apply adds one barrier key to a: an arrival at point, or an abort
// (returned as the error); keys of other points are ignored.
func (b *Etcd) apply(a *arrivals, point, key, value string) error {
	rest, ok := strings.CutPrefix(key, b.key+"/")
	if !ok {
		return nil
	}
	p, idx, ok := strings.Cut(rest, "/")
	if !ok || (p != point && p != abortPoint) {
		return nil
	}
	i, err := strconv.Atoi(idx)
	if err != nil {
		return fmt.Errorf("barrier %s: key %s: worker index %q is not a number", b.key, key, idx)
	}
	if p == abortPoint {
		return abortError(i, value)
	}
	t, err := parseTime(value)
	if err != nil {
		return fmt.Errorf("barrier %s: key %s: arrival time: %w", b.key, key, err)
	}
	return a.add(i, t)
}

// Abort puts this worker's abort with why.
func (b *Etcd) Abort(ctx context.Context, why string) error {
	if _, err := b.c.Put(ctx, fmt.Sprintf("%s/%s/%d", b.key, abortPoint, b.shard.Index), why); err != nil {
		return fmt.Errorf("barrier %s: record abort: %w", b.key, err)
	}
	return nil
}

// DeleteEtcd deletes the barrier under key, once every worker is done
// with it (the coordinator's, or whoever created the key).
func DeleteEtcd(ctx context.Context, c *clientv3.Client, key string) error {
	key = strings.TrimRight(key, "/")
	if key == "" {
		return errors.New("barrier: empty etcd key")
	}
	if _, err := c.Delete(ctx, key+"/", clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("barrier %s: delete: %w", key, err)
	}
	return nil
}

// FollowEtcd watches the barrier under key of a load of count workers
// without taking part, and calls onMet once for each point every worker
// has reached, in the order the points complete, with the latest arrival;
// an abort ends it with ErrAborted. It returns when ctx ends (nil) or the
// barrier cannot be read. The coordinator of `lwbench run --workers` uses
// it to know the load's phase.
func FollowEtcd(ctx context.Context, c *clientv3.Client, key string, count int, onMet func(point string, latest time.Time)) error {
	key = strings.TrimRight(key, "/")
	if count < 1 || key == "" {
		return fmt.Errorf("barrier: follow %q of %d workers", key, count)
	}
	f := newFollower(count, onMet)
	apply := func(k, v string) error {
		rest, ok := strings.CutPrefix(k, key+"/")
		if !ok {
			return nil
		}
		p, idx, ok := strings.Cut(rest, "/")
		if !ok {
			return nil
		}
		i, err := strconv.Atoi(idx)
		if err != nil {
			return fmt.Errorf("barrier %s: key %s: worker index %q is not a number", key, k, idx)
		}
		if err := f.apply(p, i, v); err != nil {
			return fmt.Errorf("barrier %s: %w", key, err)
		}
		return nil
	}
	rev := int64(0)
	for ctx.Err() == nil {
		if rev == 0 {
			resp, err := c.Get(ctx, key+"/", clientv3.WithPrefix())
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("barrier %s: read: %w", key, err)
			}
			for _, kv := range resp.Kvs {
				if err := apply(string(kv.Key), string(kv.Value)); err != nil {
					return err
				}
			}
			rev = resp.Header.Revision + 1
		}
		for wr := range c.Watch(clientv3.WithRequireLeader(ctx), key+"/", clientv3.WithPrefix(), clientv3.WithRev(rev)) {
			if wr.Err() != nil {
				rev = 0 // compacted, or the leader lost: read again
				break
			}
			for _, ev := range wr.Events {
				rev = ev.Kv.ModRevision + 1
				if ev.Type != clientv3.EventTypePut {
					continue
				}
				if err := apply(string(ev.Kv.Key), string(ev.Kv.Value)); err != nil {
					return err
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}
