package keyspace

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestDetectValue(t *testing.T) {
	codec, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	pod, err := codec.Encode(NewGenerator(1).Pod("ns", "p", 0))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      []byte
		want    ValueInfo
		wantErr bool
	}{
		{name: "empty", in: nil, want: ValueInfo{Encoding: EncodingEmpty}},
		{name: "protobuf pod", in: pod, want: ValueInfo{Encoding: EncodingProtobuf, APIVersion: "v1", Kind: "Pod"}},
		{name: "truncated protobuf", in: pod[:len(pod)/2], want: ValueInfo{Encoding: EncodingProtobuf}, wantErr: true},
		{name: "custom resource json", in: []byte(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"x"}}`), want: ValueInfo{Encoding: EncodingJSON, APIVersion: "stable.example.com/v1", Kind: "CronTab"}},
		{name: "json with newline", in: []byte("\n{\"kind\":\"Foo\"}\n"), want: ValueInfo{Encoding: EncodingJSON, Kind: "Foo"}},
		{name: "broken json", in: []byte(`{"kind":`), want: ValueInfo{Encoding: EncodingJSON}, wantErr: true},
		{name: "cbor", in: []byte{0xd9, 0xd9, 0xf7, 0xa0}, want: ValueInfo{Encoding: EncodingCBOR}},
		{name: "aescbc", in: []byte("k8s:enc:aescbc:v1:key1:\x01\x02"), want: ValueInfo{Encoding: EncodingEncrypted, Provider: "aescbc", ProviderVersion: "v1", KeyName: "key1"}},
		{name: "kms v2", in: []byte("k8s:enc:kms:v2:vault-kms:\x0a\x01"), want: ValueInfo{Encoding: EncodingEncrypted, Provider: "kms", ProviderVersion: "v2", KeyName: "vault-kms"}},
		{name: "encrypted prefix cut short", in: []byte("k8s:enc:aesgcm:v1"), want: ValueInfo{Encoding: EncodingEncrypted}, wantErr: true},
		{name: "compact_rev_key value", in: []byte("1234"), want: ValueInfo{Encoding: EncodingOther}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DetectValue(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("DetectValue error = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				if got.Encoding != tt.want.Encoding {
					t.Fatalf("Encoding = %q, want %q", got.Encoding, tt.want.Encoding)
				}
				return
			}
			if got != tt.want {
				t.Fatalf("DetectValue = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCodecStoresLikeKubeAPIServer(t *testing.T) {
	codec, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	pod := NewGenerator(7).Pod("shop", "checkout-abc", 3)
	pod.ResourceVersion = "999"
	b, err := codec.Encode(pod)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, ProtobufPrefix) {
		t.Fatalf("stored value starts with %q, want k8s\\x00", b[:4])
	}
	if pod.ResourceVersion != "999" {
		t.Fatalf("Encode modified its argument: resourceVersion %q", pod.ResourceVersion)
	}
	if bytes.Contains(b, []byte("999")) {
		t.Fatalf("stored value still holds the resourceVersion")
	}
	if n := len(b); n < 2500 || n > 8000 {
		t.Errorf("pod is %d bytes, want a realistic 2.5-8 KiB", n)
	}
	obj, err := codec.Decode(b, 4242)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := obj.(*corev1.Pod)
	if !ok {
		t.Fatalf("decoded %T, want *v1.Pod", obj)
	}
	if got.ResourceVersion != "4242" {
		t.Errorf("decoded resourceVersion %q, want 4242 from mod_revision", got.ResourceVersion)
	}
	if got.Name != "checkout-abc" || got.Namespace != "shop" || got.Spec.NodeName != pod.Spec.NodeName {
		t.Errorf("decoded pod %s/%s on %s differs from %s/%s on %s", got.Namespace, got.Name, got.Spec.NodeName, pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
}

func TestGeneratorDeterministicAndChurning(t *testing.T) {
	codec, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	enc := func(gen int, seed uint64) []byte {
		b, err := codec.Encode(NewGenerator(seed).Pod("ns", "p", gen))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(enc(1, 5), enc(1, 5)) {
		t.Error("same seed, name and generation gave different bytes")
	}
	if bytes.Equal(enc(1, 5), enc(2, 5)) {
		t.Error("a new generation did not change the pod")
	}
	cm, err := codec.Encode(NewGenerator(5).ConfigMap("ns", "cm", 0, 4096))
	if err != nil {
		t.Fatal(err)
	}
	if len(cm) < 4096 {
		t.Errorf("configmap with 4096 data bytes encoded to %d bytes", len(cm))
	}
	if info, err := DetectValue(cm); err != nil || info.Kind != "ConfigMap" {
		t.Errorf("DetectValue(configmap) = %+v, %v", info, err)
	}
}

func FuzzDetectValue(f *testing.F) {
	f.Add([]byte("k8s\x00\x0a\x02"))
	f.Add([]byte("k8s:enc:aescbc:v1:k:"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, _ := DetectValue(b)
		if info.Encoding == "" {
			t.Fatalf("DetectValue(%q) left Encoding empty", b)
		}
	})
}
