#!/usr/bin/env bash
# What serving real Kafka brokers costs the controllers: the configs workload against a quorum
# with 3 Apache Kafka brokers following its metadata log, against the same without brokers, in
# one run on this host. For each round and case, a fresh static 3-voter quorum on loopback (one
# unpinned shard per node, a Kafka listener on each; tools/scripts/lib/quorum.sh); with brokers,
# compat/brokers.sh starts brokers 4, 5 and 6 on the Kafka listeners and waits until they are
# registered and unfenced; then `corum loadgen --workload configs` (CLIENTS clients over
# CONNECTIONS connections, broker configs `log.retention.ms` over 1,000 resources, corum's own
# protocol). The order of the cases alternates from round to round (use an even number of
# rounds), so drift on a shared host hits both.
#
#   tools/scripts/brokers-overhead.sh [CORUM] [SECONDS] [ROUNDS]
#
# Environment: CLIENTS (default 256), CONNECTIONS (default 8), BASE_PORT (default 19600),
# BROKER_BASE_PORT (default 19700). Needs compat/install.sh (Java, Kafka's jars).
# CONTROLLER_CPUS and BROKER_CPUS (taskset lists, e.g. 0 and 1): pin the corum nodes and the load
# generator to the first, the brokers' JVMs to the second, so that on a small host the brokers'
# own work (replaying every record) does not take the controllers' CPU — as on separate hosts.
# Unset: nothing pinned. Give the controllers the CPU that serves the disk's completion
# interrupts (the script prints it, from /proc/interrupts): on separate hosts a controller's
# fsyncs complete on its own host, while brokers pinned to that CPU delay every disk round of
# the controllers (on this VM, vCPU 1 takes them all: CONTROLLER_CPUS=1 BROKER_CPUS=0).
# BUSY=1 adds a control case, `busy`: no brokers, but the brokers' CPUs (BROKER_CPUS, else one
# unpinned loop) kept busy by a spin loop. On a VM whose virtual CPUs share physical cores, a
# busy neighbour CPU slows the controllers' own: `busy` against `with` is what serving the
# brokers costs the controllers, apart from the host's neighbour effect.
# BROKERS_ROOT=DIR puts the brokers' directories (their logs and metadata log) under DIR instead
# of the run's directory, e.g. on a tmpfs to take their writes off the controllers' disk.
# PERF_DIR=DIR keeps a perf profile of the leader per case (DIR/<case><round>.data); PERF_ARGS
# replaces perf's options ("-F 999 -g"; e.g. "-F 499 --call-graph dwarf,16384").
# Prints one line per run — throughput, latency, the nodes' CPU per write (all three, then the
# leader's and a follower's mean), the brokers' CPU per
# write, the brokers' metadata fetches per second the nodes answered (their metrics), and the
# host's other CPU use (cores busy beyond the nodes and brokers: the load generator, the
# kernel's share, and anything else running: a figure above ~0.5 means the run was disturbed)
# — then the leader's writes per proposal and per sync round of its log, its minor page faults
# (first touches of fresh memory) per write and per second, the batches its Kafka listener
# rendered for the brokers (afresh, and from its cache), and its mean time per
# stage of a write (`corum loadgen --metrics`), then each
# case's mean and the ratio with / without, each with one standard error from its rounds'
# spread (tools/scripts/lib/summary.py).
# Everything it starts stops at exit; its directory is removed.
set -euo pipefail

BIN=${1:-target/release/corum}
SECONDS_PER_RUN=${2:-10}
ROUNDS=${3:-3}
CLIENTS=${CLIENTS:-256}
CONNECTIONS=${CONNECTIONS:-8}
BASE_PORT=${BASE_PORT:-19600}
BROKER_BASE_PORT=${BROKER_BASE_PORT:-19700}
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=lib/quorum.sh
. "$(dirname "$0")/lib/quorum.sh"
work_dir /var/tmp/corum-brokers-overhead
BROKERS_DIR=""
stop_brokers() {
    if [ -n "$BROKERS_DIR" ]; then
        "$ROOT/compat/brokers.sh" stop --dir "$BROKERS_DIR" >/dev/null 2>&1 || true
        BROKERS_DIR=""
    fi
}
SPIN=""
stop_spin() {
    if [ -n "$SPIN" ]; then kill "$SPIN" 2>/dev/null || true; wait "$SPIN" 2>/dev/null || true; SPIN=""; fi
}
trap 'stop_brokers; stop_spin; cleanup' EXIT INT TERM

[ -x "$BIN" ] || { echo "no corum binary at $BIN (cargo build --release -p corum-tools)" >&2; exit 2; }
compgen -G "$ROOT/compat/jars/kafka_2.13-*.jar" >/dev/null \
    || { echo "no Kafka jars in compat/jars: run compat/install.sh" >&2; exit 2; }

