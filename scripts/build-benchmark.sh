#!/usr/bin/env bash
# build-benchmark.sh VERSION [CACHE_DIR]
#
# Builds two tools of etcd's root module (go.etcd.io/etcd/v3) for one etcd
# release into one directory and prints the path of the first:
#   CACHE_DIR/benchmark-vVERSION/benchmark        (tools/benchmark)
#   CACHE_DIR/benchmark-vVERSION/etcd-dump-logs   (tools/etcd-dump-logs)
#   CACHE_DIR/benchmark-vVERSION/SOURCE_VERSION   (root module version used)
#   CACHE_DIR/benchmark-vVERSION/SOURCE_PROBED    (the source rule below, and
#                                                 each newer version skipped, why)
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
# `go list -m -versions` omits tags the proxy serves (for 3.6 it lists
# v3.6.0 and v3.6.8 while v3.6.9-v3.6.14 are served), so the patch releases
# from VERSION down are asked for one by one; one the checksum database
# does not know (v3.5.33) is skipped, never fetched unverified. A directory built before this
# rule (no SOURCE_PROBED) is rebuilt and swapped in place of the old one.
set -euo pipefail

# VERSION names the directory the build is installed into, its lock file
# and every module fetched: only a release MAJOR.MINOR.PATCH (digits, no
# leading zeros; a leading v is dropped) is accepted, so that the directory
# is this script's own, CACHE_DIR/benchmark-vVERSION, never another path.
# Anything else, or a CACHE_DIR that is not a directory, is refused (exit 2)
# before a file is created. The script removes nothing but the temporary
# directories it made itself.
LC_ALL=C
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: build-benchmark.sh VERSION [CACHE_DIR]" >&2
  exit 2
fi
version=${1#v}
if ! [[ $version =~ ^(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})$ ]]; then
  echo "build-benchmark.sh: version $(printf '%q' "${1:0:40}") is not a release MAJOR.MINOR.PATCH such as 3.7.3" >&2
  exit 2
fi
cache=${2:-${ETCDKIT_CACHE:-$HOME/.cache/etcdkit}}
if [ -z "$cache" ] || { [ -e "$cache" ] && [ ! -d "$cache" ]; }; then
  echo "build-benchmark.sh: cache $(printf '%q' "$cache") is not a directory" >&2
  exit 2
fi
# Absolute: the build runs in a directory of its own.
cache=$(realpath -m -- "$cache")
out="$cache/benchmark-v$version"
work=""
tmp=""
trap 'rm -rf -- "$work" "$tmp"' EXIT

complete() { [ -x "$out/benchmark" ] && [ -x "$out/etcd-dump-logs" ] && [ -f "$out/SOURCE_VERSION" ] && [ -f "$out/SOURCE_PROBED" ]; }

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
# version of this script, left: it is replaced once the new build is
# complete (a caller running its binaries keeps them until then).

start=$SECONDS
work=$(mktemp -d)
tmp=$(mktemp -d "$out.tmp.XXXXXX")
cd "$work"
# Keep the caller's module settings and etcd's ETCD_* variables out of the build.
unset GOFLAGS GOWORK
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)
echo "build-benchmark.sh: building etcd $version's benchmark and etcd-dump-logs into $out" >&2
go mod init etcdkit.local/benchmarkbuild >/dev/null 2>&1

# The root module's source: the newest patch release of VERSION's minor
# version, not above VERSION, that the proxy serves and the checksum
# database knows.
echo "build-benchmark.sh: looking for go.etcd.io/etcd/v3 v$version on the module proxy" >&2
minor=${version%.*}
patch=${version##*.}
source_version=""
skipped=""
while [ "$patch" -ge 0 ]; do
  # go mod download verifies the module against the checksum database,
  # which lacks some versions the proxy serves (v3.5.33: 404).
  got=$(go mod download -json "go.etcd.io/etcd/v3@v$minor.$patch" 2>/dev/null || true)
  if grep -q '"GoModSum"' <<<"$got"; then
    source_version=$minor.$patch
    break
  fi
  why=$(sed -n 's/.*"Error": "\(.*\)",\{0,1\}$/\1/p' <<<"$got" | sed 's/\\n.*//' | sed -e 's/.*sumdb.*: /checksum database: /' -e t -e 's/.*: \([0-9][0-9][0-9] \)/proxy: \1/' | head -1)
  skipped="${skipped}v$minor.$patch: ${why:-not available}"$'\n'
  patch=$((patch - 1))
done
if [ -z "$source_version" ]; then
  echo "build-benchmark.sh: no go.etcd.io/etcd/v3 v$minor.x on the module proxy" >&2
  exit 1
fi

# The tools' packages, not the root module's path: that path is also a
# package (3.5's dummy.go) importing go.etcd.io/etcd/tests/v3, which the
# proxy does not serve for every release.
reqs="go.etcd.io/etcd/v3/tools/benchmark@v$source_version go.etcd.io/etcd/v3/tools/etcd-dump-logs@v$source_version"
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
{
  echo "newest go.etcd.io/etcd/v3 v$minor.x <= v$version that the module proxy serves and the checksum database knows, probed patch by patch; skipped:"
  printf '%s' "$skipped"
} > "$tmp/SOURCE_PROBED"
chmod 755 "$tmp"
if [ -e "$out" ]; then
  old=$(mktemp -d "$out.old.XXXXXX")
  mv -T "$out" "$old/dir"
  mv -T "$tmp" "$out"
  rm -rf -- "$old"
else
  mv -T "$tmp" "$out"
fi
tmp=""
echo "build-benchmark.sh: tools/benchmark and tools/etcd-dump-logs from go.etcd.io/etcd/v3 v$source_version, linked against etcd v$version modules, in $out after $((SECONDS - start)) s" >&2
echo "$out/benchmark"
