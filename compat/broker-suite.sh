#!/usr/bin/env bash
# Real Apache Kafka 4.1.2 brokers (process.roles=broker, run by brokers.sh) against a KRaft
# controller quorum, through broker and controller failures, with the data checked throughout.
#
#   broker-suite.sh --controllers kafka [--quorum dynamic|static] [common options]
#   broker-suite.sh --controllers corum --bootstrap-controllers H:P[,...] --cluster-id ID
#                   --leader-cmd CMD --kill-leader-cmd CMD [--after-kill-cmd CMD]
#                   [--controller-listener NAME] [common options]
# common options: [--dir DIR] [--messages N] [--rate R] [--session-timeout-ms MS] [--keep]
#                 [--results FILE]
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
# The controllers' broker.session.timeout.ms decides when a silent broker is fenced: the suite
# starts Kafka's with --session-timeout-ms (default 9000, Kafka's default); a caller's quorum
# should use the same. Kafka's controllers also get min.insync.replicas=2: a 4.1 controller with
# eligible leader replicas writes its own min.insync.replicas as the cluster-wide default, which
# overrides the brokers' static value (the suite's topics set it themselves anyway).
#
# Scenario (brokers 4, 5, 6 on 127.0.0.1:19392-19394; each step bounded, the first failure stops
# the suite, keeps every log and prints where they are):
#   1. the controllers; the brokers start, register and are unfenced (kafka-cluster list-endpoints)
#   2. traffic A: kafka-topics --create (6 partitions, RF 3, min.insync.replicas 2) through a
#      broker, then --messages (default 100,000) through an idempotent acks=all producer at --rate
#      (default 10,000/s) and a consumer group; at 30% acknowledged broker 5 is SIGKILLed:
#      kill -> fenced, kill -> no partition led by it (leaders moved), kill -> out of every ISR
#   3. broker 5 restarts: restart -> unfenced, restart -> back in every ISR; traffic A must have
#      consumed every acknowledged message exactly once
#   4. the broker leading most partitions gets SIGTERM: its leaders must move before it exits
#      (controlled shutdown); term -> leaders moved, term -> exit; it restarts
#   5. traffic B, and at 30% the active controller is SIGKILLed: kill -> every broker's metadata
#      log follows the new leader (its KafkaRaftClient logs "Completed transition to
#      FollowerState(... leader=N"), kill -> every broker's heartbeats go to the new controller
#      ("Recorded new KRaft controller ... (id: N"); no broker is fenced meanwhile; traffic B checked
#   6. kafka-metadata-quorum --bootstrap-server describe --status and kafka-features
#      --bootstrap-server describe, both through the brokers
# The brokers' view (fenced/unfenced, leaders, ISRs) is polled every 100 ms by BrokerMonitor
# (brokers.sh monitor), so the timings are good to about 0.1-0.2 s. The end prints one TIMING
# line per measurement and a RESULT line of JSON (appended to --results FILE too).
set -euo pipefail

COMPAT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CONTROLLERS="" QUORUM=dynamic DIR="" MESSAGES=100000 RATE=10000 SESSION_MS=9000 KEEP=0 RESULTS=""
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
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "broker-suite.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
[ -n "$CONTROLLERS" ] || { echo "broker-suite.sh: --controllers kafka|corum is required (--help)" >&2; exit 2; }
[ -n "$DIR" ] || DIR=$(mktemp -d -t corum-broker-suite.XXXXXX)
mkdir -p "$DIR"
CTL_DIR="$DIR/controllers"
BROKERS=(4 5 6)
B="$COMPAT/brokers.sh"
bk() { "$B" "$@" --dir "$DIR/brokers"; }
now_ms() { date +%s%3N; }

declare -A T=()
ORDER=()
timing() { T[$1]=$2; ORDER+=("$1"); printf 'TIMING %-36s %6d ms\n' "$1" "$2"; }
STEP=""
step() { STEP="$1"; echo "== $(date +%H:%M:%S) $1"; }

