package keyspace

import "strings"

// IsResourcePath reports whether path, the segment(s) right below a
// prefix (Key.Path), is a directory kube-apiserver stores a resource in:
// a built-in resource's path (pods, minions, services/specs, ...), the
// apiserver's own masterleases, peerserverleases and ranges, or
// "<group>/<resource>" with a dotted group (custom resources, CRDs,
// APIServices). A namespace or an object name is none of these, which is
// how a --prefix one level too deep (/registry/pods) is told apart.
func IsResourcePath(path string) bool {
	if _, ok := pathToResource[path]; ok {
		return true
	}
	if _, ok := builtinGroups[path]; ok {
		return true
	}
	switch path {
	case "masterleases", "peerserverleases", "ranges":
		return true
	}
	group, resource, ok := strings.Cut(path, "/")
	return ok && strings.Contains(group, ".") && resource != "" && !strings.Contains(resource, "/")
}
