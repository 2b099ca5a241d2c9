#!/usr/bin/env bash
# wal-vs-dump-logs.sh: checks that `etcdinspect wal` counts the entries of
# each request kind as etcd's own etcd-dump-logs does, on one WAL written
# by a real etcd 3.7.3 under a Kubernetes-shaped load (scripts/walcompare),
# and writes results/wal-vs-dump-logs.{json,md} with the machine, the
# versions (etcd, etcd-dump-logs' source, Go), the date, the commit and the
# exact commands. Exits 1 when a kind differs.
#
# Builds etcd with scripts/build-etcd.sh and etcd-dump-logs with
# scripts/build-benchmark.sh (module proxy only; etcd-dump-logs comes from
# the newest root module go.etcd.io/etcd/v3 of a minor release the proxy
# serves, linked against that release's libraries: SOURCE_VERSION).
#
# etcd-dump-logs of 3.7 (root module v3.7.1, the newest served; 3.7.2 and
# 3.7.3 are not) panics with a nil pointer dereference on the first normal
# entry of a 3.7.3 WAL: etcd 3.7's protobuf types hold optional fields as
# pointers, the tool dereferences entry.Type, and the entries etcd 3.7.3
# writes leave Type (EntryNormal, 0) unset (the same tool prints the
# addresses of term, index and commitIndex, not their values, for the same
# reason: %d of a *uint64). Its run is recorded in the
# results (-try-dump-logs); the comparison uses etcd-dump-logs of
# DUMP_LOGS_VERSION (default 3.6.16: root module v3.6.x with the 3.6.16
# libraries), which decodes the same wire format. Extra arguments go to
# scripts/walcompare (-pods, -configmaps, -events).
#
# wal-vs-dump-logs.sh --wal-bytes SIZE [--runs N] times both tools instead
# on a data directory (WAL + db) of SIZE (e.g. 1GiB) written the same way
# with pod updates, and writes results/wal-bench.{json,md}: each tool's
# wall time and peak RSS over N runs (default 3), and etcdinspect's peak Go
# heap on a quarter of the WAL and on all of it.
set -euo pipefail
cd "$(dirname "$0")/.."
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)
version=3.7.3
mkdir -p results

etcd_dir=$(scripts/build-etcd.sh "$version")
dump_version=${DUMP_LOGS_VERSION:-3.6.16}
same=$(dirname "$(scripts/build-benchmark.sh "$version")")
tools=$(dirname "$(scripts/build-benchmark.sh "$dump_version")")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/etcdinspect" ./cmd/etcdinspect

go run ./scripts/walcompare -etcd "$etcd_dir/etcd" -dump-logs "$tools/etcd-dump-logs" -try-dump-logs "$same/etcd-dump-logs" -etcdinspect "$work/etcdinspect" \
  -meta "machine.cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)" -meta "machine.cores=$(nproc)" \
  -meta "machine.memory=$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)" -meta "machine.kernel=$(uname -sr)" \
  -meta "version.etcd=$("$etcd_dir/etcd" --version | awk '/etcd Version/ {print $3}')" \
  -meta "version.etcd-dump-logs=tools/etcd-dump-logs of go.etcd.io/etcd/v3 v$(cat "$tools/SOURCE_VERSION"), linked against etcd v$dump_version modules" \
  -meta "version.etcd-dump-logs (same release, tried)=tools/etcd-dump-logs of go.etcd.io/etcd/v3 v$(cat "$same/SOURCE_VERSION"), linked against etcd v$version modules" \
  -meta "version.go=$(go env GOVERSION)" \
  -meta "version.commit=$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)" \
  "$@" && status=0 || status=$?
case " $* " in
*" -wal-bytes"* | *" --wal-bytes"*) cat results/wal-bench.md ;;
*) cat results/wal-vs-dump-logs.md ;;
esac
exit "$status"
