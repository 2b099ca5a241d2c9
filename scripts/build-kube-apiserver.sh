#!/usr/bin/env bash
# build-kube-apiserver.sh VERSION [CACHE_DIR]
#
# Builds kube-apiserver VERSION into CACHE_DIR/kube-apiserver-vVERSION and
# prints that directory: scripts/build-kube.sh kube-apiserver VERSION
# [CACHE_DIR], which says how (lock, cache, versions accepted). That script
# is sourced rather than run, so that its messages begin with this script's
# name, as callers of this one (etcdproc.RunBuildScript) expect.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: build-kube-apiserver.sh VERSION [CACHE_DIR]" >&2
  exit 2
fi
source "$(dirname -- "${BASH_SOURCE[0]}")/build-kube.sh" kube-apiserver "$@"
