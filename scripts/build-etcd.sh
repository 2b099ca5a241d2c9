#!/usr/bin/env bash
# build-etcd.sh VERSION [CACHE_DIR]
#
# Builds real etcd, etcdctl and etcdutl binaries of one release from the Go
# module proxy and prints the directory that holds them:
#   CACHE_DIR/etcd-vVERSION/{etcd,etcdctl,etcdutl}
# CACHE_DIR defaults to $ETCDKIT_CACHE or ~/.cache/etcdkit. A second call for
# the same version reuses the binaries.
#
# Parallel callers (two test binaries, a test and a script) build once: the
# build holds an exclusive lock on CACHE_DIR/etcd-vVERSION.lock, writes into
# a temporary directory beside the final one and renames it into place, so a
# caller sees either no directory or a complete one. Progress goes to stderr;
# the only line on stdout is the directory. The first build of a version takes
# 1-3 minutes on 2 cores with a warm Go module cache, longer with a cold one.
#
# `go install` of etcd's server module fails because of its replace
# directives, so a throwaway wrapper module requires every etcd module at the
# same version and builds each main package. VERSION 3.4.x is not built: use
# Debian's etcd-server package (apt-get install etcd-server), whose binaries
# this script links into the cache instead.
set -euo pipefail

# VERSION names the directory the build is installed into, its lock file
# and every module fetched: only a release MAJOR.MINOR.PATCH (digits, no
# leading zeros; a leading v is dropped) is accepted, so that the directory
# is this script's own, CACHE_DIR/etcd-vVERSION, never another path.
# Anything else, or a CACHE_DIR that is not a directory, is refused (exit 2)
# before a file is created. The script removes nothing but the temporary
# directories it made itself.
LC_ALL=C
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: build-etcd.sh VERSION [CACHE_DIR]" >&2
  exit 2
fi
version=${1#v}
if ! [[ $version =~ ^(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})$ ]]; then
  echo "build-etcd.sh: version $(printf '%q' "${1:0:40}") is not a release MAJOR.MINOR.PATCH such as 3.7.3" >&2
  exit 2
fi
cache=${2:-${ETCDKIT_CACHE:-$HOME/.cache/etcdkit}}
if [ -z "$cache" ] || { [ -e "$cache" ] && [ ! -d "$cache" ]; }; then
  echo "build-etcd.sh: cache $(printf '%q' "$cache") is not a directory" >&2
  exit 2
fi
# Absolute: the build runs in a directory of its own.
cache=$(realpath -m -- "$cache")
out="$cache/etcd-v$version"
work=""
tmp=""
trap 'rm -rf -- "$work" "$tmp"' EXIT

complete() { [ -x "$out/etcd" ] && [ -x "$out/etcdctl" ]; }

if complete; then
  echo "$out"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$out.lock"
if ! flock -n 9; then
  echo "build-etcd.sh: another process is building etcd $version into $cache; waiting for it" >&2
  flock 9
fi
# The holder of the lock before us may have finished the build.
if complete; then
  echo "$out"
  exit 0
fi

# install_build renames the finished build, $tmp, into place as $out. A
# directory without both binaries at $out (what an interrupted build of an
# older version of this script left) is first renamed into a temporary
# directory of this script's own, and only that is removed.
install_build() {
  chmod 755 "$tmp"
  if [ -e "$out" ] || [ -L "$out" ]; then
    local old
    old=$(mktemp -d "$out.old.XXXXXX")
    mv -T "$out" "$old/dir"
    mv -T "$tmp" "$out"
    rm -rf -- "$old"
  else
    mv -T "$tmp" "$out"
  fi
  tmp=""
}

case "$version" in
3.4.*)
  if ! command -v /usr/bin/etcd >/dev/null 2>&1; then
    echo "build-etcd.sh: etcd $version comes from Debian's etcd-server package; run: apt-get install -y etcd-server" >&2
    exit 1
  fi
  have=$(/usr/bin/etcd --version 2>/dev/null | awk '/etcd Version/ {print $3}')
  if [ "$have" != "$version" ]; then
    echo "build-etcd.sh: Debian's etcd-server is $have, not $version" >&2
    exit 1
  fi
  tmp=$(mktemp -d "$out.tmp.XXXXXX")
  ln -s /usr/bin/etcd "$tmp/etcd"
  ln -s /usr/bin/etcdctl "$tmp/etcdctl"
  install_build
  echo "$out"
  exit 0
  ;;
esac

start=$SECONDS
work=$(mktemp -d)
tmp=$(mktemp -d "$out.tmp.XXXXXX")
cd "$work"
# Keep the caller's module settings and etcd's ETCD_* variables out of the build.
unset GOFLAGS GOWORK
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)
echo "build-etcd.sh: building etcd $version from the Go module proxy into $out (1-3 minutes the first time)" >&2
go mod init etcdkit.local/etcdbuild >/dev/null 2>&1
mods="server etcdctl etcdutl api client/v3 client/pkg pkg"
reqs=""
for m in $mods; do
  case "$m" in
  client/v3) path="go.etcd.io/etcd/client/v3" ;;
  client/pkg) path="go.etcd.io/etcd/client/pkg/v3" ;;
  *) path="go.etcd.io/etcd/$m/v3" ;;
  esac
  reqs="$reqs $path@v$version"
done
echo "build-etcd.sh: resolving modules" >&2
# shellcheck disable=SC2086
go get $reqs >/dev/null 2>&1 || { echo "build-etcd.sh: go get of etcd v$version failed" >&2; go get $reqs; exit 1; }
# go get may move a module to a newer version to satisfy another; refuse that.
for m in $reqs; do
  path=${m%@*}
  got=$(go list -m -f '{{.Version}}' "$path")
  if [ "$got" != "v$version" ]; then
    echo "build-etcd.sh: $path resolved to $got, not v$version" >&2
    exit 1
  fi
done
for bin in etcd:go.etcd.io/etcd/server/v3 etcdctl:go.etcd.io/etcd/etcdctl/v3 etcdutl:go.etcd.io/etcd/etcdutl/v3; do
  echo "build-etcd.sh: go build ${bin%%:*} ($((SECONDS - start)) s so far)" >&2
  go build -trimpath -o "$tmp/${bin%%:*}" "${bin#*:}"
done
"$tmp/etcd" --version >&2
install_build
echo "build-etcd.sh: etcd $version ready in $out after $((SECONDS - start)) s" >&2
echo "$out"
