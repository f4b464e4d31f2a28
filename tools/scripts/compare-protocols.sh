#!/usr/bin/env bash
# Topic creation through the Kafka listener against the same through corum's own protocol, in
# one run on this host: for each round and protocol, a fresh static 3-voter quorum on loopback
# (one unpinned shard per node, a Kafka listener on each), then `corum loadgen --workload
# topics` (1 partition, replication factor 3, CLIENTS concurrent clients over CONNECTIONS
# connections: over Kafka's protocol, CreateTopics v7 pipelined to the active controller's
# Kafka listener). Each run gets its own quorum, so neither protocol runs on a log the other
# filled. The order alternates from round to round (private first in odd rounds, Kafka first in
# even ones), so drift on a shared host within a round hits both protocols alike; use an even
# number of rounds.
#
#   tools/scripts/compare-protocols.sh [CORUM] [SECONDS] [ROUNDS]
#
# Environment: CLIENTS (default 64), CONNECTIONS (default 4), BASE_PORT (default 19500);
# PERF_DIR=DIR keeps a perf profile of the leader per run (DIR/<protocol><round>.data: 999 Hz,
# call graphs, 6 s from 3 s into the load; PERF_ARGS replaces "-F 999 -g").
# Prints one line per run, then each protocol's mean and the ratio kafka / private,
# each with one standard error (tools/scripts/lib/summary.py).
# Everything it starts stops at exit; its directory is removed.
set -euo pipefail

BIN=${1:-target/release/corum}
SECONDS_PER_RUN=${2:-10}
ROUNDS=${3:-3}
CLIENTS=${CLIENTS:-64}
CONNECTIONS=${CONNECTIONS:-4}
BASE_PORT=${BASE_PORT:-19500}
# shellcheck source=lib/quorum.sh
. "$(dirname "$0")/lib/quorum.sh"
work_dir /var/tmp/corum-protocols

[ -x "$BIN" ] || { echo "no corum binary at $BIN (cargo build --release -p corum-tools)" >&2; exit 2; }

echo "round protocol ops_per_sec p50_us p99_us node_cpu_us/op leader_cpu_us/op loadgen_cpu_us/op errors"
for round in $(seq 1 "$ROUNDS"); do
    order="private kafka"
    [ $((round % 2)) -eq 0 ] && order="kafka private"
    for protocol in $order; do
        tag=$protocol$round
        start_quorum "$BIN" "$tag" kafka
        leader=$(quorum_leader "$BIN" "$tag")
        leader_pid=${NODE_PIDS[$((leader - 1))]}
        before=$(cpu_of "${NODE_PIDS[@]}")
        leader_before=$(cpu_of "$leader_pid")
        if [ -n "${PERF_DIR:-}" ]; then
            mkdir -p "$PERF_DIR"
            (sleep 3; perf record ${PERF_ARGS:--F 999 -g} -p "$leader_pid" -o "$PERF_DIR/$tag.data" -- sleep 6 >/dev/null 2>&1) &
        fi
        "$BIN" loadgen --bootstrap "$(cat "$WORK/$tag.bootstrap")" \
            --kafka-bootstrap "$(cat "$WORK/$tag.kafka")" --protocol "$protocol" \
            --workload topics --partitions 1 --clients "$CLIENTS" --connections "$CONNECTIONS" \
            --duration "$SECONDS_PER_RUN" --raw-fsync-seconds 0 --raw-quorum-writers 0 \
            --rtt-probes 0 --no-progress --json >"$WORK/$tag.json"
        after=$(cpu_of "${NODE_PIDS[@]}")
        leader_after=$(cpu_of "$leader_pid")
        python3 - "$round" "$protocol" "$WORK/$tag.json" "$before" "$after" "$leader_before" "$leader_after" <<'EOF'
import json, sys
r = json.load(open(sys.argv[3]))
# The nodes' CPU over the whole run (brokers registering included) per acknowledged topic, and
# the active controller's own share of it.
ops = max(r["ops"], 1)
node_us = (float(sys.argv[5]) - float(sys.argv[4])) * 1e6 / ops
leader_us = (float(sys.argv[7]) - float(sys.argv[6])) * 1e6 / ops
kinds = "".join(f" {k}: {n}" for k, n in r["error_kinds"].items())
print(f"{sys.argv[1]:>5} {sys.argv[2]:8} {r['ops_per_sec']:>11.0f} {r['p50_us']:>6} "
      f"{r['p99_us']:>6} {node_us:>14.1f} {leader_us:>16.1f} "
      f"{r.get('loadgen_cpu_us_per_op', 0):>17.1f} {r['errors']:>6}{kinds}")
EOF
        stop_quorum
    done
done
python3 - "$WORK" "$ROUNDS" "$(dirname "$0")/lib" <<'EOF'
import sys
sys.path.insert(0, sys.argv[3])
import summary
means = summary.means(sys.argv[1], int(sys.argv[2]), ("private", "kafka"), "topics/s")
print(f"ratio kafka / private: {summary.ratio(means, 'kafka', 'private')[1]}")
EOF
