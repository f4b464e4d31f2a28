# Shared by the comparison scripts (sourced, not run): a static 3-voter quorum on loopback,
# one unpinned shard per node, under $WORK (made by `work_dir`), with ports from $BASE_PORT.
# Every process it starts is stopped, and $WORK removed, when the script exits.

PIDS=()

# work_dir PREFIX: creates $WORK (PREFIX.XXXXXX) and arranges for the cleanup at exit.
work_dir() {
    WORK=$(mktemp -d "$1.XXXXXX")
    trap cleanup EXIT INT TERM
}

cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "${WORK:?}"
}

# stat_sum "I J ..." SCALE PID...: fields I, J, ... of /proc/PID/stat (counted from 0 after the
# command's name: 7 minor faults, 11 user and 12 system ticks) summed over the pids, divided by
# SCALE (`ticks`: the clock's ticks per second).
stat_sum() {
    python3 - "$@" <<'EOF'
import os, sys
fields = [int(f) for f in sys.argv[1].split()]
scale = os.sysconf("SC_CLK_TCK") if sys.argv[2] == "ticks" else int(sys.argv[2])
total = 0
for pid in sys.argv[3:]:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read().rsplit(")", 1)[1].split()
    total += sum(int(stat[i]) for i in fields)
print(total / scale if scale != 1 else total)
EOF
}

# CPU seconds (user + system) of the given pids.
cpu_of() {
    stat_sum "11 12" ticks "$@"
}

# Minor page faults of the given pids (summed): first touches of memory the process was
# given (fresh heap pages, mappings).
faults_of() {
    stat_sum 7 1 "$@"
}

# CPU seconds the whole host spent busy (every CPU: user, nice, system, irq, softirq, steal),
# from /proc/stat: with cpu_of, what else ran during a measurement.
host_busy() {
    python3 - <<'EOF'
import os
tick = os.sysconf("SC_CLK_TCK")
f = open("/proc/stat").readline().split()
user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in f[1:9])
print((user + nice + system + irq + softirq + steal) / tick)
EOF
}

# disk_irq_cpu: the CPU that has served most of the block devices' completion interrupts
# (virtio-blk, NVMe, SCSI/ATA queues in /proc/interrupts), or nothing when none is found. A
# process pinned away from it still has its fsyncs completed there, so work pinned onto that
# CPU delays the other's disk rounds.
disk_irq_cpu() {
    python3 - <<'EOF'
import re
lines = open("/proc/interrupts").read().splitlines()
cpus = len(lines[0].split())
totals = [0] * cpus
for line in lines[1:]:
    fields = line.split()
    if not re.search(r"virtio\d+-req|nvme\d+q|ahci|ata_piix|mpt|megasas|xen-blkfront", line):
        continue
    for i, v in enumerate(fields[1:cpus + 1]):
        if v.isdigit():
            totals[i] += int(v)
if any(totals):
    print(max(range(cpus), key=lambda i: totals[i]))
EOF
}

