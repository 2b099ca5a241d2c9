#!/usr/bin/env bash
# demo.sh [SNAPSHOT]: the README's "from a load to an inspection": run the
# default lwbench scenario on an embedded etcd, save its final state, and
# inspect that snapshot with etcdinspect.
set -euo pipefail
cd "$(dirname "$0")/.."
snap=${1:-/tmp/lw.db}
go run ./cmd/lwbench run --snapshot "$snap"
go run ./cmd/etcdinspect status "$snap"
go run ./cmd/etcdinspect usage "$snap"
