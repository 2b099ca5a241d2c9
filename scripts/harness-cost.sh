#!/usr/bin/env bash
# harness-cost.sh [--quick | --render | --bare-only | --informers-only]: what lwbench's own client-go clients cost it,
# against issue 21 item 6's targets, written to results/harness-cost.md
# and .json, the run's own result in harness-cost-run.json
# (scripts/harnesscost does the measuring): BenchmarkInformerMemory
# (lwbench's informers per informer against a bare client-go set, 30 and 100
# informers over 1,000 pods), BenchmarkKubeletWatches (1,000 nodes), and
# `lwbench run --kube-apiserver 1.37 --watchers 300 --objects 3000`, then
# the same run with etcd in a process of its own (--cluster-size 1), with
# kube-apiserver's 5-minute compaction, with client-go's WatchListClient off
# and with a 2 GiB soft memory limit (GOMEMLIMIT) (harnesscost's
# runVariants), and BenchmarkBareInformerRun: the run's load with bare
# client-go informers in place of lwbench's (up to 20 minutes).
# It uses the kube-apiserver 1.37.2 cached in ~/.cache/etcdkit (built by
# scripts/build-kube-apiserver.sh on first use) and takes 50-100 minutes on
# 2 idle cores (each 300 x 3,000 run 10-18 minutes).
#
# --quick runs small sizes (10 informers, 100 nodes, 30 watchers over 300
# pods) into ${TMPDIR:-/tmp}/harness-cost-quick.md, never results/: a check
# that the script works, not the published figures. --render rewrites
# results/harness-cost.md from results/harness-cost.json, running nothing.
# --bare-only runs only BenchmarkBareInformerRun into results/harness-cost.json
# (its own date and commit beside it) and rewrites the table;
# --informers-only likewise BenchmarkInformerMemory (three runs a size, the
# medians).
set -euo pipefail
cd "$(dirname "$0")/.."
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)
unset GOMEMLIMIT GOGC # the target's run measures Go's defaults; a variant sets its own

args=(-sizes 30x1000,100x1000 -nodes 1000 -run-args "--start-concurrency 8 --sync-timeout 10m" -out results/harness-cost.md)
case "${1:-}" in
  --render) exec go run ./scripts/harnesscost -render -out results/harness-cost.md ;;
  --bare-only) args=(-bare-only -run-args "--start-concurrency 8" -out results/harness-cost.md) ;;
  --informers-only) args=(-informers-only -sizes 30x1000,100x1000 -out results/harness-cost.md) ;;
  --quick) args=(-sizes 10x300 -nodes 100 -watchers 30 -objects 300 -run-args "--sync-timeout 10m" -out "${TMPDIR:-/tmp}/harness-cost-quick.md" -quick) ;;
  "") ;;
  *) echo "usage: scripts/harness-cost.sh [--quick | --render | --bare-only | --informers-only]" >&2; exit 2 ;;
esac
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/lwbench" ./cmd/lwbench
go test -c -o "$bin/kubeload.test" ./pkg/kubeload
mkdir -p results
go run ./scripts/harnesscost -lwbench "$bin/lwbench" -test-binary "$bin/kubeload.test" "${args[@]}" \
  -commit "$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)"
