#!/usr/bin/env bash
# build-kube.sh COMPONENT VERSION [CACHE_DIR]
#
# Builds a real Kubernetes COMPONENT (kube-apiserver, kube-controller-manager
# or kube-scheduler) of one release (1.35.x, 1.36.x, 1.37.x, 1.38.0-beta.0,
# whose go.mod needs Go 1.27) from the Go module proxy and prints the
# directory that holds it:
#   CACHE_DIR/COMPONENT-vVERSION/COMPONENT
# CACHE_DIR defaults to $ETCDKIT_CACHE or ~/.cache/etcdkit, the cache
# build-etcd.sh fills. A second call for the same component and version
# reuses the binary. scripts/build-kube-apiserver.sh VERSION [CACHE_DIR] is
# this script for kube-apiserver (it sources this file, so its messages
# carry its own name).
#
# Parallel callers build once: the build holds an exclusive lock on
# CACHE_DIR/COMPONENT-vVERSION.lock, writes into a temporary directory
# beside the final one and renames it into place, so a caller sees either no
# directory or a complete one. Progress goes to stderr; the only line on
# stdout is the directory. The first build of kube-apiserver takes 10-40
# minutes on 2 cores (and about 1 GB of module cache and 3 GB of build
# cache); with that build cache warm, kube-controller-manager takes 2-9
# minutes and kube-scheduler 10-60 s (idle machine to load average 7).
# Each binary is 100-170 MB.
#
# k8s.io/kubernetes requires its staging modules (k8s.io/api,
# k8s.io/apiserver, ...) at v0.0.0 and replaces them with ./staging/src/...,
# and replace directives of a dependency do not apply. So a throwaway wrapper
# module requires k8s.io/kubernetes at vVERSION and replaces every staging
# module named in that release's go.mod with its published release
# v0.MINOR.PATCH, then builds k8s.io/kubernetes/cmd/COMPONENT with
# k8s.io/component-base/version set by -ldflags, so that clients see
# vVERSION (upstream: hack/lib/version.sh sets the same variables).
set -euo pipefail

# VERSION names the directory the build is installed into, its lock file
# and every module fetched: only a release MAJOR.MINOR.PATCH, or a
# pre-release MAJOR.MINOR.PATCH-(alpha|beta|rc).N (digits without leading
# zeros; a leading v is dropped), of the lines below is accepted, so that
# the directory is this script's own, CACHE_DIR/COMPONENT-vVERSION,
# never another path. COMPONENT is one of the three names above. Anything
# else, or a CACHE_DIR that is not a
# directory, is refused (exit 2) before a file is created. The script
# removes nothing but the temporary directories it made itself.
LC_ALL=C
# me is the name in every message: build-kube.sh, or
# build-kube-apiserver.sh when that script sources this one.
me=${0##*/}
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: build-kube.sh kube-apiserver|kube-controller-manager|kube-scheduler VERSION [CACHE_DIR]" >&2
  exit 2
fi
component=$1
shift
case "$component" in
kube-apiserver | kube-controller-manager | kube-scheduler) ;;
*)
  echo "$me: component $(printf '%q' "${component:0:40}") is not kube-apiserver, kube-controller-manager or kube-scheduler" >&2
  exit 2
  ;;
esac
version=${1#v}
if ! [[ $version =~ ^(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})(-(alpha|beta|rc)\.(0|[1-9][0-9]?))?$ ]]; then
  echo "$me: version $(printf '%q' "${1:0:40}") is not a release MAJOR.MINOR.PATCH such as 1.37.2 (or a pre-release such as 1.38.0-beta.0)" >&2
  exit 2
fi
case "$version" in
1.35.* | 1.36.* | 1.37.* | 1.38.*) ;;
*)
  echo "$me: version $version is not of the 1.35, 1.36, 1.37 or 1.38 line" >&2
  exit 2
  ;;
esac
cache=${2:-${ETCDKIT_CACHE:-$HOME/.cache/etcdkit}}
if [ -z "$cache" ] || { [ -e "$cache" ] && [ ! -d "$cache" ]; }; then
  echo "$me: cache $(printf '%q' "$cache") is not a directory" >&2
  exit 2
