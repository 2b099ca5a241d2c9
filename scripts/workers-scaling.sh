#!/usr/bin/env bash
# workers-scaling.sh [--quick]: how `lwbench run --workers N` scales on this
# machine, written to results/workers-scaling.md and .json
# (scripts/workersscaling does the measuring).
#
# For N = 1, 2, 4 and 8 local worker processes, first against lwbench's
# embedded etcd member, then against a cluster of 3 real etcd processes
# (etcd 3.7.3, built once into ~/.cache/etcdkit by scripts/build-etcd.sh),
# it runs `lwbench run --workers N` offering N x 1,000 writes/s to
# N x 5 informers for 20 s, records the merged write and event throughput,
# the p99s, the workers' and etcd's CPU, the load average and the
# generator-limited workers, says per N what saturated (machine, etcd,
# generator or none) and states the knee (issue 22's Scaling target). The
# full run takes about 10 minutes on 2 idle cores: run it on a quiet
# machine, other loads distort every figure.
#
# --quick runs N = 1 and 2 against the embedded member only, with small
# loads for 5 s (a minute or two), and writes
# ${TMPDIR:-/tmp}/workers-scaling-quick.md (and .json), never results/:
# a check that the script works, not the published figures.
#
# LWBENCH=/path/to/lwbench measures that build of lwbench instead of one
# built from ./cmd/lwbench (the worker processes are that binary too).
set -euo pipefail
cd "$(dirname "$0")/.."
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)

args=(-workers 1,2,4,8 -cluster-sizes 0,3 -rate-per-worker 1000 -watchers-per-worker 5
  -objects 2000 -namespaces 16 -duration 20s -out results/workers-scaling.md)
case "${1:-}" in
  --quick) args=(-workers 1,2 -cluster-sizes 0 -rate-per-worker 100 -watchers-per-worker 2
    -objects 200 -namespaces 4 -duration 5s -out "${TMPDIR:-/tmp}/workers-scaling-quick.md" -quick) ;;
  "") scripts/build-etcd.sh 3.7.3 >/dev/null ;;
  *) echo "usage: scripts/workers-scaling.sh [--quick]" >&2; exit 2 ;;
esac

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
lwbench=${LWBENCH:-$bin/lwbench}
[[ -n ${LWBENCH:-} ]] || go build -o "$bin/lwbench" ./cmd/lwbench
go build -o "$bin/workersscaling" ./scripts/workersscaling
mkdir -p results
"$bin/workersscaling" "${args[@]}" -lwbench "$lwbench" \
  -commit "$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)"
for a in "${args[@]}"; do if [[ $a == *.md ]]; then cat "$a"; fi; done
