#!/usr/bin/env bash
# Real Apache Kafka brokers (process.roles=broker, run by brokers.sh; 4.1.2 from compat/jars
# unless --kafka-jars) against a KRaft controller quorum, through broker and controller failures,
# with the data checked throughout.
#
#   broker-suite.sh --controllers kafka [--quorum dynamic|static] [common options]
#   broker-suite.sh --controllers corum --corum-bin PATH | --corum-quorum DIR [common options]
#   broker-suite.sh --controllers corum --bootstrap-controllers H:P[,...] --cluster-id ID
#                   --leader-cmd CMD --kill-leader-cmd CMD [--after-kill-cmd CMD]
#                   [--controller-listener NAME] [--direct-bootstrap H:P[,...]] [common options]
# common options: [--dir DIR] [--messages N] [--rate R] [--session-timeout-ms MS] [--keep]
#                 [--results FILE] [--fence-bound-ms MS] [--follow-bound-ms MS] [--keep-going]
#                 [--broker-base-port P] [--corum-base-port P] [--kafka-jars DIR] [--release-version V]
#
# The controller side is pluggable. With --controllers kafka the suite runs three Kafka
# controller-only nodes itself (kafka-kraft.sh --roles controller, formatted at release 4.1) and
# stops them at the end. The quorum is dynamic (KIP-853, kraft.version 1) unless --quorum static:
# the brokers find it through controller.quorum.bootstrap.servers, and a broker configured that
# way learns where the active controller is only from the voter set in the metadata log, which a
# static quorum does not write (it follows the log but never registers); with --quorum static the
# brokers get controller.quorum.voters instead. With any other value the
# caller runs the quorum and says how to reach and fail it (each option may also come from the
# environment variable named in brackets):
#   --bootstrap-controllers  [SUITE_BOOTSTRAP_CONTROLLERS]  the controllers' listeners
#   --quorum-voters          [SUITE_QUORUM_VOTERS]          a static quorum's controller.quorum.voters:
#                            the brokers then use it instead of the bootstrap servers (a broker
#                            with bootstrap servers only finds the active controller of a quorum
#                            whose log holds a voter set, KIP-853; see brokers.sh)
#   --controller-listener    [SUITE_CONTROLLER_LISTENER]    their listener's name (CONTROLLER)
#   --cluster-id             [SUITE_CLUSTER_ID]             the quorum's cluster id
#   --leader-cmd             [SUITE_LEADER_CMD]             prints the active controller's node id
#   --kill-leader-cmd        [SUITE_KILL_LEADER_CMD]        SIGKILLs the active controller and
#                            returns once another one is active (it may restart the killed one
#                            in the background); "at_ms=EPOCH_MS" in its output is taken as the
#                            moment of the kill, else the moment before it was run
# Each command runs through bash -c, bounded by 120 s.
#   --after-kill-cmd         [SUITE_AFTER_KILL_CMD]         optional: run after the controller
#                            kill's checks (e.g. wait until the killed controller is back)
#   --direct-bootstrap       [SUITE_DIRECT_BOOTSTRAP]       optional: controllers that serve
#                            Kafka's admin protocol themselves (corum's Kafka listeners): step 2
#                            then also creates a topic with kafka-topics --bootstrap-server there
# corum's quorum from corum-quorum.sh fills all of these in: --corum-bin PATH [CORUM_BIN] starts
# one (3 nodes, in DIR/controllers, broker.session.timeout.ms from --session-timeout-ms) and stops
# it at the end; --corum-quorum DIR uses one already running there (its caller stops it). The
# brokers then reach the quorum through its Kafka listeners (controller.listener.names=KAFKA,
# controller.quorum.voters=KAFKA_VOTERS: the quorum is static), the controller kill is
# corum-quorum.sh failover, and --direct-bootstrap is its KAFKA_BOOTSTRAP.
# --kafka-jars DIR [KAFKA_JARS] runs the brokers from another Kafka version's jars (brokers.sh
# --kafka-jars; broker-versions.sh fetches them); the tools, the traffic and the monitor stay on
# compat/jars. --release-version V [SUITE_RELEASE_VERSION] is the release the controllers are
# formatted at (kafka-kraft.sh --release-version, default 4.1; corum-quorum.sh --release-version,
# default corum's, 4.1; with --corum-quorum DIR the quorum's own RELEASE_VERSION); step 6 checks
# that the brokers report that release's metadata.version as finalized (4.1-IV1 by default, any
# V-IVn for a release V, V itself for a level such as 4.0-IV3).
# The controllers' broker.session.timeout.ms decides when a silent broker is fenced: the suite
# starts Kafka's with --session-timeout-ms (default 9000, Kafka's default); a caller's quorum
# should use the same. Kafka's controllers also get min.insync.replicas=2: a 4.1 controller with
# eligible leader replicas writes its own min.insync.replicas as the cluster-wide default, which
# overrides the brokers' static value (the suite's topics set it themselves anyway).
# Bounds: a SIGKILLed broker must be fenced within --fence-bound-ms of the kill (default the
# session timeout + 1000); with --follow-bound-ms, every broker must follow the new metadata
# leader within that long of the controller kill (no bound by default: reported only).
# --keep-going: a failed check (a wait that ran out, a bound exceeded, a traffic phase that lost
# or duplicated messages) is reported as a FAIL line and the scenario goes on where it can (a
# broker that did not start or a controller side that is gone still stops it); the suite then
# exits 1 listing every failed check. Without it the first failure stops the suite.
#
# Scenario (brokers 4, 5, 6 on 127.0.0.1:P..P+2, P from --broker-base-port, default 19392; a
# corum quorum the suite starts takes corum-quorum.sh's ports from --corum-base-port, default
# 19600; each step bounded, the first failure (unless --keep-going) stops the suite, keeps every
# log and prints where they are):
#   1. the controllers; the brokers start, register and are unfenced (kafka-cluster list-endpoints)
#   2. with --direct-bootstrap: kafka-topics --create (3 partitions, RF 3) on the controllers
#      directly; the brokers must then lead it with every replica in sync, and 1,000 messages go
#      through it. Traffic A: kafka-topics --create (6 partitions, RF 3, min.insync.replicas 2)
#      through a broker, then --messages (default 100,000) through an idempotent acks=all
#      producer at --rate (default 10,000/s) and a consumer group; at 30% acknowledged broker 5
#      is SIGKILLed: kill -> fenced, kill -> no partition led by it (leaders moved), kill -> out
#      of every ISR. Eligible leader replicas (KIP-966): topic suite-elr (3 partitions, RF 3,
#      min.insync.replicas 3, no traffic) is created before the kill; once broker 5 is fenced
#      kafka-topics --describe through a broker (and on the controllers directly, with
#      --direct-bootstrap) must show "Elr: 5" on every partition (the ISR fell below its min ISR
#      with broker 5 leaving cleanly), or none where the release has eligible leader replicas off
#      (before 4.1)
#   3. broker 5 restarts: restart -> unfenced, restart -> back in every ISR; traffic A must have
#      consumed every acknowledged message exactly once; suite-elr shows no eligible leader
#      replica (broker 5, killed, registers again as an unclean shutdown and is back in the ISR)
#   4. the broker leading most partitions gets SIGTERM: its leaders must move before it exits
#      (controlled shutdown); term -> leaders moved, term -> exit; it restarts
#   5. traffic B, and at 30% the active controller is SIGKILLed: kill -> every broker's metadata
#      log follows the new leader (its KafkaRaftClient logs "Completed transition to
#      FollowerState(... leader=N"), kill -> every broker's heartbeats go to the new controller
#      ("Recorded new KRaft controller ... (id: N"; a broker that does not log it must stay unfenced
#      for the session timeout + 5 s); no broker is fenced meanwhile; traffic B checked
#   6. kafka-metadata-quorum --bootstrap-server describe --status and kafka-features
#      --bootstrap-server describe, both through the brokers
# The brokers' view (fenced/unfenced, leaders, ISRs) is polled every 100 ms by BrokerMonitor
# (brokers.sh monitor), so the timings are good to about 0.1-0.2 s. The end prints one TIMING
# line per measurement and a RESULT line of JSON (appended to --results FILE too).
set -euo pipefail

