#!/usr/bin/env bash
# The cost of a voter change under load (#15's target): a dynamic quorum of 3 voters and a
# fourth controller formatted with --no-initial-controllers (observing, no auto-join). Each
# round runs a verified configs load of CLIENTS clients for SECS seconds with no change
# (p99 before), then the same load while `corum quorum add-controller` adds node 4 one
# second in (p99 during, and how long the add took), then removes node 4 again (no load).
#
#   tools/scripts/voter-change-p99.sh [BIN] [ROUNDS] [SECS] [CLIENTS]
#
# Prints per round: add took, p99 before, p99 during and their ratio, and the errors the load
# saw during the change (a write in flight when the VotersRecord is appended is refused with
# NotController and retried by the client); then the means. Every
# process it starts is stopped, and its directory removed, at exit.
set -euo pipefail
BIN=${1:-target/release/corum}
ROUNDS=${2:-3}
SECS=${3:-6}
CLIENTS=${4:-64}
BASE_PORT=${BASE_PORT:-29300}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/quorum.sh
. "$here/lib/quorum.sh"
work_dir /var/tmp/corum-voter-change

cid=$("$BIN" random-uuid)
servers="" boot="" initial=""
for i in 1 2 3 4; do
    servers+="${servers:+,}127.0.0.1:$((BASE_PORT + i))"
    boot+="${boot:+,}127.0.0.1:$((BASE_PORT + 10 + i))"
done
for i in 1 2 3; do
    initial+="${initial:+,}$i@127.0.0.1:$((BASE_PORT + i)):$("$BIN" random-uuid)"
done
for i in 1 2 3 4; do
    cat >"$WORK/node$i.properties" <<CONF
node.id=$i
process.roles=controller
listeners=CONTROLLER://127.0.0.1:$((BASE_PORT + i)),CLIENT://127.0.0.1:$((BASE_PORT + 10 + i))
controller.listener.names=CONTROLLER
controller.quorum.bootstrap.servers=$servers
metadata.log.dir=$WORK/node$i
corum.cores=0
corum.no.pin=true
CONF
    if [ "$i" -le 3 ]; then
        "$BIN" format --config "$WORK/node$i.properties" --cluster-id "$cid" --initial-controllers "$initial" >/dev/null
    else
        "$BIN" format --config "$WORK/node$i.properties" --cluster-id "$cid" --no-initial-controllers >/dev/null
    fi
    RUST_LOG=warn "$BIN" run --config "$WORK/node$i.properties" >"$WORK/node$i.log" 2>&1 &
    PIDS+=($!)
done
for _ in $(seq 1 200); do
    if "$BIN" quorum describe --bootstrap "$boot" --status 2>/dev/null | grep -qi leader; then break; fi
    sleep 0.1
done
dir4=$(sed -n 's/^directory.id=//p' "$WORK/node4/meta.properties")

p99_of() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["lost"]==0, r; print(r["p99_us"])' "$1"; }
load() {
    "$BIN" loadgen --bootstrap "$boot" --workload configs --clients "$CLIENTS" --duration "$SECS" \
        --verify --raw-fsync-seconds 0 --json >"$1" 2>/dev/null
}

sum_ratio=0
sum_took=0
for r in $(seq 1 "$ROUNDS"); do
    load "$WORK/before.json"
    load "$WORK/during.json" &
    lp=$!
    sleep 1
    t0=$(date +%s%N)
    "$BIN" quorum add-controller --bootstrap "$boot" --config "$WORK/node4.properties" >/dev/null
    took_ms=$((($(date +%s%N) - t0) / 1000000))
    wait "$lp"
    before=$(p99_of "$WORK/before.json")
    during=$(p99_of "$WORK/during.json")
    ratio=$(python3 -c "print(f'{$during / $before:.2f}')")
    errors=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["errors"])' "$WORK/during.json")
    echo "round $r: add-controller took ${took_ms} ms; p99 before ${before} us, during ${during} us: ratio $ratio; errors during: $errors"
    sum_ratio=$(python3 -c "print($sum_ratio + $ratio)")
    sum_took=$((sum_took + took_ms))
    "$BIN" quorum remove-controller --bootstrap "$boot" --controller-id 4 --controller-directory-id "$dir4" >/dev/null
done
python3 -c "print(f'mean over $ROUNDS rounds: add-controller {$sum_took / $ROUNDS:.0f} ms, p99 during / before {$sum_ratio / $ROUNDS:.2f}')"