# The brokers' JVMs (children of the brokers.sh that started them), by their directories.
broker_pids() {
    pgrep -f "kafka.Kafka $BROKERS_DIR/" || true
}

# The leader's counters: proposals, sync rounds of its log, minor page faults, and the batches
# its Kafka listener rendered for the brokers' fetches afresh and from its cache of renderings.
leader_counters() {
    local rendered='corum_kafka_rendered_batches_total{listener="KAFKA",source='
    echo "$(node_metric "$1" corum_controller_proposals_total),$(node_metric "$1" corum_raft_sync_rounds_total),$(faults_of "${NODE_PIDS[$(($1 - 1))]}"),$(node_metric "$1" "${rendered}\"afresh\"}"),$(node_metric "$1" "${rendered}\"cache\"}")"
}

irq_cpu=$(disk_irq_cpu)
if [ -n "$irq_cpu" ]; then
    echo "# the disk's completion interrupts are served on CPU $irq_cpu"
    if [ -n "${BROKER_CPUS:-}" ] && taskset -c "$BROKER_CPUS" true 2>/dev/null \
        && python3 -c 'import sys; from itertools import chain
cpus = set(chain.from_iterable(range(int(a), int(b or a) + 1) for a, _, b in (p.partition("-") for p in sys.argv[1].split(","))))
sys.exit(0 if int(sys.argv[2]) in cpus else 1)' "$BROKER_CPUS" "$irq_cpu"; then
        echo "# warning: BROKER_CPUS ($BROKER_CPUS) holds that CPU: the brokers delay the controllers' fsyncs" >&2
    fi