cleanup() {
  local rc=$?
  trap - EXIT
  if [ $rc != 0 ]; then
    echo "broker-suite.sh: FAILED at step: $STEP (exit $rc)" >&2
    "$B" stop --dir "$DIR/brokers" --keep --timeout 20 >/dev/null 2>&1 || true
    [ "$CONTROLLERS" != kafka ] || "$COMPAT/kafka-kraft.sh" stop --dir "$CTL_DIR" --keep >/dev/null 2>&1 || true
    echo "broker-suite.sh: everything kept in $DIR: brokers/broker-*/logs/server.log, brokers/traffic/, brokers/monitor.jsonl$([ "$CONTROLLERS" = kafka ] && echo ', controllers/node-*/logs/{server,request}.log')" >&2
  fi
  exit $rc
}
trap cleanup EXIT
die() { echo "broker-suite.sh: $*" >&2; exit 1; }
field() { sed -n "s/.*$1=\([0-9-]*\).*/\1/p" | head -n 1; }
mon_wait() {  # EXPR AFTER TIMEOUT -> prints delta_ms
  bk monitor --wait "$1" --after "$2" --timeout "$3" | field delta_ms
}
mon_last() { bk monitor --last; }
# measure NAME EXPR AFTER_MS TIMEOUT_S: records how long after AFTER_MS the brokers' view met EXPR.
measure() {
  local v
  v=$(mon_wait "$2" "$3" "$4") || die "$1: '$2' did not hold within $4 s; last state: $(mon_last)"
  timing "$1" "$v"
}
leaders_of() { mon_last | python3 -c "import json,sys; print(json.load(sys.stdin)['leaders'].get('$1', 0))"; }
all_unfenced() { local e="" i; for i in "${BROKERS[@]}"; do e+="${e:+ and }unfenced($i)"; done; echo "$e"; }

SUITE_T0=$SECONDS

# --- 1. controllers and brokers -------------------------------------------------------------------
step "controllers ($CONTROLLERS)"
if [ "$CONTROLLERS" = kafka ]; then
  "$COMPAT/kafka-kraft.sh" start --nodes 3 --roles controller --quorum "$QUORUM" --release-version 4.1 \
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
else
  [ -n "$BC" ] && [ -n "$CID" ] && [ -n "$LEADER_CMD" ] && [ -n "$KILL_CMD" ] \
    || die "--controllers $CONTROLLERS needs --bootstrap-controllers, --cluster-id, --leader-cmd and --kill-leader-cmd"
fi
callback() { timeout 120 bash -c "$1"; }
echo "controllers: $BC (listener $CL, cluster $CID, active $(callback "$LEADER_CMD"))"

step "brokers start"
t0=$(now_ms)
voters=(); [ -z "$QV" ] || voters=(--quorum-voters "$QV")
bk start --bootstrap-controllers "$BC" "${voters[@]}" --controller-listener "$CL" --cluster-id "$CID" \
  --ids "$(IFS=,; echo "${BROKERS[*]}")" --session-timeout-ms "$SESSION_MS" >/dev/null
bk wait-unfenced --timeout 60
timing brokers_start_to_all_unfenced $(( $(now_ms) - t0 ))
. "$DIR/brokers/brokers.env"
bk monitor --start --topics suite-a,suite-b,__consumer_offsets >/dev/null

# --- 2. traffic A and a broker SIGKILL ---------------------------------------------------------------
step "traffic A ($MESSAGES messages) with broker 5 SIGKILLed at 30%"
bk traffic --start --name a --topic suite-a --messages "$MESSAGES" --rate "$RATE" --timeout 300 >/dev/null
bk traffic --wait-acked $((MESSAGES * 3 / 10)) --name a --timeout 120 >/dev/null
bk monitor --wait "leaders(5) > 0 and isr(5) == partitions" --timeout 30 >/dev/null \
  || die "broker 5 leads nothing or is not in every ISR before the kill: $(mon_last)"
kill_at=$(bk kill 5 | field at_ms)
measure broker_kill_to_fenced "fenced(5)" "$kill_at" 60
measure broker_kill_to_leaders_moved "leaders(5) == 0 and offline == 0" "$kill_at" 60
measure broker_kill_to_out_of_isr "isr(5) == 0" "$kill_at" 60

step "broker 5 restart; traffic A result"
out=$(bk restart 5 --timeout 120)
restart_at=$(field at_ms <<< "$out")
measure broker_restart_to_unfenced "unfenced(5)" "$restart_at" 120
measure broker_restart_to_in_every_isr "isr(5) == partitions" "$restart_at" 120
A=$(bk traffic --wait --name a --timeout 300)
echo "traffic A: $A"
v=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['elapsed_ms'])" "$A"); timing traffic_a_elapsed "$v"

