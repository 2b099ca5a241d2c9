package clustermodel

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/clusterload"
	"github.com/kubestore/etcdkit/pkg/shard"
)

// kubeName is the shape of a name kube-apiserver generates for a pod of
// owner "daemon": generateName and 5 characters of
// k8s.io/apimachinery/pkg/util/rand's alphabet.
var kubeName = regexp.MustCompile(`^daemon-[bcdfghjklmnpqrstvwxz2456789]{5}$`)

// TestPodNamesNeverMeet generates 50,000 pod names of one owner, ten
// times the DaemonSet's at --nodes 5000, undivided and divided among 3
// shards: none repeats, within a shard or across shards, and each has
// kube-apiserver's shape. Drawn at random from the 27^5 suffixes, 50,000
// names would repeat with a probability of 1 - exp(-87).
func TestPodNamesNeverMeet(t *testing.T) {
	const names = 50000
	for _, count := range []int{1, 3} {
		seen := map[string]int{}
		for i := range count {
			c := &cluster{shard: shard.Shard{Index: i, Count: count}, nameSeqs: map[string]int64{}}
			from, to := shard.Shard{Index: i, Count: count}.Range(names)
			for range to - from {
				name, err := c.podName("daemon")
				if err != nil {
					t.Fatal(err)
				}
				if !kubeName.MatchString(name) {
					t.Fatalf("%d shards: got name %q, want kube-apiserver's shape %s", count, name, kubeName)
				}
				if j, ok := seen[name]; ok {
					t.Fatalf("%d shards: shard %d named a pod %q, which shard %d named before", count, i, name, j)
				}
				seen[name] = i
			}
		}
	}
}

// TestCreatePodTakesAnotherName creates a pod whose first generated name
// an existing key holds already (another client's, under a reused
// prefix): as kube-apiserver does, the model tries the next name; the
// existing key is left as it was, not counted as a pod created and not
// the cleanup's.
func TestCreatePodTakesAnotherName(t *testing.T) {
	kv := etcdtest.NewClient(t, etcdtest.RunEtcd(t))
	st, err := newStore(kv, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := clusterload.NewPlan(clusterload.Options{Nodes: 2, PodsPerNode: 10})
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(st, "/registry", plan, 1024, shard.Whole)
	first, err := newCluster(st, "/registry", plan, 1024, shard.Whole).podName("daemon")
	if err != nil {
		t.Fatal(err)
	}
	taken := key("/registry", "", "pods", "default", first)
	put, err := kv.Put(t.Context(), taken, "another client's")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := plan.DaemonSet(1024).Spec.Template
	p, k, err := c.createPod(t.Context(), tmpl, "default", "DaemonSet", "daemon")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name == first || !kubeName.MatchString(p.Name) || c.podsCreated.Load() != 1 {
		t.Errorf("got pod %q (%d created), want one pod of another name than the taken %q", p.Name, c.podsCreated.Load(), first)
	}
	resp, err := kv.Get(t.Context(), "/registry/pods/default/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 2 {
		t.Fatalf("got %d pods in etcd, want the taken one and the new", len(resp.Kvs))
	}
	for _, x := range resp.Kvs {
		switch string(x.Key) {
		case taken:
			if string(x.Value) != "another client's" || x.ModRevision != put.Header.Revision {
				t.Errorf("the taken key: got %q at mod_revision %d, want it unchanged at %d", x.Value, x.ModRevision, put.Header.Revision)
			}
		case k:
		default:
			t.Errorf("unexpected key %s", x.Key)
		}
	}
	written := st.writtenKeys()
	if len(written) != 1 || written[0] != k {
		t.Errorf("the cleanup would delete %v, want the model's %s alone", written, k)
	}

	// A create that fails otherwise is no name's fault: no retry.
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := c.createPod(canceled, tmpl, "default", "DaemonSet", "daemon"); err == nil || errors.Is(err, errExists) {
		t.Errorf("create with a canceled context: got %v, want its error", err)
	}
}
