#!/usr/bin/env bash
# Runs every compatibility session, one after another, against one cluster; prints one line per
# client (PASS/FAIL and seconds) and a closing "N passed, M failed" line; exits non-zero when any
# session failed.
#
#   compat/run.sh --bootstrap HOST:PORT[,...] [--controller-bootstrap HOST:PORT[,...]]
#                 [--broker-ids ID,...] [--through-failover --failover-cmd CMD] [--before-each-cmd CMD]
#                 [--only NAME[,NAME...]] [--session-timeout-s S] [--log-dir DIR]
#
# --bootstrap             the cluster's Kafka listeners (every node's, so a client survives one
#                         node's death)
# --controller-bootstrap  the controllers' listeners, for the steps that use KIP-919's
#                         --bootstrap-controller (Java AdminClient and tools); without it those
#                         steps are skipped and the session says so
# --broker-ids            the registered brokers' ids: replica assignments, the replication factor
#                         and the broker-config steps use these (default: every node the cluster
#                         lists, which for corum also holds the controllers)
# --through-failover      every session pauses at its marked point; run.sh then runs
#                         --failover-cmd (through bash -c, with COMPAT_SESSION set to the
#                         session's name) and lets the session go on when the command returns;
#                         the session then checks that everything acknowledged before is there
# --before-each-cmd       run before each session (e.g. wait until a killed node is back)
# --only                  run these sessions only (names as printed)
# --session-timeout-s     a session still running after this is killed and fails (default 300)
# --log-dir               where each session's output goes (default: a new temporary directory,
#                         kept and printed when something failed, removed otherwise)
#
# Needs what compat/install.sh installs; a missing client fails its session (nothing is skipped).
set -uo pipefail

COMPAT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SESSIONS=(kcat confluent kafka-python kafka-python-cli aiokafka kafkajs java-admin java-tools)

bootstrap="" controller_bootstrap="" broker_ids="" failover=0 failover_cmd="" before_cmd="" only=""
timeout_s=300 log_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bootstrap) bootstrap="$2"; shift 2 ;;
    --controller-bootstrap) controller_bootstrap="$2"; shift 2 ;;
    --broker-ids) broker_ids="$2"; shift 2 ;;
    --through-failover) failover=1; shift ;;
    --failover-cmd) failover_cmd="$2"; shift 2 ;;
    --before-each-cmd) before_cmd="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --session-timeout-s) timeout_s="$2"; shift 2 ;;
    --log-dir) log_dir="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
[ -n "$bootstrap" ] || { echo "run.sh: --bootstrap is required (--help)" >&2; exit 2; }
if [ $failover = 1 ] && [ -z "$failover_cmd" ]; then
  echo "run.sh: --through-failover needs --failover-cmd" >&2; exit 2
fi
if [ -n "$only" ]; then
  IFS=, read -r -a wanted <<< "$only"
  for w in "${wanted[@]}"; do
    [[ " ${SESSIONS[*]} " == *" $w "* ]] || { echo "run.sh: unknown session '$w' (${SESSIONS[*]})" >&2; exit 2; }
  done
  SESSIONS=("${wanted[@]}")
fi
keep_logs=0
if [ -z "$log_dir" ]; then log_dir=$(mktemp -d -t corum-compat.XXXXXX); else mkdir -p "$log_dir"; keep_logs=1; fi

PY="$COMPAT/.venv/bin/python"
# The JVM settings for Java sessions: small heap, quick start-up.
export COMPAT_JAVA_OPTS="-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto -Dlog4j2.configurationFile=$COMPAT/log4j2-tools.properties"
export COMPAT_JARS="$COMPAT/jars"

