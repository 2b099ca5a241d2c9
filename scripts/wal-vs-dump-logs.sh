#!/usr/bin/env bash
# wal-vs-dump-logs.sh: checks that `etcdinspect wal` counts the entries of
# each request kind as etcd's own etcd-dump-logs does, on WALs written by
# real etcd 3.5.35, 3.6.16 and 3.7.3 members (WAL_VERSIONS) under a
# Kubernetes-shaped load (scripts/walcompare), and writes
# results/wal-vs-dump-logs.{json,md}: one section per release with its
# etcd-dump-logs build (tool source and every etcd module it links, read
# from the binary) and Equal, plus the machine, Go, the date, the commit
# and the exact commands. Exits 1 when a kind differs in any section.
#
# Builds etcd with scripts/build-etcd.sh and etcd-dump-logs with
# scripts/build-benchmark.sh (module proxy only). The proxy does not serve
# the root module go.etcd.io/etcd/v3 (which holds tools/etcd-dump-logs) of
# 3.5.35, 3.6.16 or 3.7.3, so each etcd-dump-logs comes from the newest root
# module of the same minor release that the proxy serves and the checksum
# database knows (3.5.22, 3.6.14, 3.7.1 today), linked against the
# release's own modules: the 3.5 and 3.6 sections compare within one minor
# line.
#
# etcd-dump-logs of 3.7 (root module v3.7.1) panics with a nil pointer
# dereference on the first normal entry of a 3.7.3 WAL: etcd 3.7's
# protobuf types hold optional fields as pointers, the tool dereferences
# entry.Type, and the entries etcd 3.7.3 writes leave Type (EntryNormal, 0)
# unset (the same tool prints the addresses of term, index and
# commitIndex, not their values, for the same reason: %d of a *uint64).
# Its run is recorded in the 3.7.3 section (-try-dump-logs); that section
# compares with etcd-dump-logs of DUMP_LOGS_VERSION (default 3.6.16), which
# decodes the same wire format. A release whose etcd-dump-logs cannot be
# built gets a section saying so. Extra arguments go to scripts/walcompare
# (-pods, -configmaps, -events).
#
# wal-vs-dump-logs.sh --wal-bytes SIZE [--runs N] times both tools instead
# on a data directory (WAL + db) of SIZE (e.g. 1GiB) written by etcd 3.7.3
# the same way with pod updates, read by etcd-dump-logs of
# DUMP_LOGS_VERSION, and writes results/wal-bench.{json,md}: each tool's
# wall time and peak RSS over N runs (default 3), and etcdinspect's peak Go
# heap on a quarter of the WAL and on all of it.
set -euo pipefail
cd "$(dirname "$0")/.."
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)
versions=${WAL_VERSIONS:-3.5.35 3.6.16 3.7.3}
dump_version=${DUMP_LOGS_VERSION:-3.6.16}
mkdir -p results
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/etcdinspect" ./cmd/etcdinspect
go build -o "$work/walcompare" ./scripts/walcompare
machine=(
  -meta "machine.cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)" -meta "machine.cores=$(nproc)"
  -meta "machine.memory=$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)" -meta "machine.kernel=$(uname -sr)"
  -meta "version.go=$(go env GOVERSION)"
  -meta "version.commit=$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)"
)

case " $* " in
*" -wal-bytes"* | *" --wal-bytes"*)
  version=3.7.3
  etcd_dir=$(scripts/build-etcd.sh "$version")
  tools=$(dirname "$(scripts/build-benchmark.sh "$dump_version")")
  "$work/walcompare" -etcd "$etcd_dir/etcd" -dump-logs "$tools/etcd-dump-logs" -etcdinspect "$work/etcdinspect" "${machine[@]}" \
    -meta "version.etcd=$("$etcd_dir/etcd" --version | awk '/etcd Version/ {print $3}')" \
    -meta "version.etcd-dump-logs=tools/etcd-dump-logs of go.etcd.io/etcd/v3 v$(cat "$tools/SOURCE_VERSION"), linked against etcd v$dump_version modules" \
    "$@" && status=0 || status=$?
  cat results/wal-bench.md
  exit "$status"
  ;;
esac

status=0
sections=()
for version in $versions; do
  section="$work/section-$version.json"
  sections+=("$section")
  if ! etcd_dir=$(scripts/build-etcd.sh "$version"); then
    "$work/walcompare" -section "$section" -skip-etcd "$version" -skip "scripts/build-etcd.sh $version failed"
    continue
  fi
  if ! same=$(dirname "$(scripts/build-benchmark.sh "$version")"); then
    "$work/walcompare" -section "$section" -skip-etcd "$version" \
      -skip "scripts/build-benchmark.sh $version failed: no root module go.etcd.io/etcd/v3 of this minor release that the module proxy serves builds"
    continue
  fi
  case "$version" in
  3.7.*)
    tools=$(dirname "$(scripts/build-benchmark.sh "$dump_version")")
    try=(-try-dump-logs "$same/etcd-dump-logs")
    ;;
  *)
    tools=$same
    try=()
    ;;
  esac
  echo "wal-vs-dump-logs.sh: etcd $version, etcd-dump-logs of go.etcd.io/etcd/v3 v$(cat "$tools/SOURCE_VERSION")" >&2
  "$work/walcompare" -etcd "$etcd_dir/etcd" -dump-logs "$tools/etcd-dump-logs" "${try[@]}" -etcdinspect "$work/etcdinspect" \
    -section "$section" "$@" || status=1
  if [ ! -f "$section" ]; then
    "$work/walcompare" -section "$section" -skip-etcd "$version" -skip "the comparison failed before counting (walcompare's log)"
  fi
done
"$work/walcompare" -merge -out results/wal-vs-dump-logs "${machine[@]}" "${sections[@]}" || status=1
cat results/wal-vs-dump-logs.md
exit "$status"