fi
# Absolute: the build runs in a directory of its own.
cache=$(realpath -m -- "$cache")
out="$cache/$component-v$version"
work=""
tmp=""
trap 'rm -rf -- "$work" "$tmp"' EXIT
major=${version%%.*}
rest=${version#*.}
minor=${rest%%.*}
staging="v0.$rest"

complete() { [ -x "$out/$component" ]; }

if complete; then
  echo "$out"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$out.lock"
if ! flock -n 9; then
  echo "$me: another process is building $component $version into $cache; waiting for it" >&2
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
echo "$me: building $component $version from the Go module proxy into $out" >&2
echo "$me: the first build takes 10-40 minutes on 2 cores (kube-controller-manager and kube-scheduler a few after kube-apiserver's)" >&2
go mod init "etcdkit.local/${component//-/}build" >/dev/null 2>&1

echo "$me: downloading k8s.io/kubernetes@v$version" >&2
gomod=$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
if [ -z "$gomod" ] || [ ! -f "$gomod" ]; then
  echo "$me: go mod download of k8s.io/kubernetes@v$version gave no go.mod" >&2
  go mod download -json "k8s.io/kubernetes@v$version" >&2 || true
  exit 1
fi

# The staging modules: every replace in k8s.io/kubernetes' go.mod whose
# target is a directory under ./staging.
mods=$(go mod edit -json "$gomod" | awk '
  /"Replace": \[/ { inrep = 1 }
  inrep && /"Old": \{/ { old = 1; next }
  inrep && /"New": \{/ { old = 0; next }
  inrep && old && /"Path":/ { gsub(/[",]/, "", $2); path = $2 }
  inrep && !old && /"Path":/ { gsub(/[",]/, "", $2); if ($2 ~ /^\.\/staging\//) print path }
')
if [ -z "$mods" ]; then
  echo "$me: no staging replace directives in $gomod" >&2
  exit 1
fi
echo "$me: replacing $(echo "$mods" | wc -l) staging modules with $staging" >&2
go mod edit -require="k8s.io/kubernetes@v$version"
for m in $mods; do
  go mod edit -replace="$m=$m@$staging"
done
cat >main.go <<EOF
// Package main only anchors k8s.io/kubernetes/cmd/$component in the
// module graph of the build-kube.sh wrapper.
package main

import _ "k8s.io/kubernetes/cmd/$component/app"

func main() {}
EOF

echo "$me: resolving modules ($((SECONDS - start)) s so far)" >&2
if ! go mod tidy >tidy.log 2>&1; then
  echo "$me: go mod tidy of the wrapper failed:" >&2
  tail -n 30 tidy.log >&2
  exit 1
fi

# Minimal version selection must keep every module at the version
# k8s.io/kubernetes v$version requires; refuse a build that moved one.
got=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
if [ "$got" != "v$version" ]; then
  echo "$me: k8s.io/kubernetes resolved to $got, not v$version" >&2
  exit 1
fi
for m in $mods; do
  got=$(go list -m -f '{{if .Replace}}{{.Replace.Version}}{{end}}' "$m" 2>/dev/null || true)
  if [ -n "$got" ] && [ "$got" != "$staging" ]; then
    echo "$me: $m resolved to $got, not $staging" >&2
    exit 1
  fi
done
moved=0
while read -r path want; do
  case " $(echo $mods) " in *" $path "*) continue ;; esac
  got=$(go list -m -f '{{.Version}}' "$path" 2>/dev/null || true)
  # A module outside the component's build list is not selected at all.
  if [ -n "$got" ] && [ "$got" != "$want" ]; then
    echo "$me: $path resolved to $got, but k8s.io/kubernetes v$version requires $want" >&2
    moved=1
  fi
done < <(go mod edit -json "$gomod" | awk '
  /"Require": \[/ { inreq = 1 }
  inreq && /^\t\]/ { inreq = 0 }
  inreq && /"Path":/ { gsub(/[",]/, "", $2); path = $2 }
  inreq && /"Version":/ { gsub(/[",]/, "", $2); print path, $2 }
')
if [ "$moved" = 1 ]; then
  exit 1
fi

pkg=k8s.io/component-base/version
ldflags="-X $pkg.gitVersion=v$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "$me: go build $component ($((SECONDS - start)) s so far)" >&2
go build -trimpath -ldflags "$ldflags" -o "$tmp/$component" "k8s.io/kubernetes/cmd/$component"
"$tmp/$component" --version >&2
have=$("$tmp/$component" --version | awk '{print $2}')
if [ "$have" != "v$version" ]; then
  echo "$me: the built binary reports $have, not v$version" >&2
  exit 1
fi
# A directory without the binary at $out (what an interrupted build left) is
# first renamed into a temporary directory of this script's own, and only
# that is removed.
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
echo "$me: $component $version ready in $out after $((SECONDS - start)) s" >&2
echo "$out"
