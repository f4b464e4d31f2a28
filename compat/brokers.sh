#!/usr/bin/env bash
# Real Apache Kafka brokers (process.roles=broker, from the jars install.sh put in compat/jars/,
# or another version's: --kafka-jars) against any KRaft controller quorum given by address: Kafka's own controllers
# (kafka-kraft.sh --roles controller) or corum's. Each broker is its own JVM with its own
# directory and logs, on loopback.
#
#   brokers.sh start --bootstrap-controllers H:P[,H:P...] --controller-listener NAME --cluster-id ID
#                    [--quorum-voters ID@H:P[,...]] --ids 4,5,6 [--base-port P] [--dir DIR] [--session-timeout-ms MS]
#                    [--heartbeat-interval-ms MS] [--release-version V] [--kafka-jars DIR] [--timeout S]
#                    [--props k=v ...]
#   brokers.sh wait-unfenced [--timeout S]     # every running broker registered and unfenced
#   brokers.sh kill ID                         # SIGKILL; prints at_ms=
#   brokers.sh term ID [--timeout S]           # SIGTERM, wait for the exit, print how long it took
#   brokers.sh restart ID [--timeout S]        # (SIGTERM if running,) start again, wait until started
#   brokers.sh status | env | logs             # up/down per broker; the cluster's shape; log paths
#   brokers.sh traffic [--topic T] [--messages N] [--partitions 6] [--replication-factor 3]
#                      [--rate R] [--size B] [--timeout S] [--drain-timeout-s S] [--name NAME]
#                      [--allow-unacked] [--no-create]
#                      [--start | --wait | --progress | --wait-acked N]
#   brokers.sh monitor --start [--topics T,...] [--interval-ms MS] | --stop | --last
#                      | --wait EXPR [--after EPOCH_MS] [--timeout S]
#                      | --always EXPR --after EPOCH_MS [--until EPOCH_MS]
#   brokers.sh stop [--keep]                   # SIGTERM every broker (SIGKILL after 30 s), remove DIR
# Every command takes --dir DIR (default $COMPAT_BROKERS_DIR or /tmp/corum-compat-brokers).
#
# start formats each broker's log dir with Kafka's StorageTool (kafka-storage format) and the
# given cluster id. A broker-only format in Kafka 4.1 needs nothing else: no --release-version (a
# broker takes metadata.version from the quorum's log; the bootstrap.checkpoint that format writes
# anyway, at 4.1-IV1 unless --release-version says otherwise, is read by controllers only) and none
# of --standalone/--initial-controllers/--no-initial-controllers (those are for controllers).
# Broker i of --ids (counting from 0) listens on PLAINTEXT 127.0.0.1:(P+i), P defaulting to 19392.
# It finds the quorum through controller.quorum.bootstrap.servers (KIP-853). That works only
# against a quorum whose log holds a voter set (a dynamic one, kraft.version 1): a broker's
# channels to the active controller (registration, heartbeats, AlterPartition, forwarding) look
# the Raft leader's id up in the voter set to find its address, and a static quorum
# (controller.quorum.voters, kraft.version 0) writes none, so such a broker follows the metadata
# log but never registers. Against a static quorum give --quorum-voters (controller.quorum.voters,
# the controllers' own value) instead. Each broker logs to DIR/broker-ID/logs/server.log (a
# restart moves the old one to server.log.N); start waits for every broker's "Kafka Server
# started", which a broker logs only once the controller has unfenced it. Ports stay below the
# ephemeral range (see kafka-kraft.sh for why).
# --session-timeout-ms sets broker.session.timeout.ms in the brokers' properties, but the value
# that fences a broker is the controllers' (set it there too); --heartbeat-interval-ms is the
# brokers' own broker.heartbeat.interval.ms. --props k=v (repeatable) appends to every broker's
# server.properties, later keys winning.
# --kafka-jars DIR (default $KAFKA_JARS, else compat/jars) runs the brokers, and their format,
# from another Kafka version's jars (a directory of a kafka_2.13 release and its runtime
# dependencies with an SLF4J binding to log4j2, as broker-versions.sh fetches them); it is
# remembered in DIR/brokers.env for restart. Everything else brokers.sh runs (kafka-topics,
# kafka-cluster, the traffic and monitor programs) stays on compat/jars (4.1.2): the brokers'
# version is the one under test, the clients' is held fixed.
# BROKER_LOG_LEVELS=LOGGER=LEVEL[,...] (environment, at start; restart keeps the files) sets some
# of the brokers' loggers, e.g. org.apache.kafka.clients.NetworkClient=DEBUG logs the API
# versions each broker recorded for each controller and broker it connected to ("API versions:
# ... [usable: N]"), and every request it sent. A log line ends with its logger and, in brackets,
# its thread: Kafka 4.3 and newer no longer name the controller channel in their channels'
# messages ("Recorded new KRaft controller ..."), and the thread (e.g.
# broker-4-to-controller-heartbeat-channel-manager) tells them apart.
#
# wait-unfenced uses Kafka's own `kafka-cluster list-endpoints --include-fenced-brokers` (the
# Admin's DescribeCluster v2 with IncludeFencedBrokers, KIP-1073) against the brokers, after every
# running broker logged "Kafka Server started" in its current log (a restarted broker's previous
# registration stays unfenced until its session times out).
#
# traffic creates the topic with `kafka-topics --create` through the brokers (min.insync.replicas
# 2 when the replication factor is 3 or more), then runs
# BrokerTraffic (brokers/java): an idempotent acks=all producer sends N numbered messages while a
# consumer group reads them; it prints one JSON line (sent, acked, consumed, unique, duplicates,
# missing, ...; see BrokerTraffic.java) and exits non-zero unless every acknowledged message was
# consumed exactly once. --start runs it in the background (files DIR/traffic/NAME.*), --progress
# prints its last progress line, --wait-acked N returns once N messages are acknowledged (to kill
# something mid-run), --wait waits for the result; --drain-timeout-s (default 120) is how long
# the consumer may go on reading after the last send before what it lacks counts as missing.
# monitor runs BrokerMonitor (brokers/java) in
# the background: a JSON line in DIR/monitor.jsonl whenever the brokers' view changes (fenced and
# unfenced brokers, leaders and ISR membership per broker over --topics); --wait EXPR prints the
# epoch ms of the first state at or after --after where the Python expression EXPR holds (names:
# fenced(id), unfenced(id), leaders(id), isr(id), partitions, offline; see brokers/monitor_wait.py),
# --always checks EXPR held throughout a window, --last prints the newest state.
#
# Every wait is bounded; a failing step exits non-zero with a message and the paths of the logs,
# which are kept (only a successful `stop` without --keep removes DIR).
set -euo pipefail
trap 'echo "brokers.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

