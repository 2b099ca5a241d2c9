package keyspace

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kubestore/etcdkit/internal/etcdtest"
)

// TestDocumentRefusesValuesBeyondTheLimits decodes CustomResourceDefinitions
// whose schema nests JSONSchemaProps.not ever deeper (600,000 levels
// overflowed the stack of Kubernetes' generated decoder, a fatal error no
// recover catches), a JSON object as deep, and a value above the size
// limit: beyond a limit Document must return ErrValueLimit naming it,
// without decoding; within it, decode.
func TestDocumentRefusesValuesBeyondTheLimits(t *testing.T) {
	c, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	deepJSON := func(depth int) []byte {
		return []byte(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","spec":` +
			strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth) + "}")
	}
	tests := []struct {
		name      string
		value     []byte
		wantLimit string // "" when the value must decode
	}{
		{"crd 50 deep", etcdtest.NestedCRDValue("a.example.com", 50), ""},
		{"crd at the limit", etcdtest.NestedCRDValue("a.example.com", MaxNestingDepth-10), ""},
		{"crd beyond the limit", etcdtest.NestedCRDValue("a.example.com", MaxNestingDepth+10), fmt.Sprint(MaxNestingDepth)},
		{"crd 100,000 deep", etcdtest.NestedCRDValue("a.example.com", 100_000), fmt.Sprint(MaxNestingDepth)},
		{"crd 600,000 deep", etcdtest.NestedCRDValue("a.example.com", 600_000), fmt.Sprint(MaxNestingDepth)},
		{"json 50 deep", deepJSON(50), ""},
		{"json 600,000 deep", deepJSON(600_000), fmt.Sprint(MaxNestingDepth)},
		{"json above the size limit", append([]byte(`{"kind":"X","a":"`), bytes.Repeat([]byte("x"), MaxValueBytes)...), fmt.Sprint(MaxValueBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, info, err := c.Document(tt.value, 7)
			if tt.wantLimit == "" {
				if err != nil {
					t.Fatalf("Document: %v", err)
				}
				if md := doc["metadata"].(map[string]any); md["resourceVersion"] != "7" {
					t.Errorf("metadata %v: want resourceVersion 7", md)
				}
				return
			}
			if !errors.Is(err, ErrValueLimit) || !strings.Contains(err.Error(), tt.wantLimit) {
				t.Fatalf("Document error %v: want ErrValueLimit naming the limit %s", err, tt.wantLimit)
			}
			if doc != nil {
				t.Error("a document was returned beyond the limit")
			}
			if info.Encoding == "" {
				t.Error("ValueInfo.Encoding is empty")
			}
		})
	}
}

// TestNestedCRDValueDecodes checks the hand-encoded CustomResourceDefinition
// against Kubernetes' own decoder: the schema nests exactly depth levels.
func TestNestedCRDValueDecodes(t *testing.T) {
	c, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	const depth = 30
	doc, info, err := c.Document(etcdtest.NestedCRDValue("a.example.com", depth), 3)
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "CustomResourceDefinition" || info.APIVersion != "apiextensions.k8s.io/v1beta1" {
		t.Errorf("decoded a %s %s", info.APIVersion, info.Kind)
	}
	schema, _ := doc["spec"].(map[string]any)["validation"].(map[string]any)["openAPIV3Schema"].(map[string]any)
	got := 0
	for schema != nil {
		schema, _ = schema["not"].(map[string]any)
		got++
	}
	if got != depth+1 {
		t.Errorf("the schema nests %d levels, want %d", got-1, depth)
	}
}

// FuzzCheckValueLimits feeds arbitrary values to CheckValueLimits: it must
// never panic, its errors wrap ErrValueLimit, and no depth exceeds what
// the bytes can hold (every level takes a tag and a length).
func FuzzCheckValueLimits(f *testing.F) {
	f.Add(etcdtest.NestedCRDValue("a", 3))
	f.Add([]byte(`{"a":[{"b":"}"}]}`))
	f.Add([]byte("k8s\x00\x12\x02\x0a\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		err := CheckValueLimits(b)
		if err != nil && !errors.Is(err, ErrValueLimit) {
			t.Fatalf("error %v does not wrap ErrValueLimit", err)
		}
		if d, _ := protobufDepth(b, MaxNestingDepth); err == nil && d > len(b)/2+1 {
			t.Fatalf("depth %d for %d bytes", d, len(b))
		}
	})
}
