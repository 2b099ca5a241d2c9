package keyspace

import (
	"slices"
	"strings"
)

// Class says what part of kube-apiserver's key space a key belongs to.
type Class string

// The classes of keys Parse recognises.
const (
	// ClassObject is an API object: <prefix>/<path>/[<namespace>/]<name>.
	ClassObject Class = "object"
	// ClassCompactRevKey is "compact_rev_key" at the etcd root, written by
	// kube-apiserver's compactor; its value is the last compacted revision
	// in decimal and its etcd version counts compactions
	// (k8s.io/apiserver/pkg/storage/etcd3/compact.go).
	ClassCompactRevKey Class = "compact-rev-key"
	// ClassMasterLease is <prefix>/masterleases/<ip>: an Endpoints object per
	// kube-apiserver, held by an etcd lease
	// (pkg/controlplane/reconcilers/lease.go).
	ClassMasterLease Class = "master-lease"
	// ClassRangeAllocation is <prefix>/ranges/<name>, the service IP and node
	// port allocators' RangeAllocation bitmaps
	// (pkg/registry/core/rest/storage_core.go).
	ClassRangeAllocation Class = "range-allocation"
	// ClassUnrecognised is a key under the prefix that does not have the shape
	// of any of the above (too few or too many segments).
	ClassUnrecognised Class = "unrecognised"
	// ClassOutside is a key outside every Kubernetes prefix.
	ClassOutside Class = "outside"
)

// IsObject reports whether keys of class c hold objects kube-apiserver
// stores under its prefix: API objects, master leases and range
// allocations. Usage rows by namespace or group label the other classes
// by their class, as rows by resource do.
func (c Class) IsObject() bool {
	return c == ClassObject || c == ClassMasterLease || c == ClassRangeAllocation
}

// CompactRevKey is the etcd key kube-apiserver's compactor uses as its
// logical clock; it lives at the etcd root, not under the prefix.
const CompactRevKey = "compact_rev_key"

// DefaultPrefix is kube-apiserver's default --etcd-prefix
// (k8s.io/kubernetes/pkg/kubeapiserver/options DefaultEtcdPathPrefix).
const DefaultPrefix = "/registry"

// KnownPrefixes are the etcd prefixes Kubernetes distributions use:
// kube-apiserver's default, and OpenShift's kube-apiserver and
// openshift-apiserver prefixes.
var KnownPrefixes = []string{"/registry", "/kubernetes.io", "/openshift.io"}

// Key is an etcd key mapped onto Kubernetes' key space.
//
// For an object, Group is the API group ("" for the core group), Resource the
// lower-case plural resource name, Namespace empty for a cluster-scoped
// object, and Path the resource's segment(s) of the key as stored, which
// differ from Resource for kube-apiserver's overrides (nodes are stored under
// "minions") and include the group for custom resources
// ("stable.example.com/crontabs").
type Key struct {
	Class     Class
	Prefix    string
	Path      string
	Group     string
	Resource  string
	Namespace string
	Name      string
}

// GroupResource returns "resource" for the core group and
// "resource.group" otherwise, kubectl's spelling.
func (k Key) GroupResource() string {
	if k.Group == "" {
		return k.Resource
	}
	return k.Resource + "." + k.Group
}

// groupResource names a resource of a group; "" is the core group.
type groupResource struct{ group, resource string }

// overrides are kube-apiserver's resource prefixes that differ from the
// lower-cased resource name, for built-in resources whose group is dropped
// from the key (k8s.io/kubernetes/pkg/kubeapiserver/default_storage_factory_builder.go
// SpecialDefaultResourcePrefixes).
var overrides = map[groupResource]string{
	{"", "replicationcontrollers"}:        "controllers",
	{"", "endpoints"}:                     "services/endpoints",
	{"", "nodes"}:                         "minions",
	{"", "services"}:                      "services/specs",
	{"networking.k8s.io", "ingresses"}:    "ingress",
	{"extensions", "ingresses"}:           "ingress",
	{"policy", "podsecuritypolicies"}:     "podsecuritypolicy",
	{"extensions", "podsecuritypolicies"}: "podsecuritypolicy",
}

