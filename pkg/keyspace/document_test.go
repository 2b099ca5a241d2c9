package keyspace

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

func TestDocument(t *testing.T) {
	c, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Annotations: map[string]string{lastApplied: `{"data":{"k":"c2VjcmV0"}}`}},
		Data:       map[string][]byte{"k": []byte("secret")}}
	secretBytes, err := c.Encode(secret)
	if err != nil {
		t.Fatal(err)
	}
	// As kube-apiserver stores them: a CRD as apiextensions.k8s.io/v1beta1,
	// an APIService as apiregistration.k8s.io/v1.
	crd := &apiextensionsv1beta1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "crontabs.stable.example.com"},
		Spec: apiextensionsv1beta1.CustomResourceDefinitionSpec{Group: "stable.example.com", Scope: apiextensionsv1beta1.NamespaceScoped,
			Names: apiextensionsv1beta1.CustomResourceDefinitionNames{Plural: "crontabs", Kind: "CronTab"}}}
	crdBytes, err := c.Encode(crd)
	if err != nil {
		t.Fatal(err)
	}
	apiService := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1", GroupPriorityMinimum: 100, VersionPriority: 100}}
	apiServiceBytes, err := c.Encode(apiService)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "stable.example.com/v1", "kind": "CronTab",
		"metadata": map[string]any{"name": "c", "namespace": "ns"}, "spec": map[string]any{"cronSpec": "* * * * *"}}}
	envelope := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "metrics.example.io/v1", Kind: "NodeSample"}, Raw: []byte{0x0a, 0x00}}
	raw, err := envelope.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	unknownKind := append([]byte("k8s\x00"), raw...)
	var buf bytesBuffer
	if err := cbor.NewSerializer(c.scheme, c.scheme).Encode(u, &buf); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		value      []byte
		wantKind   string
		wantErr    error
		wantAnyErr bool
	}{
		{"protobuf secret", secretBytes, "Secret", nil, false},
		{"json custom resource", []byte(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c"}}`), "CronTab", nil, false},
		{"cbor custom resource", buf, "CronTab", nil, false},
		{"encrypted", []byte("k8s:enc:kms:v2:vault:\x0a\x01x"), "", ErrEncrypted, false},
		{"protobuf CRD, stored as v1beta1", crdBytes, "CustomResourceDefinition", nil, false},
		{"protobuf APIService", apiServiceBytes, "APIService", nil, false},
		{"unknown protobuf kind", unknownKind, "", ErrNotInScheme, false},
		{"plain text", []byte("42"), "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, info, err := c.Document(tt.value, 77)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error %v, want %v", err, tt.wantErr)
				}
				return
			case tt.wantAnyErr:
				if err == nil {
					t.Fatal("no error")
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			md := doc["metadata"].(map[string]any)
			if doc["kind"] != tt.wantKind || info.Kind != tt.wantKind || md["resourceVersion"] != "77" {
				t.Errorf("kind %v (info %q), resourceVersion %v; want %s and \"77\"", doc["kind"], info.Kind, md["resourceVersion"], tt.wantKind)
			}
		})
	}
	doc, _, err := c.Document(secretBytes, 5)
	if err != nil {
		t.Fatal(err)
	}
	if !RedactSecret(doc) {
		t.Fatal("a Secret was not recognised")
	}
	data := doc["data"].(map[string]any)
	ann := doc["metadata"].(map[string]any)["annotations"].(map[string]any)
	if data["k"] != Redacted || ann[lastApplied] != Redacted {
		t.Errorf("data %v, annotation %v: want both redacted", data, ann[lastApplied])
	}
	if RedactSecret(map[string]any{"kind": "ConfigMap", "apiVersion": "v1", "data": map[string]any{"k": "v"}}) {
		t.Error("a ConfigMap was redacted")
	}
}

// bytesBuffer is an io.Writer collecting bytes.
type bytesBuffer []byte

func (b *bytesBuffer) Write(p []byte) (int, error) { *b = append(*b, p...); return len(p), nil }

func FuzzDocument(f *testing.F) {
	c, err := NewCodec()
	if err != nil {
		f.Fatal(err)
	}
	pod, _ := c.Encode(NewGenerator(1).Pod("ns", "p", 0))
	f.Add(pod)
	f.Add([]byte(`{"kind":"X","metadata":{"name":"a"}}`))
	f.Add([]byte("k8s:enc:aescbc:v1:key1:zz"))
	f.Add([]byte{0xd9, 0xd9, 0xf7, 0xa0})
	f.Fuzz(func(t *testing.T, b []byte) {
		doc, _, err := c.Document(b, 3)
		if err != nil {
			return
		}
		md, ok := doc["metadata"].(map[string]any)
		if !ok || md["resourceVersion"] != "3" {
			t.Fatalf("decoded %q without resourceVersion 3: %v", b, doc["metadata"])
		}
	})
}

func TestDetectPrefixes(t *testing.T) {
	keys := func(ks ...string) func(func(string) bool) {
		return func(yield func(string) bool) {
			for _, k := range ks {
				if !yield(k) {
					return
				}
			}
		}
	}
	tests := []struct {
		keys []string
		want []string
	}{
		{[]string{"/registry/pods/a/b", "compact_rev_key"}, []string{"/registry"}},
		{[]string{"/kubernetes.io/pods/a/b", "/openshift.io/routes/a/b"}, []string{"/kubernetes.io", "/openshift.io"}},
		{[]string{"/custom/k8s/namespaces/default", "/custom/k8s/pods/a/b"}, []string{"/custom/k8s"}},
		{[]string{"/other/key"}, KnownPrefixes},
	}
	for _, tt := range tests {
		if got := DetectPrefixes(keys(tt.keys...)); !slices.Equal(got, tt.want) {
			t.Errorf("DetectPrefixes(%q) = %q, want %q", tt.keys, got, tt.want)
		}
	}
	p := Parser{Prefixes: DetectPrefixes(keys("/custom/k8s/namespaces/default"))}
	if k := p.Parse("/custom/k8s/pods/ns/web"); k.Class != ClassObject || k.Resource != "pods" || k.Namespace != "ns" {
		t.Errorf("parse under a detected prefix: %+v", k)
	}
}
