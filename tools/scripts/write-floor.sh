#!/usr/bin/env bash
# How far a quorum's write at one client is from the floor the runtime sets, in one run on
# this host: per round, `corum bench floor` (three voter processes doing nothing but a
# write's three hops and three 4 KiB O_DSYNC writes, on glommio and on blocking threads),
# then a static 3-voter quorum of the same binary (one unpinned shard per node, as
# compare-write-path.sh starts it) under the configs workload at one client, its nodes' CPU
# read from /proc before and after.
#
#   tools/scripts/write-floor.sh CORUM [SECONDS] [ROUNDS]
#
# Prints one line per round: the three voters' CPU per write (µs, summed) and p50 (µs) of
# the glommio floor, the blocking-thread floor and the quorum, and the quorum's CPU over each
# floor's. Everything it starts stops at exit; its directory is removed.
set -euo pipefail

BIN=${1:?the corum binary}
SECONDS_PER_RUN=${2:-5}
ROUNDS=${3:-2}
BASE_PORT=${BASE_PORT:-19500}
# shellcheck source=lib/quorum.sh
. "$(dirname "$0")/lib/quorum.sh"
work_dir /var/tmp/corum-floor

echo "round floor_glommio_cpu floor_glommio_p50 floor_std_cpu floor_std_p50 quorum_cpu quorum_p50 quorum/glommio quorum/std"
for round in $(seq 1 "$ROUNDS"); do
    mkdir -p "$WORK/floor"
    floor=$("$BIN" bench floor --dir "$WORK/floor" --seconds "$SECONDS_PER_RUN" --json)
    rm -rf "${WORK:?}/q"
    start_quorum "$BIN" q
    boot=$(cat "$WORK/q.bootstrap")
    before=$(cpu_of "${NODE_PIDS[@]}")
    quorum=$("$BIN" loadgen --bootstrap "$boot" --workload configs --clients 1 --connections 1 \
        --duration "$SECONDS_PER_RUN" --json)
    after=$(cpu_of "${NODE_PIDS[@]}")
    stop_quorum
    python3 - "$round" "$floor" "$quorum" "$before" "$after" <<'PY'
import json, sys
round_, floor, quorum, before, after = sys.argv[1:]
runs = {r["runtime"]: r for r in json.loads(floor)["runs"]}
q = json.loads(quorum)
cpu = (float(after) - float(before)) * 1e6 / (q["ops"] or 1)
g, s = runs["glommio"], runs["std"]
print(f"{round_:>5} {g['voters_cpu_us_per_write']:>17.1f} {g['p50_us']:>17} "
      f"{s['voters_cpu_us_per_write']:>13.1f} {s['p50_us']:>13} {cpu:>10.1f} {q['p50_us']:>10} "
      f"{cpu / g['voters_cpu_us_per_write']:>14.2f} {cpu / s['voters_cpu_us_per_write']:>10.2f}")
PY
done
