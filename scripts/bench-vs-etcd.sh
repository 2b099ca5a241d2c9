#!/usr/bin/env bash
# bench-vs-etcd.sh [--out DIR] [--divide N] [--puts-only] [RUNS]
#
# Shows that lwbench's load generator is not what limits a run: against one
# real etcd process it runs etcd's own benchmark tool and the equivalent
# lwbench invocation with the same clients, connections, streams and
# watchers, RUNS times each (default 5), alternating which goes first, and
# writes DIR/lwbench-vs-benchmark.{json,md} (DIR: results) with the machine,
# the versions, the date, the commit and the exact commands. The puts run
# with 8-byte and with 4 KiB values. For every comparison it records each
# client's throughput, CPU per million puts or events and maximum resident
# memory, their ratios, and whether lwbench meets the put generator's
# targets (issue 22): at least the benchmark's throughput, at most its CPU
# per write, at most twice its memory. A last section runs lwbench at 1,000
# Kubernetes-style watchers and reports its own CPU and memory beside
# etcd's.
#
# --divide N divides every comparison's puts (and the watch comparisons'
# events) by N, and --puts-only skips the watch comparisons and the
# 1,000-watcher run: a quick check of the script, never the published
# figures (write it outside results/ with --out).
#
# Needs go, curl, jq and python3. scripts/internal/measure/measure.py runs
# each client and measures both tools the same way: its own CPU and maximum
# RSS (wait4's rusage, what GNU time prints), and its peak anonymous and
# file-backed resident memory sampled from /proc/PID/status, which sets what
# a tool allocates apart from the pages of its binary it maps in. Builds
# etcd and etcd's benchmark tool with scripts/build-etcd.sh and
# scripts/build-benchmark.sh (module proxy only). The etcd member listens on
# free loopback ports, keeps its data in a temporary directory and is
# stopped (by its PID) when the script exits. Before every run it is
# emptied, compacted and defragmented (etcdctl), so that every run starts
# from the same empty member whichever tool ran before it.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
args="$*"
out_dir=results
divide=1
puts_only=false
while [ $# -gt 0 ]; do
  case $1 in
    --out) out_dir=${2:?--out needs a directory}; shift 2 ;;
    --divide) divide=${2:?--divide needs a number}; shift 2 ;;
    --puts-only) puts_only=true; shift ;;
    -*) echo "bench-vs-etcd.sh: unknown flag $1; usage: bench-vs-etcd.sh [--out DIR] [--divide N] [--puts-only] [RUNS]" >&2; exit 2 ;;
    *) break ;;
  esac
done
runs=${1:-5}
if ! [[ $runs =~ ^[1-9][0-9]*$ ]] || ! [[ $divide =~ ^[1-9][0-9]*$ ]]; then
  echo "bench-vs-etcd.sh: RUNS ($runs) and --divide ($divide) must be positive integers" >&2
  exit 2
fi
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
version=3.7.3

# etcd reads every ETCD_* variable as a flag: keep them away from etcd.
while IFS='=' read -r name _; do unset "$name"; done < <(env | grep '^ETCD_' || true)
for tool in go curl jq python3; do
  command -v "$tool" >/dev/null || { echo "bench-vs-etcd.sh: $tool is required" >&2; exit 1; }