// builtinGroups gives the group of each built-in resource, whose key drops
// the group: kube-apiserver's DefaultStorageFactory.ResourcePrefix is the
// lower-cased resource unless overridden
// (k8s.io/apiserver/pkg/server/storage/storage_factory.go). Resources that
// cohabit in two groups (events in core and events.k8s.io, deployments in
// apps and extensions, ...) share one key and are reported under their
// storage group. The table follows test/integration/etcd/data.go.
var builtinGroups = map[string]string{
	// core
	"pods": "", "configmaps": "", "secrets": "", "serviceaccounts": "", "namespaces": "",
	"persistentvolumes": "", "persistentvolumeclaims": "", "events": "", "limitranges": "",
	"resourcequotas": "", "podtemplates": "", "nodes": "", "replicationcontrollers": "",
	"services": "", "endpoints": "",
	// apps
	"deployments": "apps", "statefulsets": "apps", "daemonsets": "apps", "replicasets": "apps",
	"controllerrevisions": "apps",
	// batch, autoscaling, policy
	"jobs": "batch", "cronjobs": "batch",
	"horizontalpodautoscalers": "autoscaling",
	"poddisruptionbudgets":     "policy", "podsecuritypolicies": "policy",
	// networking
	"ingresses": "networking.k8s.io", "ingressclasses": "networking.k8s.io",
	"networkpolicies": "networking.k8s.io", "ipaddresses": "networking.k8s.io",
	"servicecidrs": "networking.k8s.io",
	// rbac
	"roles": "rbac.authorization.k8s.io", "rolebindings": "rbac.authorization.k8s.io",
	"clusterroles": "rbac.authorization.k8s.io", "clusterrolebindings": "rbac.authorization.k8s.io",
	// storage
	"storageclasses": "storage.k8s.io", "volumeattachments": "storage.k8s.io",
	"csidrivers": "storage.k8s.io", "csinodes": "storage.k8s.io",
	"csistoragecapacities": "storage.k8s.io", "volumeattributesclasses": "storage.k8s.io",
	// scheduling, coordination, discovery, node
	"priorityclasses": "scheduling.k8s.io",
	"leases":          "coordination.k8s.io", "leasecandidates": "coordination.k8s.io",
	"endpointslices": "discovery.k8s.io",
	"runtimeclasses": "node.k8s.io",
	// certificates
	"certificatesigningrequests": "certificates.k8s.io", "clustertrustbundles": "certificates.k8s.io",
	// admission
	"mutatingwebhookconfigurations":     "admissionregistration.k8s.io",
	"validatingwebhookconfigurations":   "admissionregistration.k8s.io",
	"validatingadmissionpolicies":       "admissionregistration.k8s.io",
	"validatingadmissionpolicybindings": "admissionregistration.k8s.io",
	"mutatingadmissionpolicies":         "admissionregistration.k8s.io",
	"mutatingadmissionpolicybindings":   "admissionregistration.k8s.io",
	// flow control, internal, DRA, migration
	"flowschemas": "flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations": "flowcontrol.apiserver.k8s.io",
	"storageversions":          "internal.apiserver.k8s.io",
	"deviceclasses":            "resource.k8s.io",
	"resourceclaims":           "resource.k8s.io",
	"resourceclaimtemplates":   "resource.k8s.io",
	"resourceslices":           "resource.k8s.io",
	"devicetaintrules":         "resource.k8s.io",
	"storageversionmigrations": "storagemigration.k8s.io",
}

// pathToResource inverts overrides: the stored path of an overridden
// built-in resource gives back its group and resource.
var pathToResource = func() map[string]groupResource {
	m := make(map[string]groupResource, len(overrides))
	for gr, path := range overrides {
		if builtinGroups[gr.resource] == gr.group {
			m[path] = gr
		}
	}
	return m
}()