COMPAT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CONTROLLERS="" QUORUM=dynamic DIR="" MESSAGES=100000 RATE=10000 SESSION_MS=9000 KEEP=0 RESULTS=""
FENCE_BOUND_MS="" FOLLOW_BOUND_MS="" BROKER_PORT=19392 CORUM_PORT=19600 KEEP_GOING=0 CORUM_BIN="${CORUM_BIN:-}" CORUM_QUORUM=""
DIRECT="${SUITE_DIRECT_BOOTSTRAP:-}" KAFKA_JARS_ARG="${KAFKA_JARS:-}" RELEASE="${SUITE_RELEASE_VERSION:-}"
BC="${SUITE_BOOTSTRAP_CONTROLLERS:-}" QV="${SUITE_QUORUM_VOTERS:-}" CL="${SUITE_CONTROLLER_LISTENER:-CONTROLLER}" CID="${SUITE_CLUSTER_ID:-}"
LEADER_CMD="${SUITE_LEADER_CMD:-}" KILL_CMD="${SUITE_KILL_LEADER_CMD:-}" AFTER_KILL_CMD="${SUITE_AFTER_KILL_CMD:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --controllers) CONTROLLERS="$2"; shift 2 ;;
    --quorum) QUORUM="$2"; shift 2 ;;
    --dir) DIR="$2"; shift 2 ;;
    --messages) MESSAGES="$2"; shift 2 ;;
    --rate) RATE="$2"; shift 2 ;;
    --session-timeout-ms) SESSION_MS="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --results) RESULTS="$2"; shift 2 ;;
    --bootstrap-controllers) BC="$2"; shift 2 ;;
    --controller-listener) CL="$2"; shift 2 ;;
    --quorum-voters) QV="$2"; shift 2 ;;
    --cluster-id) CID="$2"; shift 2 ;;
    --leader-cmd) LEADER_CMD="$2"; shift 2 ;;
    --kill-leader-cmd) KILL_CMD="$2"; shift 2 ;;
    --after-kill-cmd) AFTER_KILL_CMD="$2"; shift 2 ;;
    --direct-bootstrap) DIRECT="$2"; shift 2 ;;
    --corum-bin) CORUM_BIN="$2"; shift 2 ;;
    --corum-quorum) CORUM_QUORUM="$2"; shift 2 ;;
    --fence-bound-ms) FENCE_BOUND_MS="$2"; shift 2 ;;
    --follow-bound-ms) FOLLOW_BOUND_MS="$2"; shift 2 ;;
    --keep-going) KEEP_GOING=1; shift ;;
    --broker-base-port) BROKER_PORT="$2"; shift 2 ;;
    --corum-base-port) CORUM_PORT="$2"; shift 2 ;;
    --kafka-jars) KAFKA_JARS_ARG="$2"; shift 2 ;;
    --release-version) RELEASE="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "broker-suite.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
