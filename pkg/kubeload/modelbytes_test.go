package kubeload_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubestore/etcdkit/internal/apiserverproc"
	"github.com/kubestore/etcdkit/internal/apiservertest"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/kubeload"
	"github.com/kubestore/etcdkit/pkg/watchload"
)

// storedValue is one value a step put into etcd.
type storedValue struct {
	key string
	rev int64
	val []byte
}

// TestModelStoresWhatKubeAPIServerStores performs the same plan ops through
// kube-apiserver (kubeload.APIWorkload: a pod's create, two status
// updates and graceful delete, a configmap's create and update, an event's
// create and patch) and with the etcd-direct model (watchload
// KubernetesWorkload) on one etcd, the model under a prefix of its own
// (as long as kube-apiserver's), and compares every value each step put:
// the same number of puts, the same objects once the values only the
// server chooses are set aside (uid, creationTimestamp, managedFields
// times, deletionTimestamp), managedFields and their fieldsV1 included,
// and sizes within 2 %.
func TestModelStoresWhatKubeAPIServerStores(t *testing.T) {
	bin := apiservertest.Binaries(t)
	srv := etcdtest.RunEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	c, err := apiserverproc.Start(ctx, apiserverproc.Config{BinDir: bin, Dir: t.TempDir(), EtcdServers: srv.Endpoints, DisableWatchCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	cli := etcdtest.NewClient(t, srv)

	opts := watchload.KubernetesWorkloadOptions{Prefix: "/registry", Namespaces: 1, Workers: 1, Seed: 3,
		Mix: watchload.DefaultMix, ResourceMix: watchload.DefaultResourceMix, NamespacePrefix: "ns-"}
	plan, err := watchload.NewKubernetesWorkload(opts)
	if err != nil {
		t.Fatal(err)
	}
	conns, err := kubeload.NewConnections(c.RESTConfig(), kubeload.ConnectionsPerClient)
	if err != nil {
		t.Fatal(err)
	}
	api, err := kubeload.NewAPIWorkload(conns, plan, 1, opts.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Seed(ctx, 1); err != nil { // the namespace only: no objects planned
		t.Fatal(err)
	}
	mopts := opts
	mopts.Prefix, mopts.NoWatchCache = "/regmodel", true // the same objects under a prefix as long as kube-apiserver's
	model, err := watchload.NewKubernetesWorkload(mopts)
	if err != nil {
		t.Fatal(err)
	}
	writers := []struct {
		prefix string
		wl     watchload.Workload
		kv     watchload.KV
	}{{opts.Prefix, api, nil}, {mopts.Prefix, model, cli}}

	event := "web-0.188a000000000001"
	steps := []struct {
		name          string
		kind          watchload.OpType
		resource, obj string
		wantPuts      int
	}{
		{"pod create", watchload.OpCreate, watchload.ResourcePods, "web-0", 1},
		{"pod status update", watchload.OpUpdate, watchload.ResourcePods, "web-0", 1},
		{"pod second status update", watchload.OpUpdate, watchload.ResourcePods, "web-0", 1},
		{"pod graceful delete", watchload.OpDelete, watchload.ResourcePods, "web-0", 2}, // and the delete
		{"configmap create", watchload.OpCreate, watchload.ResourceConfigMaps, "settings", 1},
		{"configmap update", watchload.OpUpdate, watchload.ResourceConfigMaps, "settings", 1},
		{"event create", watchload.OpCreate, watchload.ResourceEvents, event, 1},
		{"event patch", watchload.OpUpdate, watchload.ResourceEvents, event, 1},
	}
	codec, err := keyspace.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		puts := map[string][]storedValue{}
		for _, w := range writers {
			start := currentRevision(ctx, t, cli)
			key := keyspace.Build(keyspace.Key{Prefix: w.prefix, Resource: s.resource, Namespace: "ns-0", Name: s.obj})
			if _, _, err := w.wl.Do(ctx, 0, w.kv, watchload.Op{Kind: s.kind, Resource: s.resource, Namespace: "ns-0", Name: s.obj, Key: key}); err != nil {
				t.Fatalf("%s under %s: %v", s.name, w.prefix, err)
			}
			puts[w.prefix] = putsSince(ctx, t, cli, start, key)
		}
		real, modelled := puts[opts.Prefix], puts[mopts.Prefix]
		if len(real) != s.wantPuts || len(modelled) != s.wantPuts {
			t.Errorf("%s: kube-apiserver put %d values, the model %d; want %d", s.name, len(real), len(modelled), s.wantPuts)
			continue
		}
		for i := range real {
			r, m := real[i], modelled[i]
			ro, err := codec.Decode(r.val, r.rev)
			if err != nil {
				t.Fatalf("%s: kube-apiserver's value: %v", s.name, err)
			}
			mo, err := codec.Decode(m.val, m.rev)
			if err != nil {
				t.Fatalf("%s: the model's value: %v", s.name, err)
			}
			serverChosen(t, ro)
			serverChosen(t, mo)
			if !reflect.DeepEqual(ro, mo) {
				t.Errorf("%s, put %d: the model stored a different object than kube-apiserver:\n%s", s.name, i+1, jsonDiff(ro, mo))
			}
			if d := len(m.val) - len(r.val); d*50 > len(r.val) || -d*50 > len(r.val) {
				t.Errorf("%s, put %d: the model's value is %d bytes, kube-apiserver's %d: more than 2 %% apart", s.name, i+1, len(m.val), len(r.val))
			}
			t.Logf("%s, put %d: %d bytes, kube-apiserver %d", s.name, i+1, len(m.val), len(r.val))
		}
	}
}

// currentRevision returns etcd's revision.
func currentRevision(ctx context.Context, t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(ctx, "compact_rev_key")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// putsSince returns the values put at key after revision start, up to
// etcd's current revision, in revision order: at each revision, the key's
// value if that revision wrote it.
func putsSince(ctx context.Context, t *testing.T, cli *clientv3.Client, start int64, key string) []storedValue {
	t.Helper()
	var out []storedValue
	for rev := start + 1; rev <= currentRevision(ctx, t, cli); rev++ {
		resp, err := cli.Get(ctx, key, clientv3.WithRev(rev))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 1 && resp.Kvs[0].ModRevision == rev {
			out = append(out, storedValue{key: key, rev: rev, val: resp.Kvs[0].Value})
		}
	}
	return out
}

// serverChosen clears what kube-apiserver chooses itself, from the clock
// or at random.
func serverChosen(t *testing.T, obj runtime.Object) {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	m.SetUID("")
	m.SetResourceVersion("")
	m.SetCreationTimestamp(metav1.Time{})
	m.SetDeletionTimestamp(nil)
	mf := m.GetManagedFields()
	for i := range mf {
		mf[i].Time = nil
	}
	m.SetManagedFields(mf)
}

// jsonDiff lists the lines of the two objects' indented JSON that differ,
// kube-apiserver's first.
func jsonDiff(real, model runtime.Object) string {
	rj, _ := json.MarshalIndent(real, "", " ")
	mj, _ := json.MarshalIndent(model, "", " ")
	rl, ml := strings.Split(string(rj), "\n"), strings.Split(string(mj), "\n")
	var b strings.Builder
	for i := range max(len(rl), len(ml)) {
		var r, m string
		if i < len(rl) {
			r = rl[i]
		}
		if i < len(ml) {
			m = ml[i]
		}
		if r != m {
			fmt.Fprintf(&b, "line %d: kube-apiserver %s | model %s\n", i+1, strings.TrimSpace(r), strings.TrimSpace(m))
		}
	}
	return b.String()
}
