#!/usr/bin/env bash
# repro-progress-overtake.sh
#
# Reproduces an etcd watch defect that lwbench's partition-follower run
# reported (issue 12, item 8): a watch created on a gRPC stream that
# already carries another watch, right after a progress request on that
# stream, receives a progress notification at revision R before its own
# events at or below R (bookmarkable guarantee broken; no event is lost or
# delivered twice). Runs TestReproProgressNotificationBeforeEvents in
# pkg/watchload against the embedded etcd of go.mod (v3.7.3): exit 1 with
# the sequence (the watch requests and responses on the wire) and the
# validator's verdict on it when etcd shows it, exit 0 if 300 attempts (at
# most 60 s) did not. Usually reproduces within a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)
ETCDKIT_REPRO_PROGRESS=1 exec go test -count=1 -run '^TestReproProgressNotificationBeforeEvents$' -v ./pkg/watchload
