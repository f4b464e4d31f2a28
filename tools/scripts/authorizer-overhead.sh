#!/usr/bin/env bash
# What authorizing the private protocol costs: the configs workload against a quorum whose
# client listener requires client certificates (mutual TLS, as tls-overhead.sh's TLS case),
# with Kafka's authorizer (`authorizer.class.name`) and without, in one run on this host. With
# it, `super.users` names an admin certificate, which grants the load generator's certificate
# ALTER_CONFIGS and DESCRIBE on the cluster by ACL (not a super user: every write is a real
# decision), beside FILLER other ACLs (principals × topics, READ) so the image is not empty.
# For each round and case, a fresh static 3-voter quorum on loopback (one unpinned shard per
# node; tools/scripts/lib/quorum.sh), certificates from `corum certs`, then `corum loadgen
# --workload configs` (CLIENTS clients over CONNECTIONS connections, `--command-config`). The
# cases alternate, so drift on a shared host hits both.
#
#   tools/scripts/authorizer-overhead.sh [CORUM] [SECONDS] [ROUNDS]
#
# Environment: CLIENTS (default 256), CONNECTIONS (default 8), FILLER (default 1000, a
# multiple of 10), BASE_PORT (default 19900). Prints one line per run (throughput, latency,
# the nodes' CPU per write, refusals), then each case's mean, each round's ratio and the
# ratio of the means authorizer / none (means and ratio with one standard error,
# tools/scripts/lib/summary.py). Everything it starts stops at exit; its directory is
# removed.
set -euo pipefail

BIN=${1:-target/release/corum}
SECONDS_PER_RUN=${2:-10}
ROUNDS=${3:-3}
CLIENTS=${CLIENTS:-256}
CONNECTIONS=${CONNECTIONS:-8}
FILLER=${FILLER:-1000}
BASE_PORT=${BASE_PORT:-19900}
# A busy shared host may take longer than the default 20 s to elect over TLS.
LEADER_TRIES=${LEADER_TRIES:-600}
# shellcheck source=lib/quorum.sh
. "$(dirname "$0")/lib/quorum.sh"
work_dir /var/tmp/corum-authorizer-overhead

[ -x "$BIN" ] || { echo "no corum binary at $BIN (cargo build --release -p corum-tools)" >&2; exit 2; }

PKI=$WORK/pki
make_pki "$BIN" "$PKI" loadgen admin
ACL_PROPERTIES="$MTLS_PROPERTIES
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:CN=admin"

# The ACLs of the authorizer case, added by the admin.
grant() {
    local boot=$1 principals=() topics=()
    "$BIN" acls --bootstrap "$boot" --command-config "$WORK/admin.properties" --add \
        --allow-principal User:CN=loadgen --operation ALTER_CONFIGS --operation DESCRIBE \
        --cluster >/dev/null
    for p in $(seq 1 10); do principals+=(--allow-principal "User:CN=tenant-$p"); done
    for t in $(seq 1 $((FILLER / 10))); do topics+=(--topic "topic-$t"); done
    "$BIN" acls --bootstrap "$boot" --command-config "$WORK/admin.properties" --add \
        "${principals[@]}" --operation READ "${topics[@]}" >/dev/null
    # Every node enforces once it has replayed them.
    sleep 1
}

# Requests the nodes refused (corum_rpc_authorization_refused_total, all 3).
refused() {
    python3 - "$BASE_PORT" <<'EOF'
import re, sys, urllib.request
base = int(sys.argv[1])
total = 0
for i in (1, 2, 3):
    text = urllib.request.urlopen(f"http://127.0.0.1:{base + 30 + i}/metrics", timeout=5).read().decode()
    m = re.search(r'^corum_rpc_authorization_refused_total (\S+)$', text, re.M)
    total += float(m.group(1)) if m else 0
print(int(total))
EOF
}

echo "round case       ops_per_sec p50_us p99_us node_cpu_us/op errors refused"
for round in $(seq 1 "$ROUNDS"); do
    for case in none authorizer; do
        tag=$case$round
        if [ "$case" = authorizer ]; then
            NODE_PROPERTIES=$ACL_PROPERTIES DESCRIBE_ARGS="--command-config $WORK/admin.properties" \
                start_quorum "$BIN" "$tag"
            grant "$(cat "$WORK/$tag.bootstrap")"
        else
            NODE_PROPERTIES=$MTLS_PROPERTIES DESCRIBE_ARGS="--command-config $WORK/admin.properties" \
                start_quorum "$BIN" "$tag"
        fi
        before=$(cpu_of "${NODE_PIDS[@]}")
        "$BIN" loadgen --bootstrap "$(cat "$WORK/$tag.bootstrap")" --workload configs \
            --clients "$CLIENTS" --connections "$CONNECTIONS" --duration "$SECONDS_PER_RUN" \
            --raw-fsync-seconds 0 --raw-quorum-writers 0 --rtt-probes 0 --no-progress \
            --command-config "$WORK/loadgen.properties" --json >"$WORK/$tag.json"
        after=$(cpu_of "${NODE_PIDS[@]}")
        refusals=$(refused)
        python3 - "$round" "$case" "$WORK/$tag.json" "$before" "$after" "$refusals" <<'PY'
import json, sys
r = json.load(open(sys.argv[3]))
ops = max(r["ops"], 1)
node_us = (float(sys.argv[5]) - float(sys.argv[4])) * 1e6 / ops
print(f"{sys.argv[1]:>5} {sys.argv[2]:10} {r['ops_per_sec']:>11.0f} {r['p50_us']:>6} "
      f"{r['p99_us']:>6} {node_us:>14.1f} {r['errors']:>6} {sys.argv[6]:>7}")
PY
        stop_quorum
    done
done
python3 - "$WORK" "$ROUNDS" "$(dirname "$0")/lib" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[3])
import summary
work, rounds = sys.argv[1], int(sys.argv[2])
means = summary.means(work, rounds, ("none", "authorizer"), "writes/s")
for r in range(1, rounds + 1):
    n = json.load(open(f"{work}/none{r}.json"))["ops_per_sec"]
    a = json.load(open(f"{work}/authorizer{r}.json"))["ops_per_sec"]
    print(f"round {r}: authorizer / none {a / n:.2f}")
print(f"ratio authorizer / none: {summary.ratio(means, 'authorizer', 'none')[1]}")
PY
