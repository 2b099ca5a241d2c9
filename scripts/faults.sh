#!/usr/bin/env bash
# faults.sh [VERSION]
#
# Injects each fault lwbench knows (kill, pause or partition of the leader
# or of a follower) into a three-member etcd VERSION cluster (default the
# newest of internal/etcdproc Versions) that lwbench starts itself, one
# fault per run, with three client setups (informers on every endpoint,
# informers pinned to one member each, kube-apiserver's watch caches), and
# writes results/faults.{json,md}: time to recover, relists, writer and
# probe errors, lost events, with the machine, versions, date and commit.
# Partitions need network namespaces (root and iproute2); where they are
# not allowed those runs are listed as skipped, with the reason.
# Takes about 30 s per run, 18 runs.
set -euo pipefail
cd "$(dirname "$0")/.."
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)
if [ $# -gt 0 ]; then
  exec go run ./scripts/clusterbench faults -version "$1"
fi
exec go run ./scripts/clusterbench faults