[ -n "$CONTROLLERS" ] || { echo "broker-suite.sh: --controllers kafka|corum is required (--help)" >&2; exit 2; }
[ -n "$DIR" ] || DIR=$(mktemp -d -t corum-broker-suite.XXXXXX)
mkdir -p "$DIR"
CTL_DIR="$DIR/controllers"
[ -n "$FENCE_BOUND_MS" ] || FENCE_BOUND_MS=$((SESSION_MS + 1000))
# Whether this suite runs the controllers (and so stops them), and where a corum quorum's files are.
OWN_CTL=0 CORUM_DIR=""
if [ "$CONTROLLERS" = kafka ]; then OWN_CTL=1
elif [ "$CONTROLLERS" = corum ] && [ -n "$CORUM_QUORUM" ]; then CORUM_DIR=$CORUM_QUORUM
elif [ "$CONTROLLERS" = corum ] && [ -z "$BC" ]; then
  [ -n "$CORUM_BIN" ] || { echo "broker-suite.sh: --controllers corum needs --corum-bin PATH, --corum-quorum DIR or --bootstrap-controllers ... (--help)" >&2; exit 2; }
  OWN_CTL=1 CORUM_DIR=$CTL_DIR
fi
BROKERS=(4 5 6)
B="$COMPAT/brokers.sh"
# KAFKA_JARS reaches every brokers.sh command (start records it; the others read brokers.env).
if [ -n "$KAFKA_JARS_ARG" ]; then export KAFKA_JARS="$KAFKA_JARS_ARG"; else unset KAFKA_JARS; fi
bk() { "$B" "$@" --dir "$DIR/brokers"; }
now_ms() { date +%s%3N; }

