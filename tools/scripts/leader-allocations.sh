#!/usr/bin/env bash
# Counts the leader's heap allocations per acknowledged write, by size, on this host: a static
# 3-voter quorum on loopback (one unpinned shard per node, as compare-write-path.sh starts it),
# the configs workload at CLIENTS clients over corum's protocol (PROTOCOL=kafka: topic creation,
# one partition each, over the Kafka listener, as compare-protocols.sh runs it), and a uprobe
# on glibc's malloc (`perf probe`, its size argument) attached to the leader for PROBE_SECONDS
# in the middle of the load. A uprobe traps on every call, so the load runs slower while it is
# attached; the counts per write are what the figure is for, not the throughput.
#
#   tools/scripts/leader-allocations.sh CORUM [CLIENTS] [PROBE_SECONDS]
#
# Prints the writes acknowledged while the probe was attached, then one line per size
# allocated at least a tenth of a time per write: size, allocations per write. With
# STACKS=1 it records the call stacks of allocations over 1,000 bytes (chunks of 1 KiB and
# more: glibc's large-chunk path, which first consolidates every freed small chunk) and prints
# the commonest.
# Needs root (uprobes) and perf. Everything it starts stops at exit.
set -euo pipefail

BIN=${1:?the corum binary}
CLIENTS=${2:-256}
PROBE_SECONDS=${3:-2}
BASE_PORT=${BASE_PORT:-19600}
LIBC=${LIBC:-$(ldd "$BIN" | awk '/libc\.so/ {print $3}')}
# shellcheck source=lib/quorum.sh
. "$(dirname "$0")/lib/quorum.sh"
work_dir /var/tmp/corum-allocations
command -v perf >/dev/null || { echo "perf is needed" >&2; exit 1; }
perf probe -q -d 'probe_libc:malloc' 2>/dev/null || true
perf probe -q -x "$LIBC" 'malloc bytes=%di:u64'
trap 'perf probe -q -d "probe_libc:malloc" 2>/dev/null || true; cleanup' EXIT

PROTOCOL=${PROTOCOL:-private}
if [ "$PROTOCOL" = kafka ]; then
    start_quorum "$BIN" a kafka
    workload=(--workload topics --partitions 1 --protocol kafka
        --kafka-bootstrap "$(cat "$WORK/a.kafka")")
else
    start_quorum "$BIN" a
    workload=(--workload configs)
fi
boot=$(cat "$WORK/a.bootstrap")
leader=$(quorum_leader "$BIN" a)
pid=${NODE_PIDS[$((leader - 1))]}
"$BIN" loadgen --bootstrap "$boot" "${workload[@]}" --clients "$CLIENTS" \
    --connections $(( CLIENTS < 8 ? CLIENTS : 8 )) --duration $(( PROBE_SECONDS + 6 )) --json \
    >"$WORK/loadgen.json" &
loadgen=$!
sleep 3
# The writes are counted inside perf's window (its command runs once the probe is attached).
export -f node_metric
export BASE_PORT
count="node_metric $leader corum_controller_commit_latency_seconds_count"
perf record -q -e probe_libc:malloc -o "$WORK/malloc.data" -p "$pid" -- bash -c "
    $count >'$WORK/writes.before'
    sleep $PROBE_SECONDS
    $count >'$WORK/writes.after'" >/dev/null 2>&1
writes_before=$(cat "$WORK/writes.before")
writes_after=$(cat "$WORK/writes.after")
if [ "${STACKS:-0}" = 1 ]; then
    perf record -q -e probe_libc:malloc --filter 'bytes > 1000' --call-graph dwarf,16384 \
        -o "$WORK/large.data" -p "$pid" -- sleep "$PROBE_SECONDS" >/dev/null 2>&1
fi
wait "$loadgen"
writes=$(( writes_after - writes_before ))
echo "leader: node $leader; writes acknowledged while probed: $writes"
[ "$writes" -gt 0 ] || { echo "no write acknowledged while probed" >&2; exit 1; }
perf script -i "$WORK/malloc.data" 2>/dev/null \
    | grep -o 'bytes=[0-9]*' | cut -d= -f2 | sort -n | uniq -c \
    | awk -v w="$writes" '$1 / w >= 0.1 {n += $1 / w; printf "%8d bytes  %6.2f per write\n", $2, $1 / w}
        END {printf "all sizes above: %.1f allocations per write\n", n}'
if [ "${STACKS:-0}" = 1 ]; then
    echo "allocations over 1,000 bytes, by caller:"
    perf report -i "$WORK/large.data" --no-children --stdio -G --percent-limit 5 2>/dev/null \
        | grep -E 'bytes=|corum_' | grep -v 'shard_main\|run_node' | head -40
fi