# Sets cmd to the command line of one session; the caller adds the common arguments.
session_cmd() {
  case "$1" in
    kcat) cmd=("$PY" "$COMPAT/sessions/kcat_metadata.py") ;;
    confluent) cmd=("$PY" "$COMPAT/sessions/confluent_admin.py") ;;
    kafka-python) cmd=("$PY" "$COMPAT/sessions/kafka_python_admin.py") ;;
    kafka-python-cli) cmd=("$PY" "$COMPAT/sessions/kafka_python_cli.py") ;;
    aiokafka) cmd=("$PY" "$COMPAT/sessions/aiokafka_admin.py") ;;
    kafkajs) cmd=(node "$COMPAT/sessions/kafkajs_admin.js") ;;
    java-admin) read -r -a java_opts <<< "$COMPAT_JAVA_OPTS"
                cmd=(java "${java_opts[@]}" -cp "$COMPAT/build/classes:$COMPAT/jars/*" AdminSession) ;;
    java-tools) cmd=("$PY" "$COMPAT/sessions/kafka_tools.py") ;;
  esac
}

passed=0 failed=0 failed_names=()
for name in "${SESSIONS[@]}"; do
  log="$log_dir/$name.log"
  pause_dir="$log_dir/$name.pause"
  rm -rf "$pause_dir"
  t0=$(date +%s.%N)
  status=""
  if [ -n "$before_cmd" ] && ! COMPAT_SESSION="$name" bash -c "$before_cmd" >>"$log" 2>&1; then
    status="--before-each-cmd failed"
  fi
  if [ -z "$status" ]; then
    session_cmd "$name"
    cmd+=(--bootstrap "$bootstrap")
    # Only Kafka's Java admin client speaks KIP-919 (bootstrap.controllers).
    if [ -n "$controller_bootstrap" ] && [[ $name == java-* ]]; then
      cmd+=(--controller-bootstrap "$controller_bootstrap")
    fi
    [ -n "$broker_ids" ] && cmd+=(--broker-ids "$broker_ids")
    [ $failover = 1 ] && cmd+=(--through-failover "$pause_dir")
    # Each session in its own process group, so a timeout ends it and everything it started.
    setsid "${cmd[@]}" >"$log" 2>&1 </dev/null &
    pid=$!
    deadline=$((SECONDS + timeout_s))
    resumed=0
    while kill -0 "$pid" 2>/dev/null; do
      if [ $failover = 1 ] && [ $resumed = 0 ] && [ -f "$pause_dir/paused" ]; then
        if ! COMPAT_SESSION="$name" bash -c "$failover_cmd" >>"$log.failover" 2>&1; then
          status="--failover-cmd failed (see $log.failover)"
          kill -KILL -- -"$pid" 2>/dev/null
        fi
        touch "$pause_dir/resume"
        resumed=1
      fi
      if [ $SECONDS -ge $deadline ]; then
        status="timed out after ${timeout_s} s"
        kill -KILL -- -"$pid" 2>/dev/null
      fi
      sleep 0.1
    done
    wait "$pid" 2>/dev/null; rc=$?
    if [ -z "$status" ]; then
      if [ $rc != 0 ]; then status="exit $rc"
      elif [ $failover = 1 ] && [ $resumed = 0 ]; then status="never reached its failover pause"
      fi
    fi
  fi
  secs=$(echo "$(date +%s.%N) - $t0" | bc)
  if [ -z "$status" ]; then
    printf 'PASS  %-18s %6.1f s\n' "$name" "$secs"
    passed=$((passed + 1))
  else
    why=$(grep -m1 'FAIL' "$log" 2>/dev/null || tail -1 "$log" 2>/dev/null)
    printf 'FAIL  %-18s %6.1f s  %s: %s (log: %s)\n' "$name" "$secs" "$status" "$why" "$log"
    failed=$((failed + 1))
    failed_names+=("$name")
  fi
done

echo "$passed passed, $failed failed"
if [ $failed -gt 0 ]; then
  echo "run.sh: failed: ${failed_names[*]}; logs in $log_dir" >&2
  exit 1
fi
[ $keep_logs = 1 ] || rm -rf "$log_dir"
exit 0
