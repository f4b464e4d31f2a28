#!/usr/bin/env bash
# A corum controller quorum on loopback for real Kafka brokers (brokers.sh, broker-suite.sh) to
# run against: kafka-kraft.sh's counterpart for corum.
#
#   corum-quorum.sh start [--nodes 1|3] [--dir DIR] [--base-port P] [--bin PATH] [--log FILTER]
#                         [--release-version V] [--feature NAME=LEVEL ...] [--props k=v ...]
#   corum-quorum.sh env [--dir DIR]            # CLUSTER_ID= KAFKA_VOTERS= KAFKA_BOOTSTRAP= CLIENT_BOOTSTRAP= ...
#   corum-quorum.sh status [--dir DIR]         # up/down per node, the leader
#   corum-quorum.sh leader [--dir DIR]         # node id of the active controller (the Raft leader)
#   corum-quorum.sh kill-leader [--dir DIR]    # SIGKILL it; prints id=, pid= and at_ms= (the kill's epoch ms)
#   corum-quorum.sh restart ID [--dir DIR]     # (SIGTERM if running,) start node ID, wait for its ready line
#   corum-quorum.sh failover [--dir DIR]       # kill-leader, wait for another leader, restart the
#                                              # killed node in the background; prints at_ms=
#   corum-quorum.sh wait-ready [--dir DIR]     # every node running and ready, a leader elected
#   corum-quorum.sh stop [--dir DIR] [--keep]  # SIGTERM (SIGKILL after 30 s), remove DIR
#
# start makes a cluster id (`corum random-uuid`), writes each node's properties, formats it
# (`corum format`) and runs it (`corum run`, its own process group, RUST_LOG=--log, default info),
# then waits for every node's ready line and for a leader. Node i (1-based) listens on loopback:
# CONTROLLER (Raft) P+i-1, CLIENT (corum's own protocol) P+100+i-1, KAFKA (Kafka's protocol: the
# brokers' controller listener, and admin clients) P+200+i-1, metrics P+300+i-1; P defaults to
# 19600. The quorum is static (controller.quorum.voters over the CONTROLLER ports) and each node
# runs one unpinned shard (corum.cores=0, corum.no.pin=true: several nodes share the cores here).
# --bin: the corum binary (default $CORUM_BIN, else `corum` on the PATH); it is remembered for the
# other commands. --props k=v (repeatable) appends to every node's properties (later keys win),
# e.g. broker.session.timeout.ms=9000. --release-version V (default $CORUM_RELEASE_VERSION, else
# none: corum format's default, 4.1) and --feature NAME=LEVEL (repeatable) go to `corum format`:
# the metadata.version and feature levels the cluster starts at (Kafka 4.0 brokers, for one, need
# --release-version 4.0: they support metadata.version up to 4.0-IV3 only); quorum.env keeps the
# release as RELEASE_VERSION (empty: the default).
#
# Brokers reach the quorum through the KAFKA listeners: controller.listener.names=KAFKA and
# controller.quorum.voters=$KAFKA_VOTERS (the corum node ids at their Kafka ports). A static
# quorum writes no voter set in its log (kraft.version 0), so brokers given only
# controller.quorum.bootstrap.servers could not resolve the active controller (broker-apis.md).
#
# Files in DIR (default $COMPAT_CORUM_DIR or /tmp/corum-compat-corum): quorum.env (what `env`
# prints), node-i/server.properties, node-i/data (metadata.log.dir), node-i/corum.log (the
# node's log, appended across restarts, each start marked), node-i/stdout.log (its ready line),
# node-i/pid. The ports must lie below the ephemeral range (see kafka-kraft.sh for why). Every
# wait is bounded; a failure names the node and the tail of its log.
set -euo pipefail
trap 'echo "corum-quorum.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

cmd="${1:-}"
[ -n "$cmd" ] && [ "$cmd" != -h ] && [ "$cmd" != --help ] \
  || { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2; }
shift

