#!/usr/bin/env bash
# version-matrix.sh [RUNS]
#
# Runs lwbench's quick scenario (a short `lwbench run` on a three-member
# cluster that lwbench starts itself, one connection pinned to each member)
# against real etcd 3.5, 3.6 and 3.7 servers (internal/etcdproc Versions),
# RUNS times each (default 3), versions interleaved, and writes
# results/version-matrix.{json,md} with the machine, Go and etcd versions,
# date, commit and exact commands. etcd binaries are built from the module
# proxy by scripts/build-etcd.sh the first time (1-2 minutes per version).
# Takes about 30 s per run.
set -euo pipefail
cd "$(dirname "$0")/.."
# etcd reads every ETCD_* variable as a flag: keep them away from etcd.
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)
exec go run ./scripts/clusterbench matrix -runs "${1:-3}"
