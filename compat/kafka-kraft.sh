#!/usr/bin/env bash
# A real Apache Kafka cluster in KRaft mode, from the jars install.sh put in compat/jars/, on
# loopback ports in a temporary directory: the reference the compatibility sessions are proven
# against before they are pointed at corum.
#
#   kafka-kraft.sh start [--nodes 1|3] [--dir DIR] [--base-port P] [--release-version V] [--record]
#                        [--roles combined|controller] [--quorum static|dynamic] [--props k=v ...]
#   kafka-kraft.sh status|env [--dir DIR]      # nodes up; BOOTSTRAP=... CONTROLLER_BOOTSTRAP=...
#   kafka-kraft.sh leader [--dir DIR]          # node id of the active controller
#   kafka-kraft.sh failover [--dir DIR]        # SIGKILL the active controller, wait for a new one,
#                                              # restart the killed node in the background; prints
#                                              # the kill's epoch ms as at_ms=
#   kafka-kraft.sh wait-ready [--dir DIR]      # every node up, registered and unfenced
#   kafka-kraft.sh stop [--dir DIR] [--keep]   # SIGTERM (then SIGKILL after 30 s), remove DIR
#
# Every node is a combined broker+controller (process.roles=broker,controller) with a static voter
# set (controller.quorum.voters). Node i listens for clients on PLAINTEXT 127.0.0.1:(P+i-1) and for
# Raft and --bootstrap-controller on CONTROLLER 127.0.0.1:(P+100+i-1); P defaults to 19092.
# --roles controller: controller-only nodes (process.roles=controller, no PLAINTEXT listener, BOOTSTRAP
# empty) for brokers.sh to run brokers against, heap capped at 256 MB. --quorum dynamic: a KIP-853
# quorum (controller.quorum.bootstrap.servers; every node formatted with the same
# --initial-controllers id@host:port:directory-id, kraft.version 1, a VotersRecord in the bootstrap
# checkpoint) instead of the static controller.quorum.voters. --props k=v (repeatable) appends to
# every node's server.properties, e.g. the controllers' broker.session.timeout.ms.
# The ports must lie below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768 up by
# default): a client that keeps reconnecting to a killed node's port on loopback can otherwise be
# given that very port as its source port and connect to itself (TCP simultaneous open), and the
# node's restart then fails with 'Address already in use'. Seen here with librdkafka.
# The storage is formatted at --release-version (default 3.9: metadata.version 21, where Kafka 4.1
# supports up to 27) so that the sessions' real `metadata.version` upgrades have somewhere to go.
# Each node's request log (kafka.request.logger at DEBUG: one JSON line per request with its API
# key, version, client id and listener) is DIR/node-i/logs/request.log; client-apis.py turns those
# logs into the table in client-apis.md. With --record each node's PLAINTEXT listener binds to
# P+30+i-1 and advertises P+i-1, where recorder.py listens and forwards, writing every request's
# header and the bytes left after its body to DIR/recorder.jsonl (clients and the brokers among
# themselves pass through it; the CONTROLLER listener does not). Not for failover runs: a client
# then sees a closed connection, not a refused one, when a node dies.
set -euo pipefail
trap 'echo "kafka-kraft.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

COMPAT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JARS="$COMPAT/jars"

cmd="${1:-}"
[ -n "$cmd" ] || { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2; }
shift

DIR="${COMPAT_KAFKA_DIR:-/tmp/corum-compat-kafka}"
NODES=1
BASE_PORT=19092
RELEASE_VERSION=3.9
KEEP=0
RECORD=0
ROLES=combined
QUORUM=static
PROPS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR="$2"; shift 2 ;;
    --nodes) NODES="$2"; shift 2 ;;
    --base-port) BASE_PORT="$2"; shift 2 ;;
    --release-version) RELEASE_VERSION="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --record) RECORD=1; shift ;;
    --roles) ROLES="$2"; shift 2 ;;
    --quorum) QUORUM="$2"; shift 2 ;;
    --props) shift; while [ $# -gt 0 ] && [[ "$1" != --* ]]; do PROPS+=("$1"); shift; done ;;
    *) echo "kafka-kraft.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

die() { echo "kafka-kraft.sh: $*" >&2; exit 1; }

# The JVM settings for the nodes and the tools: a small heap and the serial collector, so that
# three nodes and the sessions' tools fit on a 2-core machine beside other work.
JAVA_NODE_OPTS=(-Xms256m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true)
# Controller-only nodes keep a smaller heap: brokers run beside them.
JAVA_CONTROLLER_OPTS=(-Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true)
JAVA_TOOL_OPTS=(-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto)

require_jars() {
  compgen -G "$JARS/kafka_2.13-*.jar" >/dev/null \
    || die "no Kafka jars in $JARS: run compat/install.sh first"
}

