#!/usr/bin/env bash
# build-benchmark.sh VERSION [CACHE_DIR]
#
# Builds two tools of etcd's root module (go.etcd.io/etcd/v3) for one etcd
# release into one directory and prints the path of the first:
#   CACHE_DIR/benchmark-vVERSION/benchmark        (tools/benchmark)
#   CACHE_DIR/benchmark-vVERSION/etcd-dump-logs   (tools/etcd-dump-logs)
#   CACHE_DIR/benchmark-vVERSION/SOURCE_VERSION   (root module version used)
# CACHE_DIR defaults to $ETCDKIT_CACHE or ~/.cache/etcdkit. A second call
# reuses the binaries. Nothing of etcd's code is copied into this repository.
#
# Parallel callers build once: the build holds an exclusive lock on
# CACHE_DIR/benchmark-vVERSION.lock, writes into a temporary directory beside
# the final one and renames it into place, so a caller sees either no
# directory or a complete one. Progress goes to stderr; the only line on
# stdout is the benchmark binary's path.
#
# The tools live in etcd's root module, whose replace directives make
# `go install` refuse it. A throwaway wrapper module requires the root module
# and every etcd module the tools link at VERSION, then builds the packages.
# The Go module proxy does not serve every release of the root module (v3.7.2
# and v3.7.3 answer 403 while their server, client and api modules are
# served); then the newest root module of the same minor release that the
# proxy serves provides the tools' source, linked against the VERSION
# libraries. The chosen source version is written to SOURCE_VERSION.
set -euo pipefail

version=${1:?usage: build-benchmark.sh VERSION [CACHE_DIR]}
version=${version#v}
cache=${2:-${ETCDKIT_CACHE:-$HOME/.cache/etcdkit}}
out="$cache/benchmark-v$version"

complete() { [ -x "$out/benchmark" ] && [ -x "$out/etcd-dump-logs" ] && [ -f "$out/SOURCE_VERSION" ]; }

if complete; then
  echo "$out/benchmark"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$out.lock"
if ! flock -n 9; then
  echo "build-benchmark.sh: another process is building etcd $version's tools into $cache; waiting for it" >&2
  flock 9
fi
# The holder of the lock before us may have finished the build.
if complete; then
  echo "$out/benchmark"
  exit 0
fi
# A directory without every file is what an interrupted build, or an older
# version of this script (benchmark only), left: replace it.
rm -rf "$out"

start=$SECONDS
work=$(mktemp -d)
tmp=$(mktemp -d "$out.tmp.XXXXXX")
trap 'rm -rf "$work" "$tmp"' EXIT
cd "$work"
# Keep the caller's module settings and etcd's ETCD_* variables out of the build.
unset GOFLAGS GOWORK
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)
echo "build-benchmark.sh: building etcd $version's benchmark and etcd-dump-logs into $out" >&2
go mod init etcdkit.local/benchmarkbuild >/dev/null 2>&1

# The root module's source: VERSION if the proxy has it, else the newest
# patch release of the same minor version that it has.
echo "build-benchmark.sh: looking for go.etcd.io/etcd/v3 v$version on the module proxy" >&2
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
echo "build-benchmark.sh: resolving modules (root module v$source_version)" >&2
# shellcheck disable=SC2086
go get $reqs >/dev/null 2>&1 || { echo "build-benchmark.sh: go get failed" >&2; go get $reqs; exit 1; }
for m in server/v3 client/v3 api/v3; do
  got=$(go list -m -f '{{.Version}}' "go.etcd.io/etcd/$m")
  if [ "$got" != "v$version" ]; then
    echo "build-benchmark.sh: go.etcd.io/etcd/$m resolved to $got, not v$version" >&2
    exit 1
  fi
done
for tool in benchmark etcd-dump-logs; do
  echo "build-benchmark.sh: go build $tool ($((SECONDS - start)) s so far)" >&2
  go build -trimpath -o "$tmp/$tool" "go.etcd.io/etcd/v3/tools/$tool"
done
echo "$source_version" > "$tmp/SOURCE_VERSION"
chmod 755 "$tmp"
mv -T "$tmp" "$out"
echo "build-benchmark.sh: tools/benchmark and tools/etcd-dump-logs from go.etcd.io/etcd/v3 v$source_version, linked against etcd v$version modules, in $out after $((SECONDS - start)) s" >&2
echo "$out/benchmark"
