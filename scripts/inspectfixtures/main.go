// Command inspectfixtures writes one etcdinspect test fixture with a real
// etcd server binary (-etcd): it starts the member on free loopback ports
// in a temporary directory, writes a small Kubernetes-like data set as
// kube-apiserver would store it, compacts, enables auth, saves a snapshot
// through the Maintenance API (so the file carries etcdctl's SHA-256
// trailer) to -out, and stops the member by PID. The same operations run in
// the same order on every version, so revisions match across versions.
// scripts/make-inspect-fixtures.sh runs it for etcd 3.4, 3.5, 3.6 and 3.7.
package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubestore/etcdkit/internal/etcdproc"
	"github.com/kubestore/etcdkit/pkg/keyspace"
)

// Lease IDs are chosen, not granted at random, so that fixtures of every
// version agree.
const (
	eventLeaseID  = 0x7a11e5e0000001
	masterLeaseID = 0x7a11e5e0000002
	rootPassword  = "fixture-root-password"
)

func main() {
	etcdBin := flag.String("etcd", "", "etcd server binary")
	out := flag.String("out", "", "snapshot file to write")
	flag.Parse()
	if *etcdBin == "" || *out == "" {
		log.Fatal("inspectfixtures: -etcd and -out are required")
	}
	if err := run(*etcdBin, *out); err != nil {
		log.Fatalf("inspectfixtures: %v", err)
	}
}

