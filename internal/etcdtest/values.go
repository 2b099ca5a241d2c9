package etcdtest

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// NestedCRDValue returns the stored value of a CustomResourceDefinition
// named name, as kube-apiserver stores it ("k8s\x00", a runtime.Unknown
// envelope, apiextensions.k8s.io/v1beta1 protobuf), whose validation
// schema nests JSONSchemaProps.not depth times. It is encoded by hand
// field by field (k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/
// v1beta1/generated.proto, k8s.io/apimachinery/pkg/runtime/
// generated.proto), because the generated marshaller recurses once per
// level and overflows the stack on the deep values tests need. It takes
// about 5 bytes per level.
func NestedCRDValue(name string, depth int) []byte {
	// sizes[k] is the length of a JSONSchemaProps with k nested nots.
	sizes := make([]int, depth+1)
	for k := 1; k <= depth; k++ {
		sizes[k] = protowire.SizeTag(28) + protowire.SizeBytes(sizes[k-1])
	}
	props := make([]byte, 0, sizes[depth])
	for k := depth; k >= 1; k-- {
		props = protowire.AppendTag(props, 28, protowire.BytesType) // not
		props = protowire.AppendVarint(props, uint64(sizes[k-1]))
	}
	validation := message(nil, 1, props) // openAPIV3Schema
	spec := protowire.AppendTag(nil, 1, protowire.BytesType)
	spec = protowire.AppendString(spec, "stable.example.com") // group
	spec = message(spec, 5, validation)                       // validation
	meta := protowire.AppendTag(nil, 1, protowire.BytesType)
	meta = protowire.AppendString(meta, name) // name
	crd := message(nil, 1, meta)              // metadata
	crd = message(crd, 2, spec)               // spec
	typeMeta := protowire.AppendTag(nil, 1, protowire.BytesType)
	typeMeta = protowire.AppendString(typeMeta, "apiextensions.k8s.io/v1beta1")
	typeMeta = protowire.AppendTag(typeMeta, 2, protowire.BytesType)
	typeMeta = protowire.AppendString(typeMeta, "CustomResourceDefinition")
	v := []byte{'k', '8', 's', 0}
	v = message(v, 1, typeMeta) // typeMeta
	v = message(v, 2, crd)      // raw
	return v
}

// message appends field num holding the message m.
func message(b []byte, num protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}