declare -A T=()
ORDER=()
timing() { T[$1]=$2; ORDER+=("$1"); printf 'TIMING %-36s %6d ms\n' "$1" "$2"; }
STEP="" STEPS=() SUMMARY_DONE=0
step() { STEP="$1"; STEPS+=("$1"); echo "== $(date +%H:%M:%S) $1"; }
# One line per step: PASS, FAIL (its failed checks), or where the suite stopped.
step_summary() {
  local s f n died="${1:-}"
  for s in "${STEPS[@]}"; do
    n=0
    for f in "${FAILED_STEP[@]}"; do [ "$f" != "$s" ] || n=$((n + 1)); done
    if [ -n "$died" ] && [ "$s" = "$STEP" ]; then echo "STEP FAIL  $s (the suite stopped here)"
    elif [ $n = 0 ]; then echo "STEP PASS  $s"
    else echo "STEP FAIL  $s ($n failed check(s))"; fi
  done
}
kafka_tool() {
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$COMPAT/log4j2-tools.properties" \
    -cp "$COMPAT/jars/*" "$@"
}

# elr_wait BOOTSTRAP WANT TIMEOUT_S: waits until kafka-topics --describe of suite-elr through
# BOOTSTRAP (DescribeTopicPartitions) shows "Elr: WANT" on each of its partitions (WANT empty: none).
elr_wait() {
  local deadline=$((SECONDS + $3)) lines
  while :; do
    lines=$(kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$1" --describe --topic suite-elr 2>&1 \
      | grep -P '^\s*Topic: suite-elr\s+Partition:' || true)
    if [ "$(grep -cP "\tElr: $2(\t|\$)" <<< "$lines")" = 3 ]; then
      echo "$lines" | sed 's/^/  /'
      return 0
    fi
    [ $SECONDS -lt "$deadline" ] \
      || { check_failed "kafka-topics --bootstrap-server $1 --describe --topic suite-elr: not every partition shows 'Elr: $2' within $3 s: ${lines:-no partition line}"; return 1; }
    sleep 1
  done
}

stop_controllers() {
  [ "$OWN_CTL" = 1 ] || return 0
  if [ "$CONTROLLERS" = kafka ]; then "$COMPAT/kafka-kraft.sh" stop --dir "$CTL_DIR" --keep
  else "$COMPAT/corum-quorum.sh" stop --dir "$CTL_DIR" --keep; fi
}
# The controllers' logs, and the last warnings and errors of corum's.
controller_logs() {
  if [ "$CONTROLLERS" = kafka ]; then echo "  controllers: $CTL_DIR/node-*/logs/{server,request}.log"
  elif [ -n "$CORUM_DIR" ]; then
    local f
    for f in "$CORUM_DIR"/node-*/corum.log; do
      [ -f "$f" ] || continue
      echo "  corum: $f"
      grep -E ' (WARN|ERROR) ' "$f" | grep -v 'single-core placement' | tail -n 3 | cut -c1-400 | sed 's/^/      /' || true
    done
  fi
}
cleanup() {
  local rc=$?
  trap - EXIT
  if [ $rc != 0 ]; then
    if [ "$SUMMARY_DONE" = 1 ]; then echo "broker-suite.sh: FAILED: ${#FAILED[@]} check(s)" >&2
    else echo "broker-suite.sh: FAILED at step: $STEP (exit $rc)" >&2; fi
    [ ${#FAILED[@]} = 0 ] || printf 'broker-suite.sh: failed check: %s\n' "${FAILED[@]}" >&2
    [ "$SUMMARY_DONE" = 1 ] || step_summary died >&2
    "$B" stop --dir "$DIR/brokers" --keep --timeout 20 >/dev/null 2>&1 || true
    stop_controllers >/dev/null 2>&1 || true
    echo "broker-suite.sh: everything kept in $DIR: brokers/broker-*/logs/server.log, brokers/traffic/, brokers/monitor.jsonl, brokers-sh.err (brokers.sh's account of each failed wait)" >&2
    controller_logs >&2
  fi
  exit $rc
}
trap cleanup EXIT
die() { echo "broker-suite.sh: $*" >&2; exit 1; }
# A failed check: with --keep-going it is listed and the scenario goes on (returns 1 so that the
# caller can skip what depended on it), else the suite stops here.
FAILED=() FAILED_STEP=()
check_failed() {
  [ "$KEEP_GOING" = 1 ] || die "$*"
  FAILED+=("[$STEP] $*") FAILED_STEP+=("$STEP")
  echo "FAIL [$STEP] $*" >&2
  return 1
}
field() { sed -n "s/.*$1=\([0-9-]*\).*/\1/p" | head -n 1; }
mon_wait() {  # EXPR AFTER TIMEOUT -> prints delta_ms (brokers.sh's account of a failure: brokers-sh.err)
  bk monitor --wait "$1" --after "$2" --timeout "$3" 2>>"$DIR/brokers-sh.err" | field delta_ms
}
mon_last() { bk monitor --last; }
# measure NAME EXPR AFTER_MS TIMEOUT_S: records how long after AFTER_MS the brokers' view met EXPR.
measure() {
  local v
  if ! v=$(mon_wait "$2" "$3" "$4"); then
    T[$1]=null; ORDER+=("$1")
    check_failed "$1: '$2' did not hold within $4 s; last state: $(mon_last)"
    return 1
  fi
  timing "$1" "$v"
}
# bound NAME MAX_MS: the timing NAME (if measured) must not exceed MAX_MS.
bound() {
  [ "${T[$1]:-null}" != null ] || return 0
  [ "${T[$1]}" -le "$2" ] || check_failed "$1: ${T[$1]} ms, above the bound of $2 ms"
}
leaders_of() { mon_last | python3 -c "import json,sys; print(json.load(sys.stdin)['leaders'].get('$1', 0))"; }
all_unfenced() { local e="" i; for i in "${BROKERS[@]}"; do e+="${e:+ and }unfenced($i)"; done; echo "$e"; }

SUITE_T0=$SECONDS

# --- 1. controllers and brokers -------------------------------------------------------------------
step "controllers ($CONTROLLERS)"
if [ "$CONTROLLERS" = kafka ]; then
  "$COMPAT/kafka-kraft.sh" start --nodes 3 --roles controller --quorum "$QUORUM" --release-version "${RELEASE:-4.1}" \
    --dir "$CTL_DIR" --props min.insync.replicas=2 "broker.session.timeout.ms=$SESSION_MS" >"$DIR/controllers.out" \
    || die "kafka-kraft.sh start failed: $(cat "$DIR/controllers.out")"
  # shellcheck disable=SC1091
  . "$CTL_DIR/cluster.env"
  BC="$CONTROLLER_BOOTSTRAP" CL=CONTROLLER CID="$CLUSTER_ID"
  if [ "$QUORUM" = static ]; then
    QV=$(grep -h '^controller.quorum.voters=' "$CTL_DIR/node-1/server.properties" | cut -d= -f2)
  fi
  LEADER_CMD="'$COMPAT/kafka-kraft.sh' leader --dir '$CTL_DIR'"
  KILL_CMD="'$COMPAT/kafka-kraft.sh' failover --dir '$CTL_DIR'"
  AFTER_KILL_CMD="'$COMPAT/kafka-kraft.sh' wait-ready --dir '$CTL_DIR'"
elif [ -n "$CORUM_DIR" ]; then
  if [ "$OWN_CTL" = 1 ]; then
    release_args=(); [ -z "$RELEASE" ] || release_args=(--release-version "$RELEASE")
    "$COMPAT/corum-quorum.sh" start --nodes 3 --dir "$CTL_DIR" --bin "$CORUM_BIN" --base-port "$CORUM_PORT" \
      "${release_args[@]}" --props "broker.session.timeout.ms=$SESSION_MS" >"$DIR/controllers.out" 2>&1 \
      || die "corum-quorum.sh start failed: $(cat "$DIR/controllers.out")"
  fi
  # shellcheck disable=SC1091
  . "$CORUM_DIR/quorum.env" || die "no corum quorum in $CORUM_DIR (corum-quorum.sh start --dir $CORUM_DIR)"
  BC="$KAFKA_BOOTSTRAP" QV="$KAFKA_VOTERS" CL="$KAFKA_LISTENER" CID="$CLUSTER_ID" DIRECT="$KAFKA_BOOTSTRAP"
  [ -n "$RELEASE" ] || RELEASE="${RELEASE_VERSION:-}"
  LEADER_CMD="'$COMPAT/corum-quorum.sh' leader --dir '$CORUM_DIR'"
  KILL_CMD="'$COMPAT/corum-quorum.sh' failover --dir '$CORUM_DIR'"
  AFTER_KILL_CMD="'$COMPAT/corum-quorum.sh' wait-ready --dir '$CORUM_DIR'"
  session=$(sed -n 's/^broker.session.timeout.ms=//p' "$CORUM_DIR/node-1/server.properties" | tail -n 1)
  [ -z "$session" ] || [ "$session" = "$SESSION_MS" ] \
    || echo "broker-suite.sh: note: the corum nodes' broker.session.timeout.ms is $session, the brokers' $SESSION_MS" >&2
else
  [ -n "$BC" ] && [ -n "$CID" ] && [ -n "$LEADER_CMD" ] && [ -n "$KILL_CMD" ] \
    || die "--controllers $CONTROLLERS needs --bootstrap-controllers, --cluster-id, --leader-cmd and --kill-leader-cmd"
fi
callback() { timeout 120 bash -c "$1"; }
echo "controllers: $BC (listener $CL, cluster $CID, active $(callback "$LEADER_CMD"), release ${RELEASE:-default})"
# The metadata.version the brokers must report finalized in step 6 (an extended regex).
case "$RELEASE" in
  "") WANT_MV='4\.1-IV1' ;;
  *-IV*) WANT_MV="${RELEASE//./\\.}" ;;
  *) WANT_MV="${RELEASE//./\\.}-IV[0-9]+" ;;
