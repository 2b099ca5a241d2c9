package command_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/kubestore/etcdkit/cmd/etcdinspect/command"
	"github.com/kubestore/etcdkit/internal/cli"
	"github.com/kubestore/etcdkit/internal/etcdtest"
	"github.com/kubestore/etcdkit/pkg/keyspace"
	"github.com/kubestore/etcdkit/pkg/revision"
)

// run executes etcdinspect in-process and returns stdout, stderr and the
// exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	root := command.NewRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	code := cli.Run(root, args, &errOut)
	return out.String(), errOut.String(), code
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func makeDB(t *testing.T) string {
	return etcdtest.CreateDB(t, func(ctx context.Context, c *clientv3.Client) {
		codec, err := keyspace.NewCodec()
		if err != nil {
			t.Fatal(err)
		}
		gen := keyspace.NewGenerator(2)
		for i := range 6 {
			b, err := codec.Encode(gen.Pod("default", fmt.Sprintf("p%d", i), 0))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Put(ctx, fmt.Sprintf("/registry/pods/default/p%d", i), string(b)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Put(ctx, "/registry/minions/node-1", "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Delete(ctx, "/registry/pods/default/p5"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestUsageAndStatusJSON(t *testing.T) {
	path := makeDB(t)
	before := fileSum(t, path)

	out, stderr, code := run(t, "usage", path, "-w", "json")
	if code != 0 {
		t.Fatalf("usage exit %d: %s", code, stderr)
	}
	var usage struct {
		SchemaVersion int `json:"schemaVersion"`
		Rows          []struct {
			Group, Resource, Path string
			Objects, Revisions    int64
			Tombstones            int64
		} `json:"rows"`
		Total struct {
			Objects, Revisions, Tombstones int64
			LiveEntryBytes                 int64 `json:"liveEntryBytes"`
			LiveValueBytes                 int64 `json:"liveValueBytes"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(out), &usage); err != nil {
		t.Fatalf("usage JSON: %v\n%s", err, out)
	}
	want := map[string][3]int64{"pods": {5, 7, 1}, "nodes": {1, 1, 0}}
	for _, r := range usage.Rows {
		w, ok := want[r.Resource]
		if !ok {
			t.Errorf("unexpected row %+v", r)
			continue
		}
		if got := [3]int64{r.Objects, r.Revisions, r.Tombstones}; got != w {
			t.Errorf("%s: objects/revisions/tombstones %v, want %v", r.Resource, got, w)
		}
		delete(want, r.Resource)
	}
	if len(want) != 0 || usage.SchemaVersion != 2 || usage.Total.Objects != 6 {
		t.Errorf("missing rows %v, schema %d, total %+v", want, usage.SchemaVersion, usage.Total)
	}

	// keys lists the same live entries: its per-key sizes add up to
	// usage's totals, and each value is shorter than its entry.
	out, stderr, code = run(t, "keys", path, "-w", "json")
	if code != 0 {
		t.Fatalf("keys exit %d: %s", code, stderr)
	}
	var keys struct {
		Keys []struct {
			ValueBytes int64 `json:"valueBytes"`
			EntryBytes int64 `json:"entryBytes"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(out), &keys); err != nil {
		t.Fatal(err)
	}
	var valueBytes, entryBytes int64
	for _, k := range keys.Keys {
		if k.ValueBytes >= k.EntryBytes {
			t.Errorf("key with value bytes %d >= entry bytes %d", k.ValueBytes, k.EntryBytes)
		}
		valueBytes += k.ValueBytes
		entryBytes += k.EntryBytes
	}
	if valueBytes != usage.Total.LiveValueBytes || entryBytes != usage.Total.LiveEntryBytes {
		t.Errorf("keys sum to %d value and %d entry bytes, usage totals %d and %d", valueBytes, entryBytes, usage.Total.LiveValueBytes, usage.Total.LiveEntryBytes)
	}

	out, stderr, code = run(t, "status", path, "-w", "json")
	if code != 0 {
		t.Fatalf("status exit %d: %s", code, stderr)
	}
	var st struct {
		Revision, LiveKeys, Revisions, Tombstones int64
		SnapshotTrailer                           string
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.Revision != 9 || st.LiveKeys != 6 || st.Revisions != 8 || st.Tombstones != 1 || st.SnapshotTrailer != "absent" {
		t.Errorf("status %+v: want revision 9, 6 live keys, 8 revisions, 1 tombstone, trailer absent", st)
	}

	out, _, code = run(t, "usage", path, "--by", "namespace", "-w", "csv")
	if code != 0 || !strings.HasPrefix(out, "namespace,objects,live entry bytes,live value bytes") || !strings.Contains(out, "\ndefault,5,") {
		t.Errorf("usage --by namespace csv (exit %d):\n%s", code, out)
	}
	if fileSum(t, path) != before {
		t.Fatal("etcdinspect modified the file")
	}
}

func TestBadInputExitsWithOneLine(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	full, err := os.ReadFile(fixture("3.7"))
	if err != nil {
		t.Fatal(err)
	}
	empty := write("empty.db", nil)
	garbage := write("garbage.db", bytes.Repeat([]byte("not a database "), 1000))
	random := make([]byte, 64*1024)
	for i := range random {
		random[i] = byte(i*7919 + i>>3)
	}
	randomPath := write("random.db", random)
	truncated := write("truncated.db", full[:len(full)/3])
	// Overwrite the key bucket's pages' headers: page 4 onwards holds data.
	badPage := bytes.Clone(full)
	for pg := 2; pg*4096+16 < len(badPage); pg++ {
		binary.LittleEndian.PutUint64(badPage[pg*4096:], 0xdead)
	}
	badPagePath := write("bad-page.db", badPage)
	otherBolt := filepath.Join(dir, "other.db")
	bdb, err := bolt.Open(otherBolt, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	bdb.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("widgets")); return err })
	bdb.Close()

	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantMsg  string
	}{
		{"empty", []string{"status", empty}, 1, "empty"},
		{"garbage", []string{"status", garbage}, 1, "not a bbolt database"},
		{"random bytes", []string{"usage", randomPath}, 1, "not a bbolt database"},
		{"truncated", []string{"status", truncated}, 1, "truncated"},
		{"corrupt pages", []string{"usage", badPagePath}, 1, "corrupt database"},
		{"corrupt pages, keys", []string{"keys", badPagePath}, 1, "corrupt database"},
		{"corrupt pages, meta", []string{"meta", badPagePath}, 1, "corrupt database"},
		{"bbolt but not etcd", []string{"leases", otherBolt}, 1, "without etcd's key and meta buckets"},
		{"missing", []string{"status", filepath.Join(dir, "missing.db")}, 1, "no such file"},
		{"garbage history", []string{"history", garbage, "k"}, 1, "not a bbolt database"},
		{"garbage get", []string{"get", garbage, "k"}, 1, "not a bbolt database"},
		{"garbage compaction", []string{"compaction", garbage, "--at", "5"}, 1, "not a bbolt database"},
		{"garbage diff", []string{"diff", fixture("3.7"), garbage}, 1, "not a bbolt database"},
		{"compacted revision", []string{"get", fixture("3.7"), "/registry/pods/default/web-0", "--revision", "5"}, 1, "compact revision 24"},
		{"future revision", []string{"compaction", fixture("3.7"), "--at", "99"}, 1, "above the current revision 28"},
		{"already compacted", []string{"compaction", fixture("3.7"), "--at", "20"}, 1, "not above the compact revision 24"},
		{"deleted key", []string{"get", fixture("3.7"), "/registry/pods/default/web-3"}, 1, "deleted at revision 24"},
		{"no history", []string{"history", fixture("3.7"), "/nope"}, 1, "no stored revision"},
		{"raw secret", []string{"get", fixture("3.7"), "/registry/secrets/default/db-password", "-o", "raw"}, 1, "--show-secrets"},
		{"no argument", []string{"status"}, 2, "accepts 1 arg"},
		{"bad format", []string{"status", empty, "-w", "yaml"}, 2, "write-out"},
		{"bad --by", []string{"usage", empty, "--by", "kind"}, 2, "--by"},
		{"negative --top", []string{"usage", empty, "--top", "-1"}, 2, "--top"},
		{"prefix and resource", []string{"keys", empty, "--prefix", "/a", "--resource", "pods"}, 2, "--prefix and --resource"},
		{"namespace alone", []string{"keys", empty, "-n", "default"}, 2, "--namespace needs --resource"},
		{"compaction without --at", []string{"compaction", empty}, 2, "--at"},
		{"bad -o", []string{"get", empty, "k", "-o", "xml"}, 2, "--output"},
		{"relative --etcd-prefix", []string{"usage", empty, "--etcd-prefix", "registry"}, 2, "--prefix"},
		{"unknown command", []string{"dump", empty}, 2, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sums [][32]byte
			for _, a := range tt.args[1:] {
				if fi, err := os.Stat(a); err == nil && fi.Mode().IsRegular() {
					sums = append(sums, fileSum(t, a))
				}
			}
			out, stderr, code := run(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.wantCode, stderr)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.wantMsg) || strings.Contains(stderr, "goroutine") {
				t.Errorf("stderr %q: want one line mentioning %q", stderr, tt.wantMsg)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			i := 0
			for _, a := range tt.args[1:] {
				if fi, err := os.Stat(a); err == nil && fi.Mode().IsRegular() {
					if fileSum(t, a) != sums[i] {
						t.Errorf("%s changed", a)
					}
					i++
				}
			}
		})
	}
}

// TestStatusReportsAFailedCheck prints the status of a file whose synced
// freelist frees a reachable page, then exits 1 naming the problem.
func TestStatusReportsAFailedCheck(t *testing.T) {
	b, err := os.ReadFile(fixture("3.7"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "db")
	os.WriteFile(p, b, 0o600)
	bdb, err := bolt.Open(p, 0o600, nil) // read-write: bbolt writes a freelist
	if err != nil {
		t.Fatal(err)
	}
	bdb.Close()
	b, _ = os.ReadFile(p)
	le := binary.LittleEndian
	// The current meta page: the one with the higher txid.
	meta := 0
	if le.Uint64(b[4096+64:]) > le.Uint64(b[64:]) {
		meta = 4096
	}
	root, freelist := le.Uint64(b[meta+32:]), le.Uint64(b[meta+48:])
	if freelist == ^uint64(0) || le.Uint16(b[freelist*4096+10:]) == 0 {
		t.Fatalf("no synced freelist with free pages (freelist page %d)", freelist)
	}
	le.PutUint64(b[freelist*4096+16:], root) // the first free id becomes the root page
	os.WriteFile(p, b, 0o600)
	before := fileSum(t, p)

	out, stderr, code := run(t, "status", p)
	if code != 1 || !strings.Contains(stderr, "consistency check found") || !strings.Contains(stderr, "reachable freed") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want 1 and one line naming the check errors", code, stderr)
	}
	if !strings.Contains(out, "| consistency check ") || !strings.Contains(out, "reachable freed") {
		t.Errorf("the status table does not show the failed check:\n%s", out)
	}
	if fileSum(t, p) != before {
		t.Error("file changed")
	}
}

// TestLockedByRunningMember inspects the db of a running member: a clear
// error after the lock timeout, never a hang.
func TestLockedByRunningMember(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	start := time.Now()
	_, stderr, code := run(t, "status", srv.DBPath(), "--lock-timeout", "300ms")
	if code != 1 || !strings.Contains(stderr, "etcdctl snapshot save") || !strings.Contains(stderr, srv.DBPath()) {
		t.Errorf("exit %d, stderr %q; want 1 and a hint to use etcdctl snapshot save", code, stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestMetaShowsAlarmsAndNoPasswords raises a NOSPACE alarm and adds a
// user on a real member, saves a snapshot and reads the meta buckets.
func TestMetaShowsAlarmsAndNoPasswords(t *testing.T) {
	srv := etcdtest.RunEtcd(t)
	c := etcdtest.NewClient(t, srv)
	ctx := t.Context()
	st, err := c.Status(ctx, srv.Endpoints[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UserAdd(ctx, "alice", "very-secret-password"); err != nil {
		t.Fatal(err)
	}
	if _, err := etcdserverpb.NewMaintenanceClient(c.ActiveConnection()).Alarm(ctx, &etcdserverpb.AlarmRequest{
		Action: etcdserverpb.AlarmRequest_ACTIVATE, MemberID: st.Header.MemberId, Alarm: etcdserverpb.AlarmType_NOSPACE}); err != nil {
		t.Fatal(err)
	}
	rc, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "snap.db")
	os.WriteFile(p, b, 0o600)
	out, stderr, code := run(t, "meta", p, "-w", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var ci struct {
		Alarms []struct{ MemberID, Alarm string }
		Users  []struct {
			Name        string
			HasPassword bool
		}
		Members        []struct{ ID, Name string }
		ClusterVersion string
	}
	if err := json.Unmarshal([]byte(out), &ci); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("%x", st.Header.MemberId)
	if len(ci.Alarms) != 1 || ci.Alarms[0].Alarm != "NOSPACE" || ci.Alarms[0].MemberID != id {
		t.Errorf("alarms %+v, want NOSPACE on member %s", ci.Alarms, id)
	}
	if len(ci.Users) != 1 || ci.Users[0].Name != "alice" || !ci.Users[0].HasPassword {
		t.Errorf("users %+v", ci.Users)
	}
	if len(ci.Members) != 1 || ci.Members[0].ID != id || ci.ClusterVersion == "" {
		t.Errorf("members %+v, cluster version %q", ci.Members, ci.ClusterVersion)
	}
	for _, format := range []string{"json", "table"} {
		out, _, _ := run(t, "meta", p, "-w", format)
		if strings.Contains(out, "very-secret-password") || strings.Contains(out, "$2a$") {
			t.Errorf("meta -w %s prints the password or its hash", format)
		}
	}
}

// TestPrefixDetectionAndOverride writes keys under an unusual
// --etcd-prefix and under OpenShift's, and checks that usage detects both,
// that --etcd-prefix overrides the detection and that keys --prefix
// filters keys.
func TestPrefixDetectionAndOverride(t *testing.T) {
	path := etcdtest.CreateDB(t, func(ctx context.Context, c *clientv3.Client) {
		for _, k := range []string{"/custom/k8s/namespaces/default", "/custom/k8s/pods/ns/p1", "/custom/k8s/pods/ns/p2",
			"/kubernetes.io/config.openshift.io/clusteroperators/console", "/elsewhere/x"} {
			if _, err := c.Put(ctx, k, "v"); err != nil {
				t.Fatal(err)
			}
		}
	})
	usage := func(args ...string) map[string]int64 {
		t.Helper()
		out, stderr, code := run(t, append([]string{"usage", path, "-w", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var u struct {
			Rows []struct {
				Class, Prefix, Group, Resource string
				Objects                        int64
			}
		}
		if err := json.Unmarshal([]byte(out), &u); err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, r := range u.Rows {
			got[r.Class+" "+r.Prefix+" "+r.Resource+"."+r.Group] = r.Objects
		}
		return got
	}
	detected := usage()
	want := map[string]int64{"object /custom/k8s pods.": 2, "object /custom/k8s namespaces.": 1,
		"object /kubernetes.io clusteroperators.config.openshift.io": 1, "outside  .": 1}
	if fmt.Sprint(detected) != fmt.Sprint(want) {
		t.Errorf("detected rows %v, want %v", detected, want)
	}
	overridden := usage("--etcd-prefix", "/custom/k8s/")
	if overridden["object /custom/k8s pods."] != 2 || overridden["outside  ."] != 2 {
		t.Errorf("--etcd-prefix rows %v: want the pods and two keys outside", overridden)
	}
	out, stderr, code := run(t, "keys", path, "--prefix", "/custom/k8s/pods/", "-w", "csv")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "/custom/k8s/pods/ns/p2,pods,ns,p2,") {
		t.Errorf("keys --prefix (exit %d, %s):\n%s", code, stderr, out)
	}
}

// TestGetDecodesCRDsAndAPIServices stores a CustomResourceDefinition and an
// APIService as kube-apiserver does (protobuf; the CRD as
// apiextensions.k8s.io/v1beta1) and expects get to decode both.
func TestGetDecodesCRDsAndAPIServices(t *testing.T) {
	codec, err := keyspace.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1beta1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "crontabs.stable.example.com"},
		Spec: apiextensionsv1beta1.CustomResourceDefinitionSpec{Group: "stable.example.com", Scope: apiextensionsv1beta1.NamespaceScoped,
			Names: apiextensionsv1beta1.CustomResourceDefinitionNames{Plural: "crontabs", Kind: "CronTab"}}}
	apiService := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1", GroupPriorityMinimum: 100, VersionPriority: 100}}
	keys := map[string]runtime.Object{
		"/registry/apiextensions.k8s.io/customresourcedefinitions/crontabs.stable.example.com": crd,
		"/registry/apiregistration.k8s.io/apiservices/v1beta1.metrics.k8s.io":                  apiService,
	}
	revs := map[string]int64{}
	path := etcdtest.CreateDB(t, func(ctx context.Context, c *clientv3.Client) {
		for k, obj := range keys {
			b, err := codec.Encode(obj)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Put(ctx, k, string(b))
			if err != nil {
				t.Fatal(err)
			}
			revs[k] = resp.Header.Revision
		}
	})
	want := map[string][3]string{ // apiVersion, kind, spec.group
		"/registry/apiextensions.k8s.io/customresourcedefinitions/crontabs.stable.example.com": {"apiextensions.k8s.io/v1beta1", "CustomResourceDefinition", "stable.example.com"},
		"/registry/apiregistration.k8s.io/apiservices/v1beta1.metrics.k8s.io":                  {"apiregistration.k8s.io/v1", "APIService", "metrics.k8s.io"},
	}
	for k, w := range want {
		out, stderr, code := run(t, "get", path, k, "-w", "json")
		if code != 0 {
			t.Fatalf("get %s: exit %d: %s", k, code, stderr)
		}
		var got struct {
			DecodeError string
			Object      struct {
				APIVersion, Kind string
				Metadata         struct{ Name, ResourceVersion string }
				Spec             struct{ Group string }
			}
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		o := got.Object
		if got.DecodeError != "" || o.APIVersion != w[0] || o.Kind != w[1] || o.Spec.Group != w[2] ||
			o.Metadata.ResourceVersion != fmt.Sprint(revs[k]) || !strings.HasSuffix(k, "/"+o.Metadata.Name) {
			t.Errorf("get %s: %+v (decode error %q); want %v at resourceVersion %d", k, o, got.DecodeError, w, revs[k])
		}
	}
}

// appendEntry writes key=value into the db file at path as the next
// revision, with bbolt directly: values above etcd's request size limit
// cannot be put through a member.
func appendEntry(t *testing.T, path, key string, value []byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		last, _ := b.Cursor().Last()
		bk, err := revision.Decode(last)
		if err != nil {
			return err
		}
		rev := revision.Revision{Main: bk.Main + 1}
		kv := &mvccpb.KeyValue{Key: []byte(key), Value: value, CreateRevision: rev.Main, ModRevision: rev.Main, Version: 1}
		v, err := proto.Marshal(kv)
		if err != nil {
			return err
		}
		return b.Put(rev.Bytes(), v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGetRefusesDeepValuesAndRawNeverDecodes stores a
// CustomResourceDefinition whose schema nests JSONSchemaProps.not 600,000
// deep (it overflowed the stack of the generated decoder, killing the
// process, even with -o raw): get must refuse to decode it in one line
// naming the file, the key and the limit, and -o raw must print the stored
// bytes without decoding them.
func TestGetRefusesDeepValuesAndRawNeverDecodes(t *testing.T) {
	const key = "/registry/apiextensions.k8s.io/customresourcedefinitions/deep.example.com"
	value := etcdtest.NestedCRDValue("deep.example.com", 600_000)
	path := makeDB(t)
	appendEntry(t, path, key, value)
	before := fileSum(t, path)

	_, stderr, code := run(t, "get", path, key)
	limit := fmt.Sprint(keyspace.MaxNestingDepth)
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, path) || !strings.Contains(stderr, key) ||
		!strings.Contains(stderr, limit) || strings.Contains(stderr, "goroutine") {
		t.Errorf("get: exit %d, stderr %q; want 1 and one line naming the file, the key and the limit %s", code, stderr, limit)
	}
	out, stderr, code := run(t, "get", path, key, "-w", "json")
	if code != 0 || !strings.Contains(out, `"decodeError"`) || !strings.Contains(out, limit) {
		t.Errorf("get -w json: exit %d (%s), want 0 and a decodeError naming the limit:\n%.500s", code, stderr, out)
	}
	out, stderr, code = run(t, "get", path, key, "-o", "raw")
	if code != 0 || out != string(value) {
		t.Errorf("get -o raw: exit %d (%s), %d bytes printed, want 0 and the %d stored bytes", code, stderr, len(out), len(value))
	}
	if fileSum(t, path) != before {
		t.Error("the file changed")
	}
}

// rawControl returns the offset of the first non-printable rune (but a
// line end) or invalid UTF-8 byte in s, or -1.
func rawControl(s string) int {
	for i, r := range s {
		if r == utf8.RuneError || r != '\n' && !strconv.IsPrint(r) {
			return i
		}
	}
	return -1
}

// TestControlCharactersInKeysAreEscaped writes keys holding a terminal
// escape, CR, LF, NUL, a C1 control and invalid UTF-8, and prints them with
// every command that shows keys, in every format: table, markdown and CSV
// must show them escaped (a newline must not split a row, an escape must
// not reach the terminal), JSON with its own escaping; a binary key in a
// bucket `meta` cannot decode must not reach stderr raw either.
func TestControlCharactersInKeysAreEscaped(t *testing.T) {
	keys := []string{
		"/registry/configmaps/default/esc\x1b[2J",
		"/registry/configmaps/default/cr\rlf\n",
		"/registry/configmaps/default/nul\x00",
		"/registry/configmaps/default/bad\xff",
		"/registry/configmaps/default/c1\u009b31m",
		"/registry/configmaps/ns\x1b[31m/x",
		"/outside/\x1b]0;title\x07",
	}
	path := etcdtest.CreateDB(t, func(ctx context.Context, c *clientv3.Client) {
		for _, k := range keys {
			if _, err := c.Put(ctx, k, "v"); err != nil {
				t.Fatal(err)
			}
		}
	})
	before := fileSum(t, path)
	invocations := [][]string{
		{"keys", path},
		{"usage", path, "--by", "namespace"},
		{"history", path, keys[0]},
		{"get", path, keys[1]},
	}
	for _, args := range invocations {
		for _, format := range []string{"table", "markdown", "csv", "json"} {
			args := append(slices.Clone(args), "-w", format)
			t.Run(strings.Join([]string{args[0], format}, " "), func(t *testing.T) {
				out, stderr, code := run(t, args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				if format == "json" {
					// JSON escapes C0 controls and invalid UTF-8 its own way.
					if i := strings.IndexFunc(out, func(r rune) bool { return r < ' ' && r != '\n' || r == utf8.RuneError }); i >= 0 || !json.Valid([]byte(out)) {
						t.Errorf("raw control byte at %d or invalid JSON:\n%q", i, out)
					}
					return
				}
				if i := rawControl(out); i >= 0 {
					t.Fatalf("raw control byte at %d: %q", i, out[max(0, i-40):min(len(out), i+40)])
				}
				want := map[string]string{"keys": `esc\x1b[2J`, "usage": `ns\x1b[31m`, "get": `cr\rlf\n`}[args[0]]
				if !strings.Contains(out, want) {
					t.Errorf("the escaped key %s is missing:\n%s", want, out)
				}
				if format == "csv" && args[0] == "keys" {
					rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
					if err != nil || len(rows) != len(keys)+1 {
						t.Errorf("csv: %d records (%v), want %d", len(rows), err, len(keys)+1)
					}
				}
			})
		}
	}

	// A members entry whose key is binary and whose value is not JSON.
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("members"))
		if err != nil {
			return err
		}
		return b.Put([]byte("\x1b[31mevil\r\n\x00"), []byte("not json"))
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	before = fileSum(t, path)
	_, stderr, code := run(t, "meta", path)
	if code != 1 || strings.Count(stderr, "\n") != 1 || rawControl(stderr) >= 0 || !strings.Contains(stderr, `\x1b[31mevil`) {
		t.Errorf("meta: exit %d, stderr %q; want 1 and one line with the key escaped", code, stderr)
	}
	if fileSum(t, path) != before {
		t.Error("the file changed")
	}
}
