package watchload

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// TestShardsWriteTheWholeLoadOnce runs a load undivided under one prefix,
// then as three shards one after the other under another, each shard a
// workload of its own as a separate worker would build it from (i, 3) and
// the same options. Each shard leaves exactly the keys the undivided run
// leaves in the namespaces it owns, and none in the others; together the
// shards seed and send as many writes as the undivided run.
func TestShardsWriteTheWholeLoadOnce(t *testing.T) {
	c := etcdtest.NewClient(t, etcdtest.RunEtcd(t))
	const total = 150
	run := func(prefix string, s shard.Shard) (keys []string, seeded int, sent int64) {
		wl, err := NewKubernetesWorkload(KubernetesWorkloadOptions{Prefix: prefix, Namespaces: 5, Pods: 20, ConfigMaps: 5, Events: 10,
			Mix: DefaultMix, ResourceMix: DefaultResourceMix, Workers: 2, Seed: 7, Shard: s})
		if err != nil {
			t.Fatal(err)
		}
		counts, err := wl.Seed(t.Context(), []KV{c}, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range counts {
			seeded += n
		}
		env := NewEnv(time.Now(), 1024, 2, nil)
		w, err := NewWriters(env, []KV{c}, wl, WriterOptions{Rate: 2000, Total: total, Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		st := w.Run(t.Context())
		if st.Errors != 0 || st.Unsent != 0 || st.Sent != st.Planned {
			t.Fatalf("shard %v: %+v", s, st)
		}
		resp, err := c.Get(t.Context(), prefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			keys = append(keys, string(kv.Key[len(prefix):]))
		}
		return keys, seeded, st.Sent
	}
	// namespaceOf returns the namespace number of a key /<resource>/ns-<n>/<name>.
	namespaceOf := func(key string) int {
		parts := strings.Split(key, "/")
		n, err := strconv.Atoi(strings.TrimPrefix(parts[2], "ns-"))
		if err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		return n
	}
	inShard := func(keys []string, s shard.Shard) []string {
		var out []string
		for _, k := range keys {
			if s.Owns(namespaceOf(k), 5) {
				out = append(out, k)
			}
		}
		return out
	}
	whole, wholeSeeded, wholeSent := run("/whole", shard.Whole)
	if wholeSeeded != 35 || wholeSent != total {
		t.Fatalf("undivided: seeded %d, sent %d", wholeSeeded, wholeSent)
	}
	var seeded int
	var sent int64
	var keys []string
	for i := range 3 {
		s := shard.Shard{Index: i, Count: 3}
		// The shards share the prefix: what shard i leaves is what the
		// sharded prefix holds in its namespaces.
		var n int
		var m int64
		keys, n, m = run("/sharded", s)
		seeded, sent = seeded+n, sent+m
		if n == 0 || m == 0 {
			t.Errorf("shard %v wrote nothing (seeded %d, sent %d)", s, n, m)
		}
		if got, want := inShard(keys, s), inShard(whole, s); !slices.Equal(got, want) {
			t.Errorf("shard %v left %d keys in its namespaces, the undivided run %d:\n%v\n%v", s, len(got), len(want), got, want)
		}
		for j := i + 1; j < 3; j++ {
			if later := inShard(keys, shard.Shard{Index: j, Count: 3}); len(later) != 0 {
				t.Errorf("after shard %v: keys of shard %d/3 written: %v", s, j, later)
			}
		}
	}
	if seeded != wholeSeeded || sent != wholeSent {
		t.Errorf("shards seeded %d and sent %d writes; undivided %d and %d", seeded, sent, wholeSeeded, wholeSent)
	}
	if !slices.Equal(keys, whole) {
		t.Errorf("the shards left %d keys, the undivided run %d", len(keys), len(whole))
	}
}

// TestShardOptionsValidated: more shards than namespaces, or an index
// outside the count, is an error.
func TestShardOptionsValidated(t *testing.T) {
	for _, s := range []shard.Shard{{Index: 0, Count: 6}, {Index: 3, Count: 3}, {Index: -1, Count: 2}} {
		if _, err := NewKubernetesWorkload(KubernetesWorkloadOptions{Namespaces: 5, Workers: 1, Shard: s}); err == nil {
			t.Errorf("shard %v over 5 namespaces: no error", s)
		}
	}
}

// nextCounting counts the ops planned.
type nextCounting struct {
	*KubernetesWorkload
	n atomic.Int64
}

func (w *nextCounting) Next(i int64) Op { w.n.Add(1); return w.KubernetesWorkload.Next(i) }

// TestShardCancelDoesNotWalkThePlan: a shard's writers cancelled early
// stop planning where they stopped, whatever the schedule's length (the
// experiments schedule ten minutes of writes and stop each case early;
// walking the rest of the plan cost them seconds of CPU and moved the
// planner), and count as unsent only owned ops they reached.
func TestShardCancelDoesNotWalkThePlan(t *testing.T) {
	c := etcdtest.NewClient(t, etcdtest.RunEtcd(t))
	kw, err := NewKubernetesWorkload(KubernetesWorkloadOptions{Prefix: "/cancel-shard", Namespaces: 4, Pods: 8,
		Mix: DefaultMix, ResourceMix: ResourceMix{PodsPercent: 100}, Workers: 1, Seed: 3, Shard: shard.Shard{Index: 1, Count: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kw.Seed(t.Context(), []KV{c}, 2); err != nil {
		t.Fatal(err)
	}
	wl := &nextCounting{KubernetesWorkload: kw}
	env := NewEnv(time.Now(), 1024, 1, nil)
	const total = 1_000_000
	w, err := NewWriters(env, []KV{c}, wl, WriterOptions{Rate: 500, Total: total, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	st := w.Run(ctx)
	if n := wl.n.Load(); n > 10_000 {
		t.Errorf("planned %d ops of %d after a 300 ms run at 500/s: the rest of the plan was walked", n, total)
	}
	if st.Sent == 0 || st.Sent+st.Unsent != st.Planned || st.Planned >= total/2 {
		t.Errorf("stats %+v: want sent + unsent = planned, planned the owned ops reached", st)
	}
}