esac

step "brokers start"
t0=$(now_ms)
voters=(); [ -z "$QV" ] || voters=(--quorum-voters "$QV")
bk start --bootstrap-controllers "$BC" "${voters[@]}" --controller-listener "$CL" --cluster-id "$CID" \
  --ids "$(IFS=,; echo "${BROKERS[*]}")" --base-port "$BROKER_PORT" --session-timeout-ms "$SESSION_MS" --timeout 90 \
  >"$DIR/brokers-start.out"
grep '^brokers.sh: started' "$DIR/brokers-start.out" || true
bk wait-unfenced --timeout 60
timing brokers_start_to_all_unfenced $(( $(now_ms) - t0 ))
. "$DIR/brokers/brokers.env"
MON_TOPICS=suite-a,suite-b,__consumer_offsets
[ -z "$DIRECT" ] || MON_TOPICS+=,suite-direct
bk monitor --start --topics "$MON_TOPICS" >/dev/null

# --- 2. topics, traffic A and a broker SIGKILL ----------------------------------------------------
if [ -n "$DIRECT" ]; then
  step "kafka-topics --create on the controllers directly ($DIRECT)"
  t0=$(now_ms)
  if out=$(kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$DIRECT" --create \
      --topic suite-direct --partitions 3 --replication-factor 3 --config min.insync.replicas=2 2>&1); then
    timing direct_create $(( $(now_ms) - t0 ))
    measure direct_create_to_led_in_sync \
      "'suite-direct' in topics and offline == 0 and isr(4) == partitions and isr(5) == partitions and isr(6) == partitions" \
      "$t0" 30 \
      && { D=$(bk traffic --name direct --topic suite-direct --no-create --messages 1000 --timeout 60) \
             || check_failed "1,000 messages through the directly created topic: ${D:-no result}"; echo "traffic direct: $D"; } \
      || true
  else
    check_failed "kafka-topics --bootstrap-server $DIRECT --create failed: $out" || true
  fi
fi

step "traffic A ($MESSAGES messages) with broker 5 SIGKILLed at 30%"
# Eligible leader replicas are on from release 4.1 (Kafka's format default), off before it.
case "${RELEASE:-4.1}" in 3.*|4.0*) ELR_KILLED="" ;; *) ELR_KILLED=5 ;; esac
if out=$(kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" --create --topic suite-elr \
    --partitions 3 --replication-factor 3 --config min.insync.replicas=3 2>&1); then
  ELR_TOPIC=1
else
  ELR_TOPIC=0
  check_failed "kafka-topics --create suite-elr failed: $out" || true
fi
bk traffic --start --name a --topic suite-a --messages "$MESSAGES" --rate "$RATE" --timeout 300 --drain-timeout-s 60 >/dev/null
bk traffic --wait-acked $((MESSAGES * 3 / 10)) --name a --timeout 120 >/dev/null \
  2>>"$DIR/brokers-sh.err" || check_failed "traffic A: $((MESSAGES * 3 / 10)) messages not acknowledged within 120 s" || true
bk monitor --wait "leaders(5) > 0 and isr(5) == partitions" --timeout 30 >/dev/null \
  || check_failed "broker 5 leads nothing or is not in every ISR before the kill: $(mon_last)" || true
kill_at=$(bk kill 5 | field at_ms)
measure broker_kill_to_fenced "fenced(5)" "$kill_at" 60 && bound broker_kill_to_fenced "$FENCE_BOUND_MS" || true
measure broker_kill_to_leaders_moved "leaders(5) == 0 and offline == 0" "$kill_at" 60 || true
measure broker_kill_to_out_of_isr "isr(5) == 0" "$kill_at" 60 || true
if [ "$ELR_TOPIC" = 1 ]; then
  elr_wait "$BOOTSTRAP" "$ELR_KILLED" 30 || true
  [ -z "$DIRECT" ] || elr_wait "$DIRECT" "$ELR_KILLED" 30 || true
fi

step "broker 5 restart; traffic A result"
out=$(bk restart 5 --timeout 120)
restart_at=$(field at_ms <<< "$out")
measure broker_restart_to_unfenced "unfenced(5)" "$restart_at" 45 || true
measure broker_restart_to_in_every_isr "isr(5) == partitions" "$restart_at" 45 || true
[ "$ELR_TOPIC" = 0 ] || elr_wait "$BOOTSTRAP" "" 45 || true
# traffic_result NAME: waits for traffic NAME; sets TRAFFIC to its JSON line (null without one).
traffic_result() {
  local r
  r=$(bk traffic --wait --name "$1" --timeout 300 2>>"$DIR/brokers-sh.err") \
    || check_failed "traffic $1 lost or duplicated messages, or did not finish: ${r:-no result}" || true
  echo "traffic $1: ${r:-none}"
  TRAFFIC=null
  [[ "$r" != "{"* ]] || TRAFFIC=$r
}
traffic_result a; A=$TRAFFIC
[ "$A" = null ] || timing traffic_a_elapsed "$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['elapsed_ms'])" "$A")"

