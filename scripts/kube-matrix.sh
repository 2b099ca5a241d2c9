#!/usr/bin/env bash
# kube-matrix.sh [VERSION...]
#
# Runs lwbench through real kube-apiservers of each Kubernetes release
# given (default 1.37.2; 1.35.4 and 1.36.3 are the other releases lwbench
# builds) and writes results/kube/: per release, `lwbench conformance`
# (the etcd-direct model against the real stack, watch cache on/off x
# client-go WatchListClient on/off) and `lwbench run --kube-apiserver` for
# each profile x WatchListClient, and the experiments through kube-apiserver
# at --quick sizes (relist-storm per watch cache x WatchListClient,
# compaction-sweep per WatchListClient, continuation and catchup per
# watch cache, defrag-stall) into results/kube/experiments/, as JSON, with README.md
# holding the tables, machine, versions, date, commit and the exact
# commands (scripts/kubematrix). A release not built yet is built first by
# scripts/build-kube-apiserver.sh (10-30 minutes on 2 cores). Each release
# takes about 12 minutes (35 minutes for the three on 2026-11-27).
set -euo pipefail
cd "$(dirname "$0")/.."
# etcd reads every ETCD_* variable as a flag: keep them away from etcd.
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)
exec go run ./scripts/kubematrix -out results/kube "$@"
