#!/usr/bin/env bash
# Bad input under load (#18): the configs workload (CLIENTS clients) against a static 3-voter
# quorum on loopback (tools/scripts/lib/quorum.sh, with Kafka listeners), undisturbed and then
# under a connection flood and slow consumers at the leader, in one run on this host.
#
#   tools/scripts/bad-input-load.sh [CORUM] [SECONDS] [ROUNDS]
#
# The flood: FLOOD connections (tools/scripts/lib/flood.py, FLOOD_PROCESSES processes: one
# process holds at most its open-file limit) from 127.0.0.2, as from another host, at the
# leader's client and Kafka listeners, sending nothing and reopened when the node closes them
# (at most FLOOD_RATE a second in all); it is in place before the workload's clients connect.
# The slow consumers: SLOW connections on each of the leader's client and Kafka listeners
# (`corum loadgen --slow-consumers`) that pipeline requests and never read an answer.
# The nodes run with max.connections=MAX_CONNECTIONS, max.connections.per.ip=MAX_PER_IP,
# corum.connection.send.timeout.ms=SEND_TIMEOUT_MS; the leader's RSS (VmRSS, sampled every
# 100 ms, and VmHWM) is compared with RSS_BOUND_MIB.
#
# Environment: CLIENTS (64), CONNECTIONS (8), FLOOD (20000), FLOOD_PROCESSES (4), KEEP_JSON
# (a path prefix: each run's loadgen JSON is copied there),
# FLOOD_RATE (200), SLOW (2), MAX_CONNECTIONS (10000), MAX_PER_IP (5000),
# SEND_TIMEOUT_MS (5000), RSS_BOUND_MIB (512), BASE_PORT (19900).
# Prints one line per run, then the ratio of the means (flood / undisturbed, with one
# standard error: tools/scripts/lib/summary.py) and the peak
# RSS against the bound; exits 1 when the throughput ratio is below 0.5 or the RSS reached
# the bound. Per run it also prints the leader's CPU per acknowledged write and how many
# cores the whole host kept busy (this machine is shared: what else ran shows there).
# Everything it starts stops at exit; its directory is removed.
set -euo pipefail

BIN=${1:-target/release/corum}
SECONDS_PER_RUN=${2:-10}
ROUNDS=${3:-2}
CLIENTS=${CLIENTS:-64}
CONNECTIONS=${CONNECTIONS:-8}
FLOOD=${FLOOD:-20000}
FLOOD_PROCESSES=${FLOOD_PROCESSES:-4}
FLOOD_RATE=${FLOOD_RATE:-200}
SLOW=${SLOW:-2}
MAX_CONNECTIONS=${MAX_CONNECTIONS:-10000}
MAX_PER_IP=${MAX_PER_IP:-5000}
SEND_TIMEOUT_MS=${SEND_TIMEOUT_MS:-5000}
RSS_BOUND_MIB=${RSS_BOUND_MIB:-512}
BASE_PORT=${BASE_PORT:-19900}
HERE=$(dirname "$0")
# shellcheck source=lib/quorum.sh
. "$HERE/lib/quorum.sh"
work_dir /var/tmp/corum-bad-input

[ -x "$BIN" ] || { echo "no corum binary at $BIN (cargo build --release -p corum-tools)" >&2; exit 2; }
# The nodes and the flood need a descriptor per connection.
ulimit -n "$(ulimit -Hn)"

NODE_PROPERTIES="max.connections=$MAX_CONNECTIONS
max.connections.per.ip=$MAX_PER_IP
corum.connection.send.timeout.ms=$SEND_TIMEOUT_MS" start_quorum "$BIN" q kafka
BOOT=$(cat "$WORK/q.bootstrap")
LEADER=$(quorum_leader "$BIN" q)
LEADER_PID=${NODE_PIDS[$((LEADER - 1))]}
LEADER_CLIENT=127.0.0.1:$((BASE_PORT + 10 + LEADER))
LEADER_KAFKA=127.0.0.1:$((BASE_PORT + 20 + LEADER))
echo "leader: node $LEADER (pid $LEADER_PID), client $LEADER_CLIENT, Kafka $LEADER_KAFKA"

# sample_rss FILE: the leader's VmRSS (KiB) every 100 ms into FILE until killed.
sample_rss() {
    while kill -0 "$LEADER_PID" 2>/dev/null; do
        awk '/^VmRSS:/ { print $2 }' "/proc/$LEADER_PID/status" >>"$1" 2>/dev/null || true
        sleep 0.1
    done
}