# --- 4. controlled shutdown --------------------------------------------------------------------------
step "SIGTERM of the broker leading most partitions"
victim=$(mon_last | python3 -c "
import json, sys
s = json.load(sys.stdin)
print(max(($(IFS=,; echo "${BROKERS[*]}")), key=lambda i: s['leaders'].get(str(i), 0)))")
led=$(leaders_of "$victim")
[ "$led" -gt 0 ] || die "no broker leads a partition: $(mon_last)"
echo "broker $victim leads $led partitions"
if out=$(bk term "$victim" --timeout 60); then
  echo "$out"
  term_at=$(field term_at_ms <<< "$out"); exit_at=$(field exit_at_ms <<< "$out")
  timing broker_term_to_exit $((exit_at - term_at))
  if measure broker_term_to_leaders_moved "leaders($victim) == 0 and offline == 0" "$term_at" 60; then
    moved=${T[broker_term_to_leaders_moved]}
    [ $((term_at + moved)) -le "$exit_at" ] \
      || check_failed "broker $victim exited (+$((exit_at - term_at)) ms) before the brokers saw its leaders move (+$moved ms)" || true
  fi
  grep -q "The controller has asked us to exit controlled shutdown" "$DIR/brokers/broker-$victim/logs/server.log" \
    || check_failed "broker $victim did not log that the controller let it finish its controlled shutdown" || true
else
  check_failed "broker $victim did not exit within 60 s of SIGTERM (controlled shutdown never finished); SIGKILLed" || true
  bk kill "$victim" >/dev/null || true
fi
out=$(bk restart "$victim" --timeout 120)
restart_at=$(field at_ms <<< "$out")
measure broker_term_restart_to_in_every_isr "unfenced($victim) and isr($victim) == partitions" "$restart_at" 45 || true

# --- 5. traffic B and an active-controller SIGKILL ------------------------------------------------------
step "traffic B ($MESSAGES messages) with the active controller SIGKILLed at 30%"
bk traffic --start --name b --topic suite-b --messages "$MESSAGES" --rate "$RATE" --timeout 300 --drain-timeout-s 60 >/dev/null
bk traffic --wait-acked $((MESSAGES * 3 / 10)) --name b --timeout 120 >/dev/null \
  2>>"$DIR/brokers-sh.err" || check_failed "traffic B: $((MESSAGES * 3 / 10)) messages not acknowledged within 120 s" || true
old=$(callback "$LEADER_CMD")
[ -n "$old" ] || die "--leader-cmd printed no controller id"
before=$(now_ms)
kout=$(callback "$KILL_CMD") || die "--kill-leader-cmd failed: $kout"
echo "$kout"
ctl_at=$(field at_ms <<< "$kout"); [ -n "$ctl_at" ] || ctl_at=$before
new=$(callback "$LEADER_CMD")
[ -n "$new" ] && [ "$new" != "$old" ] || die "no new active controller after killing $old (leader-cmd says '${new}')"
logs=()
for i in "${BROKERS[@]}"; do logs+=("$DIR/brokers/broker-$i/logs/server.log"); done
deadline=$((SECONDS + 60))
until follow=$(python3 "$COMPAT/brokers/log_first.py" --each --after "$ctl_at" --not-group "$old" \
    --regex 'Completed transition to FollowerState\(fetchTimeoutMs=[0-9]+, epoch=[0-9]+, leader=([0-9]+)' \
    "${logs[@]}" 2>/dev/null) || [ $SECONDS -ge $deadline ]; do
  sleep 0.5
done
if [ $SECONDS -ge $deadline ] && ! grep -q last_delta_ms <<< "$follow"; then
  T[ctl_kill_to_brokers_follow_new_leader]=null; ORDER+=(ctl_kill_to_brokers_follow_new_leader)
  check_failed "not every broker logged following a new metadata leader within 60 s: ${follow:-none}" || true
else
  echo "$follow"
  timing ctl_kill_to_brokers_follow_new_leader "$(field last_delta_ms <<< "$follow")"
  [ -z "$FOLLOW_BOUND_MS" ] || bound ctl_kill_to_brokers_follow_new_leader "$FOLLOW_BOUND_MS"
fi
# A broker's heartbeat channel logs "Recorded new KRaft controller" when it switches, but not
# always: one whose heartbeat timed out while it still aimed at the dead controller can go on
# to the new one without that line, and one that reached the restarted old controller goes on
# there if that controller forwards its heartbeats instead of answering NOT_CONTROLLER (corum's
# standbys do). Such a broker counts as heartbeating to the new controller if it stays unfenced
# for the session timeout plus 5 s (the election) after the kill. The channel is named in the
# message up to Kafka 4.2 ("[broker-4-to-controller-heartbeat-channel-manager]: Recorded ..."),
# from 4.3 only in the thread, which brokers.sh's log layout adds at the end of each line.
hb_until=$((ctl_at + SESSION_MS + 5000))
until hb=$(python3 "$COMPAT/brokers/log_first.py" --each --after "$ctl_at" --not-group "$old" \
    --regex '^(?=.*to-controller-heartbeat-channel-manager).*Recorded new KRaft controller, from now on will use node \S+ \(id: ([0-9]+)' \
    "${logs[@]}" 2>/dev/null) || [ "$(now_ms)" -ge "$hb_until" ]; do
  sleep 0.5
done
if grep -q last_delta_ms <<< "$hb"; then
  timing ctl_kill_to_heartbeats_to_new_leader "$(field last_delta_ms <<< "$hb")"
else
  T[ctl_kill_to_heartbeats_to_new_leader]=null; ORDER+=(ctl_kill_to_heartbeats_to_new_leader)
  sleep 0.5  # the monitor polls every 100 ms: let it write the states up to hb_until
  for i in "${BROKERS[@]}"; do
    ! grep -q "/broker-$i/logs/server.log" <<< "$hb" || continue
    echo "broker $i logged no switch of its heartbeats to a new controller; checking that it stays unfenced until +$((hb_until - ctl_at)) ms"
    bk monitor --always "unfenced($i)" --after "$ctl_at" --until "$hb_until" >/dev/null 2>>"$DIR/brokers-sh.err" \
      || check_failed "broker $i logged no switch of its heartbeats to a new controller and was fenced after the controller kill" || true
  done
fi
traffic_result b; B_OUT=$TRAFFIC
[ "$B_OUT" = null ] || timing traffic_b_elapsed "$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['elapsed_ms'])" "$B_OUT")"
bk monitor --always "$(all_unfenced)" --after "$ctl_at" >/dev/null \
  || check_failed "a broker was fenced after the controller kill" || true