fi
echo "round case ops_per_sec p50_us p99_us node_cpu_us/op leader/followers broker_cpu_us/op fetches/s other_cores errors"
CASES=(without with)
[ "${BUSY:-0}" = 1 ] && CASES+=(busy)
for round in $(seq 1 "$ROUNDS"); do
    # The order turns from round to round, so drift within a round hits every case.
    n=${#CASES[@]}
    order=()
    for i in $(seq 0 $((n - 1))); do order+=("${CASES[$(((i + round - 1) % n))]}"); done
    [ $((round % 2)) -eq 0 ] && [ "$n" -eq 2 ] && order=(with without)
    for case in "${order[@]}"; do
        tag=$case$round
        start_quorum "$BIN" "$tag" kafka
        if [ -n "${CONTROLLER_CPUS:-}" ]; then
            for p in "${NODE_PIDS[@]}"; do taskset -a -pc "$CONTROLLER_CPUS" "$p" >/dev/null; done
        fi
        # A static quorum: the brokers name each controller's Kafka listener.
        kafka_voters="1@127.0.0.1:$((BASE_PORT + 21)),2@127.0.0.1:$((BASE_PORT + 22)),3@127.0.0.1:$((BASE_PORT + 23))"
        bpids=()
        if [ "$case" = with ]; then
            BROKERS_DIR=${BROKERS_ROOT:-$WORK}/$tag/brokers
            "$ROOT/compat/brokers.sh" start --dir "$BROKERS_DIR" \
                --bootstrap-controllers "$(cat "$WORK/$tag.kafka")" \
                --quorum-voters "$kafka_voters" --controller-listener KAFKA \
                --cluster-id "$(cat "$WORK/$tag.cluster_id")" --ids 4,5,6 \
                --base-port "$BROKER_BASE_PORT" --timeout 180 >"$WORK/$tag/brokers.out" 2>&1 \
                || { cat "$WORK/$tag/brokers.out" >&2; exit 1; }
            mapfile -t bpids < <(broker_pids)
            [ "${#bpids[@]}" -eq 3 ] || { echo "expected 3 broker JVMs, found ${#bpids[@]}" >&2; exit 1; }
            if [ -n "${BROKER_CPUS:-}" ]; then
                for p in "${bpids[@]}"; do taskset -a -pc "$BROKER_CPUS" "$p" >/dev/null; done
            fi
        elif [ "$case" = busy ]; then
            # The neighbour's CPU is counted where the brokers' would be.
            spin=()
            [ -z "${BROKER_CPUS:-}" ] || spin=(taskset -c "$BROKER_CPUS")
            "${spin[@]}" bash -c 'while :; do :; done' &
            SPIN=$!
            bpids=("$SPIN")
        fi
        fetches_before=$(kafka_requests Fetch)
        t0=$(date +%s.%N)
        host0=$(host_busy)
        before=$(cpu_of "${NODE_PIDS[@]}")
        # Each node's own, to split the leader's CPU from the followers'.
        each_before=$(for p in "${NODE_PIDS[@]}"; do cpu_of "$p"; done | paste -sd,)
        leader=$(quorum_leader "$BIN" "$tag")
        # The leader's batching (proposals, one batch each, and its log's sync rounds) and
        # its page faults.
        leader_before=$(leader_counters "$leader")
        if [ -n "${PERF_DIR:-}" ]; then
            # PERF_DIR: a profile of the leader (perf record, 6 s from 3 s into the load).
            mkdir -p "$PERF_DIR"
            (sleep 3; perf record ${PERF_ARGS:--F 999 -g} -p "${NODE_PIDS[$((leader - 1))]}" -o "$PERF_DIR/$tag.data" -- sleep 6 >/dev/null 2>&1) &
        fi
        bbefore=0
        [ "${#bpids[@]}" -eq 0 ] || bbefore=$(cpu_of "${bpids[@]}")
        pin=()
        [ -z "${CONTROLLER_CPUS:-}" ] || pin=(taskset -c "$CONTROLLER_CPUS")
        "${pin[@]}" "$BIN" loadgen --bootstrap "$(cat "$WORK/$tag.bootstrap")" --workload configs \
            --clients "$CLIENTS" --connections "$CONNECTIONS" --duration "$SECONDS_PER_RUN" \
            --raw-fsync-seconds 0 --raw-quorum-writers 0 --rtt-probes 0 --no-progress \
            --metrics "127.0.0.1:$((BASE_PORT + 31)),127.0.0.1:$((BASE_PORT + 32)),127.0.0.1:$((BASE_PORT + 33))" \
            --json >"$WORK/$tag.json"
        after=$(cpu_of "${NODE_PIDS[@]}")
        leader_after=$(leader_counters "$leader")
        each_after=$(for p in "${NODE_PIDS[@]}"; do cpu_of "$p"; done | paste -sd,)
        host1=$(host_busy)
        fetches=$(($(kafka_requests Fetch) - fetches_before))
        t1=$(date +%s.%N)
        bafter=0
        [ "${#bpids[@]}" -eq 0 ] || bafter=$(cpu_of "${bpids[@]}")
        python3 - "$round" "$case" "$WORK/$tag.json" "$before" "$after" "$bbefore" "$bafter" \
            "$fetches" "$t0" "$t1" "$host0" "$host1" "$each_before" "$each_after" "$leader" \
            "$leader_before" "$leader_after" <<'PY'
import json, sys
r = json.load(open(sys.argv[3]))
ops = max(r["ops"], 1)
node_us = (float(sys.argv[5]) - float(sys.argv[4])) * 1e6 / ops
each = [(float(a) - float(b)) * 1e6 / ops
        for b, a in zip(sys.argv[13].split(","), sys.argv[14].split(","))]
leader = int(sys.argv[15])
followers = [u for i, u in enumerate(each, 1) if i != leader]
split = f"{each[leader - 1]:.1f}/{sum(followers) / max(len(followers), 1):.1f}"
broker_us = (float(sys.argv[7]) - float(sys.argv[6])) * 1e6 / ops
elapsed = float(sys.argv[10]) - float(sys.argv[9])
fetches = int(sys.argv[8]) / elapsed
ours = float(sys.argv[5]) - float(sys.argv[4]) + float(sys.argv[7]) - float(sys.argv[6])
other = (float(sys.argv[12]) - float(sys.argv[11]) - ours) / elapsed
print(f"{sys.argv[1]:>5} {sys.argv[2]:7} {r['ops_per_sec']:>11.0f} {r['p50_us']:>6} "
      f"{r['p99_us']:>6} {node_us:>14.1f} {split:>16} {broker_us:>16.1f} {fetches:>9.0f} {other:>11.2f} "
      f"{r['errors']:>6}")
proposals, rounds, faults, afresh, cached = (int(a) - int(b) for b, a in zip(sys.argv[16].split(","), sys.argv[17].split(",")))
rendered = f", {afresh} batches rendered for the brokers, {cached} more from its cache" if afresh + cached else ""
print(f"      leader: {r['ops'] / max(proposals, 1):.1f} writes per proposal, "
      f"{r['ops'] / max(rounds, 1):.1f} per sync round, "
      f"{faults / ops:.3f} page faults per write ({faults / elapsed:.0f}/s){rendered}")
stages = r.get("stage_mean_us")
if stages:
    print("      stages (leader, mean us): " + " ".join(f"{k}={v:.0f}" for k, v in stages.items()))
PY
        stop_brokers
        stop_spin
        stop_quorum
    done
done
python3 - "$WORK" "$ROUNDS" "$(dirname "$0")/lib" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
import summary
means = summary.means(sys.argv[1], int(sys.argv[2]), ("without", "with", "busy"), "writes/s")
print(f"ratio with / without brokers: {summary.ratio(means, 'with', 'without')[1]}")
if "busy" in means:
    print(f"ratio with brokers / without brokers beside a busy neighbour CPU: {summary.ratio(means, 'with', 'busy')[1]}")
PY
