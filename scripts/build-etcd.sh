#!/usr/bin/env bash
# build-etcd.sh VERSION [CACHE_DIR]
#
# Builds real etcd, etcdctl and etcdutl binaries of one release from the Go
# module proxy and prints the directory that holds them:
#   CACHE_DIR/etcd-vVERSION/{etcd,etcdctl,etcdutl}
# CACHE_DIR defaults to $ETCDKIT_CACHE or ~/.cache/etcdkit. A second call for
# the same version reuses the binaries.
#
# `go install` of etcd's server module fails because of its replace
# directives, so a throwaway wrapper module requires every etcd module at the
# same version and builds each main package. VERSION 3.4.x is not built: use
# Debian's etcd-server package (apt-get install etcd-server), whose binaries
# this script links into the cache instead.
set -euo pipefail

version=${1:?usage: build-etcd.sh VERSION [CACHE_DIR]}
version=${version#v}
cache=${2:-${ETCDKIT_CACHE:-$HOME/.cache/etcdkit}}
out="$cache/etcd-v$version"

if [ -x "$out/etcd" ] && [ -x "$out/etcdctl" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$out"

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
  ln -sf /usr/bin/etcd "$out/etcd"
  ln -sf /usr/bin/etcdctl "$out/etcdctl"
  echo "$out"
  exit 0
  ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# Keep the caller's module settings and etcd's ETCD_* variables out of the build.
unset GOFLAGS GOWORK
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)
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
go build -trimpath -o "$out/etcd" go.etcd.io/etcd/server/v3
go build -trimpath -o "$out/etcdctl" go.etcd.io/etcd/etcdctl/v3
go build -trimpath -o "$out/etcdutl" go.etcd.io/etcd/etcdutl/v3
"$out/etcd" --version >&2
echo "$out"