[ -z "$AFTER_KILL_CMD" ] || callback "$AFTER_KILL_CMD" >/dev/null || die "--after-kill-cmd failed"

# --- 6. the quorum and the features, through the brokers ---------------------------------------------
step "kafka-metadata-quorum and kafka-features through the brokers"
if q=$(kafka_tool org.apache.kafka.tools.MetadataQuorumCommand --bootstrap-server "$BOOTSTRAP" describe --status 2>&1); then
  echo "$q" | sed 's/^/  /'
  grep -q "^LeaderId:" <<< "$q" || check_failed "describe --status printed no LeaderId" || true
else
  check_failed "kafka-metadata-quorum describe --status failed: $q" || true
fi
MV_SEEN=""
if f=$(kafka_tool org.apache.kafka.tools.FeatureCommand --bootstrap-server "$BOOTSTRAP" describe 2>&1); then
  echo "$f" | sed 's/^/  /'
  MV_SEEN=$(sed -n -E 's/^Feature: metadata\.version.*FinalizedVersionLevel: ([^[:space:]]+).*/\1/p' <<< "$f" | head -n 1)
  grep -qE "Feature: metadata.version.*FinalizedVersionLevel: $WANT_MV\b" <<< "$f" \
    || check_failed "kafka-features describe shows no finalized metadata.version $WANT_MV" || true
else
  check_failed "kafka-features describe failed: $f" || true
fi

step "stop"
bk stop --keep >/dev/null
stop_controllers >/dev/null
timing suite_wall $(( (SECONDS - SUITE_T0) * 1000 ))
json="{\"controllers\":\"$CONTROLLERS\",\"quorum\":\"$([ "$CONTROLLERS" = kafka ] && echo "$QUORUM" || echo external)\""
json+=",\"broker_version\":\"${BROKER_VERSION:-}\",\"release_version\":\"$RELEASE\",\"metadata_version\":\"$MV_SEEN\""
for k in "${ORDER[@]}"; do json+=",\"$k\":${T[$k]}"; done
json+=",\"traffic_a\":$A,\"traffic_b\":$B_OUT,\"failed_checks\":${#FAILED[@]}}"
echo "RESULT $json"
[ -z "$RESULTS" ] || echo "$json" >> "$RESULTS"
step_summary
SUMMARY_DONE=1
[ ${#FAILED[@]} = 0 ] || exit 1
if [ "$KEEP" = 0 ]; then rm -rf "$DIR"; else echo "kept $DIR"; fi
echo "PASS broker-suite ($CONTROLLERS controllers) in $((SECONDS - SUITE_T0)) s"
