#!/usr/bin/env bash
# build-kwok.sh [VERSION] [CACHE_DIR]
#
# Builds KWOK (sigs.k8s.io/kwok/cmd/kwok, the node and pod simulator) of one
# release from the Go module proxy and prints the directory that holds it:
#   CACHE_DIR/kwok-vVERSION/kwok
#   CACHE_DIR/kwok-vVERSION/node-initialize.yaml            (the module's
#   CACHE_DIR/kwok-vVERSION/node-heartbeat-with-lease.yaml   kustomize/stage
#   CACHE_DIR/kwok-vVERSION/pod-ready.yaml                   files, kwokctl's
#   CACHE_DIR/kwok-vVERSION/pod-complete.yaml                default stages;
#   CACHE_DIR/kwok-vVERSION/pod-delete.yaml                  kwok exits "no
#                                                             stages found"
#                                                             without stages)
# VERSION defaults to 0.8.0, the release the project pins; CACHE_DIR to
# $ETCDKIT_CACHE or ~/.cache/etcdkit. A second call reuses the build.
#
# Parallel callers build once: the build holds an exclusive lock on
# CACHE_DIR/kwok-vVERSION.lock, writes into a temporary directory beside the
# final one and renames it into place, so a caller sees either no directory
# or a complete one. Progress goes to stderr; the only line on stdout is the
# directory. The build takes 1-5 minutes on 2 cores (70 s measured on an
# idle machine, 259 s under a load average of 7, modules downloaded).
#
# sigs.k8s.io/kwok's go.mod has no replace directives (it requires published
# k8s.io/* modules), so a throwaway wrapper module that requires it at
# vVERSION builds sigs.k8s.io/kwok/cmd/kwok as is; its version string is the
# module's own (pkg/consts).
set -euo pipefail

# VERSION names the directory, its lock file and the module fetched: only
# a release 0.MINOR.PATCH (digits without leading zeros; a leading v is
# dropped) is accepted, so that the directory is this script's own. Anything
# else, or a CACHE_DIR that is not a directory, is refused (exit 2) before a
# file is created. The script removes nothing but the temporary directories
# it made itself.
LC_ALL=C
if [ $# -gt 2 ]; then
  echo "usage: build-kwok.sh [VERSION] [CACHE_DIR]" >&2
  exit 2
fi
arg=${1-0.8.0}
version=${arg#v}
if ! [[ $version =~ ^0\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})$ ]]; then
  echo "build-kwok.sh: version $(printf '%q' "${arg:0:40}") is not a release 0.MINOR.PATCH such as 0.8.0" >&2
  exit 2
fi
cache=${2:-${ETCDKIT_CACHE:-$HOME/.cache/etcdkit}}
if [ -z "$cache" ] || { [ -e "$cache" ] && [ ! -d "$cache" ]; }; then
  echo "build-kwok.sh: cache $(printf '%q' "$cache") is not a directory" >&2
  exit 2
fi
# Absolute: the build runs in a directory of its own.
cache=$(realpath -m -- "$cache")
out="$cache/kwok-v$version"
work=""
tmp=""
trap 'rm -rf -- "$work" "$tmp"' EXIT
# The stage files, by their path in the module.
stages="node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml"

complete() {
  [ -x "$out/kwok" ] || return 1
  for s in $stages; do
    [ -f "$out/${s##*/}" ] || return 1
  done
}

if complete; then
  echo "$out"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$out.lock"
if ! flock -n 9; then
  echo "build-kwok.sh: another process is building kwok $version into $cache; waiting for it" >&2
  flock 9
fi
# The holder of the lock before us may have finished the build.
if complete; then
  echo "$out"
  exit 0
fi

start=$SECONDS
work=$(mktemp -d)
tmp=$(mktemp -d "$out.tmp.XXXXXX")
cd "$work"
# Keep the caller's module settings and etcd's ETCD_* variables out of the build.
unset GOFLAGS GOWORK
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)
echo "build-kwok.sh: building kwok $version from the Go module proxy into $out" >&2
go mod init etcdkit.local/kwokbuild >/dev/null 2>&1
echo "build-kwok.sh: downloading sigs.k8s.io/kwok@v$version" >&2
moddir=$(go mod download -json "sigs.k8s.io/kwok@v$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
if [ -z "$moddir" ] || [ ! -d "$moddir/kustomize/stage" ]; then
  echo "build-kwok.sh: go mod download of sigs.k8s.io/kwok@v$version gave no module directory with kustomize/stage" >&2
  go mod download -json "sigs.k8s.io/kwok@v$version" >&2 || true
  exit 1
fi
go mod edit -require="sigs.k8s.io/kwok@v$version"
cat >main.go <<'GO'
// Package main only anchors sigs.k8s.io/kwok/cmd/kwok in the module graph
// of the build-kwok.sh wrapper.
package main

import _ "sigs.k8s.io/kwok/cmd/kwok"

func main() {}
GO
echo "build-kwok.sh: resolving modules ($((SECONDS - start)) s so far)" >&2
if ! go mod tidy >tidy.log 2>&1; then
  echo "build-kwok.sh: go mod tidy of the wrapper failed:" >&2
  tail -n 30 tidy.log >&2
  exit 1
fi
got=$(go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
if [ "$got" != "v$version" ]; then
  echo "build-kwok.sh: sigs.k8s.io/kwok resolved to $got, not v$version" >&2
  exit 1
fi
echo "build-kwok.sh: go build kwok ($((SECONDS - start)) s so far)" >&2
go build -trimpath -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok
"$tmp/kwok" --version >&2
if ! "$tmp/kwok" --version | grep -q "v$version"; then
  echo "build-kwok.sh: the built binary does not report v$version" >&2
  exit 1
fi
for s in $stages; do
  cp -- "$moddir/kustomize/stage/$s" "$tmp/${s##*/}"
  chmod 644 "$tmp/${s##*/}"
done
# A directory without a complete build at $out (what an interrupted build
# left) is first renamed into a temporary directory of this script's own,
# and only that is removed.
chmod 755 "$tmp"
if [ -e "$out" ] || [ -L "$out" ]; then
  old=$(mktemp -d "$out.old.XXXXXX")
  mv -T "$out" "$old/dir"
  mv -T "$tmp" "$out"
  rm -rf -- "$old"
else
  mv -T "$tmp" "$out"
fi
tmp=""
echo "build-kwok.sh: kwok $version ready in $out after $((SECONDS - start)) s" >&2
echo "$out"