# load TAG [loadgen args...]: one measured run into $WORK/TAG.json.
load() {
    local tag=$1
    shift
    "$BIN" loadgen --bootstrap "$BOOT" --workload configs --clients "$CLIENTS" \
        --connections "$CONNECTIONS" --duration "$SECONDS_PER_RUN" --raw-fsync-seconds 0 \
        --raw-quorum-writers 0 --rtt-probes 0 --no-progress --json "$@" >"$WORK/$tag.json"
}

echo "round case ops_per_sec p50_us p99_us errors leader_cpu_us/op host_busy_cores rss_max_mib flood_open flood_closed_by_node slow_closed_by_node"
for round in $(seq 1 "$ROUNDS"); do
    for case in undisturbed flood; do
        tag=$case$round
        : >"$WORK/$tag.rss"
        sample_rss "$WORK/$tag.rss" &
        sampler=$!
        PIDS+=("$sampler")
        flooders=()
        extra=()
        if [ "$case" = flood ]; then
            per=$((FLOOD / FLOOD_PROCESSES))
            for f in $(seq 1 "$FLOOD_PROCESSES"); do
                python3 "$HERE/lib/flood.py" "$per" $((SECONDS_PER_RUN + 120)) \
                    $((FLOOD_RATE / FLOOD_PROCESSES)) "$LEADER_CLIENT,$LEADER_KAFKA" 127.0.0.2 \
                    >"$WORK/$tag.flood$f" &
                flooders+=($!)
                PIDS+=($!)
            done
            # The flood is in place (every connection opened once) before the clients connect.
            for f in $(seq 1 "$FLOOD_PROCESSES"); do
                for _ in $(seq 1 600); do
                    grep -q filled "$WORK/$tag.flood$f" 2>/dev/null && break
                    sleep 0.1
                done
            done
            extra=(--slow-consumers "$SLOW" --slow-at "$LEADER_CLIENT" --slow-kafka-at "$LEADER_KAFKA")
        fi
        cpu_before=$(cpu_of "$LEADER_PID")
        host_before=$(host_busy)
        start=$(date +%s.%N)
        load "$tag" "${extra[@]}"
        [ -n "${KEEP_JSON:-}" ] && cp "$WORK/$tag.json" "$KEEP_JSON.$tag.json"
        cpu_after=$(cpu_of "$LEADER_PID")
        host_after=$(host_busy)
        end=$(date +%s.%N)
        for p in "${flooders[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
        for p in "${flooders[@]}"; do wait "$p" 2>/dev/null || true; done
        kill "$sampler" 2>/dev/null || true
        wait "$sampler" 2>/dev/null || true
        python3 - "$round" "$case" "$WORK" "$tag" "$FLOOD_PROCESSES" "$cpu_before" "$cpu_after" \
            "$host_before" "$host_after" "$start" "$end" <<'PY'
import json, sys
round_, case, work, tag, procs = sys.argv[1:6]
cpu0, cpu1, host0, host1, t0, t1 = (float(x) for x in sys.argv[6:12])
r = json.load(open(f"{work}/{tag}.json"))
rss = [int(l) for l in open(f"{work}/{tag}.rss") if l.strip()]
open_ = closed = 0
if case == "flood":
    for f in range(1, int(procs) + 1):
        for line in open(f"{work}/{tag}.flood{f}"):
            e = json.loads(line)
            if e["event"] == "end":
                open_ += e["open"]
                closed += e["closed_by_node"]
slow = (r.get("abuse") or {}).get("slow_closed_by_node", 0)
leader_us = (cpu1 - cpu0) * 1e6 / max(r["ops"], 1)
host = (host1 - host0) / max(t1 - t0, 1e-9)
print(f"{round_:>5} {case:11} {r['ops_per_sec']:>11.0f} {r['p50_us']:>6} {r['p99_us']:>6} "
      f"{r['errors']:>6} {leader_us:>16.1f} {host:>15.2f} {max(rss, default=0) // 1024:>11} "
      f"{open_:>10} {closed:>20} {slow:>19}")
PY
    done
done
HWM=$(awk '/^VmHWM:/ { print int($2 / 1024) }' "/proc/$LEADER_PID/status")
python3 - "$WORK" "$ROUNDS" "$RSS_BOUND_MIB" "$HWM" "$HERE/lib" <<'PY'
import sys
sys.path.insert(0, sys.argv[5])
import summary
work, rounds, bound, hwm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
means = summary.means(work, rounds, ("undisturbed", "flood"), "writes/s")
ratio, text = summary.ratio(means, "flood", "undisturbed")
print(f"throughput under the flood / undisturbed: {text} (target >= 0.50)")
print(f"leader peak RSS (VmHWM): {hwm} MiB, bound {bound} MiB")
sys.exit(0 if ratio >= 0.5 and hwm < bound else 1)
PY