COMPAT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JARS="$COMPAT/jars"
CLASSES="$COMPAT/build/brokers"

cmd="${1:-}"
[ -n "$cmd" ] && [ "$cmd" != -h ] && [ "$cmd" != --help ] \
  || { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2; }
shift

DIR="${COMPAT_BROKERS_DIR:-/tmp/corum-compat-brokers}"
BROKER_LOG_LEVELS="${BROKER_LOG_LEVELS:-}"
BC="" QV="" CL="" CID="" IDS_ARG="" BASE_PORT_ARG=19392 SESSION_MS=9000 HEARTBEAT_MS=2000 RELEASE=""
TIMEOUT="" KEEP=0 PROPS=() POS=() BROKER_JARS_ARG="${KAFKA_JARS:-}"
T_TOPIC="" T_MESSAGES=100000 T_PARTITIONS=6 T_RF=3 T_RATE=0 T_SIZE=100 T_NAME=traffic T_MODE=run
T_ALLOW=0 T_CREATE=1 T_DRAIN=120 T_ACKED=0 M_MODE="" M_TOPICS="" M_INTERVAL=100 M_EXPR="" M_AFTER=0 M_UNTIL=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR="$2"; shift 2 ;;
    --bootstrap-controllers) BC="$2"; shift 2 ;;
    --quorum-voters) QV="$2"; shift 2 ;;
    --controller-listener) CL="$2"; shift 2 ;;
    --cluster-id) CID="$2"; shift 2 ;;
    --ids) IDS_ARG="$2"; shift 2 ;;
    --base-port) BASE_PORT_ARG="$2"; shift 2 ;;
    --session-timeout-ms) SESSION_MS="$2"; shift 2 ;;
    --heartbeat-interval-ms) HEARTBEAT_MS="$2"; shift 2 ;;
    --release-version) RELEASE="$2"; shift 2 ;;
    --kafka-jars) BROKER_JARS_ARG="$2"; shift 2 ;;
    --timeout) TIMEOUT="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --props) shift; while [ $# -gt 0 ] && [[ "$1" != --* ]]; do PROPS+=("$1"); shift; done ;;
    --topic) T_TOPIC="$2"; shift 2 ;;
    --messages) T_MESSAGES="$2"; shift 2 ;;
    --partitions) T_PARTITIONS="$2"; shift 2 ;;
    --replication-factor) T_RF="$2"; shift 2 ;;
    --rate) T_RATE="$2"; shift 2 ;;
    --size) T_SIZE="$2"; shift 2 ;;
    --name) T_NAME="$2"; shift 2 ;;
    --allow-unacked) T_ALLOW=1; shift ;;
    --drain-timeout-s) T_DRAIN="$2"; shift 2 ;;
    --no-create) T_CREATE=0; shift ;;
    --progress) T_MODE=progress; shift ;;
    --wait-acked) T_MODE=wait-acked; T_ACKED="$2"; shift 2 ;;
    --start) T_MODE=start; M_MODE=start; shift ;;
    --stop) M_MODE=stop; shift ;;
    --wait) T_MODE=wait; M_MODE=wait; [ "$cmd" = monitor ] && { M_EXPR="$2"; shift; }; shift ;;
    --always) M_MODE=always; M_EXPR="$2"; shift 2 ;;
    --last) M_MODE=last; shift ;;
    --until) M_UNTIL="$2"; shift 2 ;;
    --topics) M_TOPICS="$2"; shift 2 ;;
    --interval-ms) M_INTERVAL="$2"; shift 2 ;;
    --after) M_AFTER="$2"; shift 2 ;;
    --*) echo "brokers.sh: unknown argument '$1' (brokers.sh --help)" >&2; exit 2 ;;
    *) POS+=("$1"); shift ;;
  esac
