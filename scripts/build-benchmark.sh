#!/usr/bin/env bash
# build-benchmark.sh VERSION [CACHE_DIR]
#
# Builds etcd's own benchmark tool (go.etcd.io/etcd/v3/tools/benchmark) for
# one etcd release and prints the path of the binary:
#   CACHE_DIR/benchmark-vVERSION/benchmark
# CACHE_DIR defaults to $ETCDKIT_CACHE or ~/.cache/etcdkit. A second call
# reuses the binary. Nothing of etcd's code is copied into this repository.
#
# The tool lives in etcd's root module, go.etcd.io/etcd/v3, whose replace
# directives make `go install` refuse it. A throwaway wrapper module
# requires the root module and every etcd module the tool links at
# VERSION, then builds the package. The Go module proxy does not serve
# every release of the root module (v3.7.2 and v3.7.3 answer 403 while
# their server, client and api modules are served); then the newest root
# module of the same minor release that the proxy serves provides the
# tool's source, linked against the VERSION libraries. The chosen source
# version is written next to the binary, in SOURCE_VERSION.
set -euo pipefail

version=${1:?usage: build-benchmark.sh VERSION [CACHE_DIR]}
version=${version#v}
cache=${2:-${ETCDKIT_CACHE:-$HOME/.cache/etcdkit}}
out="$cache/benchmark-v$version"

if [ -x "$out/benchmark" ] && [ -f "$out/SOURCE_VERSION" ]; then
  echo "$out/benchmark"
  exit 0
fi
mkdir -p "$out"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
unset GOFLAGS GOWORK
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)
go mod init etcdkit.local/benchmarkbuild >/dev/null 2>&1

# The root module's source: VERSION if the proxy has it, else the newest
# patch release of the same minor version that it has.
minor=${version%.*}
source_version=""
if go list -m -json "go.etcd.io/etcd/v3@v$version" >/dev/null 2>&1; then
  source_version=$version
else
  for v in $(go list -m -versions go.etcd.io/etcd/v3 2>/dev/null | tr ' ' '\n' | grep "^v$minor\." | sort -t. -k3 -n -r); do
    if go list -m -json "go.etcd.io/etcd/v3@$v" >/dev/null 2>&1; then
      source_version=${v#v}
      break
    fi
  done
  if [ -z "$source_version" ]; then
    # `go list -m -versions` omits some tags the proxy serves; try the
    # patch releases below VERSION one by one.
    patch=${version##*.}
    while [ "$patch" -gt 0 ]; do
      patch=$((patch - 1))
      if go list -m -json "go.etcd.io/etcd/v3@v$minor.$patch" >/dev/null 2>&1; then
        source_version=$minor.$patch
        break
      fi
    done
  fi
fi
if [ -z "$source_version" ]; then
  echo "build-benchmark.sh: no go.etcd.io/etcd/v3 v$minor.x on the module proxy" >&2
  exit 1
fi

reqs="go.etcd.io/etcd/v3@v$source_version"
for m in server/v3 client/v3 api/v3 client/pkg/v3 pkg/v3 etcdctl/v3 etcdutl/v3; do
  reqs="$reqs go.etcd.io/etcd/$m@v$version"
done
# shellcheck disable=SC2086
go get $reqs >/dev/null 2>&1 || { echo "build-benchmark.sh: go get failed" >&2; go get $reqs; exit 1; }
for m in server/v3 client/v3 api/v3; do
  got=$(go list -m -f '{{.Version}}' "go.etcd.io/etcd/$m")
  if [ "$got" != "v$version" ]; then
    echo "build-benchmark.sh: go.etcd.io/etcd/$m resolved to $got, not v$version" >&2
    exit 1
  fi
done
go build -trimpath -o "$out/benchmark" go.etcd.io/etcd/v3/tools/benchmark
echo "$source_version" > "$out/SOURCE_VERSION"
echo "build-benchmark.sh: tools/benchmark from go.etcd.io/etcd/v3 v$source_version, linked against etcd v$version modules" >&2
echo "$out/benchmark"
