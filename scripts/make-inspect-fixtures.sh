#!/usr/bin/env bash
# make-inspect-fixtures.sh: regenerate etcdinspect's fixtures, one snapshot
# per etcd minor version written by that version's real server, under
# testdata/fixtures/:
#   etcd-3.4.db  etcd 3.4.23 (Debian's etcd-server package)
#   etcd-3.5.db  etcd 3.5.35 (built from the module proxy)
#   etcd-3.6.db  etcd 3.6.16
#   etcd-3.7.db  etcd 3.7.3
# plus etcd-3.X.etcdutl.json, what `etcdutl snapshot status -w json` (3.7.3)
# prints for each, which the tests compare etcdinspect's hash with. After
# running it, refresh the goldens:
#   go test ./cmd/etcdinspect/command -run Golden -update
set -euo pipefail
cd "$(dirname "$0")/.."
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)

out=testdata/fixtures
mkdir -p "$out"
if ! command -v /usr/bin/etcd >/dev/null 2>&1; then
  apt-get install -y etcd-server >/dev/null
fi
etcdutl="$(scripts/build-etcd.sh 3.7.3)/etcdutl"
for v in 3.4.23 3.5.35 3.6.16 3.7.3; do
  dir=$(scripts/build-etcd.sh "$v")
  minor=${v%.*}
  go run ./scripts/inspectfixtures -etcd "$dir/etcd" -out "$out/etcd-$minor.db"
  # etcdutl reads a copy: the fixture itself is never opened by anything
  # but etcdinspect.
  tmp=$(mktemp)
  cp "$out/etcd-$minor.db" "$tmp"
  "$etcdutl" snapshot status "$tmp" -w json > "$out/etcd-$minor.etcdutl.json"
  rm -f "$tmp"
done
ls -l "$out"