done

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
# ("EP" stands for the endpoint), what to read from lwbench's result, a
# note, the work the benchmark does (puts, or events), and the value size
# of the puts (0 for the watch comparisons).
names=(); units=(); bcmds=(); lcmds=(); lfields=(); notes=(); works=(); values=()
add() { names+=("$1"); units+=("$2"); bcmds+=("$3"); lcmds+=("$4"); lfields+=("$5"); notes+=("$6"); works+=("$7"); values+=("$8"); }
for val in 8 4096; do
  label="$val-byte values"
  if [ "$val" = 4096 ]; then label="4 KiB values"; fi
  t1=$((40000 / divide)) t2=$((80000 / divide))
  add "put, $label, 16 clients, 1 connection" "puts/s" \
    "benchmark --endpoints EP --conns 1 --clients 16 put --key-size 8 --val-size $val --total $t1 --key-space-size 100000" \
    "lwbench put --endpoints EP --writer-conns 1 --writer-concurrency 16 --prefix /b/ --key-size 8 --value-size $val --writes $t1 --keys 100000 --write-rate 1000000 -w json" \
    ".writes.throughputPerSecond" \
    "Plain Puts of $label to 8-byte keys drawn at random from 100,000. lwbench's open-loop rate is far above etcd's capacity, so it measures the ceiling; its throughput is completions over the time from the first scheduled put to the last completion, the benchmark's is completions over its total time. lwbench also deletes the keys it created afterwards (the benchmark leaves its keys), which counts in its CPU and memory." \
    "$t1" "$val"
  add "put, $label, 64 clients, 4 connections" "puts/s" \
    "benchmark --endpoints EP --conns 4 --clients 64 put --key-size 8 --val-size $val --total $t2 --key-space-size 100000" \
    "lwbench put --endpoints EP --writer-conns 4 --writer-concurrency 64 --prefix /b/ --key-size 8 --value-size $val --writes $t2 --keys 100000 --write-rate 1000000 -w json" \
    ".writes.throughputPerSecond" \
    "As above with more clients over more connections." \
    "$t2" "$val"
done
if [ "$puts_only" = false ]; then
  wp=$((4000 / divide))
  add "watch fan-out, 10 streams x 100 watchers, 1 key" "events/s" \
    "benchmark --endpoints EP --conns 1 --clients 16 watch --streams 10 --watch-per-stream 100 --watched-key-total 1 --key-space-size 1 --key-size 32 --put-total $wp" \
    "lwbench watch --endpoints EP --conns 1 --streams 10 --watchers 1000 --prefix /lwbench-vs-benchmark-watch-key/ --keys 1 --value-size 4 --writes $wp --write-rate 1000000 --writer-concurrency 16 --writer-conns 1 --prev-kv=false --progress-notify=false -w json" \
    ".delivery.eventsPerSecond" \
    "Every watcher watches the one key every put goes to, so both deliver puts x watchers = $((wp * 1000)) events. This is the benchmark's default shape: its --key-space-size defaults to 1, which collapses any --watched-key-total onto a single key; it is set explicitly here. Values of 4 bytes (the benchmark puts \"data\"), no prevKV, no progress notifications. The benchmark's rate is events over the time from the start of the puts to the last event; lwbench's is events over the time from the first scheduled put to the last event received. lwbench also times every event against its put and validates every watch against a recorded history; the benchmark does neither." \
    "$((wp * 1000))" 0
  add "watch fan-out, 20 streams x 50 watchers over 4 connections, 1 key" "events/s" \
    "benchmark --endpoints EP --conns 4 --clients 16 watch --streams 20 --watch-per-stream 50 --watched-key-total 1 --key-space-size 1 --key-size 32 --put-total $wp" \
    "lwbench watch --endpoints EP --conns 4 --streams 20 --watchers 1000 --prefix /lwbench-vs-benchmark-watch-key/ --keys 1 --value-size 4 --writes $wp --write-rate 1000000 --writer-concurrency 16 --writer-conns 4 --prev-kv=false --progress-notify=false -w json" \
    ".delivery.eventsPerSecond" \
    "As above over four connections." \
    "$((wp * 1000))" 0
fi

