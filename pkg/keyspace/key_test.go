package keyspace

import (
	"testing"
)

func TestParseBuildRoundTrip(t *testing.T) {
	tests := []struct {
		key  string
		want Key
	}{
		// Core types whose group is dropped.
		{"/registry/pods/default/web-0", Key{Class: ClassObject, Prefix: "/registry", Path: "pods", Resource: "pods", Namespace: "default", Name: "web-0"}},
		{"/registry/namespaces/kube-system", Key{Class: ClassObject, Prefix: "/registry", Path: "namespaces", Resource: "namespaces", Name: "kube-system"}},
		{"/registry/configmaps/ns1/cm.with.dots", Key{Class: ClassObject, Prefix: "/registry", Path: "configmaps", Resource: "configmaps", Namespace: "ns1", Name: "cm.with.dots"}},
		// Every override in SpecialDefaultResourcePrefixes.
		{"/registry/minions/node-1", Key{Class: ClassObject, Prefix: "/registry", Path: "minions", Resource: "nodes", Name: "node-1"}},
		{"/registry/controllers/ns/rc1", Key{Class: ClassObject, Prefix: "/registry", Path: "controllers", Resource: "replicationcontrollers", Namespace: "ns", Name: "rc1"}},
		{"/registry/services/specs/default/kubernetes", Key{Class: ClassObject, Prefix: "/registry", Path: "services/specs", Resource: "services", Namespace: "default", Name: "kubernetes"}},
		{"/registry/services/endpoints/default/kubernetes", Key{Class: ClassObject, Prefix: "/registry", Path: "services/endpoints", Resource: "endpoints", Namespace: "default", Name: "kubernetes"}},
		{"/registry/ingress/ns/ing1", Key{Class: ClassObject, Prefix: "/registry", Path: "ingress", Group: "networking.k8s.io", Resource: "ingresses", Namespace: "ns", Name: "ing1"}},
		{"/registry/podsecuritypolicy/psp1", Key{Class: ClassObject, Prefix: "/registry", Path: "podsecuritypolicy", Group: "policy", Resource: "podsecuritypolicies", Name: "psp1"}},
		// Built-ins of named groups, group dropped.
		{"/registry/deployments/ns/d1", Key{Class: ClassObject, Prefix: "/registry", Path: "deployments", Group: "apps", Resource: "deployments", Namespace: "ns", Name: "d1"}},
		{"/registry/clusterroles/system:admin", Key{Class: ClassObject, Prefix: "/registry", Path: "clusterroles", Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "system:admin"}},
		{"/registry/leases/kube-node-lease/node-1", Key{Class: ClassObject, Prefix: "/registry", Path: "leases", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-node-lease", Name: "node-1"}},
		{"/registry/ipaddresses/192.168.2.3", Key{Class: ClassObject, Prefix: "/registry", Path: "ipaddresses", Group: "networking.k8s.io", Resource: "ipaddresses", Name: "192.168.2.3"}},
		// Group-qualified paths: CRDs, APIServices, custom resources.
		{"/registry/apiextensions.k8s.io/customresourcedefinitions/crontabs.stable.example.com", Key{Class: ClassObject, Prefix: "/registry", Path: "apiextensions.k8s.io/customresourcedefinitions", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "crontabs.stable.example.com"}},
		{"/registry/apiregistration.k8s.io/apiservices/v1.apps", Key{Class: ClassObject, Prefix: "/registry", Path: "apiregistration.k8s.io/apiservices", Group: "apiregistration.k8s.io", Resource: "apiservices", Name: "v1.apps"}},
		{"/registry/cr.bar.com/foos/ns/cr1foo", Key{Class: ClassObject, Prefix: "/registry", Path: "cr.bar.com/foos", Group: "cr.bar.com", Resource: "foos", Namespace: "ns", Name: "cr1foo"}},
		{"/registry/custom.fancy.com/pants/cr2pant", Key{Class: ClassObject, Prefix: "/registry", Path: "custom.fancy.com/pants", Group: "custom.fancy.com", Resource: "pants", Name: "cr2pant"}},
		{"/registry/snapshot.storage.k8s.io/volumesnapshots/ns/s1", Key{Class: ClassObject, Prefix: "/registry", Path: "snapshot.storage.k8s.io/volumesnapshots", Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots", Namespace: "ns", Name: "s1"}},
		// OpenShift prefixes.
		{"/kubernetes.io/config.openshift.io/clusteroperators/console", Key{Class: ClassObject, Prefix: "/kubernetes.io", Path: "config.openshift.io/clusteroperators", Group: "config.openshift.io", Resource: "clusteroperators", Name: "console"}},
		{"/openshift.io/routes/ns/r1", Key{Class: ClassObject, Prefix: "/openshift.io", Path: "routes", Resource: "routes", Namespace: "ns", Name: "r1"}},
	}
	var p Parser
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got := p.Parse(tt.key)
			if got != tt.want {
				t.Fatalf("Parse(%q) = %+v, want %+v", tt.key, got, tt.want)
			}
			if back := Build(got); back != tt.key {
				t.Fatalf("Build(Parse(%q)) = %q", tt.key, back)
			}
			if g, r := ResourceOf(got.Path); g != tt.want.Group || r != tt.want.Resource {
				t.Errorf("ResourceOf(%q) = %q, %q, want %q, %q", got.Path, g, r, tt.want.Group, tt.want.Resource)
			}
		})
	}
}

func TestBuildCohabitingGroups(t *testing.T) {
	tests := []struct {
		key  Key
		want string
	}{
		{Key{Prefix: "/registry", Group: "extensions", Resource: "ingresses", Namespace: "ns", Name: "i"}, "/registry/ingress/ns/i"},
		{Key{Prefix: "/registry", Group: "extensions", Resource: "deployments", Namespace: "ns", Name: "d"}, "/registry/deployments/ns/d"},
		{Key{Prefix: "/registry", Group: "events.k8s.io", Resource: "events", Namespace: "ns", Name: "e"}, "/registry/events/ns/e"},
		{Key{Prefix: "/registry/", Group: "", Resource: "nodes", Name: "n"}, "/registry/minions/n"},
	}
	for _, tt := range tests {
		if got := Build(tt.key); got != tt.want {
			t.Errorf("Build(%+v) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

func TestParseSpecialKeys(t *testing.T) {
	tests := []struct {
		key       string
		wantClass Class
		wantPath  string
	}{
		{"compact_rev_key", ClassCompactRevKey, ""},
		{"/registry/masterleases/10.0.0.1", ClassMasterLease, "masterleases"},
		{"/registry/ranges/serviceips", ClassRangeAllocation, "ranges"},
		{"/registry/ranges/servicenodeports", ClassRangeAllocation, "ranges"},
		{"/registry/pods", ClassUnrecognised, "pods"},
		{"/registry/pods/a/b/c", ClassUnrecognised, "pods"},
		{"/registry/", ClassUnrecognised, ""},
		{"/registry/cr.example.com", ClassUnrecognised, "cr.example.com"},
		{"/registry/pods//name", ClassUnrecognised, "pods"},
		{"/registryx/pods/a/b", ClassOutside, ""},
		{"foo", ClassOutside, ""},
		{"", ClassOutside, ""},
	}
	var p Parser
	for _, tt := range tests {
		got := p.Parse(tt.key)
		if got.Class != tt.wantClass || got.Path != tt.wantPath {
			t.Errorf("Parse(%q) = class %q path %q, want %q %q", tt.key, got.Class, got.Path, tt.wantClass, tt.wantPath)
		}
	}
}

func TestParseCustomPrefix(t *testing.T) {
	p := Parser{Prefixes: []string{"/lwbench/run1/"}}
	got := p.Parse("/lwbench/run1/pods/ns/p")
	want := Key{Class: ClassObject, Prefix: "/lwbench/run1", Path: "pods", Resource: "pods", Namespace: "ns", Name: "p"}
	if got != want {
		t.Fatalf("Parse = %+v, want %+v", got, want)
	}
	if got := p.Parse("/registry/pods/ns/p"); got.Class != ClassOutside {
		t.Fatalf("key under another prefix: class %q, want outside", got.Class)
	}
}

func TestGroupResource(t *testing.T) {
	if got := (Key{Resource: "pods"}).GroupResource(); got != "pods" {
		t.Errorf("got %q, want pods", got)
	}
	if got := (Key{Group: "apps", Resource: "deployments"}).GroupResource(); got != "deployments.apps" {
		t.Errorf("got %q, want deployments.apps", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"/registry/pods/a/b", "/registry/services/specs/a/b", "/registry/x.y/z/n", "compact_rev_key", "/registry//", "/kubernetes.io/a"} {
		f.Add(s)
	}
	var p Parser
	f.Fuzz(func(t *testing.T, key string) {
		k := p.Parse(key)
		// A key kube-apiserver would write (its path is the resource's own)
		// must build back to itself.
		if k.Class == ClassObject && ResourcePath(k.Group, k.Resource) == k.Path {
			if back := Build(k); back != key {
				t.Fatalf("Build(Parse(%q)) = %q (%+v)", key, back, k)
			}
		}
	})
}
