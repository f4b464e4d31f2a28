#!/usr/bin/env bash
# What TLS costs: the configs workload against a quorum with TLS on the controller listener
# (mutual TLS between the controllers) and on the client listener (client certificates
# required), against the same quorum in PLAINTEXT, in one run on this host. For each round and
# case, a fresh static 3-voter quorum on loopback (one unpinned shard per node;
# tools/scripts/lib/quorum.sh), certificates from `corum certs`, then `corum loadgen --workload
# configs` (CLIENTS clients over CONNECTIONS connections; with TLS, `--command-config` names
# the client's truststore and keystore). The order of the cases alternates from round to round
# (use an even number of rounds), so drift on a shared host hits both.
#
#   tools/scripts/tls-overhead.sh [CORUM] [SECONDS] [ROUNDS]
#
# Environment: CLIENTS (default 256), CONNECTIONS (default 8), BASE_PORT (default 19800).
# Prints one line per run (throughput, latency, the nodes' CPU per write), then each case's
# mean, each round's ratio and the ratio of the means TLS / plaintext (means and
# ratio with one standard error, tools/scripts/lib/summary.py). Everything it starts
# stops at exit; its directory is removed.
set -euo pipefail

BIN=${1:-target/release/corum}
SECONDS_PER_RUN=${2:-10}
ROUNDS=${3:-3}
CLIENTS=${CLIENTS:-256}
CONNECTIONS=${CONNECTIONS:-8}
BASE_PORT=${BASE_PORT:-19800}
# shellcheck source=lib/quorum.sh
. "$(dirname "$0")/lib/quorum.sh"
work_dir /var/tmp/corum-tls-overhead

[ -x "$BIN" ] || { echo "no corum binary at $BIN (cargo build --release -p corum-tools)" >&2; exit 2; }

PKI=$WORK/pki
make_pki "$BIN" "$PKI" loadgen

echo "round case ops_per_sec p50_us p99_us node_cpu_us/op errors"
for round in $(seq 1 "$ROUNDS"); do
    # The order alternates from round to round, so drift within a round hits both cases.
    order="plaintext tls"
    [ $((round % 2)) -eq 0 ] && order="tls plaintext"
    for case in $order; do
        tag=$case$round
        extra=()
        if [ "$case" = tls ]; then
            NODE_PROPERTIES=$MTLS_PROPERTIES DESCRIBE_ARGS="--command-config $WORK/loadgen.properties" \
                start_quorum "$BIN" "$tag"
            extra=(--command-config "$WORK/loadgen.properties")
        else
            NODE_PROPERTIES="" DESCRIBE_ARGS="" start_quorum "$BIN" "$tag"
        fi
        before=$(cpu_of "${NODE_PIDS[@]}")
        "$BIN" loadgen --bootstrap "$(cat "$WORK/$tag.bootstrap")" --workload configs \
            --clients "$CLIENTS" --connections "$CONNECTIONS" --duration "$SECONDS_PER_RUN" \
            --raw-fsync-seconds 0 --raw-quorum-writers 0 --rtt-probes 0 --no-progress \
            "${extra[@]}" --json >"$WORK/$tag.json"
        after=$(cpu_of "${NODE_PIDS[@]}")
        python3 - "$round" "$case" "$WORK/$tag.json" "$before" "$after" <<'PY'
import json, sys
r = json.load(open(sys.argv[3]))
ops = max(r["ops"], 1)
node_us = (float(sys.argv[5]) - float(sys.argv[4])) * 1e6 / ops
print(f"{sys.argv[1]:>5} {sys.argv[2]:9} {r['ops_per_sec']:>11.0f} {r['p50_us']:>6} "
      f"{r['p99_us']:>6} {node_us:>14.1f} {r['errors']:>6}")
PY
        stop_quorum
    done
done
python3 - "$WORK" "$ROUNDS" "$(dirname "$0")/lib" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[3])
import summary
work, rounds = sys.argv[1], int(sys.argv[2])
means = summary.means(work, rounds, ("plaintext", "tls"), "writes/s")
for r in range(1, rounds + 1):
    p = json.load(open(f"{work}/plaintext{r}.json"))["ops_per_sec"]
    t = json.load(open(f"{work}/tls{r}.json"))["ops_per_sec"]
    print(f"round {r}: TLS / plaintext {t / p:.2f}")
print(f"ratio TLS / plaintext: {summary.ratio(means, 'tls', 'plaintext')[1]}")
PY
