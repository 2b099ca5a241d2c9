#!/usr/bin/env bash
# inspect-bench.sh: the speed and memory figures of etcdinspect, written to
# results/inspect-bench.{json,md}.
#
# 1. Makes (once, under ~/.cache/etcdkit/bench, never in git) a 1 GiB
#    database with a real etcd 3.7.3: 10,000 pod keys x 25 revisions,
#    uncompacted (scripts/inspectload), and a 5-revision one of the same
#    keys for the memory comparison.
# 2. Warms the page cache, then times, side by side in one hyperfine run:
#    etcdinspect usage (all cores and one worker), etcdinspect status,
#    etcdutl snapshot status and bbolt keys FILE key (bbolt's CLI at the
#    version pinned in go.mod).
# 3. Records the peak Go heap of etcdinspect usage and status on both files
#    (hidden --mem-stats flag), the machine, versions, date and commit.
set -euo pipefail
cd "$(dirname "$0")/.."
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)

cache=${ETCDKIT_CACHE:-$HOME/.cache/etcdkit}
bench="$cache/bench"
mkdir -p "$bench" results
command -v hyperfine >/dev/null 2>&1 || apt-get install -y hyperfine >/dev/null

etcd_dir=$(scripts/build-etcd.sh 3.7.3)
bbolt_version=$(go list -m -f '{{.Version}}' go.etcd.io/bbolt)
bbolt="$cache/bbolt-$bbolt_version"
if [ ! -x "$bbolt" ]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && unset GOFLAGS GOWORK && go mod init etcdkit.local/bbolt >/dev/null 2>&1 &&
    go get "go.etcd.io/bbolt/cmd/bbolt@$bbolt_version" >/dev/null 2>&1 &&
    go build -o "$bbolt" go.etcd.io/bbolt/cmd/bbolt)
  rm -rf "$tmp"
fi
inspect="$bench/etcdinspect"
go build -o "$inspect" ./cmd/etcdinspect

big="$bench/pods-10000x25.db"
small="$bench/pods-10000x5.db"
[ -f "$big" ] || go run ./scripts/inspectload -etcd "$etcd_dir/etcd" -out "$big" -pods 10000 -revisions 25
[ -f "$small" ] || go run ./scripts/inspectload -etcd "$etcd_dir/etcd" -out "$small" -pods 10000 -revisions 5

cat "$big" "$small" >/dev/null # warm the page cache
load=$(cut -d" " -f1-3 /proc/loadavg)
hf=$(mktemp)
hyperfine --warmup 3 --runs 20 --export-json "$hf" --output null \
  "$inspect usage $big" \
  "$inspect usage --workers 1 $big" \
  "$inspect status $big" \
  "$etcd_dir/etcdutl snapshot status $big" \
  "$bbolt keys $big key"

mems=()
for f in "$big" "$small"; do
  for c in usage status; do
    m=$(mktemp)
    "$inspect" "$c" "$f" --mem-stats >/dev/null 2>"$m"
    mems+=(-mem "$(basename "$f"):$(stat -c %s "$f"):etcdinspect $c:$m")
  done
done

revisions=$("$inspect" status "$big" -w json | sed -n 's/.*"revisions": \([0-9]*\).*/\1/p')
go run ./scripts/inspectreport -hyperfine "$hf" \
  -names "etcdinspect usage,etcdinspect usage --workers 1,etcdinspect status,etcdutl snapshot status,bbolt keys" \
  -date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" -commit "$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)" \
  -machine "cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)" -machine "cores=$(nproc)" \
  -machine "memory=$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)" -machine "kernel=$(uname -sr)" -machine "loadavg=$load (1, 5, 15 min, before timing; the machine is shared)" \
  -version "go=$(go env GOVERSION)" -version "etcd=$("$etcd_dir/etcd" --version | awk '/etcd Version/ {print $3}')" \
  -version "etcdutl=$("$etcd_dir/etcdutl" version | awk '/etcdutl version/ {print $3}')" -version "bbolt=$bbolt_version" \
  -db "description=$(basename "$big"), $(stat -c %s "$big") bytes, $revisions revisions of 10,000 pod keys written by etcd 3.7.3, uncompacted" \
  "${mems[@]}"
rm -f "$hf"
cat results/inspect-bench.md
