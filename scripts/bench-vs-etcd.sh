#!/usr/bin/env bash
# bench-vs-etcd.sh [RUNS]
#
# Shows that lwbench's load generator is not what limits a run: against one
# real etcd process it runs etcd's own benchmark tool and the equivalent
# lwbench invocation with the same clients, connections, streams and
# watchers, RUNS times each (default 5), alternating which goes first, and
# writes results/lwbench-vs-benchmark.{json,md} with the machine, the
# versions, the date, the commit and the exact commands. A last section runs
# lwbench at 1,000 Kubernetes-style watchers and reports its own CPU and
# memory beside etcd's.
#
# Needs go, curl, jq, python3 and GNU time (/usr/bin/time), which measures
# each client's own CPU the same way for both tools. Builds etcd and etcd's benchmark tool with
# scripts/build-etcd.sh and scripts/build-benchmark.sh (module proxy only).
# The etcd member listens on free loopback ports, keeps its data in a
# temporary directory and is stopped (by its PID) when the script exits.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
runs=${1:-5}
version=3.7.3

# etcd reads every ETCD_* variable as a flag: keep them away from etcd.
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)
for tool in go curl jq python3; do
  command -v "$tool" >/dev/null || { echo "bench-vs-etcd.sh: $tool is required" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "bench-vs-etcd.sh: GNU time (/usr/bin/time) is required" >&2; exit 1; }

etcd_dir=$(scripts/build-etcd.sh "$version")
bench=$(scripts/build-benchmark.sh "$version")
bench_source=$(cat "$(dirname "$bench")/SOURCE_VERSION")

