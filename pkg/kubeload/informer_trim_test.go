package kubeload

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kubestore/etcdkit/pkg/watchload"
)

// TestInformersStoreMetadata lists one pod with two managedFields entries
// through an InformerSet and checks its informer stores only the pod's
// identity and resourceVersion (StoreMetadata: a StoredObject), which is
// what lwbench reads.
func TestInformersStoreMetadata(t *testing.T) {
	const list = `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"p","namespace":"ns","resourceVersion":"5",` +
		`"managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}},` +
		`{"manager":"kubelet","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:status":{}}}]},"spec":{"containers":[{"name":"c","image":"i"}]}}]}`
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		io.WriteString(w, list)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	conns, err := NewConnections(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, ConnectionsPerClient)
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewInformerSet(conns, watchload.NewEnv(time.Now(), 1<<10, 1, nil), "/registry", []string{watchload.ResourcePods}, new(bool))
	if err != nil {
		t.Fatal(err)
	}
	defer set.Stop()
	if err := set.Start(t.Context(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	objs := set.Informers[0].inf.GetStore().List()
	if len(objs) != 1 {
		t.Fatalf("got %d objects stored, want 1", len(objs))
	}
	stored, ok := objs[0].(*StoredObject)
	if !ok {
		t.Fatalf("got a %T stored, want *StoredObject", objs[0])
	}
	if want := (StoredObject{Name: "p", Namespace: "ns", ResourceVersion: "5"}); *stored != want {
		t.Errorf("got %+v stored, want %+v", *stored, want)
	}
	if got, want := set.Cache(0), map[string]int64{"/registry/pods/ns/p": 5}; len(got) != 1 || got["/registry/pods/ns/p"] != 5 {
		t.Errorf("got cache %v, want %v", got, want)
	}
}

// TestTrimManagedFields: the transform of BenchmarkInformerMemory's bare
// set keeps the object, without managedFields.
func TestTrimManagedFields(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.PodSpec{NodeName: "n"}}
	got, err := TrimManagedFields(pod)
	if err != nil {
		t.Fatal(err)
	}
	p := got.(*corev1.Pod)
	if len(p.ManagedFields) != 0 || p.Spec.NodeName != "n" {
		t.Errorf("got managedFields %v, nodeName %q; want none, %q", p.ManagedFields, p.Spec.NodeName, "n")
	}
}