done

die() { echo "brokers.sh: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }

# The brokers' JVM: heap capped (three brokers and three controllers share two cores here).
JAVA_BROKER_OPTS=(-Xms64m -Xmx${COMPAT_BROKER_HEAP:-256m} -XX:+UseSerialGC -XX:TieredStopAtLevel=1
                  -Djava.awt.headless=true)
JAVA_TOOL_OPTS=(-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto)

kafka_tool() {
  java "${JAVA_TOOL_OPTS[@]}" -Dlog4j2.configurationFile="$COMPAT/log4j2-tools.properties" \
    -cp "$JARS/*" "$@"
}
broker_program() {
  java "${JAVA_TOOL_OPTS[@]}" -Dlog4j2.configurationFile="$COMPAT/log4j2-tools.properties" \
    -cp "$CLASSES:$JARS/*" "$@"
}

require_install() {
  compgen -G "$JARS/kafka_2.13-*.jar" >/dev/null || die "no Kafka jars in $JARS: run compat/install.sh first"
  [ -z "${BROKER_JARS:-}" ] || compgen -G "$BROKER_JARS/kafka_2.13-*.jar" >/dev/null \
    || die "no kafka_2.13 jar in $BROKER_JARS (--kafka-jars / KAFKA_JARS)"
  [ -f "$CLASSES/BrokerTraffic.class" ] && [ -f "$CLASSES/BrokerMonitor.class" ] \
    || die "no compiled broker programs in $CLASSES: run compat/install.sh first"
  command -v java >/dev/null || die "java not found (install a JDK 17 or newer)"
}

load_env() {
  [ -f "$DIR/brokers.env" ] || die "no brokers in $DIR (start some with: brokers.sh start ...)"
  # shellcheck disable=SC1091
  . "$DIR/brokers.env"
  IFS=, read -r -a ID_LIST <<< "$IDS"
  # Written by start since --kafka-jars; a brokers.env without it means compat/jars.
  BROKER_JARS="${BROKER_JARS:-$JARS}"
}
# The version of the kafka_2.13 jar in a jars directory.
jars_version() {
  local j
  j=$(compgen -G "$1/kafka_2.13-*.jar" | head -n 1) || return 1
  j=${j##*/kafka_2.13-}; echo "${j%.jar}"
}

bdir() { echo "$DIR/broker-$1"; }
port_of() {
  local i
  for i in "${!ID_LIST[@]}"; do
    [ "${ID_LIST[$i]}" = "$1" ] && { echo $((BASE_PORT + i)); return 0; }
  done
  die "no broker $1 here (ids: $IDS)"
}
broker_pid() {
  local f
  f="$(bdir "$1")/pid"
  [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"
}

# The logs to look at when something failed: every broker's server.log, and its last errors.
show_logs() {
  local id f
  echo "brokers.sh: logs kept in $DIR:" >&2
  for id in "${ID_LIST[@]}"; do
    f="$(bdir "$id")/logs/server.log"
    echo "  broker $id: $f" >&2
    # Cut: a broker's request dumps run to many kilobytes a line.
    [ -f "$f" ] && grep -E '\] (ERROR|WARN) ' "$f" | tail -n 3 | cut -c1-300 | sed 's/^/      /' >&2 || true
  done
  local running
  running=$(running_ids)
  [ -z "$running" ] || echo "brokers.sh: still running: brokers $running (brokers.sh stop --dir $DIR --keep)" >&2
}
fail() { echo "brokers.sh: $*" >&2; show_logs; exit 1; }

write_broker() {
  local id="$1" port d rf min_isr
  port=$(port_of "$id")
  d=$(bdir "$id")
  rf=$(( ${#ID_LIST[@]} >= 3 ? 3 : ${#ID_LIST[@]} ))
  min_isr=$(( rf >= 3 ? 2 : 1 ))
  mkdir -p "$d/data" "$d/logs"
  cat > "$d/server.properties" <<EOF
process.roles=broker
node.id=$id
$( if [ -n "${QUORUM_VOTERS:-}" ]; then echo "controller.quorum.voters=$QUORUM_VOTERS"
   else echo "controller.quorum.bootstrap.servers=$BOOTSTRAP_CONTROLLERS"; fi )
controller.listener.names=$CONTROLLER_LISTENER
listeners=PLAINTEXT://127.0.0.1:$port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,$CONTROLLER_LISTENER:PLAINTEXT
log.dirs=$d/data
num.partitions=1
default.replication.factor=$rf
auto.create.topics.enable=false
min.insync.replicas=$min_isr
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$min_isr
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$min_isr
broker.session.timeout.ms=$SESSION_MS
broker.heartbeat.interval.ms=$HEARTBEAT_MS
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
num.replica.fetchers=1
background.threads=2
log.cleaner.threads=1
num.recovery.threads.per.data.dir=1
EOF
  [ ${#PROPS[@]} = 0 ] || printf '%s\n' "${PROPS[@]}" >> "$d/server.properties"
  cat > "$d/log4j2.properties" <<EOF
status = warn
appender.server.type = File
appender.server.name = server
appender.server.fileName = $d/logs/server.log
appender.server.layout.type = PatternLayout
appender.server.layout.pattern = [%d] %p %m (%c) [%t]%n
rootLogger.level = INFO
rootLogger.appenderRef.server.ref = server
EOF
  local spec n=0
  for spec in ${BROKER_LOG_LEVELS//,/ }; do
    n=$((n + 1))
    printf 'logger.l%d.name = %s\nlogger.l%d.level = %s\n' "$n" "${spec%%=*}" "$n" "${spec#*=}" >> "$d/log4j2.properties"
  done
}

start_broker() {
  local id="$1" d
  d=$(bdir "$id")
  # setsid: its own process group, so a SIGINT to the caller does not reach it.
  setsid java "${JAVA_BROKER_OPTS[@]}" -Dlog4j2.configurationFile="$d/log4j2.properties" \
    -cp "$BROKER_JARS/*" kafka.Kafka "$d/server.properties" >"$d/logs/stdout.log" 2>&1 </dev/null &
  echo $! > "$d/pid"
  echo "$(now_ms)" > "$d/started_at_ms"
}

# A broker logs "Kafka Server started" once it caught up with the metadata log and the
# controller unfenced it (BrokerServer's start-up waits for both).
wait_started() {
  local id="$1" deadline=$((SECONDS + $2)) d
  d=$(bdir "$id")
  while ! grep -q "Kafka Server started" "$d/logs/server.log" 2>/dev/null; do
    [ -n "$(broker_pid "$id")" ] || fail "broker $id exited during start-up; see $d/logs/{stdout,server}.log"
    [ $SECONDS -lt $deadline ] || fail "broker $id did not start (registered and unfenced) within $2 s"
    sleep 0.2
  done
}

wait_exit() {
  local pid="$1" deadline=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
}

unfenced_ids() {
  { kafka_tool org.apache.kafka.tools.ClusterTool list-endpoints --include-fenced-brokers \
      --config "$DIR/tools-fast.properties" --bootstrap-server "$BOOTSTRAP" 2>/dev/null || true; } \
    | awk 'NR>1 && $5=="unfenced" && $6=="broker" {print $1}' | sort -n | paste -sd, -
}

running_ids() {
  local id out=""
  for id in "${ID_LIST[@]}"; do [ -z "$(broker_pid "$id")" ] || out+="${out:+,}$id"; done
  echo "$out"
}

wait_unfenced() {
  local t="$1" deadline=$((SECONDS + $1)) id want got
  for id in "${ID_LIST[@]}"; do [ -z "$(broker_pid "$id")" ] || wait_started "$id" "$t"; done
  want=$(running_ids)
  [ -n "$want" ] || die "no broker is running in $DIR"
  while :; do
    got=$(unfenced_ids)
    # Every running broker unfenced (a killed one may still be listed until it is fenced).
    local all=1
    for id in ${want//,/ }; do [[ ",$got," == *",$id,"* ]] || all=0; done
    [ $all = 1 ] && { echo "brokers.sh: unfenced: $got (running: $want)"; return 0; }
    [ $SECONDS -lt $deadline ] || fail "brokers $want not all unfenced within $t s (unfenced: ${got:-none})"
    sleep 0.5
  done
}

traffic_files() { TF="$DIR/traffic/$T_NAME"; }

traffic_progress() { grep '^progress' "$TF.err" 2>/dev/null | tail -n 1 || true; }

case "$cmd" in
  start)
    BROKER_JARS=$(cd "${BROKER_JARS_ARG:-$JARS}" 2>/dev/null && pwd) \
      || die "--kafka-jars ${BROKER_JARS_ARG}: no such directory"
    require_install
    { [ -n "$BC" ] || [ -n "$QV" ]; } && [ -n "$CL" ] && [ -n "$CID" ] && [ -n "$IDS_ARG" ] \
      || die "start needs --bootstrap-controllers (or --quorum-voters), --controller-listener, --cluster-id and --ids"
    IFS=, read -r -a ID_LIST <<< "$IDS_ARG"
    ephemeral_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    [ $((BASE_PORT_ARG + ${#ID_LIST[@]})) -lt "$ephemeral_low" ] \
      || die "--base-port $BASE_PORT_ARG reaches the ephemeral port range (from $ephemeral_low)"
    if [ -f "$DIR/brokers.env" ]; then
      ( load_env
        for id in "${ID_LIST[@]}"; do
          [ -z "$(broker_pid "$id")" ] || die "brokers are already running in $DIR (brokers.sh stop --dir $DIR)"
        done ) || exit 1
      rm -rf "$DIR"
    fi
    mkdir -p "$DIR/traffic"
    boot=""
    for i in "${!ID_LIST[@]}"; do boot+="${boot:+,}127.0.0.1:$((BASE_PORT_ARG + i))"; done
    cat > "$DIR/brokers.env" <<EOF
BOOTSTRAP_CONTROLLERS=$BC
QUORUM_VOTERS=$QV
CONTROLLER_LISTENER=$CL
CLUSTER_ID=$CID
IDS=$IDS_ARG
BASE_PORT=$BASE_PORT_ARG
BOOTSTRAP=$boot
BROKER_JARS=$BROKER_JARS
BROKER_VERSION=$(jars_version "$BROKER_JARS")
EOF
    printf 'default.api.timeout.ms=8000\nrequest.timeout.ms=3000\n' > "$DIR/tools-fast.properties"
    load_env
    release_args=()
    [ -z "$RELEASE" ] || release_args=(--release-version "$RELEASE")
    fpids=()
    for id in "${ID_LIST[@]}"; do
      write_broker "$id"
      # The brokers' own StorageTool: meta.properties as their version writes it.
      java "${JAVA_TOOL_OPTS[@]}" -Dlog4j2.configurationFile="$COMPAT/log4j2-tools.properties" \
        -cp "$BROKER_JARS/*" kafka.tools.StorageTool format --cluster-id "$CLUSTER_ID" "${release_args[@]}" \
        --config "$(bdir "$id")/server.properties" >"$(bdir "$id")/logs/format.log" 2>&1 &
      fpids+=($!)
    done
    for i in "${!ID_LIST[@]}"; do
      wait "${fpids[$i]}" || fail "format of broker ${ID_LIST[$i]} failed: $(cat "$(bdir "${ID_LIST[$i]}")/logs/format.log")"
    done
    for id in "${ID_LIST[@]}"; do start_broker "$id"; done
    for id in "${ID_LIST[@]}"; do wait_started "$id" "${TIMEOUT:-120}"; done
    echo "brokers.sh: started brokers $IDS (Kafka $BROKER_VERSION) in ${SECONDS} s"
    cat "$DIR/brokers.env"
    ;;
  env) load_env; cat "$DIR/brokers.env" ;;
  status)
    load_env
    for id in "${ID_LIST[@]}"; do
      p=$(broker_pid "$id" || true)
      if [ -n "$p" ]; then echo "broker $id: up (pid $p, 127.0.0.1:$(port_of "$id"))"
      else echo "broker $id: down (127.0.0.1:$(port_of "$id"))"; fi
    done
    ;;
  logs)
    load_env
    for id in "${ID_LIST[@]}"; do
      d=$(bdir "$id")
      echo "broker $id: $d/logs/server.log (stdout: $d/logs/stdout.log; earlier runs: $(ls "$d"/logs/server.log.* 2>/dev/null | tr '\n' ' '))"
    done
    [ -d "$DIR/traffic" ] && ls "$DIR"/traffic/*.out 2>/dev/null | sed 's/^/traffic: /' || true
    [ -f "$DIR/monitor.jsonl" ] && echo "monitor: $DIR/monitor.jsonl" || true
    ;;
  wait-unfenced)
    load_env; wait_unfenced "${TIMEOUT:-120}" ;;
  kill|term|restart)
    load_env
    [ ${#POS[@]} = 1 ] || die "$cmd needs one broker id"
    id="${POS[0]}"; port_of "$id" >/dev/null
    pid=$(broker_pid "$id" || true)
    case "$cmd" in
      kill)
        [ -n "$pid" ] || die "broker $id is not running"
        at=$(now_ms)
        kill -KILL "$pid"
        wait_exit "$pid" 30 || fail "broker $id (pid $pid) survived SIGKILL for 30 s"
        echo "brokers.sh: killed broker $id (pid $pid) at_ms=$at"
        ;;
      term)
        [ -n "$pid" ] || die "broker $id is not running"
        at=$(now_ms)
        kill -TERM "$pid"
        wait_exit "$pid" "${TIMEOUT:-120}" || fail "broker $id (pid $pid) did not exit within ${TIMEOUT:-120} s of SIGTERM"
        end=$(now_ms)
        echo "brokers.sh: broker $id (pid $pid) exited $((end - at)) ms after SIGTERM term_at_ms=$at exit_at_ms=$end"
        ;;
      restart)
        if [ -n "$pid" ]; then
          kill -TERM "$pid"
          wait_exit "$pid" "${TIMEOUT:-120}" || fail "broker $id (pid $pid) did not exit within ${TIMEOUT:-120} s of SIGTERM"
        fi
        d=$(bdir "$id")
        n=1; while [ -e "$d/logs/server.log.$n" ]; do n=$((n + 1)); done
        [ ! -e "$d/logs/server.log" ] || mv "$d/logs/server.log" "$d/logs/server.log.$n"
        [ ! -e "$d/logs/stdout.log" ] || mv "$d/logs/stdout.log" "$d/logs/stdout.log.$n"
        start_broker "$id"
        at=$(cat "$d/started_at_ms")
        wait_started "$id" "${TIMEOUT:-120}"
        echo "brokers.sh: restarted broker $id (pid $(cat "$d/pid")) at_ms=$at; started (unfenced) after $(( $(now_ms) - at )) ms"
        ;;
    esac
    ;;
  traffic)
    load_env
    require_install
    traffic_files
    case "$T_MODE" in
      progress) traffic_progress; exit 0 ;;
      wait-acked)
        deadline=$((SECONDS + ${TIMEOUT:-300}))
        while :; do
          line=$(traffic_progress)
          acked=$(sed -n 's/.* acked=\([0-9]*\).*/\1/p' <<< "$line")
          [ "${acked:-0}" -ge "$T_ACKED" ] && { echo "$line"; exit 0; }
          [ ! -f "$TF.rc" ] || die "traffic $T_NAME ended before $T_ACKED acknowledged messages: $(cat "$TF.out")"
          [ $SECONDS -lt $deadline ] || fail "traffic $T_NAME: fewer than $T_ACKED acknowledged within ${TIMEOUT:-300} s (${line:-no progress})"
          sleep 0.1
        done
        ;;
      wait)
        [ -f "$TF.pid" ] || die "no traffic $T_NAME started in $DIR"
        deadline=$((SECONDS + ${TIMEOUT:-600}))
        while [ ! -f "$TF.rc" ]; do
          [ $SECONDS -lt $deadline ] || fail "traffic $T_NAME still running after ${TIMEOUT:-600} s: $(traffic_progress)"
          kill -0 "$(cat "$TF.pid")" 2>/dev/null || [ -f "$TF.rc" ] || fail "traffic $T_NAME died without a result; see $TF.err"
          sleep 0.2
        done
        cat "$TF.out"
        rc=$(cat "$TF.rc")
        [ "$rc" = 0 ] || fail "traffic $T_NAME failed (exit $rc): $(cat "$TF.out") $(grep -v '^progress' "$TF.err" | tail -n 5)"
        exit 0
        ;;
    esac
    [ -n "$T_TOPIC" ] || T_TOPIC="traffic-$(now_ms)"
    mkdir -p "$DIR/traffic"
    rm -f "$TF".*
    if [ "$T_CREATE" = 1 ]; then
      # min.insync.replicas set on the topic: a Kafka 4.1 controller with eligible leader replicas
      # writes its own min.insync.replicas as the cluster default, over the brokers' static one.
      kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" --create \
        --topic "$T_TOPIC" --partitions "$T_PARTITIONS" --replication-factor "$T_RF" \
        --config "min.insync.replicas=$(( T_RF >= 3 ? 2 : 1 ))" >"$TF.create" 2>&1 \
        || fail "kafka-topics --create $T_TOPIC failed: $(cat "$TF.create")"
    fi
    echo "$T_TOPIC" > "$TF.topic"
    allow=(); [ "$T_ALLOW" = 0 ] || allow=(--allow-unacked)
    targs=(BrokerTraffic --bootstrap "$BOOTSTRAP" --topic "$T_TOPIC" --messages "$T_MESSAGES"
           --size "$T_SIZE" --rate "$T_RATE" --timeout-s "${TIMEOUT:-300}" --drain-timeout-s "$T_DRAIN" "${allow[@]}")
    if [ "$T_MODE" = start ]; then
      # Its own process group (setsid) so that stop can end it and nothing else.
      JAVA_TOOL_OPTS_S="${JAVA_TOOL_OPTS[*]}"
      setsid bash -c 'java '"$JAVA_TOOL_OPTS_S"' -Dlog4j2.configurationFile="$0" -cp "$1" "${@:4}" >"$2.out" 2>"$2.err"; echo $? > "$2.rc.tmp"; mv "$2.rc.tmp" "$2.rc"' \
        "$COMPAT/log4j2-tools.properties" "$CLASSES:$JARS/*" "$TF" _ "${targs[@]}" </dev/null >/dev/null 2>&1 &
      echo $! > "$TF.pid"
      echo "brokers.sh: traffic $T_NAME started on topic $T_TOPIC ($T_MESSAGES messages); brokers.sh traffic --wait --name $T_NAME"
    else
      set +e
      broker_program "${targs[@]}" >"$TF.out" 2>"$TF.err"
      rc=$?
      set -e
      cat "$TF.out"
      [ "$rc" = 0 ] || fail "traffic on $T_TOPIC failed (exit $rc): $(grep -v '^progress' "$TF.err" | tail -n 5)"
    fi
    ;;
  monitor)
    load_env
    case "$M_MODE" in
      start)
        require_install
        if [ -f "$DIR/monitor.pid" ] && kill -0 "$(cat "$DIR/monitor.pid")" 2>/dev/null; then
          kill -TERM "$(cat "$DIR/monitor.pid")" || true
        fi
        rm -f "$DIR/monitor.jsonl"
        setsid java "${JAVA_TOOL_OPTS[@]}" -Dlog4j2.configurationFile="$COMPAT/log4j2-tools.properties" \
          -cp "$CLASSES:$JARS/*" BrokerMonitor --bootstrap "$BOOTSTRAP" --topics "$M_TOPICS" \
          --interval-ms "$M_INTERVAL" >"$DIR/monitor.jsonl" 2>"$DIR/monitor.err" </dev/null &
        echo $! > "$DIR/monitor.pid"
        deadline=$((SECONDS + 30))
        until grep -q '"unfenced"' "$DIR/monitor.jsonl" 2>/dev/null; do
          kill -0 "$(cat "$DIR/monitor.pid")" 2>/dev/null || die "BrokerMonitor exited: $(cat "$DIR/monitor.err")"
          [ $SECONDS -lt $deadline ] || die "BrokerMonitor saw no cluster within 30 s: $(tail -n 3 "$DIR/monitor.jsonl")"
          sleep 0.1
        done
        echo "brokers.sh: monitor writing $DIR/monitor.jsonl"
        ;;
      stop)
        if [ -f "$DIR/monitor.pid" ] && kill -0 "$(cat "$DIR/monitor.pid")" 2>/dev/null; then
          kill -TERM "$(cat "$DIR/monitor.pid")"
        fi
        rm -f "$DIR/monitor.pid"
        ;;
      wait)
        [ -f "$DIR/monitor.jsonl" ] || die "no monitor running in $DIR (brokers.sh monitor --start)"
        python3 "$COMPAT/brokers/monitor_wait.py" "$DIR/monitor.jsonl" --cond "$M_EXPR" \
          --after "$M_AFTER" --timeout "${TIMEOUT:-120}" || fail "monitor: '$M_EXPR' did not hold within ${TIMEOUT:-120} s"
        ;;
      always)
        python3 "$COMPAT/brokers/monitor_wait.py" "$DIR/monitor.jsonl" --always "$M_EXPR" \
          --after "$M_AFTER" --until "$M_UNTIL" || fail "monitor: '$M_EXPR' did not hold throughout"
        ;;
      last) python3 "$COMPAT/brokers/monitor_wait.py" "$DIR/monitor.jsonl" --last ;;
      *) die "monitor needs --start, --stop, --last, --wait EXPR or --always EXPR" ;;
    esac
    ;;
  stop)
    [ -f "$DIR/brokers.env" ] || { echo "brokers.sh: nothing to stop in $DIR"; exit 0; }
    load_env
    for f in "$DIR"/traffic/*.pid; do
      [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && kill -TERM -- "-$(cat "$f")" 2>/dev/null || true
    done
    [ ! -f "$DIR/monitor.pid" ] || kill -TERM "$(cat "$DIR/monitor.pid")" 2>/dev/null || true
    pids=()
    for id in "${ID_LIST[@]}"; do
      p=$(broker_pid "$id" || true)
      [ -n "$p" ] && { kill -TERM "$p"; pids+=("$p"); }
    done
    # A broker's controlled shutdown needs its controllers; without them it would wait long.
    for p in "${pids[@]}"; do
      wait_exit "$p" "${TIMEOUT:-30}" || { kill -KILL "$p" 2>/dev/null || true; wait_exit "$p" 10 || true; }
    done
    echo "brokers.sh: stopped ${#pids[@]} broker(s)"
    if [ "$KEEP" = 0 ]; then rm -rf "$DIR"; else echo "brokers.sh: kept $DIR"; fi
    ;;
  *) die "unknown command '$cmd' (brokers.sh --help)" ;;
esac
