#!/usr/bin/env bash
# cluster-results.sh [--quick] [--only CASE,...]: a whole cluster's load on
# this machine, written to results/cluster/ (scripts/clusterresults runs
# the cases and writes README.md from their JSON results).
#
# Each case is one `lwbench run --nodes N`: a real kube-apiserver,
# kube-controller-manager and kube-scheduler (built from the Go module
# proxy into ~/.cache/etcdkit by scripts/build-kube.sh on first use) and
# KWOK (scripts/build-kwok.sh), in front of an embedded etcd behind the
# counting proxy. The presets are 100 nodes with ClusterLoader2's 30 pods
# per node, 1,000 and 5,000 nodes with fewer pods per node, and the
# experiments: a 2 GiB db defragmented under 1,000 nodes, kube-apiserver
# and kube-controller-manager restarted, compaction every minute. The
# full run takes about two hours on 2 idle cores; --only runs some cases
# (the README still covers every result in the directory).
#
# --quick runs two 20-node cases into ${TMPDIR:-/tmp}/cluster-quick, never
# results/: a check that the script works, not the published figures.
set -euo pipefail
cd "$(dirname "$0")/.."
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)

out=results/cluster args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) out=${TMPDIR:-/tmp}/cluster-quick args+=(-quick) ;;
    --only) args+=(-only "$2"); shift ;;
    *) echo "usage: scripts/cluster-results.sh [--quick] [--only CASE,...]" >&2; exit 2 ;;
  esac
  shift
done

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/lwbench" ./cmd/lwbench
mkdir -p "$out"
go run ./scripts/clusterresults -lwbench "$bin/lwbench" -out "$out" \
  -commit "$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)" "${args[@]}"
cat "$out/README.md"