DIR="${COMPAT_CORUM_DIR:-/tmp/corum-compat-corum}"
NODES=3 BASE_PORT_ARG=19600 BIN_ARG="${CORUM_BIN:-}" LOG_FILTER=info KEEP=0 PROPS=() POS=()
RELEASE_ARG="${CORUM_RELEASE_VERSION:-}" FEATURES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR="$2"; shift 2 ;;
    --nodes) NODES="$2"; shift 2 ;;
    --base-port) BASE_PORT_ARG="$2"; shift 2 ;;
    --bin) BIN_ARG="$2"; shift 2 ;;
    --log) LOG_FILTER="$2"; shift 2 ;;
    --release-version) RELEASE_ARG="$2"; shift 2 ;;
    --feature) FEATURES+=("$2"); shift 2 ;;
    --keep) KEEP=1; shift ;;
    --props) shift; while [ $# -gt 0 ] && [[ "$1" != --* ]]; do PROPS+=("$1"); shift; done ;;
    --*) echo "corum-quorum.sh: unknown argument '$1' (corum-quorum.sh --help)" >&2; exit 2 ;;
    *) POS+=("$1"); shift ;;
  esac
done

die() { echo "corum-quorum.sh: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }

# How long each wait may take (seconds).
READY_TIMEOUT_S=30      # a started node prints its ready line
LEADER_TIMEOUT_S=60     # a leader is elected (at start, after a kill)
STOP_TIMEOUT_S=30       # a SIGTERMed node exits

load_env() {
  [ -f "$DIR/quorum.env" ] || die "no corum quorum in $DIR (start one with: corum-quorum.sh start)"
  # shellcheck disable=SC1091
  . "$DIR/quorum.env"
}

controller_port() { echo $((BASE_PORT + $1 - 1)); }
client_port() { echo $((BASE_PORT + 100 + $1 - 1)); }
kafka_port() { echo $((BASE_PORT + 200 + $1 - 1)); }
metrics_port() { echo $((BASE_PORT + 300 + $1 - 1)); }
ndir() { echo "$DIR/node-$1"; }

node_pid() {
  local f
  f="$(ndir "$1")/pid"
  [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"
}

log_tail() { tail -n "${2:-15}" "$(ndir "$1")/corum.log" 2>/dev/null | sed 's/^/    /' || true; }

check_id() {
  [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ] && [ "$1" -le "$NODES" ] || die "no node '$1' here (nodes 1-$NODES)"
}

# Starts node $1 in its own process group (setsid: a SIGINT to the caller does not reach it, and
# stop signals exactly this pid).
start_node() {
  local i="$1" d
  d=$(ndir "$i")
  echo "=== corum-quorum.sh: start of node $i at $(date '+%F %T.%3N') ($(now_ms))" >> "$d/corum.log"
  RUST_LOG="$LOG_FILTER" setsid "$BIN" run --config "$d/server.properties" \
    >"$d/stdout.log" 2>>"$d/corum.log" </dev/null &
  echo $! > "$d/pid"
}

# A node is ready once it printed `corum: node N ready: ...` (its listeners are bound).
wait_node_ready() {
  local i="$1" deadline=$((SECONDS + READY_TIMEOUT_S)) d
  d=$(ndir "$i")
  until grep -q "^corum: node $i ready:" "$d/stdout.log" 2>/dev/null; do
    [ -n "$(node_pid "$i")" ] || die "node $i exited during start-up; $d/corum.log ends:
$(log_tail "$i")"
    [ $SECONDS -lt $deadline ] || die "node $i printed no ready line within $READY_TIMEOUT_S s; $d/corum.log ends:
$(log_tail "$i")"
    sleep 0.1
  done
}

# The leader's id, asked over the client listeners of $1 (default every node); nothing when no
# leader answers within 2 s.
leader_id() {
  local boot="${1:-$CLIENT_BOOTSTRAP}"
  { RUST_LOG=error timeout 15 "$BIN" quorum describe --bootstrap "$boot" --status --json --timeout-ms 2000 \
      2>/dev/null || true; } \
    | python3 -c 'import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
if d.get("leader_id") is not None:
    print(d["leader_id"])'
}

wait_leader() {  # [NOT_ID] -> prints the leader's id
  local not="${1:-}" deadline=$((SECONDS + LEADER_TIMEOUT_S)) l boot="" i
  for i in $(seq 1 "$NODES"); do
    [ "$i" = "$not" ] || boot+="${boot:+,}127.0.0.1:$(client_port "$i")"
  done
  while :; do
    l=$(leader_id "$boot")
    [ -n "$l" ] && [ "$l" != "$not" ] && { echo "$l"; return 0; }
    [ $SECONDS -lt $deadline ] || die "no leader${not:+ other than $not} within $LEADER_TIMEOUT_S s"
    sleep 0.2
  done
}

wait_exit() {  # PID TIMEOUT_S
  local deadline=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
}

kill_leader() {  # prints "id pid at_ms"
  local l pid at
  l=$(leader_id); [ -n "$l" ] || die "no active controller to kill"
  pid=$(node_pid "$l") || die "leader $l has no live process here"
  at=$(now_ms)
  kill -KILL "$pid"
  wait_exit "$pid" 30 || die "node $l (pid $pid) survived SIGKILL for 30 s"
  echo "=== corum-quorum.sh: node $l SIGKILLed at $(date '+%F %T.%3N') ($at)" >> "$(ndir "$l")/corum.log"
  echo "$l $pid $at"
}

write_env() {
  local i voters="" kvoters="" kboot="" cboot="" rboot=""
  for i in $(seq 1 "$NODES"); do
    voters+="${voters:+,}$i@127.0.0.1:$(controller_port "$i")"
    kvoters+="${kvoters:+,}$i@127.0.0.1:$(kafka_port "$i")"
    kboot+="${kboot:+,}127.0.0.1:$(kafka_port "$i")"
    cboot+="${cboot:+,}127.0.0.1:$(client_port "$i")"
    rboot+="${rboot:+,}127.0.0.1:$(controller_port "$i")"
  done
  cat > "$DIR/quorum.env" <<EOF
NODES=$NODES
BASE_PORT=$BASE_PORT_ARG
BIN=$BIN
CLUSTER_ID=$1
KAFKA_LISTENER=KAFKA
KAFKA_VOTERS=$kvoters
KAFKA_BOOTSTRAP=$kboot
CLIENT_BOOTSTRAP=$cboot
CONTROLLER_VOTERS=$voters
LOG_FILTER=$LOG_FILTER
RELEASE_VERSION=$RELEASE_ARG
EOF
}

write_node() {
  local i="$1" d
  d=$(ndir "$i")
  mkdir -p "$d"
  cat > "$d/server.properties" <<EOF
node.id=$i
process.roles=controller
listeners=CONTROLLER://127.0.0.1:$(controller_port "$i"),CLIENT://127.0.0.1:$(client_port "$i"),KAFKA://127.0.0.1:$(kafka_port "$i")
controller.listener.names=CONTROLLER
controller.quorum.voters=$CONTROLLER_VOTERS
metadata.log.dir=$d/data
corum.metrics.listener=127.0.0.1:$(metrics_port "$i")
corum.cores=0
corum.no.pin=true
EOF
  [ ${#PROPS[@]} = 0 ] || printf '%s\n' "${PROPS[@]}" >> "$d/server.properties"
}

case "$cmd" in
  start)
    case "$NODES" in 1|3) ;; *) die "--nodes must be 1 or 3" ;; esac
    if [ -z "$BIN_ARG" ]; then BIN_ARG=$(command -v corum || true); fi
    [ -n "$BIN_ARG" ] || die "no corum binary: give --bin PATH or CORUM_BIN (cargo build -p corum-tools: target/debug/corum)"
    [ -x "$BIN_ARG" ] || die "--bin $BIN_ARG is not an executable"
    BIN=$(cd "$(dirname "$BIN_ARG")" && pwd)/$(basename "$BIN_ARG")
    command -v python3 >/dev/null || die "python3 not found"
    ephemeral_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    [ $((BASE_PORT_ARG + 300 + NODES)) -lt "$ephemeral_low" ] \
      || die "--base-port $BASE_PORT_ARG: ports up to $((BASE_PORT_ARG + 300 + NODES)) reach the ephemeral range (from $ephemeral_low)"
    if [ -f "$DIR/quorum.env" ]; then
      # In a subshell: the old quorum's shape must not replace this start's arguments.
      ( load_env
        for i in $(seq 1 "$NODES"); do
          [ -z "$(node_pid "$i")" ] || die "a quorum is already running in $DIR (corum-quorum.sh stop --dir $DIR)"
        done ) || exit 1
      rm -rf "$DIR"
    fi
    BASE_PORT=$BASE_PORT_ARG
    for i in $(seq 1 "$NODES"); do
      for p in $(controller_port "$i") $(client_port "$i") $(kafka_port "$i") $(metrics_port "$i"); do
        ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null \
          || die "port $p is taken (something listens on 127.0.0.1:$p): choose another --base-port"
      done
    done
    mkdir -p "$DIR"
    cid=$("$BIN" random-uuid) || die "$BIN random-uuid failed"
    write_env "$cid"
    load_env
    feature_args=()
    [ -z "$RELEASE_ARG" ] || feature_args+=(--release-version "$RELEASE_ARG")
    for f in "${FEATURES[@]}"; do feature_args+=(--feature "$f"); done
    for i in $(seq 1 "$NODES"); do
      write_node "$i"
      # `=`: a cluster id may start with '-'.
      RUST_LOG=warn "$BIN" format --config "$(ndir "$i")/server.properties" --cluster-id="$CLUSTER_ID" \
        "${feature_args[@]}" >"$(ndir "$i")/format.log" 2>&1 || die "format of node $i failed: $(cat "$(ndir "$i")/format.log")"
    done
    for i in $(seq 1 "$NODES"); do start_node "$i"; done
    for i in $(seq 1 "$NODES"); do wait_node_ready "$i"; done
    l=$(wait_leader)
    echo "corum-quorum.sh: $NODES node(s) ready in $SECONDS s, leader $l$([ -z "$RELEASE_ARG" ] || echo ", release $RELEASE_ARG")"
    cat "$DIR/quorum.env"
    ;;
  env) load_env; cat "$DIR/quorum.env" ;;
  status)
    load_env
    for i in $(seq 1 "$NODES"); do
      p=$(node_pid "$i" || true)
      if [ -n "$p" ]; then echo "node $i: up (pid $p, kafka 127.0.0.1:$(kafka_port "$i"), log $(ndir "$i")/corum.log)"
      else echo "node $i: down (log $(ndir "$i")/corum.log)"; fi
    done
    echo "leader: $(leader_id)"
    ;;
  leader)
    load_env; l=$(leader_id); [ -n "$l" ] || die "no active controller answers (status: corum-quorum.sh status --dir $DIR)"; echo "$l" ;;
  wait-ready)
    load_env
    for i in $(seq 1 "$NODES"); do
      [ -n "$(node_pid "$i")" ] || die "node $i is not running"
      wait_node_ready "$i"
    done
    echo "leader $(wait_leader)"
    ;;
  kill-leader)
    load_env
    out=$(kill_leader) || exit 1
    read -r l pid at <<< "$out"
    echo "corum-quorum.sh: killed leader $l (pid $pid) id=$l pid=$pid at_ms=$at"
    ;;
  failover)
    load_env
    [ "$NODES" -ge 3 ] || die "failover needs 3 nodes (start --nodes 3)"
    out=$(kill_leader) || exit 1
    read -r old pid at <<< "$out"
    new=$(wait_leader "$old") || exit 1
    echo "corum-quorum.sh: killed leader $old (pid $pid) at_ms=$at; new leader $new after $(( $(now_ms) - at )) ms; restarting node $old"
    start_node "$old"
    ;;
  restart)
    load_env
    [ ${#POS[@]} = 1 ] || die "restart needs one node id"
    id="${POS[0]}"; check_id "$id"
    if p=$(node_pid "$id"); then
      kill -TERM "$p"
      wait_exit "$p" "$STOP_TIMEOUT_S" || die "node $id (pid $p) did not exit within $STOP_TIMEOUT_S s of SIGTERM"
    fi
    at=$(now_ms)
    start_node "$id"
    wait_node_ready "$id"
    echo "corum-quorum.sh: restarted node $id (pid $(cat "$(ndir "$id")/pid")) at_ms=$at; ready after $(( $(now_ms) - at )) ms"
    ;;
  stop)
    [ -f "$DIR/quorum.env" ] || { echo "corum-quorum.sh: nothing to stop in $DIR"; exit 0; }
    load_env
    pids=()
    for i in $(seq 1 "$NODES"); do
      p=$(node_pid "$i" || true)
      [ -n "$p" ] && { kill -TERM "$p"; pids+=("$p"); }
    done
    for p in "${pids[@]}"; do
      wait_exit "$p" "$STOP_TIMEOUT_S" || { kill -KILL "$p" 2>/dev/null || true; wait_exit "$p" 10 || true; }
    done
    echo "corum-quorum.sh: stopped ${#pids[@]} node(s)"
    if [ "$KEEP" = 0 ]; then rm -rf "$DIR"; else echo "corum-quorum.sh: kept $DIR"; fi
    ;;
  *) die "unknown command '$cmd' (start|env|status|leader|kill-leader|restart|failover|wait-ready|stop)" ;;
esac