# --- 4. controlled shutdown --------------------------------------------------------------------------
step "SIGTERM of the broker leading most partitions"
victim=$(mon_last | python3 -c "
import json, sys
s = json.load(sys.stdin)
print(max(($(IFS=,; echo "${BROKERS[*]}")), key=lambda i: s['leaders'].get(str(i), 0)))")
led=$(leaders_of "$victim")
[ "$led" -gt 0 ] || die "no broker leads a partition: $(mon_last)"
echo "broker $victim leads $led partitions"
out=$(bk term "$victim" --timeout 120)
echo "$out"
term_at=$(field term_at_ms <<< "$out"); exit_at=$(field exit_at_ms <<< "$out")
measure broker_term_to_leaders_moved "leaders($victim) == 0 and offline == 0" "$term_at" 60
moved=${T[broker_term_to_leaders_moved]}
timing broker_term_to_exit $((exit_at - term_at))
[ $((term_at + moved)) -le "$exit_at" ] \
  || die "broker $victim exited (+$((exit_at - term_at)) ms) before the brokers saw its leaders move (+$moved ms)"
grep -q "The controller has asked us to exit controlled shutdown" "$DIR/brokers/broker-$victim/logs/server.log" \
  || die "broker $victim did not log that the controller let it finish its controlled shutdown"
out=$(bk restart "$victim" --timeout 120)
restart_at=$(field at_ms <<< "$out")
measure broker_term_restart_to_in_every_isr "unfenced($victim) and isr($victim) == partitions" "$restart_at" 120

# --- 5. traffic B and an active-controller SIGKILL ------------------------------------------------------
step "traffic B ($MESSAGES messages) with the active controller SIGKILLed at 30%"
bk traffic --start --name b --topic suite-b --messages "$MESSAGES" --rate "$RATE" --timeout 300 >/dev/null
bk traffic --wait-acked $((MESSAGES * 3 / 10)) --name b --timeout 120 >/dev/null
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
    "${logs[@]}" 2>/dev/null); do
  [ $SECONDS -lt $deadline ] || die "not every broker logged following a new metadata leader within 60 s"
  sleep 0.5
done
echo "$follow"
v=$(field last_delta_ms <<< "$follow"); timing ctl_kill_to_brokers_follow_new_leader "$v"
until hb=$(python3 "$COMPAT/brokers/log_first.py" --each --after "$ctl_at" --not-group "$old" \
    --regex 'to-controller-heartbeat-channel-manager\]: Recorded new KRaft controller, from now on will use node \S+ \(id: ([0-9]+)' \
    "${logs[@]}" 2>/dev/null); do
  [ $SECONDS -lt $deadline ] || die "not every broker's heartbeats went to a new controller within 60 s"
  sleep 0.5
done
v=$(field last_delta_ms <<< "$hb"); timing ctl_kill_to_heartbeats_to_new_leader "$v"
B_OUT=$(bk traffic --wait --name b --timeout 300)
echo "traffic B: $B_OUT"
v=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['elapsed_ms'])" "$B_OUT"); timing traffic_b_elapsed "$v"
bk monitor --always "$(all_unfenced)" --after "$ctl_at" >/dev/null \
  || die "a broker was fenced after the controller kill"
[ -z "$AFTER_KILL_CMD" ] || callback "$AFTER_KILL_CMD" >/dev/null || die "--after-kill-cmd failed"

# --- 6. the quorum and the features, through the brokers ---------------------------------------------
step "kafka-metadata-quorum and kafka-features through the brokers"
tool() {
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$COMPAT/log4j2-tools.properties" \
    -cp "$COMPAT/jars/*" "$@"
}
q=$(tool org.apache.kafka.tools.MetadataQuorumCommand --bootstrap-server "$BOOTSTRAP" describe --status 2>&1) \
  || die "kafka-metadata-quorum describe --status failed: $q"
echo "$q" | sed 's/^/  /'
grep -q "^LeaderId:" <<< "$q" || die "describe --status printed no LeaderId"
f=$(tool org.apache.kafka.tools.FeatureCommand --bootstrap-server "$BOOTSTRAP" describe 2>&1) \
  || die "kafka-features describe failed: $f"
echo "$f" | sed 's/^/  /'
grep -q "Feature: metadata.version.*FinalizedVersionLevel: 4.1-IV1" <<< "$f" \
  || die "kafka-features describe shows no finalized metadata.version 4.1-IV1"

step "stop"
bk stop $([ "$KEEP" = 1 ] && echo --keep) >/dev/null
[ "$CONTROLLERS" != kafka ] || "$COMPAT/kafka-kraft.sh" stop --dir "$CTL_DIR" --keep >/dev/null
timing suite_wall $(( (SECONDS - SUITE_T0) * 1000 ))
json="{\"controllers\":\"$CONTROLLERS\",\"quorum\":\"$([ "$CONTROLLERS" = kafka ] && echo "$QUORUM" || echo external)\""
for k in "${ORDER[@]}"; do json+=",\"$k\":${T[$k]}"; done
json+=",\"traffic_a\":$A,\"traffic_b\":$B_OUT}"
echo "RESULT $json"
[ -z "$RESULTS" ] || echo "$json" >> "$RESULTS"
if [ "$KEEP" = 0 ]; then rm -rf "$DIR"; else echo "kept $DIR"; fi
echo "PASS broker-suite ($CONTROLLERS controllers) in $((SECONDS - SUITE_T0)) s"
