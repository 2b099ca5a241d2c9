#!/usr/bin/env bash
# cluster-conformance.sh [--quick | --render] [--only CASE,...]: the etcd-direct model
# of a cluster held against the real control plane, written to
# results/cluster-conformance/ (scripts/clusterconformance runs the cases
# and writes README.md from their JSON results).
#
# Each case is one `lwbench conformance --nodes N` (100 and 1,000 nodes,
# 4 pods/s of churn for 5 minutes a side; 1,000 nodes again with a churn
# that never rolls out, --rollout-percent 0): the model and a real
# kube-apiserver, kube-controller-manager, kube-scheduler and KWOK (built
# from the Go module proxy into ~/.cache/etcdkit by scripts/build-kube.sh
# and build-kwok.sh on first use), each on a fresh embedded etcd behind
# the counting proxy. About an hour on 2 idle cores; a busy machine
# makes the control plane fall behind its plan (the notes say so).
#
# --quick runs one 10-node case into ${TMPDIR:-/tmp}/cluster-conformance-quick,
# never results/: a check that the script works, not the published figures.
# --render runs nothing: it rewrites results/cluster-conformance/README.md
# from the results there, their rows compared again by the current code.
set -euo pipefail
cd "$(dirname "$0")/.."
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)

out=results/cluster-conformance args=() render=
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) out=${TMPDIR:-/tmp}/cluster-conformance-quick args+=(-quick) ;;
    --only) args+=(-only "$2"); shift ;;
    --render) args+=(-render) render=1 ;;
    *) echo "usage: scripts/cluster-conformance.sh [--quick | --render] [--only CASE,...]" >&2; exit 2 ;;
  esac
  shift
done

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
[ -n "$render" ] || go build -o "$bin/lwbench" ./cmd/lwbench
mkdir -p "$out"
go run ./scripts/clusterconformance -lwbench "$bin/lwbench" -out "$out" \
  -commit "$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)" "${args[@]}"
cat "$out/README.md"