work=$(mktemp -d)
etcd_pid=""
cleanup() {
  if [ -n "$etcd_pid" ]; then
    kill "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/lwbench" ./cmd/lwbench
lwbench="$work/lwbench"

read -r cport pport < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
for s in socks:
    s.close()
')
ep="http://127.0.0.1:$cport"
"$etcd_dir/etcd" --name lwbench-vs-benchmark --data-dir "$work/data" \
  --listen-client-urls "$ep" --advertise-client-urls "$ep" \
  --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
  --initial-cluster "lwbench-vs-benchmark=http://127.0.0.1:$pport" \
  --quota-backend-bytes 8589934592 >"$work/etcd.log" 2>&1 &
etcd_pid=$!
for _ in $(seq 1 100); do
  if curl -fsS "$ep/health" 2>/dev/null | grep -q true; then break; fi
  sleep 0.2
done
curl -fsS "$ep/health" | grep -q true || { echo "bench-vs-etcd.sh: etcd did not start; log:" >&2; cat "$work/etcd.log" >&2; exit 1; }
etcd_version=$(curl -fsS "$ep/version" | jq -r .etcdserver)

# The comparisons: name, unit, the benchmark command, the lwbench command
# ("EP" stands for the endpoint), and what to read from each.
# The last argument is the work the benchmark does (puts, or events).
names=(); units=(); bcmds=(); lcmds=(); lfields=(); notes=(); works=()
add() { names+=("$1"); units+=("$2"); bcmds+=("$3"); lcmds+=("$4"); lfields+=("$5"); notes+=("$6"); works+=("$7"); }
add "put, 16 clients, 1 connection" "puts/s" \
  "benchmark --endpoints EP --conns 1 --clients 16 put --key-size 8 --val-size 8 --total 40000 --key-space-size 100000" \
  "lwbench put --endpoints EP --writer-conns 1 --writer-concurrency 16 --prefix /b/ --key-size 8 --value-size 8 --writes 40000 --keys 100000 --write-rate 1000000 -w json" \
  ".writes.throughputPerSecond" \
  "Plain Puts of 8-byte values to 8-byte keys drawn at random from 100,000. lwbench's open-loop rate is far above etcd's capacity, so it measures the ceiling; its throughput is completions over the time from the first scheduled put to the last completion, the benchmark's is completions over its total time." \
  40000
add "put, 64 clients, 4 connections" "puts/s" \
  "benchmark --endpoints EP --conns 4 --clients 64 put --key-size 8 --val-size 8 --total 80000 --key-space-size 100000" \
  "lwbench put --endpoints EP --writer-conns 4 --writer-concurrency 64 --prefix /b/ --key-size 8 --value-size 8 --writes 80000 --keys 100000 --write-rate 1000000 -w json" \
  ".writes.throughputPerSecond" \
  "As above with more clients over more connections." \
  80000
add "watch fan-out, 10 streams x 100 watchers, 1 key" "events/s" \
  "benchmark --endpoints EP --conns 1 --clients 16 watch --streams 10 --watch-per-stream 100 --watched-key-total 1 --key-space-size 1 --key-size 32 --put-total 4000" \
  "lwbench watch --endpoints EP --conns 1 --streams 10 --watchers 1000 --prefix /lwbench-vs-benchmark-watch-key/ --keys 1 --value-size 4 --writes 4000 --write-rate 1000000 --writer-concurrency 16 --writer-conns 1 --prev-kv=false --progress-notify=false -w json" \
  ".delivery.eventsPerSecond" \
  "Every watcher watches the one key every put goes to, so both deliver puts x watchers = 4,000,000 events. This is the benchmark's default shape: its --key-space-size defaults to 1, which collapses any --watched-key-total onto a single key; it is set explicitly here. Values of 4 bytes (the benchmark puts \"data\"), no prevKV, no progress notifications. The benchmark's rate is events over the time from the start of the puts to the last event; lwbench's is events over the time from the first scheduled put to the last event received. lwbench also times every event against its put and validates every watch against a recorded history; the benchmark does neither." \
  4000000
add "watch fan-out, 20 streams x 50 watchers over 4 connections, 1 key" "events/s" \
  "benchmark --endpoints EP --conns 4 --clients 16 watch --streams 20 --watch-per-stream 50 --watched-key-total 1 --key-space-size 1 --key-size 32 --put-total 4000" \
  "lwbench watch --endpoints EP --conns 4 --streams 20 --watchers 1000 --prefix /lwbench-vs-benchmark-watch-key/ --keys 1 --value-size 4 --writes 4000 --write-rate 1000000 --writer-concurrency 16 --writer-conns 4 --prev-kv=false --progress-notify=false -w json" \
  ".delivery.eventsPerSecond" \
  "As above over four connections." \
  4000000

results="$work/results.jsonl"
: >"$results"
cpu_of() { # GNU time output file -> user+sys seconds
  awk '{print $1 + $2}' "$1"
}
run_benchmark() { # comparison index -> JSON
  local cmd=${bcmds[$1]//EP/$ep}
  local out v
  # shellcheck disable=SC2086
  out=$(/usr/bin/time -f '%U %S' -o "$work/time" "$bench" ${cmd#benchmark } 2>/dev/null)
  if [ "${units[$1]}" = "events/s" ]; then
    v=$(echo "$out" | awk '/Watch events received summary/ {f=1} f && /Requests\/sec/ {print $2; exit}')
  else
    v=$(echo "$out" | awk '/Requests\/sec/ {print $2; exit}')
  fi
  echo "{\"value\": ${v:-null}, \"clientCPUSeconds\": $(cpu_of "$work/time")}"
}
run_lwbench() { # comparison index -> JSON
  local cmd=${lcmds[$1]//EP/$ep}
  # shellcheck disable=SC2086
  /usr/bin/time -f '%U %S' -o "$work/time" "$lwbench" ${cmd#lwbench } 2>/dev/null >"$work/lw.json"
  jq -c --argjson cpu "$(cpu_of "$work/time")" "{value: ${lfields[$1]}, clientCPUSeconds: \$cpu, work: (if .delivery then .delivery.events else .writes.completed end), etcdCores: (.self.etcd.cpuCores // null), violationsOK: (if .validation then (.validation | (.lost == 0 and .duplicated == 0 and .outOfOrder == 0 and .unexpected == 0)) else null end)}" "$work/lw.json"
}
for i in "${!names[@]}"; do
  for r in $(seq 1 "$runs"); do
    order="benchmark lwbench"
    if [ $((r % 2)) -eq 0 ]; then order="lwbench benchmark"; fi
    for tool in $order; do
      if [ "$tool" = benchmark ]; then
        b=$(run_benchmark "$i")
        echo "{\"comparison\": $i, \"run\": $r, \"tool\": \"benchmark\", \"result\": $b}" >>"$results"
      else
        l=$(run_lwbench "$i")
        echo "{\"comparison\": $i, \"run\": $r, \"tool\": \"lwbench\", \"result\": $l}" >>"$results"
      fi
      echo "bench-vs-etcd.sh: ${names[$i]}, run $r, $tool done" >&2
    done
  done
done

# Scale: 1,000 Kubernetes-style informers against the same member.
scale_cmd="lwbench run --endpoints EP --prefix /lwbench-scale --watchers 1000 --conns 4 --streams 40 --objects 300 --write-rate 100 --duration 20s -w json"
scale_args=${scale_cmd//EP/$ep}
# shellcheck disable=SC2086
"$lwbench" ${scale_args#lwbench } >"$work/scale.json" 2>/dev/null || true
echo "bench-vs-etcd.sh: scale run done" >&2

commit=$(git rev-parse HEAD)
dirty=false
if ! git diff --quiet HEAD -- . 2>/dev/null; then dirty=true; fi
export RUNS=$runs COMMIT=$commit DIRTY=$dirty ETCD_VERSION_SEEN=$etcd_version BENCH_SOURCE=$bench_source VERSION=$version
export RESULTS=$results SCALE=$work/scale.json SCALE_CMD=$scale_cmd
names_json=$(printf '%s\n' "${names[@]}" | jq -R . | jq -s .)
units_json=$(printf '%s\n' "${units[@]}" | jq -R . | jq -s .)
bcmds_json=$(printf '%s\n' "${bcmds[@]}" | jq -R . | jq -s .)
lcmds_json=$(printf '%s\n' "${lcmds[@]}" | jq -R . | jq -s .)
notes_json=$(printf '%s\n' "${notes[@]}" | jq -R . | jq -s .)
works_json=$(printf '%s\n' "${works[@]}" | jq -s .)
export WORKS_JSON=$works_json NAMES_JSON=$names_json UNITS_JSON=$units_json BCMDS_JSON=$bcmds_json LCMDS_JSON=$lcmds_json NOTES_JSON=$notes_json
mkdir -p results
python3 - "$repo/results/lwbench-vs-benchmark.json" "$repo/results/lwbench-vs-benchmark.md" <<'PY'
import datetime, json, os, platform, statistics, subprocess, sys

out_json, out_md = sys.argv[1], sys.argv[2]
env = os.environ
names, units = json.loads(env["NAMES_JSON"]), json.loads(env["UNITS_JSON"])
bcmds, lcmds, notes = json.loads(env["BCMDS_JSON"]), json.loads(env["LCMDS_JSON"]), json.loads(env["NOTES_JSON"])
rows = [json.loads(l) for l in open(env["RESULTS"]) if l.strip()]

def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()

mem_kb = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
doc = {
    "kind": "BenchmarkComparison",
    "schemaVersion": 1,
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "commit": env["COMMIT"], "dirty": env["DIRTY"] == "true",
    "machine": {"cpuModel": cpu_model(), "cores": os.cpu_count(), "memTotalBytes": mem_kb * 1024, "kernel": platform.release()},
    "go": subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip(),
    "etcd": {"version": env["ETCD_VERSION_SEEN"], "binary": "scripts/build-etcd.sh " + env["VERSION"]},
    "benchmarkTool": {"linkedEtcdVersion": env["VERSION"], "sourceVersion": env["BENCH_SOURCE"],
                      "build": "scripts/build-benchmark.sh " + env["VERSION"]},
    "runs": int(env["RUNS"]),
    "comparisons": [],
}
works = json.loads(env["WORKS_JSON"])
for i, name in enumerate(names):
    b = [r["result"] for r in rows if r["comparison"] == i and r["tool"] == "benchmark"]
    l = [r["result"] for r in rows if r["comparison"] == i and r["tool"] == "lwbench"]
    bv = [x["value"] for x in b if x["value"] is not None]
    lv = [x["value"] for x in l if x["value"] is not None]
    bm, lm = (statistics.median(bv) if bv else None), (statistics.median(lv) if lv else None)
    # Client CPU per million units of work (puts or events).
    bcpu = [x["clientCPUSeconds"] / works[i] * 1e6 for x in b]
    lcpu = [x["clientCPUSeconds"] / x["work"] * 1e6 for x in l if x["work"]]
    bc, lc = (statistics.median(bcpu) if bcpu else None), (statistics.median(lcpu) if lcpu else None)
    doc["comparisons"].append({
        "name": name, "unit": units[i], "note": notes[i],
        "benchmarkCommand": bcmds[i], "lwbenchCommand": lcmds[i],
        "benchmark": bv, "lwbench": lv,
        "benchmarkClientCPUSecondsPerMillion": bcpu, "lwbenchClientCPUSecondsPerMillion": lcpu,
        "etcdCores": [x["etcdCores"] for x in l],
        "lwbenchViolationsFree": None if all(x["violationsOK"] is None for x in l) else all(x["violationsOK"] for x in l),
        "benchmarkMedian": bm, "lwbenchMedian": lm,
        "ratio": (lm / bm) if bm and lm else None,
        "lwbenchAtLeastBenchmark": bool(bm and lm and lm >= bm),
        "benchmarkClientCPUMedian": bc, "lwbenchClientCPUMedian": lc,
    })
try:
    scale = json.load(open(env["SCALE"]))
except Exception:
    scale = None
if scale:
    doc["scale"] = {
        "command": env["SCALE_CMD"],
        "watchers": scale["scenario"]["watchers"], "streams": scale["scenario"]["streams"],
        "connections": scale["scenario"]["connections"],
        "writesPerSecond": scale["writes"]["throughputPerSecond"], "events": scale["delivery"]["events"],
        "eventsPerSecond": scale["delivery"]["eventsPerSecond"],
        "deliveryFromCommit": scale["delivery"]["fromCommit"], "writeLatency": scale["writes"]["latency"],
        "relists": len(scale["relists"]), "validationOK": all(
            scale["validation"][k] == 0 for k in ("lost", "duplicated", "outOfOrder", "atomic", "resumable",
                                                   "bookmarkable", "unexpected", "prevKVMismatches", "cacheMismatches")),
        "lwbench": scale["self"], "initialLists": scale["initialLists"],
    }
json.dump(doc, open(out_json, "w"), indent=2)
open(out_json, "a").write("\n")

m = doc["machine"]
md = []
md.append("# lwbench against etcd's benchmark tool\n")
md.append("Generated by `scripts/bench-vs-etcd.sh %d`; do not edit by hand. Raw figures: `lwbench-vs-benchmark.json`.\n" % doc["runs"])
md.append("| | |\n|---|---|")
md.append("| date | %s |" % doc["date"])
md.append("| commit | `%s`%s |" % (doc["commit"], " (with uncommitted changes)" if doc["dirty"] else ""))
md.append("| machine | %s, %d cores, %.1f GiB RAM, Linux %s |" % (m["cpuModel"], m["cores"], m["memTotalBytes"] / 2**30, m["kernel"]))
md.append("| Go | %s |" % doc["go"])
md.append("| etcd | %s, one member on loopback, fsync on, a fresh data directory (`%s`) |" % (doc["etcd"]["version"], doc["etcd"]["binary"]))
bt = doc["benchmarkTool"]
md.append("| etcd benchmark tool | `tools/benchmark` from `go.etcd.io/etcd/v3` v%s, linked against the v%s server, client and api modules (`%s`; the proxy does not serve the v%s root module) |" % (bt["sourceVersion"], bt["linkedEtcdVersion"], bt["build"], bt["linkedEtcdVersion"]))
md.append("| repetitions | %d per tool, alternating which runs first; medians below |\n" % doc["runs"])
md.append("Throughput is the figure each tool reports; client CPU is each client process's user + system time (GNU time) per million puts or events. The machine may run other work meanwhile: the two tools alternate, each figure is a median, and client CPU, which such load disturbs far less than throughput, shows what each load generator itself costs.\n")
md.append("| comparison | unit | benchmark (median) | lwbench (median) | lwbench / benchmark | lwbench at least benchmark | client CPU s per million, benchmark / lwbench (median) |")
md.append("|---|---|--:|--:|--:|---|--:|")
for c in doc["comparisons"]:
    fmt = lambda x: "-" if x is None else "{:,.0f}".format(x)
    cpu = lambda x: "-" if x is None else "%.2f" % x
    md.append("| %s | %s | %s | %s | %s | %s | %s / %s |" % (c["name"], c["unit"], fmt(c["benchmarkMedian"]), fmt(c["lwbenchMedian"]),
              "-" if c["ratio"] is None else "%.2f" % c["ratio"], "yes" if c["lwbenchAtLeastBenchmark"] else "**no**",
              cpu(c["benchmarkClientCPUMedian"]), cpu(c["lwbenchClientCPUMedian"])))
md.append("")
for c in doc["comparisons"]:
    md.append("## %s\n" % c["name"])
    md.append(c["note"] + "\n")
    md.append("```sh\n%s\n%s\n```\n" % (c["benchmarkCommand"], c["lwbenchCommand"]))
    md.append("Every run (%s): benchmark %s; lwbench %s. Client CPU s per million: benchmark %s; lwbench %s. etcd used %s cores during the lwbench runs; lwbench's validation found %s.\n" % (
        c["unit"], ", ".join("{:,.0f}".format(x) for x in c["benchmark"]), ", ".join("{:,.0f}".format(x) for x in c["lwbench"]),
        ", ".join("%.2f" % x for x in c["benchmarkClientCPUSecondsPerMillion"]),
        ", ".join("%.2f" % x for x in c["lwbenchClientCPUSecondsPerMillion"]),
        ", ".join("%.2f" % x for x in c["etcdCores"] if x is not None) or "-",
        "nothing to validate (puts only)" if c["lwbenchViolationsFree"] is None else "no violation" if c["lwbenchViolationsFree"] else "violations"))
if "scale" in doc:
    s = doc["scale"]
    md.append("## Scale: 1,000 informers on this machine\n")
    md.append("```sh\n%s\n```\n" % s["command"])
    md.append("| | |\n|---|---|")
    md.append("| watchers | %d informers on %d streams over %d connections |" % (s["watchers"], s["streams"], s["connections"]))
    md.append("| initial lists | %d, p50 %.1f ms, p99 %.1f ms |" % (s["initialLists"]["count"], s["initialLists"]["latency"]["p50Ms"], s["initialLists"]["latency"]["p99Ms"]))
    md.append("| writes | %.0f/s, latency from schedule p50 %.1f ms, p99 %.1f ms |" % (s["writesPerSecond"], s["writeLatency"]["p50Ms"], s["writeLatency"]["p99Ms"]))
    md.append("| events delivered | %d (%.0f/s), delivery from commit p50 %.1f ms, p99 %.1f ms |" % (s["events"], s["eventsPerSecond"], s["deliveryFromCommit"]["p50Ms"], s["deliveryFromCommit"]["p99Ms"]))
    md.append("| relists | %d |" % s["relists"])
    md.append("| watch guarantees | %s |" % ("all held" if s["validationOK"] else "**violated**"))
    lw = s["lwbench"]
    md.append("| lwbench | %.1f CPU s (%.2f of %d cores), max RSS %.0f MiB, peak heap %.0f MiB |" % (lw["cpuSeconds"], lw["cpuCores"], lw["numCPU"], lw["maxRSSBytes"] / 2**20, lw["peakHeapBytes"] / 2**20))
    if lw.get("etcd"):
        md.append("| etcd | %.1f CPU s (%.2f cores), RSS %.0f MiB |" % (lw["etcd"]["cpuSeconds"], lw["etcd"]["cpuCores"], lw["etcd"]["rssBytes"] / 2**20))
    md.append("")
open(out_md, "w").write("\n".join(md))
PY
echo "bench-vs-etcd.sh: wrote results/lwbench-vs-benchmark.json and results/lwbench-vs-benchmark.md" >&2