func run(etcdBin, out string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	work, err := os.MkdirTemp("", "inspectfixtures-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	p, err := etcdproc.Start(ctx, etcdproc.Config{BinDir: filepath.Dir(etcdBin), Dir: work})
	if err != nil {
		return err
	}
	defer p.Stop()
	c, err := p.Client()
	if err != nil {
		return err
	}
	if err := fill(ctx, c); err != nil {
		c.Close()
		return err
	}
	c.Close()
	root, err := clientv3.New(clientv3.Config{Endpoints: p.Endpoints(), DialTimeout: 5 * time.Second,
		Username: "root", Password: rootPassword, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer root.Close()
	rc, err := root.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if len(data)%512 != sha256.Size {
		return fmt.Errorf("snapshot of %d bytes has no SHA-256 trailer", len(data))
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return err
	}
	log.Printf("wrote %s (%d bytes)", out, len(data))
	return nil
}

// fill writes the data set. Every step is one transaction, in a fixed
// order.
func fill(ctx context.Context, c *clientv3.Client) error {
	codec, err := keyspace.NewCodec()
	if err != nil {
		return err
	}
	var steps []func() error
	put := func(key string, obj runtime.Object, opts ...clientv3.OpOption) {
		steps = append(steps, func() error {
			b, err := codec.Encode(obj)
			if err != nil {
				return err
			}
			_, err = c.Put(ctx, key, string(b), opts...)
			return err
		})
	}
	putRaw := func(key, val string, opts ...clientv3.OpOption) {
		steps = append(steps, func() error { _, err := c.Put(ctx, key, val, opts...); return err })
	}
	del := func(key string) {
		steps = append(steps, func() error { _, err := c.Delete(ctx, key); return err })
	}
	gen := keyspace.NewGenerator(42)
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	meta := func(ns, name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012x", len(ns)*1000+len(name))), CreationTimestamp: created}
	}
	leases := clientv3.WithLease(eventLeaseID)

	steps = append(steps, func() error { return grant(ctx, c, eventLeaseID, 3600) }, func() error { return grant(ctx, c, masterLeaseID, 15) })
	for _, ns := range []string{"default", "kube-system"} {
		put("/registry/namespaces/"+ns, &corev1.Namespace{ObjectMeta: meta("", ns), Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}})
	}
	put("/registry/services/specs/default/kubernetes", &corev1.Service{ObjectMeta: meta("default", "kubernetes"),
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}})
	put("/registry/ranges/serviceips", &corev1.RangeAllocation{ObjectMeta: meta("", ""), Range: "10.96.0.0/12", Data: []byte{0x01}})
	put("/registry/minions/node-1", &corev1.Node{ObjectMeta: meta("", "node-1"), Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24"}})
	put("/registry/masterleases/192.168.0.10", &corev1.Endpoints{ObjectMeta: meta("", "192.168.0.10"),
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.168.0.10"}}}}}, clientv3.WithLease(masterLeaseID))
	for i := range 4 {
		put(fmt.Sprintf("/registry/pods/default/web-%d", i), gen.Pod("default", fmt.Sprintf("web-%d", i), 0))
	}
	put("/registry/configmaps/kube-system/cluster-info", gen.ConfigMap("kube-system", "cluster-info", 0, 200))
	put("/registry/configmaps/default/settings", gen.ConfigMap("default", "settings", 0, 100))
	secret := &corev1.Secret{ObjectMeta: meta("default", "db-password"), Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte("hunter2")}}
	secret.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","data":{"password":"aHVudGVyMg=="},"kind":"Secret"}`}
	put("/registry/secrets/default/db-password", secret)
	putRaw("/registry/secrets/kube-system/bootstrap-token", "k8s:enc:aescbc:v1:key1:\x8b\x02\xa7\x11ciphertext-not-decrypted\x00\x17")
	// kube-apiserver stores CustomResourceDefinitions as
	// apiextensions.k8s.io/v1beta1 protobuf.
	preserve := true
	put("/registry/apiextensions.k8s.io/customresourcedefinitions/crontabs.stable.example.com", &apiextensionsv1beta1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "crontabs.stable.example.com", UID: "8f9c2a51-3a6b-4a8e-9d6c-0c2f1b7e4d11", CreationTimestamp: created},
		Spec: apiextensionsv1beta1.CustomResourceDefinitionSpec{Group: "stable.example.com", Scope: apiextensionsv1beta1.NamespaceScoped,
			Names: apiextensionsv1beta1.CustomResourceDefinitionNames{Kind: "CronTab", Plural: "crontabs", Singular: "crontab"},
			Versions: []apiextensionsv1beta1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1beta1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1beta1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}}}}},
		Status: apiextensionsv1beta1.CustomResourceDefinitionStatus{
			AcceptedNames:  apiextensionsv1beta1.CustomResourceDefinitionNames{Kind: "CronTab", Plural: "crontabs", Singular: "crontab"},
			StoredVersions: []string{"v1"},
			Conditions: []apiextensionsv1beta1.CustomResourceDefinitionCondition{
				{Type: apiextensionsv1beta1.NamesAccepted, Status: apiextensionsv1beta1.ConditionTrue, LastTransitionTime: created, Reason: "NoConflicts"},
				{Type: apiextensionsv1beta1.Established, Status: apiextensionsv1beta1.ConditionTrue, LastTransitionTime: created, Reason: "InitialNamesAccepted"},
			}}})
	putRaw("/registry/stable.example.com/crontabs/default/nightly",
		`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"nightly","namespace":"default","uid":"5d1e7c2b-9a41-4f0e-8b3d-6a2f9c0e1b77","generation":1,"creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"cronSpec":"0 3 * * *","image":"backup:1.4"}}`)
	for i := range 3 {
		ev := &corev1.Event{ObjectMeta: meta("default", fmt.Sprintf("web-%d.1853a9c0f%d", i, i)),
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: fmt.Sprintf("web-%d", i)},
			Reason:         "Scheduled", Message: fmt.Sprintf("Successfully assigned default/web-%d to node-1", i), Type: "Normal",
			Count: 1, FirstTimestamp: created, LastTimestamp: created, Source: corev1.EventSource{Component: "default-scheduler"}}
		put("/registry/events/default/"+ev.Name, ev, leases)
	}
	putRaw("/other-app/config/feature-flags", `{"dark-mode":true}`)
	// History: two kubelet status updates of web-0, a deleted pod.
	put("/registry/pods/default/web-0", gen.Pod("default", "web-0", 1))
	put("/registry/pods/default/web-0", gen.Pod("default", "web-0", 2))
	del("/registry/pods/default/web-3")
	// kube-apiserver's compactor (k8s.io/apiserver/pkg/storage/etcd3/
	// compact.go): compact_rev_key holds the revision to compact to, then a
	// physical compaction at that revision.
	steps = append(steps, func() error {
		cur, err := c.Get(ctx, keyspace.CompactRevKey)
		if err != nil {
			return err
		}
		compactAt := cur.Header.Revision
		if _, err := c.Put(ctx, keyspace.CompactRevKey, strconv.FormatInt(compactAt, 10)); err != nil {
			return err
		}
		_, err = c.Compact(ctx, compactAt, clientv3.WithCompactPhysical())
		return err
	})
	// After the compaction: more history, a delete, a configmap update.
	put("/registry/pods/default/web-1", gen.Pod("default", "web-1", 1))
	put("/registry/configmaps/default/settings", gen.ConfigMap("default", "settings", 1, 100))
	del("/registry/configmaps/kube-system/cluster-info")
	// Auth, last: users and roles (never printed with their passwords).
	steps = append(steps, func() error {
		if _, err := c.RoleAdd(ctx, "root"); err != nil {
			return err
		}
		if _, err := c.UserAdd(ctx, "root", rootPassword); err != nil {
			return err
		}
		if _, err := c.UserGrantRole(ctx, "root", "root"); err != nil {
			return err
		}
		if _, err := c.RoleAdd(ctx, "registry-reader"); err != nil {
			return err
		}
		if _, err := c.RoleGrantPermission(ctx, "registry-reader", "/registry/", clientv3.GetPrefixRangeEnd("/registry/"), clientv3.PermissionType(clientv3.PermRead)); err != nil {
			return err
		}
		if _, err := c.UserAdd(ctx, "backup", "backup-password"); err != nil {
			return err
		}
		if _, err := c.UserGrantRole(ctx, "backup", "registry-reader"); err != nil {
			return err
		}
		_, err := c.AuthEnable(ctx)
		return err
	})
	for i, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
	}
	return nil
}

// grant creates a lease with a chosen ID through the raw Lease API.
func grant(ctx context.Context, c *clientv3.Client, id, ttl int64) error {
	_, err := etcdserverpb.NewLeaseClient(c.ActiveConnection()).LeaseGrant(ctx, &etcdserverpb.LeaseGrantRequest{ID: id, TTL: ttl})
	return err
}
