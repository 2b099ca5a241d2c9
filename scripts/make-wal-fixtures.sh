#!/usr/bin/env bash
# make-wal-fixtures.sh: regenerate the member data directories (WAL
# segments, snap files, db) under testdata/fixtures/ that `etcdinspect wal`,
# `space` and `members` are tested on, one per etcd minor version, each
# what one member wrote under the same Kubernetes-shaped load (pkg/wal's
# writeLoad: pod creates and updates as kube-apiserver's guarded txns, a
# guarded delete, configmap puts, leased events and a revoke, a role and a
# user, a compaction) with --snapshot-count 10:
#   wal-3.5  real etcd 3.5.35 (scripts/build-etcd.sh)
#   wal-3.6  real etcd 3.6.16
#   wal-3.7  the embedded etcd 3.7.3 of this module, with 4 KiB WAL
#            segments (etcd's segment size is a variable, not a flag) so
#            that the directory has several segments to lose one of
# etcd 3.4 has none. To keep them small, the last segment is cut after its
# last record (etcd preallocates 64 MB of zeros) and the db after bbolt's
# high-water mark; see pkg/wal TestFixture. Then the goldens that read them
# are refreshed: check the diff before committing.
set -euo pipefail
cd "$(dirname "$0")/.."
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)

for v in 3.5.35 3.6.16; do
  scripts/build-etcd.sh "$v" >/dev/null
done
go test ./pkg/wal -run '^TestFixture$' -count=1 -update -v
go test ./cmd/etcdinspect/command -run '^(TestGoldenWAL|TestGoldenMembers)$' -count=1 -update
du -ab testdata/fixtures/wal-* | sort -k2
