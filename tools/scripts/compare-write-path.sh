#!/usr/bin/env bash
# Compares the write path of two corum builds in one run, on this host: for each build, a
# static 3-voter quorum on loopback (one unpinned shard per node), then the configs workload at
# 256 clients and at 1 client, driven by the same load generator (LOADGEN, default: the second
# build). Besides what loadgen reports, it reads every node's CPU time from /proc before and
# after each workload, so builds without the process_* metrics are measured the same way, and
# counts syscalls per write on the leader and a follower with strace when STRACE=1.
#
#   tools/scripts/compare-write-path.sh BEFORE_CORUM AFTER_CORUM [SECONDS] [ROUNDS]
#
# Prints one line per build, workload and round:
#   build clients ops_per_sec p50_us p99_us node_cpu_us_per_op loadgen_cpu_us_per_op
# Everything it starts stops at exit; its directory is removed.
set -euo pipefail

BEFORE=${1:?the corum binary to compare against}
AFTER=${2:?the corum binary under test}
SECONDS_PER_RUN=${3:-10}
ROUNDS=${4:-2}
LOADGEN=${LOADGEN:-$AFTER}
BASE_PORT=${BASE_PORT:-19400}
# shellcheck source=lib/quorum.sh
. "$(dirname "$0")/lib/quorum.sh"
work_dir /var/tmp/corum-compare
# The earlier build may not have `quorum describe`: ask with the load generator.
DESCRIBE_BIN=$LOADGEN

run_workload() { # TAG CLIENTS
    local tag=$1 clients=$2 boot before after json
    boot=$(cat "$WORK/$tag.bootstrap")
    before=$(cpu_of "${NODE_PIDS[@]}")
    json=$("$LOADGEN" loadgen --bootstrap "$boot" --workload configs --clients "$clients" \
        --connections $(( clients < 8 ? clients : 8 )) --duration "$SECONDS_PER_RUN" --json)
    after=$(cpu_of "${NODE_PIDS[@]}")
    python3 - "$tag" "$clients" "$before" "$after" "$json" <<'EOF'
import json, sys
tag, clients, before, after, text = sys.argv[1:]
r = json.loads(text)
ops = r["ops"] or 1
node_us = (float(after) - float(before)) * 1e6 / ops
print(f"{tag:6} {clients:>4} {r['ops_per_sec']:>10.0f} {r['p50_us']:>7} {r['p99_us']:>7} "
      f"{node_us:>9.1f} {r.get('loadgen_cpu_us_per_op', 0):>9.1f}")
EOF
}

echo "build  clients ops_per_sec p50_us p99_us node_cpu_us/op loadgen_cpu_us/op"
for round in $(seq 1 "$ROUNDS"); do
    for pair in "before:$BEFORE" "after:$AFTER"; do
        tag=${pair%%:*}
        bin=${pair#*:}
        rm -rf "${WORK:?}/$tag"
        start_quorum "$bin" "$tag"
        run_workload "$tag" 256
        run_workload "$tag" 1
        if [ "${STRACE:-0}" = 1 ] && [ "$round" = 1 ]; then
            boot=$(cat "$WORK/$tag.bootstrap")
            STRACE_PIDS=()
            for n in 0 1 2; do
                timeout 20 strace -c -f -p "${NODE_PIDS[$n]}" -o "$WORK/$tag.strace$n" &
                STRACE_PIDS+=($!)
            done
            sleep 1
            "$LOADGEN" loadgen --bootstrap "$boot" --workload configs --clients 1 --duration 5 --json \
                >"$WORK/$tag.strace.json"
            sleep 1
            pkill -INT -f "strace -c -f" || true
            for p in "${STRACE_PIDS[@]}"; do wait "$p" || true; done
            ops=$(python3 -c "import json;print(json.load(open('$WORK/$tag.strace.json'))['ops'])")
            for n in 0 1 2; do
                echo "$tag node$((n + 1)) syscalls per write (1 client, $ops writes):"
                awk -v ops="$ops" '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $4 > ops/4 {printf "  %-20s %.2f\n", $NF, $4/ops}' "$WORK/$tag.strace$n"
            done
        fi
        stop_quorum
    done
done