// ResourcePath returns the segment(s) kube-apiserver stores a resource
// under, below the prefix: the override for the built-ins that have one,
// the plain resource for other built-ins (their group is dropped), and
// "<group>/<resource>" for every other group, which is how custom resources,
// CustomResourceDefinitions and APIServices are stored
// (k8s.io/apiserver/pkg/server/options/etcd.go SimpleStorageFactory).
func ResourcePath(group, resource string) string {
	if p, ok := overrides[groupResource{group, resource}]; ok {
		return p
	}
	if g, ok := builtinGroups[resource]; ok && (g == group || cohabits(group, resource)) {
		return resource
	}
	if group == "" {
		return resource
	}
	return group + "/" + resource
}

// ResourceOf returns the group and resource kube-apiserver stores under
// path, the segment(s) right below a prefix (Key.Path): the inverse of
// ResourcePath, as Parse maps an object's key. An overridden path gives
// its resource ("minions" is nodes, "services/specs" services), a path
// "<group>/<resource>" with a dotted group that group and resource, a
// built-in resource its group, and any other path the core group and the
// path itself.
func ResourceOf(path string) (group, resource string) {
	if gr, ok := pathToResource[path]; ok {
		return gr.group, gr.resource
	}
	if g, r, ok := strings.Cut(path, "/"); ok && strings.Contains(g, ".") {
		return g, r
	}
	return builtinGroups[path], path
}

// cohabits reports whether a built-in resource is also served from an older
// group that shares its storage (k8s.io/kubernetes/pkg/kubeapiserver/default_storage_factory_builder.go).
func cohabits(group, resource string) bool {
	switch group {
	case "extensions":
		switch resource {
		case "deployments", "daemonsets", "replicasets", "networkpolicies", "ingresses", "podsecuritypolicies":
			return true
		}
	case "events.k8s.io":
		return resource == "events"
	}
	return false
}

// Build returns the etcd key of k: k.Prefix, the resource path, then the
// namespace (when set) and name. It is the inverse of Parse for objects;
// Class, Path and the other classes are ignored except ClassCompactRevKey,
// which gives CompactRevKey.
func Build(k Key) string {
	if k.Class == ClassCompactRevKey {
		return CompactRevKey
	}
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(k.Prefix, "/"))
	b.WriteByte('/')
	b.WriteString(ResourcePath(k.Group, k.Resource))
	if k.Namespace != "" {
		b.WriteByte('/')
		b.WriteString(k.Namespace)
	}
	b.WriteByte('/')
	b.WriteString(k.Name)
	return b.String()
}

// Parser maps etcd keys onto Kubernetes' key space under a set of prefixes.
// The zero value uses KnownPrefixes.
type Parser struct {
	// Prefixes are the etcd prefixes (--etcd-prefix values) to recognise,
	// without a trailing slash. A key is matched against the longest prefix
	// it starts with.
	Prefixes []string
}

// PrefixOf returns the prefix of p.Prefixes that key lies under.
func (p Parser) PrefixOf(key string) (string, bool) {
	prefixes := p.Prefixes
	if len(prefixes) == 0 {
		prefixes = KnownPrefixes
	}
	best := ""
	found := false
	for _, pre := range prefixes {
		pre = strings.TrimSuffix(pre, "/")
		if len(key) > len(pre) && key[len(pre)] == '/' && strings.HasPrefix(key, pre) && len(pre) >= len(best) {
			best, found = pre, true
		}
	}
	return best, found
}