# start_quorum BIN TAG [kafka]: starts the quorum with BIN, waits for a leader (asking with
# $DESCRIBE_BIN, default BIN), sets NODE_PIDS, writes the client listeners to
# $WORK/TAG.bootstrap, the cluster id to $WORK/TAG.cluster_id and, with `kafka`, a Kafka
# listener per node to $WORK/TAG.kafka. Each node serves Prometheus metrics on
# 127.0.0.1:$((BASE_PORT + 30 + i)) (`kafka_requests`). NODE_PROPERTIES (lines of
# key=value) is added to every node's configuration, `{id}` in it replaced by the node's id;
# DESCRIBE_ARGS is added to the `quorum describe` that waits for the leader (e.g.
# `--command-config FILE` when the client listeners are SSL). It asks LEADER_TRIES times
# (default 200), 0.1 s apart.
start_quorum() {
    local bin=$1 tag=$2 kafka=${3:-} cid voters="" boot="" kafka_listeners=""
    local props=${NODE_PROPERTIES:-}
    cid=$("$bin" random-uuid)
    for i in 1 2 3; do
        voters+="${voters:+,}$i@127.0.0.1:$((BASE_PORT + i))"
        boot+="${boot:+,}127.0.0.1:$((BASE_PORT + 10 + i))"
        kafka_listeners+="${kafka_listeners:+,}127.0.0.1:$((BASE_PORT + 20 + i))"
    done
    NODE_PIDS=()
    QUORUM_DIR=$WORK/$tag
    for i in 1 2 3; do
        local dir=$WORK/$tag/node$i listeners
        listeners="CONTROLLER://127.0.0.1:$((BASE_PORT + i)),CLIENT://127.0.0.1:$((BASE_PORT + 10 + i))"
        if [ -n "$kafka" ]; then
            listeners+=",KAFKA://127.0.0.1:$((BASE_PORT + 20 + i))"
        fi
        mkdir -p "$dir"
        cat >"$WORK/$tag/node$i.properties" <<EOF
node.id=$i
process.roles=controller
listeners=$listeners
controller.listener.names=CONTROLLER
controller.quorum.voters=$voters
metadata.log.dir=$dir/data
corum.cores=0
corum.no.pin=true
corum.metrics.listener=127.0.0.1:$((BASE_PORT + 30 + i))
${props//\{id\}/$i}
EOF
        "$bin" format --config "$WORK/$tag/node$i.properties" --cluster-id "$cid" >/dev/null
        RUST_LOG=warn "$bin" run --config "$WORK/$tag/node$i.properties" >"$WORK/$tag/node$i.log" 2>&1 &
        NODE_PIDS+=($!)
        PIDS+=($!)
    done
    echo "$boot" >"$WORK/$tag.bootstrap"
    echo "$cid" >"$WORK/$tag.cluster_id"
    if [ -n "$kafka" ]; then
        echo "$kafka_listeners" >"$WORK/$tag.kafka"
    fi
    for _ in $(seq 1 "${LEADER_TRIES:-200}"); do
        if "${DESCRIBE_BIN:-$bin}" quorum describe --bootstrap "$boot" --status ${DESCRIBE_ARGS:-} 2>/dev/null | grep -qi "leader"; then
            return 0
        fi
        sleep 0.1
    done
    echo "no leader for $tag" >&2
    exit 1
}

# quorum_leader BIN TAG: the node id (1-3) of the leader of the quorum started as TAG.
quorum_leader() {
    "$1" quorum describe --bootstrap "$(cat "$WORK/$2.bootstrap")" --status --json \
        | python3 -c 'import json, sys; print(json.load(sys.stdin)["leader_id"])'
}

# node_metric I NAME: node I's (1-3) metric NAME, summed over its label sets (0 when absent).
# curl and awk: quick enough to count within a window of a second or two.
node_metric() {
    curl -sf --max-time 5 "http://127.0.0.1:$((BASE_PORT + 30 + $1))/metrics" \
        | awk -v n="$2" '$1 == n || index($1, n "{") == 1 {s += $2} END {printf "%d\n", s}'
}

# kafka_requests API: the quorum's nodes' Kafka requests of API (e.g. Fetch) served so far.
kafka_requests() {
    python3 - "$1" "$BASE_PORT" <<'EOF'
import re, sys, urllib.request
api, base = sys.argv[1], int(sys.argv[2])
total = 0
for i in (1, 2, 3):
    text = urllib.request.urlopen(f"http://127.0.0.1:{base + 30 + i}/metrics", timeout=5).read().decode()
    for m in re.finditer(r'^corum_kafka_requests_total\{[^}]*api="' + re.escape(api) + r'"\} (\S+)$', text, re.M):
        total += float(m.group(1))
print(int(total))
EOF
}

# stop_quorum: stops the nodes of the last start_quorum and removes their data directories
# (each node preallocates a 1 GiB segment: a dozen rounds would fill the disk); their logs stay
# until the script exits.
stop_quorum() {
    for p in "${NODE_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${NODE_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "${QUORUM_DIR:?}"/node*/data
}

# make_pki BIN DIR CLIENT...: a CA, certificates for controllers 1-3 (on 127.0.0.1) and for
# each CLIENT in DIR, and $WORK/CLIENT.properties (`--command-config` over mutual TLS) for
# each; sets MTLS_PROPERTIES, the nodes' properties for mutual TLS on the controller and
# client listeners (for NODE_PROPERTIES).
make_pki() {
    local bin=$1 pki=$2 who
    shift 2
    "$bin" certs ca --dir "$pki" >/dev/null
    for who in 1 2 3; do
        "$bin" certs issue --dir "$pki" --common-name "controller-$who" --san 127.0.0.1 >/dev/null
    done
    for who in "$@"; do
        "$bin" certs issue --dir "$pki" --common-name "$who" >/dev/null
        printf '%s\n' "security.protocol=SSL" "ssl.truststore.location=$pki/ca.pem" \
            "ssl.keystore.location=$pki/$who.pem" >"$WORK/$who.properties"
    done
    MTLS_PROPERTIES="listener.security.protocol.map=CONTROLLER:SSL,CLIENT:SSL
ssl.keystore.location=$pki/controller-{id}.pem
ssl.truststore.location=$pki/ca.pem
listener.name.client.ssl.client.auth=required"
}
