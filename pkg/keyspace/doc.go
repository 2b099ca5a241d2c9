// Package keyspace maps etcd keys and values onto Kubernetes' storage
// layout, and makes objects encoded exactly as kube-apiserver stores them.
//
// # Keys
//
// kube-apiserver stores every object at
// <prefix>/<resource path>/[<namespace>/]<name>, where the prefix is
// --etcd-prefix (default /registry) and the resource path is the lower-cased
// plural resource for built-in types (the group is dropped), one of a few
// historical overrides (nodes -> minions, services -> services/specs, ...),
// or <group>/<resource> for custom resources, CRDs and APIServices
// (k8s.io/apiserver/pkg/storage/etcd3/store.go,
// k8s.io/apiserver/pkg/server/storage/storage_factory.go). Parse and Build
// convert between etcd keys and Key.
//
// # Values
//
// Built-in types are stored as "k8s\x00" and a protobuf runtime.Unknown that
// names apiVersion and kind; custom resources as JSON (or CBOR behind a
// gate); encrypted values start with "k8s:enc:<provider>:v<n>:<key>:".
// DetectValue classifies a value without a compiled scheme; Codec encodes
// and decodes built-in types with Kubernetes' own serializers.
//
// # Objects for loads
//
// Generator makes realistic Pods and ConfigMaps, deterministic for a seed,
// so that loads write the bytes a real cluster would.
package keyspace