// Parse maps an etcd key onto Kubernetes' key space. It never fails: a key
// outside every prefix is ClassOutside, one under a prefix with an
// unexpected shape is ClassUnrecognised with Path set to its first segment.
//
// The rules invert kube-apiserver's layout: a first segment holding a dot
// is an API group (custom resources, CRDs, APIServices; resource plurals
// never contain a dot); "services/specs" and "services/endpoints" are two
// segments; the overrides map back to their resources; then one remaining
// segment is a cluster-scoped name and two are namespace and name. Names
// and namespaces never contain '/' (IsPathSegmentName).
func (p Parser) Parse(key string) Key {
	if key == CompactRevKey {
		return Key{Class: ClassCompactRevKey, Name: key}
	}
	prefix, ok := p.PrefixOf(key)
	if !ok {
		return Key{Class: ClassOutside, Name: key}
	}
	rest := key[len(prefix)+1:]
	segs := strings.Split(rest, "/")
	k := Key{Class: ClassObject, Prefix: prefix}

	var obj []string
	switch {
	case strings.Contains(segs[0], "."):
		if len(segs) < 2 {
			return unrecognised(prefix, segs[0], rest)
		}
		k.Group, k.Resource, k.Path = segs[0], segs[1], segs[0]+"/"+segs[1]
		obj = segs[2:]
	case segs[0] == "services" && len(segs) > 1 && (segs[1] == "specs" || segs[1] == "endpoints"):
		k.Path = segs[0] + "/" + segs[1]
		gr := pathToResource[k.Path]
		k.Group, k.Resource = gr.group, gr.resource
		obj = segs[2:]
	default:
		k.Path = segs[0]
		if gr, ok := pathToResource[k.Path]; ok {
			k.Group, k.Resource = gr.group, gr.resource
		} else {
			k.Group, k.Resource = builtinGroups[k.Path], k.Path
		}
		obj = segs[1:]
		switch k.Path {
		case "masterleases", "peerserverleases":
			k.Class = ClassMasterLease
		case "ranges":
			k.Class = ClassRangeAllocation
		}
	}
	switch len(obj) {
	case 1:
		k.Name = obj[0]
	case 2:
		k.Namespace, k.Name = obj[0], obj[1]
	default:
		return unrecognised(prefix, k.Path, rest)
	}
	if k.Name == "" || (len(obj) == 2 && k.Namespace == "") || k.Resource == "" {
		return unrecognised(prefix, k.Path, rest)
	}
	return k
}

func unrecognised(prefix, path, rest string) Key {
	return Key{Class: ClassUnrecognised, Prefix: prefix, Path: path, Name: rest}
}

// markers are keys every kube-apiserver writes under its prefix, with the
// number of segments that follow the prefix: the default namespace
// (<prefix>/namespaces/default), the service IP allocator
// (<prefix>/ranges/serviceips) and the kubernetes Service
// (<prefix>/services/specs/default/kubernetes).
var markers = []string{"/namespaces/default", "/namespaces/kube-system", "/ranges/serviceips", "/services/specs/default/kubernetes"}

// PrefixCandidate returns the etcd prefix a key reveals when it is one of
// the keys every kube-apiserver writes (<prefix>/namespaces/default,
// <prefix>/ranges/serviceips, ...), so that a file written with an unusual
// --etcd-prefix can be detected: DetectPrefixes collects the candidates.
func PrefixCandidate(key string) (string, bool) {
	for _, m := range markers {
		if strings.HasSuffix(key, m) && len(key) > len(m) && key[0] == '/' {
			return key[:len(key)-len(m)], true
		}
	}
	return "", false
}

// DetectPrefixes returns the prefixes to parse a key space with: the
// KnownPrefixes that hold at least one key, plus every other prefix that
// PrefixCandidate finds among the keys, sorted; KnownPrefixes when the
// keys reveal none. keys is called with a yield function, as an iterator.
func DetectPrefixes(keys func(yield func(string) bool)) []string {
	found := map[string]bool{}
	p := Parser{}
	for k := range keys {
		if pre, ok := p.PrefixOf(k); ok {
			found[pre] = true
			continue
		}
		if pre, ok := PrefixCandidate(k); ok {
			found[pre] = true
		}
	}
	if len(found) == 0 {
		return append([]string(nil), KnownPrefixes...)
	}
	out := make([]string, 0, len(found))
	for pre := range found {
		out = append(out, pre)
	}
	slices.Sort(out)
	return out
}