# The cluster's shape is written at start so the other commands need only --dir.
load_env() {
  [ -f "$DIR/cluster.env" ] || die "no cluster in $DIR (start one with: kafka-kraft.sh start)"
  # shellcheck disable=SC1091
  . "$DIR/cluster.env"
}

broker_port() { echo $((BASE_PORT + $1 - 1)); }
# Where the PLAINTEXT listener binds: behind the recorder with --record.
broker_bind_port() { echo $((BASE_PORT + $1 - 1 + 30 * RECORD)); }
controller_port() { echo $((BASE_PORT + 100 + $1 - 1)); }

node_pid() {
  local f="$DIR/node-$1/pid"
  [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"
}

kafka_tool() {
  java "${JAVA_TOOL_OPTS[@]}" -Dlog4j2.configurationFile="$COMPAT/log4j2-tools.properties" \
    -cp "$JARS/*" "$@"
}

# A random Kafka Uuid (16 bytes, URL-safe base64 without padding; Kafka's own never starts with
# '-'), for the directory ids of a dynamic quorum's --initial-controllers.
random_uuid() {
  python3 -c 'import base64, os
while True:
    u = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
    if not u.startswith("-"):
        print(u)
        break'
}

write_configs() {
  local i voters="" boot="" cboot="" initial=""
  for i in $(seq 1 "$NODES"); do
    voters+="${voters:+,}$i@127.0.0.1:$(controller_port "$i")"
    boot+="${boot:+,}127.0.0.1:$(broker_port "$i")"
    cboot+="${cboot:+,}127.0.0.1:$(controller_port "$i")"
    [ "$QUORUM" = static ] || initial+="${initial:+,}$i@127.0.0.1:$(controller_port "$i"):$(random_uuid)"
  done
  [ "$ROLES" = combined ] || boot=""
  local quorum_line="controller.quorum.voters=$voters"
  [ "$QUORUM" = static ] || quorum_line="controller.quorum.bootstrap.servers=$cboot"
  local rf=$(( NODES >= 3 ? 3 : 1 )) min_isr=$(( NODES >= 3 ? 2 : 1 ))
  for i in $(seq 1 "$NODES"); do
    mkdir -p "$DIR/node-$i/data" "$DIR/node-$i/logs"
    if [ "$ROLES" = controller ]; then
      cat > "$DIR/node-$i/server.properties" <<EOF
process.roles=controller
node.id=$i
$quorum_line
listeners=CONTROLLER://127.0.0.1:$(controller_port "$i")
advertised.listeners=CONTROLLER://127.0.0.1:$(controller_port "$i")
listener.security.protocol.map=CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
log.dirs=$DIR/node-$i/data
num.network.threads=2
num.io.threads=2
background.threads=2
EOF
    else
      cat > "$DIR/node-$i/server.properties" <<EOF
process.roles=broker,controller
node.id=$i
$quorum_line
listeners=PLAINTEXT://127.0.0.1:$(broker_bind_port "$i"),CONTROLLER://127.0.0.1:$(controller_port "$i")
advertised.listeners=PLAINTEXT://127.0.0.1:$(broker_port "$i"),CONTROLLER://127.0.0.1:$(controller_port "$i")
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$DIR/node-$i/data
num.partitions=1
default.replication.factor=$rf
auto.create.topics.enable=false
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$min_isr
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$min_isr
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
background.threads=2
log.cleaner.threads=1
num.recovery.threads.per.data.dir=1
EOF
    fi
    [ ${#PROPS[@]} = 0 ] || printf '%s\n' "${PROPS[@]}" >> "$DIR/node-$i/server.properties"
    cat > "$DIR/node-$i/log4j2.properties" <<EOF
status = warn
appender.server.type = File
appender.server.name = server
appender.server.fileName = $DIR/node-$i/logs/server.log
appender.server.layout.type = PatternLayout
appender.server.layout.pattern = [%d] %p %m (%c)%n
appender.request.type = File
appender.request.name = request
appender.request.fileName = $DIR/node-$i/logs/request.log
appender.request.layout.type = PatternLayout
appender.request.layout.pattern = [%d] %m%n
rootLogger.level = INFO
rootLogger.appenderRef.server.ref = server
logger.request.name = kafka.request.logger
logger.request.level = DEBUG
logger.request.additivity = false
logger.request.appenderRef.request.ref = request
EOF
  done
  printf 'default.api.timeout.ms=8000\nrequest.timeout.ms=3000\n' > "$DIR/tools-fast.properties"
  cat > "$DIR/cluster.env" <<EOF
NODES=$NODES
BASE_PORT=$BASE_PORT
BOOTSTRAP=$boot
CONTROLLER_BOOTSTRAP=$cboot
RECORD=$RECORD
ROLES=$ROLES
QUORUM=$QUORUM
INITIAL_CONTROLLERS=$initial
EOF
}

start_recorder() {
  local i maps=()
  for i in $(seq 1 "$NODES"); do maps+=(--map "$(broker_port "$i")=127.0.0.1:$(broker_bind_port "$i")"); done
  [ -x "$COMPAT/.venv/bin/python" ] || die "--record needs compat/.venv (run compat/install.sh)"
  setsid "$COMPAT/.venv/bin/python" "$COMPAT/recorder.py" "${maps[@]}" --out "$DIR/recorder.jsonl" \
    >"$DIR/recorder.log" 2>&1 </dev/null &
  echo $! > "$DIR/recorder.pid"
  local deadline=$((SECONDS + 30))
  until grep -q "^recorder:" "$DIR/recorder.log" 2>/dev/null; do
    kill -0 "$(cat "$DIR/recorder.pid")" 2>/dev/null || die "recorder.py exited: $(cat "$DIR/recorder.log")"
    [ $SECONDS -lt $deadline ] || die "recorder.py did not start within 30 s"
    sleep 0.2
  done
}

start_node() {
  local i="$1" d="$DIR/node-$1"
  # setsid: the node is its own process group, so a SIGINT to the shell that started it does not
  # reach it and `stop` signals exactly this pid.
  local opts=("${JAVA_NODE_OPTS[@]}")
  [ "${ROLES:-combined}" = combined ] || opts=("${JAVA_CONTROLLER_OPTS[@]}")
  setsid java "${opts[@]}" -Dlog4j2.configurationFile="$d/log4j2.properties" \
    -cp "$JARS/*" kafka.Kafka "$d/server.properties" >"$d/logs/stdout.log" 2>&1 </dev/null &
  echo $! > "$d/pid"
}

# A node is up when its log says the server started; bounded by a deadline.
wait_node_started() {
  local i="$1" deadline=$((SECONDS + ${2:-120}))
  while ! grep -q "Kafka Server started" "$DIR/node-$i/logs/server.log" 2>/dev/null; do
    [ -n "$(node_pid "$i")" ] || die "node $i exited during start-up; see $DIR/node-$i/logs/{stdout,server}.log"
    [ $SECONDS -lt $deadline ] || die "node $i did not start within ${2:-120} s; see $DIR/node-$i/logs/server.log"
    sleep 0.5
  done
}

# Prints the active controller's node id, or nothing when there is none (no quorum, or the
# nodes asked are down). Asks the controllers directly (KIP-919), as a person would.
# Short timeouts: right after a kill the admin client may first be sent to the dead node.
leader_id() {
  { kafka_tool org.apache.kafka.tools.MetadataQuorumCommand \
      --command-config "$DIR/tools-fast.properties" \
      --bootstrap-controller "$CONTROLLER_BOOTSTRAP" describe --status 2>/dev/null || true; } \
    | awk -F'[: \t]+' '/^LeaderId/ {print $2}'
}

# Every node started and, as a broker, registered and unfenced: DescribeCluster through the
# brokers lists exactly the live, unfenced brokers.
wait_ready() {
  local deadline=$((SECONDS + ${1:-120})) n i
  # A restarted node's old registration stays unfenced until its session times out, so first wait
  # for every node's own process to say it started.
  for i in $(seq 1 "$NODES"); do wait_node_started "$i" "${1:-120}"; done
  if [ "${ROLES:-combined}" = controller ]; then
    # No brokers here: ready when the quorum has elected a leader.
    until [ -n "$(leader_id)" ]; do
      [ $SECONDS -lt $deadline ] || die "no active controller within ${1:-120} s"
      sleep 1
    done
    return 0
  fi
  while :; do
    n=$({ kafka_tool org.apache.kafka.tools.ClusterTool list-endpoints \
            --config "$DIR/tools-fast.properties" --bootstrap-server "$BOOTSTRAP" 2>/dev/null || true; } \
          | awk 'NR>1 && $5=="unfenced" && $6=="broker"' | wc -l)
    [ "$n" = "$NODES" ] && [ -n "$(leader_id)" ] && return 0
    [ $SECONDS -lt $deadline ] || die "cluster not ready within ${1:-120} s ($n of $NODES brokers unfenced)"
    sleep 1
  done
}

case "$cmd" in
  start)
    require_jars
    case "$NODES" in 1|3) ;; *) die "--nodes must be 1 or 3" ;; esac
    case "$ROLES" in combined|controller) ;; *) die "--roles must be combined or controller" ;; esac
    case "$QUORUM" in static|dynamic) ;; *) die "--quorum must be static or dynamic" ;; esac
    ephemeral_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    [ $((BASE_PORT + 200)) -lt "$ephemeral_low" ] \
      || die "--base-port $BASE_PORT: ports up to $((BASE_PORT + 200)) reach the ephemeral range (from $ephemeral_low)"
    command -v java >/dev/null || die "java not found (install a JDK 17 or newer)"
    if [ -f "$DIR/cluster.env" ]; then
      # In a subshell: the old cluster's shape must not replace this start's arguments.
      ( load_env
        for i in $(seq 1 "$NODES"); do
          [ -z "$(node_pid "$i")" ] || die "a cluster is already running in $DIR (kafka-kraft.sh stop --dir $DIR)"
        done ) || exit 1
      rm -rf "$DIR"
    fi
    mkdir -p "$DIR"
    write_configs
    [ "$RECORD" = 0 ] || start_recorder
    cid=$(kafka_tool kafka.tools.StorageTool random-uuid)
    quorum_args=()
    [ "$QUORUM" = static ] || quorum_args=(--initial-controllers "$(. "$DIR/cluster.env"; echo "$INITIAL_CONTROLLERS")")
    for i in $(seq 1 "$NODES"); do
      kafka_tool kafka.tools.StorageTool format --cluster-id "$cid" "${quorum_args[@]}" \
        --config "$DIR/node-$i/server.properties" --release-version "$RELEASE_VERSION" \
        >"$DIR/node-$i/logs/format.log" 2>&1 \
        || die "format of node $i failed: $(cat "$DIR/node-$i/logs/format.log")"
      start_node "$i"
    done
    load_env
    for i in $(seq 1 "$NODES"); do wait_node_started "$i"; done
    wait_ready 120
    echo "CLUSTER_ID=$cid" >> "$DIR/cluster.env"
    cat "$DIR/cluster.env"
    ;;
  env)
    load_env; cat "$DIR/cluster.env" ;;
  status)
    load_env
    for i in $(seq 1 "$NODES"); do
      p=$(node_pid "$i" || true)
      if [ -n "$p" ]; then echo "node $i: up (pid $p)"; else echo "node $i: down"; fi
    done
    echo "leader: $(leader_id)"
    ;;
  leader)
    load_env; l=$(leader_id); [ -n "$l" ] || die "no active controller"; echo "$l" ;;
  wait-ready)
    load_env; wait_ready 120 ;;
  failover)
    load_env
    [ "$NODES" -ge 3 ] || die "failover needs a 3-node cluster (start --nodes 3)"
    [ "${RECORD:-0}" = 0 ] || die "failover on a --record cluster: clients would not see the node die"
    old=$(leader_id); [ -n "$old" ] || die "no active controller to kill"
    pid=$(node_pid "$old") || die "leader $old has no live process"
    at=$(date +%s%3N)
    kill -KILL "$pid"
    # Wait for the old process to be gone, then for another node to be elected.
    deadline=$((SECONDS + 60))
    while kill -0 "$pid" 2>/dev/null; do [ $SECONDS -lt $deadline ] || die "node $old survived SIGKILL"; sleep 0.1; done
    while :; do
      new=$(leader_id)
      [ -n "$new" ] && [ "$new" != "$old" ] && break
      [ $SECONDS -lt $deadline ] || die "no new leader within 60 s after killing node $old"
      sleep 0.5
    done
    echo "killed leader $old (pid $pid) at_ms=$at; new leader $new; restarting node $old"
    mv "$DIR/node-$old/logs/server.log" "$DIR/node-$old/logs/server.log.before-kill"
    start_node "$old"
    ;;
  stop)
    [ -f "$DIR/cluster.env" ] || { echo "kafka-kraft.sh: nothing to stop in $DIR"; exit 0; }
    load_env
    pids=()
    for i in $(seq 1 "$NODES"); do
      p=$(node_pid "$i" || true)
      [ -n "$p" ] && { kill -TERM "$p"; pids+=("$p"); }
    done
    deadline=$((SECONDS + 30))
    for p in "${pids[@]}"; do
      while kill -0 "$p" 2>/dev/null; do
        if [ $SECONDS -ge $deadline ]; then kill -KILL "$p" 2>/dev/null || true; fi
        sleep 0.2
      done
    done
    if [ -f "$DIR/recorder.pid" ] && kill -0 "$(cat "$DIR/recorder.pid")" 2>/dev/null; then
      kill -TERM "$(cat "$DIR/recorder.pid")"
    fi
    echo "stopped ${#pids[@]} node(s)"
    if [ "$KEEP" = 0 ]; then rm -rf "$DIR"; else echo "kept $DIR"; fi
    ;;
  *) die "unknown command '$cmd' (start|stop|status|env|leader|failover|wait-ready)" ;;
esac