results="$work/results.jsonl"
: >"$results"
# measure.py writes "user_s system_s maxRSS_KiB peakAnon_KiB peakFile_KiB
# exit_code" on one line.
measure() { # output file, command... -> the command's stdout
  local o=$1
  shift
  python3 "$repo/scripts/internal/measure/measure.py" -o "$o" -- "$@"
}
cpu_of() { # measure.py output file -> user+sys seconds
  awk '{print $1 + $2}' "$1"
}
rss_of() { # measure.py output file -> maximum resident set, bytes
  awk '{print $3 * 1024}' "$1"
}
mem_of() { # measure.py output file -> JSON fields of peak anonymous and file-backed RSS, bytes
  awk '{printf "\"peakRSSAnonBytes\": %d, \"peakRSSFileBytes\": %d", $4 * 1024, $5 * 1024}' "$1"
}
etcdctl() { "$etcd_dir/etcdctl" --endpoints "$ep" "$@"; }
# reset_member empties the member, compacts its history away and
# defragments it, so that every run starts from the same state whichever
# tool ran before (the benchmark leaves its keys; 4 KiB values grow the
# database by hundreds of MiB a run).
reset_member() {
  etcdctl del "" --from-key >/dev/null
  local rev
  rev=$(etcdctl endpoint status -w json | jq '.[0].Status.header.revision')
  # Refused when nothing was written since the last compaction.
  etcdctl compact --physical "$rev" >/dev/null 2>&1 || true
  etcdctl defrag >/dev/null
}
run_benchmark() { # comparison index -> JSON
  local cmd=${bcmds[$1]//EP/$ep}
  local out v
  # shellcheck disable=SC2086
  out=$(measure "$work/time" "$bench" ${cmd#benchmark } 2>/dev/null)
  if [ "${units[$1]}" = "events/s" ]; then
    v=$(echo "$out" | awk '/Watch events received summary/ {f=1} f && /Requests\/sec/ {print $2; exit}')
  else
    v=$(echo "$out" | awk '/Requests\/sec/ {print $2; exit}')
  fi
  echo "{\"value\": ${v:-null}, \"clientCPUSeconds\": $(cpu_of "$work/time"), \"maxRSSBytes\": $(rss_of "$work/time"), $(mem_of "$work/time")}"
}
run_lwbench() { # comparison index -> JSON
  local cmd=${lcmds[$1]//EP/$ep}
  # shellcheck disable=SC2086
  measure "$work/time" "$lwbench" ${cmd#lwbench } 2>/dev/null >"$work/lw.json"
  jq -c --argjson cpu "$(cpu_of "$work/time")" --argjson rss "$(rss_of "$work/time")" --argjson mem "{$(mem_of "$work/time")}" "\$mem + {value: ${lfields[$1]}, clientCPUSeconds: \$cpu, maxRSSBytes: \$rss, work: (if .delivery then .delivery.events else .writes.completed end), etcdCores: (.self.etcd.cpuCores // null), violationsOK: (if .validation then (.validation | (.lost == 0 and .duplicated == 0 and .outOfOrder == 0 and .unexpected == 0)) else null end)}" "$work/lw.json"
}
# Each tool's maximum RSS doing nothing (its help), once a run: what its
# binary and its packages' initialisation hold before any load.
for r in $(seq 1 "$runs"); do
  for tool in benchmark lwbench; do
    bin=$bench
    if [ "$tool" = lwbench ]; then bin=$lwbench; fi
    measure "$work/time" "$bin" --help >/dev/null 2>&1 || true
    # Too short a run for measure.py's samples: the maximum RSS only.
    echo "{\"comparison\": -1, \"run\": $r, \"tool\": \"$tool\", \"result\": {\"maxRSSBytes\": $(rss_of "$work/time")}}" >>"$results"
  done
done
for i in "${!names[@]}"; do
  for r in $(seq 1 "$runs"); do
    order="benchmark lwbench"
    if [ $((r % 2)) -eq 0 ]; then order="lwbench benchmark"; fi
    for tool in $order; do
      reset_member
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
: >"$work/scale.json"
if [ "$puts_only" = false ]; then
  reset_member
  scale_args=${scale_cmd//EP/$ep}
  # shellcheck disable=SC2086
  "$lwbench" ${scale_args#lwbench } >"$work/scale.json" 2>/dev/null || true
  echo "bench-vs-etcd.sh: scale run done" >&2
fi

commit=$(git rev-parse HEAD)
dirty=false
if ! git diff --quiet HEAD -- . 2>/dev/null; then dirty=true; fi
export RUNS=$runs ARGS=$args COMMIT=$commit DIRTY=$dirty ETCD_VERSION_SEEN=$etcd_version BENCH_SOURCE=$bench_source VERSION=$version
export RESULTS=$results SCALE=$work/scale.json SCALE_CMD=$scale_cmd
names_json=$(printf '%s\n' "${names[@]}" | jq -R . | jq -s .)
units_json=$(printf '%s\n' "${units[@]}" | jq -R . | jq -s .)
bcmds_json=$(printf '%s\n' "${bcmds[@]}" | jq -R . | jq -s .)
lcmds_json=$(printf '%s\n' "${lcmds[@]}" | jq -R . | jq -s .)
notes_json=$(printf '%s\n' "${notes[@]}" | jq -R . | jq -s .)
works_json=$(printf '%s\n' "${works[@]}" | jq -s .)
values_json=$(printf '%s\n' "${values[@]}" | jq -s .)
export WORKS_JSON=$works_json VALUES_JSON=$values_json NAMES_JSON=$names_json UNITS_JSON=$units_json BCMDS_JSON=$bcmds_json LCMDS_JSON=$lcmds_json NOTES_JSON=$notes_json
python3 - "$out_dir/lwbench-vs-benchmark.json" "$out_dir/lwbench-vs-benchmark.md" <<'PY'
import datetime, json, os, platform, statistics, subprocess, sys

out_json, out_md = sys.argv[1], sys.argv[2]
env = os.environ
names, units = json.loads(env["NAMES_JSON"]), json.loads(env["UNITS_JSON"])
bcmds, lcmds, notes = json.loads(env["BCMDS_JSON"]), json.loads(env["LCMDS_JSON"]), json.loads(env["NOTES_JSON"])
works, values = json.loads(env["WORKS_JSON"]), json.loads(env["VALUES_JSON"])
rows = [json.loads(l) for l in open(env["RESULTS"]) if l.strip()]

# The put generator's targets (issue 22), lwbench against the benchmark.
TARGETS = {"throughputAtLeast": 1.0, "cpuPerWorkAtMost": 1.0, "memoryAtMost": 2.0}

def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()

def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None

def ratio(l, b):
    return l / b if l is not None and b else None

mem_kb = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
doc = {
    "kind": "BenchmarkComparison",
    # 3: peak anonymous and file-backed RSS beside the maximum RSS.
    "schemaVersion": 3,
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "commit": env["COMMIT"], "dirty": env["DIRTY"] == "true",
    "arguments": env["ARGS"],
    "machine": {"cpuModel": cpu_model(), "cores": os.cpu_count(), "memTotalBytes": mem_kb * 1024, "kernel": platform.release()},
    "go": subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip(),
    "etcd": {"version": env["ETCD_VERSION_SEEN"], "binary": "scripts/build-etcd.sh " + env["VERSION"]},
    "benchmarkTool": {"linkedEtcdVersion": env["VERSION"], "sourceVersion": env["BENCH_SOURCE"],
                      "build": "scripts/build-benchmark.sh " + env["VERSION"]},
    "runs": int(env["RUNS"]),
    "targets": TARGETS,
    "atRest": {
        "benchmarkMaxRSSBytes": [r["result"]["maxRSSBytes"] for r in rows if r["comparison"] == -1 and r["tool"] == "benchmark"],
        "lwbenchMaxRSSBytes": [r["result"]["maxRSSBytes"] for r in rows if r["comparison"] == -1 and r["tool"] == "lwbench"],
    },
    "comparisons": [],
}
rest = doc["atRest"]
rest["benchmarkMaxRSSMedianBytes"] = median(rest["benchmarkMaxRSSBytes"])
rest["lwbenchMaxRSSMedianBytes"] = median(rest["lwbenchMaxRSSBytes"])
for i, name in enumerate(names):
    b = [r["result"] for r in rows if r["comparison"] == i and r["tool"] == "benchmark"]
    l = [r["result"] for r in rows if r["comparison"] == i and r["tool"] == "lwbench"]
    bv = [x["value"] for x in b if x["value"] is not None]
    lv = [x["value"] for x in l if x["value"] is not None]
    # Client CPU per million units of work (puts or events).
    bcpu = [x["clientCPUSeconds"] / works[i] * 1e6 for x in b]
    lcpu = [x["clientCPUSeconds"] / x["work"] * 1e6 for x in l if x["work"]]
    brss, lrss = [x["maxRSSBytes"] for x in b], [x["maxRSSBytes"] for x in l]
    banon, lanon = [x["peakRSSAnonBytes"] for x in b], [x["peakRSSAnonBytes"] for x in l]
    bfile, lfile = [x["peakRSSFileBytes"] for x in b], [x["peakRSSFileBytes"] for x in l]
    bm, lm = median(bv), median(lv)
    bc, lc = median(bcpu), median(lcpu)
    br, lr = median(brss), median(lrss)
    c = {
        "name": name, "unit": units[i], "valueBytes": values[i] or None, "note": notes[i],
        "benchmarkCommand": bcmds[i], "lwbenchCommand": lcmds[i],
        "benchmark": bv, "lwbench": lv,
        "benchmarkClientCPUSecondsPerMillion": bcpu, "lwbenchClientCPUSecondsPerMillion": lcpu,
        "benchmarkMaxRSSBytes": brss, "lwbenchMaxRSSBytes": lrss,
        "etcdCores": [x["etcdCores"] for x in l],
        "lwbenchViolationsFree": None if all(x["violationsOK"] is None for x in l) else all(x["violationsOK"] for x in l),
        "benchmarkMedian": bm, "lwbenchMedian": lm, "ratio": ratio(lm, bm),
        "benchmarkClientCPUMedian": bc, "lwbenchClientCPUMedian": lc, "cpuRatio": ratio(lc, bc),
        "benchmarkMaxRSSMedianBytes": br, "lwbenchMaxRSSMedianBytes": lr, "memoryRatio": ratio(lr, br),
        # What each tool allocated (anonymous pages) and the pages of its
        # binary it mapped in (file-backed), peaks sampled every 10 ms.
        "benchmarkPeakRSSAnonBytes": banon, "lwbenchPeakRSSAnonBytes": lanon,
        "benchmarkPeakRSSFileBytes": bfile, "lwbenchPeakRSSFileBytes": lfile,
        "benchmarkPeakRSSAnonMedianBytes": median(banon), "lwbenchPeakRSSAnonMedianBytes": median(lanon),
        "anonMemoryRatio": ratio(median(lanon), median(banon)),
        "benchmarkPeakRSSFileMedianBytes": median(bfile), "lwbenchPeakRSSFileMedianBytes": median(lfile),
    }
    c["lwbenchAtLeastBenchmark"] = c["ratio"] is not None and c["ratio"] >= TARGETS["throughputAtLeast"]
    c["cpuWithinTarget"] = c["cpuRatio"] is not None and c["cpuRatio"] <= TARGETS["cpuPerWorkAtMost"]
    c["memoryWithinTarget"] = c["memoryRatio"] is not None and c["memoryRatio"] <= TARGETS["memoryAtMost"]
    c["anonMemoryWithinTarget"] = c["anonMemoryRatio"] is not None and c["anonMemoryRatio"] <= TARGETS["memoryAtMost"]
    doc["comparisons"].append(c)
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
        # fromResponse since RunResult schema 4 (fromCommit before).
        "deliveryFromResponse": scale["delivery"].get("fromResponse") or scale["delivery"]["fromCommit"],
        "writeLatency": scale["writes"]["latency"],
        "relists": len(scale["relists"]), "validationOK": all(
            scale["validation"][k] == 0 for k in ("lost", "duplicated", "outOfOrder", "atomic", "resumable",
                                                   "bookmarkable", "unexpected", "prevKVMismatches", "cacheMismatches")),
        "lwbench": scale["self"], "initialLists": scale["initialLists"],
    }
json.dump(doc, open(out_json, "w"), indent=2)
open(out_json, "a").write("\n")

yesno = lambda ok: "yes" if ok else "**no**"
num = lambda x: "-" if x is None else "{:,.0f}".format(x)
two = lambda x: "-" if x is None else "%.2f" % x
mib = lambda x: "-" if x is None else "%.0f" % (x / 2**20)
m = doc["machine"]
md = []
md.append("# lwbench against etcd's benchmark tool\n")
md.append("Generated by `scripts/bench-vs-etcd.sh%s`; do not edit by hand. Raw figures: `lwbench-vs-benchmark.json`.\n" % ((" " + doc["arguments"]) if doc["arguments"] else ""))
md.append("| | |\n|---|---|")
md.append("| date | %s |" % doc["date"])
md.append("| commit | `%s`%s |" % (doc["commit"], " (with uncommitted changes)" if doc["dirty"] else ""))
md.append("| machine | %s, %d cores, %.1f GiB RAM, Linux %s |" % (m["cpuModel"], m["cores"], m["memTotalBytes"] / 2**30, m["kernel"]))
md.append("| Go | %s |" % doc["go"])
md.append("| etcd | %s, one member on loopback, fsync on, emptied, compacted and defragmented before every run (`%s`) |" % (doc["etcd"]["version"], doc["etcd"]["binary"]))
bt = doc["benchmarkTool"]
md.append("| etcd benchmark tool | `tools/benchmark` from `go.etcd.io/etcd/v3` v%s, linked against the v%s server, client and api modules (`%s`; the proxy does not serve the v%s root module) |" % (bt["sourceVersion"], bt["linkedEtcdVersion"], bt["build"], bt["linkedEtcdVersion"]))
md.append("| repetitions | %d per tool, alternating which runs first; medians below |" % doc["runs"])
md.append("| at rest | maximum RSS of each tool printing its help: benchmark %s MiB, lwbench %s MiB (median) |\n" % (mib(rest["benchmarkMaxRSSMedianBytes"]), mib(rest["lwbenchMaxRSSMedianBytes"])))
md.append("Throughput is the figure each tool reports; client CPU is each client process's user + system time (wait4's rusage, as GNU time prints it) per million puts or events; memory is each client process's maximum resident set (rusage), its binary's mapped pages included. The machine may run other work meanwhile: the two tools alternate, each figure is a median, and client CPU, which such load disturbs far less than throughput, shows what each load generator itself costs. Each ratio is lwbench's median over the benchmark's.\n")
md.append("| comparison | unit | benchmark | lwbench | ratio | client CPU s per million, benchmark / lwbench | ratio | max RSS MiB, benchmark / lwbench | ratio |")
md.append("|---|---|--:|--:|--:|--:|--:|--:|--:|")
for c in doc["comparisons"]:
    md.append("| %s | %s | %s | %s | %s | %s / %s | %s | %s / %s | %s |" % (c["name"], c["unit"], num(c["benchmarkMedian"]), num(c["lwbenchMedian"]), two(c["ratio"]),
              two(c["benchmarkClientCPUMedian"]), two(c["lwbenchClientCPUMedian"]), two(c["cpuRatio"]),
              mib(c["benchmarkMaxRSSMedianBytes"]), mib(c["lwbenchMaxRSSMedianBytes"]), two(c["memoryRatio"])))
md.append("")
md.append("Targets of lwbench's put generator (issue 22): throughput at least %.1fx the benchmark's, client CPU per write at most %.1fx, memory at most %.1fx, at equal clients and connections.\n" % (TARGETS["throughputAtLeast"], TARGETS["cpuPerWorkAtMost"], TARGETS["memoryAtMost"]))
md.append("| comparison | throughput >= %.1fx | CPU per write <= %.1fx | memory <= %.1fx | of it allocated (anonymous) <= %.1fx |" % (TARGETS["throughputAtLeast"], TARGETS["cpuPerWorkAtMost"], TARGETS["memoryAtMost"], TARGETS["memoryAtMost"]))
md.append("|---|---|---|---|---|")
for c in doc["comparisons"]:
    if c["unit"] != "puts/s":
        continue
    # Three decimals: a ratio of 0.998 shown as 1.00 beside "no" would puzzle.
    three = lambda x: "-" if x is None else "%.3f" % x
    md.append("| %s | %s (%s) | %s (%s) | %s (%s) | %s (%s) |" % (c["name"], yesno(c["lwbenchAtLeastBenchmark"]), three(c["ratio"]),
              yesno(c["cpuWithinTarget"]), three(c["cpuRatio"]), yesno(c["memoryWithinTarget"]), three(c["memoryRatio"]),
              yesno(c["anonMemoryWithinTarget"]), three(c["anonMemoryRatio"])))
md.append("")
md.append("Where the memory goes: each process's peak anonymous resident memory (what it allocated: heap, stacks) and peak file-backed resident memory (the pages of its binary it mapped in), sampled every 10 ms from /proc/PID/status (RssAnon, RssFile), medians.\n")
md.append("| comparison | max RSS MiB, benchmark / lwbench | allocated MiB, benchmark / lwbench | ratio | binary's pages MiB, benchmark / lwbench |")
md.append("|---|--:|--:|--:|--:|")
for c in doc["comparisons"]:
    md.append("| %s | %s / %s | %s / %s | %s | %s / %s |" % (c["name"], mib(c["benchmarkMaxRSSMedianBytes"]), mib(c["lwbenchMaxRSSMedianBytes"]),
              mib(c["benchmarkPeakRSSAnonMedianBytes"]), mib(c["lwbenchPeakRSSAnonMedianBytes"]), two(c["anonMemoryRatio"]),
              mib(c["benchmarkPeakRSSFileMedianBytes"]), mib(c["lwbenchPeakRSSFileMedianBytes"])))
md.append("")
for c in doc["comparisons"]:
    md.append("## %s\n" % c["name"])
    md.append(c["note"] + "\n")
    md.append("```sh\n%s\n%s\n```\n" % (c["benchmarkCommand"], c["lwbenchCommand"]))
    md.append("Every run (%s): benchmark %s; lwbench %s. Client CPU s per million: benchmark %s; lwbench %s. Max RSS MiB: benchmark %s; lwbench %s. etcd used %s cores during the lwbench runs; lwbench's validation found %s.\n" % (
        c["unit"], ", ".join(num(x) for x in c["benchmark"]), ", ".join(num(x) for x in c["lwbench"]),
        ", ".join(two(x) for x in c["benchmarkClientCPUSecondsPerMillion"]),
        ", ".join(two(x) for x in c["lwbenchClientCPUSecondsPerMillion"]),
        ", ".join(mib(x) for x in c["benchmarkMaxRSSBytes"]), ", ".join(mib(x) for x in c["lwbenchMaxRSSBytes"]),
        ", ".join(two(x) for x in c["etcdCores"] if x is not None) or "-",
        "nothing to validate (puts only)" if c["lwbenchViolationsFree"] is None else "no violation" if c["lwbenchViolationsFree"] else "violations"))
if "scale" in doc:
    s = doc["scale"]
    md.append("## Scale: 1,000 informers on this machine\n")
    md.append("```sh\n%s\n```\n" % s["command"])
    md.append("| | |\n|---|---|")
    md.append("| watchers | %d informers on %d streams over %d connections |" % (s["watchers"], s["streams"], s["connections"]))
    md.append("| initial lists | %d, p50 %.1f ms, p99 %.1f ms |" % (s["initialLists"]["count"], s["initialLists"]["latency"]["p50Ms"], s["initialLists"]["latency"]["p99Ms"]))
    md.append("| writes | %.0f/s, latency from schedule p50 %.1f ms, p99 %.1f ms |" % (s["writesPerSecond"], s["writeLatency"]["p50Ms"], s["writeLatency"]["p99Ms"]))
    md.append("| events delivered | %d (%.0f/s), delivery from the write's response p50 %.1f ms, p99 %.1f ms |" % (s["events"], s["eventsPerSecond"], s["deliveryFromResponse"]["p50Ms"], s["deliveryFromResponse"]["p99Ms"]))
    md.append("| relists | %d |" % s["relists"])
    md.append("| watch guarantees | %s |" % ("all held" if s["validationOK"] else "**violated**"))
    lw = s["lwbench"]
    md.append("| lwbench | %.1f CPU s (%.2f of %d cores), max RSS %.0f MiB, peak heap %.0f MiB |" % (lw["cpuSeconds"], lw["cpuCores"], lw["numCPU"], lw["maxRSSBytes"] / 2**20, lw["peakHeapBytes"] / 2**20))
    if lw.get("etcd"):
        md.append("| etcd | %.1f CPU s (%.2f cores), RSS %.0f MiB |" % (lw["etcd"]["cpuSeconds"], lw["etcd"]["cpuCores"], lw["etcd"]["rssBytes"] / 2**20))
    md.append("")
open(out_md, "w").write("\n".join(md))
PY
echo "bench-vs-etcd.sh: wrote $out_dir/lwbench-vs-benchmark.json and $out_dir/lwbench-vs-benchmark.md" >&2
