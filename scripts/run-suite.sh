#!/usr/bin/env bash
# run-suite.sh [--quick] [--out DIR]
#
# Runs lwbench's five compaction and defragmentation experiments
# (relist-storm, continuation, compaction-sweep, defrag-stall, catchup), each
# on embedded etcd members (the etcd release pinned in go.mod) with fsync on,
# and writes into DIR (default results/experiments, or results/quick with
# --quick):
#   NAME.json, NAME.md, NAME-*.png   each experiment's result, table and plots
#   NAME.log                         its progress log (stderr)
#   comparison.md, report/*.png      `lwbench report` over all five
#   provenance.json                  machine, versions, date, commit, commands, times
#   README.md                        the tables and plots, each with the command that made it
#                                    (scripts/suitereadme); the full run also writes results/README.md
# The full suite takes about 12 minutes on a 2-core machine; --quick
# (small sizes) under 2 minutes. Every number comes from the runs; nothing is
# edited by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)

quick=""
out=""
while [ $# -gt 0 ]; do
  case "$1" in
  --quick) quick="--quick" ;;
  --out) out=${2:?--out needs a directory}; shift ;;
  *) echo "usage: run-suite.sh [--quick] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$out" ]; then
  out=results/experiments
  [ -n "$quick" ] && out=results/quick
fi
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.md "$out"/*.png "$out"/*.log
rm -rf "$out/report"
mkdir -p "$out/report"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/lwbench" ./cmd/lwbench
lwbench="$work/lwbench"

started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!results' || echo -dirty)"
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
cores=$(nproc)
memory=$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)
kernel=$(uname -sr)
gover=$(go env GOVERSION)
etcdver=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
load=$(cut -d" " -f1-3 /proc/loadavg)

experiments=(relist-storm continuation compaction-sweep defrag-stall catchup)
cmds=()
secs=()
suite_start=$(date +%s)
for e in "${experiments[@]}"; do
  cmd="lwbench $e${quick:+ $quick} --out $out -w markdown"
  echo "run-suite.sh: $cmd" >&2
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$lwbench" "$e" $quick --out "$out" -w markdown >/dev/null 2>"$out/$e.log" || {
    echo "run-suite.sh: $e failed; last lines of $out/$e.log:" >&2
    tail -5 "$out/$e.log" >&2
    exit 1
  }
  t1=$(date +%s.%N)
  cmds+=("$cmd")
  secs+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')")
done
report_cmd="lwbench report $out/{$(IFS=,; echo "${experiments[*]}")}.json -w markdown --plots DIR"
files=()
for e in "${experiments[@]}"; do files+=("$out/$e.json"); done
mkdir -p "$work/plots"
"$lwbench" report "${files[@]}" -w markdown --plots "$work/plots" >"$out/comparison.md"
# Keep the figures that span results; the others are the experiments' own.
cp "$work/plots/db-size.png" "$work/plots/relist-cost.png" "$out/report/" 2>/dev/null || true
total=$(( $(date +%s) - suite_start ))

{
  echo "{"
  echo "  \"kind\": \"SuiteProvenance\","
  echo "  \"schemaVersion\": 1,"
  echo "  \"startedAt\": \"$started\","
  echo "  \"commit\": \"$commit\","
  echo "  \"mode\": \"$([ -n "$quick" ] && echo quick || echo full)\","
  echo "  \"machine\": {\"cpu\": \"$cpu\", \"cores\": $cores, \"memory\": \"$memory\", \"kernel\": \"$kernel\", \"loadavgBefore\": \"$load\", \"loadavgAfter\": \"$(cut -d" " -f1-3 /proc/loadavg)\"},"
  echo "  \"versions\": {\"go\": \"$gover\", \"etcd\": \"$etcdver\"},"
  echo "  \"totalSeconds\": $total,"
  echo "  \"reportCommand\": \"$report_cmd\","
  echo "  \"runs\": ["
  for i in "${!experiments[@]}"; do
    sep=","; [ "$i" -eq $((${#experiments[@]} - 1)) ] && sep=""
    echo "    {\"experiment\": \"${experiments[$i]}\", \"command\": \"${cmds[$i]}\", \"seconds\": ${secs[$i]}}$sep"
  done
  echo "  ]"
  echo "}"
} >"$out/provenance.json"

index=()
if [ "$out" = results/experiments ]; then
  index=(-index results/README.md)
fi
go run ./scripts/suitereadme -dir "$out" "${index[@]}"
echo "run-suite.sh: wrote $out/README.md${index:+ and results/README.md} in $total s" >&2
