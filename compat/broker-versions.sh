#!/usr/bin/env bash
# The broker suite (broker-suite.sh) with real Kafka brokers of several versions against corum:
# one fresh three-node corum quorum per version, one version at a time, and a table of the results.
#
#   broker-versions.sh [--versions 4.0.2,4.1.2,4.2.2,4.3.2,4.4.0] [--corum-bin PATH] [--out DIR]
#                      [--cache DIR] [--release V=R ...] [--max-release R] [--suite-timeout-s S]
#                      [--messages N] [--broker-base-port P] [--corum-base-port P] [--keep-data]
#                      [--fetch-only]
#   broker-versions.sh --table DIR              # print the tables of an earlier run again
#
# For each version V (4.0 or newer: Kafka 4 logs through log4j2, which brokers.sh configures):
#   1. the jars: `mvn dependency:copy-dependencies` on a generated pom naming kafka_2.13:V and
#      kafka-tools:V (as compat/pom.xml does for 4.1.2), into --cache DIR/V/jars (default
#      compat/.versions, git-ignored; fetched once, then reused), then again with the SLF4J
#      binding that matches the slf4j-api Kafka V resolved to (log4j-slf4j-impl for 1.x,
#      log4j-slf4j2-impl for 2.x) at the log4j version it resolved (and log4j-core when Kafka V
#      does not bring it: 4.0 does not), so that the brokers' server.log is written;
#   2. a corum quorum: corum-quorum.sh start --nodes 3 --release-version R --props
#      broker.session.timeout.ms=9000 metadata.log.segment.bytes=67108864 (64 MiB segments, as
#      `corum demo` uses: each node preallocates one, and the default 1 GiB would take 3 GiB of
#      disk a version for a metadata log of a few hundred KB);
#   3. the suite against it, as tools/tests/tools/kafka_brokers.rs runs it: broker-suite.sh
#      --controllers corum --corum-quorum DIR --kafka-jars DIR/V/jars --keep-going --keep, with
#      the test's bounds (session timeout 9,000 ms, fence bound 10,000 ms, follow bound
#      5,000 ms), bounded by --suite-timeout-s (default 900; then SIGTERM, and SIGKILL 30 s
#      later); then the quorum is stopped. Only the brokers run V: the tools, the traffic and
#      the monitor programs stay on compat/jars (4.1.2).
# R, the release corum is formatted at: --release V=R if given, else V's major.minor while it
# is at most --max-release (default 4.1, the newest release corum supports: metadata.version
# 4.1-IV1), else --max-release. So 4.0.x brokers get a cluster at 4.0 (4.0-IV3: they support no
# newer metadata.version and would not register), 4.2+ brokers one at 4.1-IV1.
# --corum-bin (default $CORUM_BIN, else `cargo build --release -p corum-tools` here and
# target/release/corum). Everything goes to --out DIR (default /var/tmp/corum-broker-versions/
# <date>-<time>): per version V/suite.out (the suite's output), V/suite/ (every broker's and corum
# node's log, kept; their data directories are removed after the run unless --keep-data),
# V/run.env (exit status, wall time, load), V/diagnosis.txt (the failed checks, the brokers'
# API-version errors, corum's warnings and forwarded requests); results.jsonl (the suite's RESULT lines);
# table.md (printed at the end: pass/fail per step, the timings). Ctrl-C or a kill stops the
# running suite, its brokers and its quorum. Exit 0 when every version passed.
set -euo pipefail

COMPAT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$COMPAT/.." && pwd)"
VERSIONS="4.0.2,4.1.2,4.2.2,4.3.2,4.4.0" CORUM_BIN_ARG="${CORUM_BIN:-}" OUT="" CACHE="$COMPAT/.versions"
MAX_RELEASE=4.1 SUITE_TIMEOUT_S=900 MESSAGES=100000 BROKER_PORT=19392 CORUM_PORT=19600 FETCH_ONLY=0
TABLE_ONLY="" RELEASES=() KEEP_DATA=0
while [ $# -gt 0 ]; do
  case "$1" in
    --versions) VERSIONS="$2"; shift 2 ;;
    --corum-bin) CORUM_BIN_ARG="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --cache) CACHE="$2"; shift 2 ;;
    --release) RELEASES+=("$2"); shift 2 ;;
    --max-release) MAX_RELEASE="$2"; shift 2 ;;
    --suite-timeout-s) SUITE_TIMEOUT_S="$2"; shift 2 ;;
    --messages) MESSAGES="$2"; shift 2 ;;
    --broker-base-port) BROKER_PORT="$2"; shift 2 ;;
    --corum-base-port) CORUM_PORT="$2"; shift 2 ;;
    --fetch-only) FETCH_ONLY=1; shift ;;
    --keep-data) KEEP_DATA=1; shift ;;
    --table) TABLE_ONLY="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "broker-versions.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done

die() { echo "broker-versions.sh: $*" >&2; exit 1; }
TABLE_PY="$COMPAT/brokers/versions_table.py"
if [ -n "$TABLE_ONLY" ]; then exec python3 "$TABLE_PY" "$TABLE_ONLY"; fi

MVN_TIMEOUT_S=600       # one `mvn dependency:copy-dependencies` (a first fetch: ~20 s here)
BUILD_TIMEOUT_S=3600    # cargo build --release of corum-tools
STOP_TIMEOUT_S=60       # stopping a version's brokers and quorum after its suite
QUORUM_TIMEOUT_S=180    # corum-quorum.sh start (format, three ready lines, a leader)
# Free space a version's run needs where --out is: three corum nodes preallocate a 64 MiB log
# segment each, the brokers write ~100 MB.
FREE_MB_MIN=1000
# The binding's version when Kafka brings no log4j at all (compat/pom.xml's).
LOG4J_FALLBACK=2.25.3

IFS=, read -r -a VERSION_LIST <<< "$VERSIONS"
[ ${#VERSION_LIST[@]} -gt 0 ] || die "--versions is empty"
for v in "${VERSION_LIST[@]}"; do
  [[ "$v" =~ ^([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || die "--versions: '$v' is not a release such as 4.1.2"
  [ "${BASH_REMATCH[1]}" -ge 4 ] || die "--versions: $v is older than 4.0 (Kafka 3 logs through log4j 1/reload4j, which brokers.sh does not configure)"
done
for tool in mvn java python3; do command -v "$tool" >/dev/null || die "$tool not found"; done

# --- the jars ---------------------------------------------------------------------------------------
# write_pom FILE VERSION [GROUP:ARTIFACT:VERSION ...]: a pom that only names jars to copy.
write_pom() {
  local f="$1" v="$2" extra gav
  shift 2
  extra=""
  for gav in "$@"; do
    IFS=: read -r g a ver <<< "$gav"
    extra+="    <dependency><groupId>$g</groupId><artifactId>$a</artifactId><version>$ver</version><scope>runtime</scope></dependency>"$'\n'
  done
  cat > "$f" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by compat/broker-versions.sh: not a build, only the jars of Kafka $v's brokers. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>corum</groupId>
  <artifactId>corum-compat-kafka-$v</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$v</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$v</version></dependency>
$extra  </dependencies>
</project>
EOF
}

copy_jars() {  # POM_DIR OUT_DIR LOG
  (cd "$1" && timeout "$MVN_TIMEOUT_S" mvn -B -q dependency:copy-dependencies -DincludeScope=runtime \
     -DoutputDirectory="$2") >>"$3" 2>&1
}

# The version in a jar's file name (slf4j-api-1.7.36.jar -> 1.7.36), or nothing.
jar_version() { local j; j=$(compgen -G "$1/$2-[0-9]*.jar" | head -n 1) || return 0; j=${j##*/"$2"-}; echo "${j%.jar}"; }

fetch_jars() {  # VERSION -> the jars directory on stdout
  local v="$1" d="$CACHE/$1" slf4j log4j binding extra=()
  if [ -f "$d/jars.ok" ] && [ -f "$d/jars/kafka_2.13-$v.jar" ]; then echo "$d/jars"; return 0; fi
  mkdir -p "$d"
  rm -rf "$d/jars" "$d/jars.tmp" "$d/jars.ok" "$d/mvn.log"
  write_pom "$d/pom.xml" "$v"
  copy_jars "$d" "$d/jars.tmp" "$d/mvn.log" || die "Kafka $v: mvn dependency:copy-dependencies failed (log: $d/mvn.log)"
  slf4j=$(jar_version "$d/jars.tmp" slf4j-api)
  log4j=$(jar_version "$d/jars.tmp" log4j-core)
  [ -n "$log4j" ] || log4j=$(jar_version "$d/jars.tmp" log4j-api)
  [ -n "$log4j" ] || log4j=$LOG4J_FALLBACK
  case "$slf4j" in
    1.*) binding="log4j-slf4j-impl" ;;
    2.*) binding="log4j-slf4j2-impl" ;;
    *) die "Kafka $v: no slf4j-api among its jars ($d/jars.tmp): which SLF4J binding to add is unknown" ;;
  esac
  extra=("org.apache.logging.log4j:$binding:$log4j")
  [ -n "$(jar_version "$d/jars.tmp" log4j-core)" ] || extra+=("org.apache.logging.log4j:log4j-core:$log4j")
  write_pom "$d/pom.xml" "$v" "${extra[@]}"
  copy_jars "$d" "$d/jars.tmp" "$d/mvn.log" || die "Kafka $v: mvn with $binding failed (log: $d/mvn.log)"
  [ -f "$d/jars.tmp/kafka_2.13-$v.jar" ] || die "Kafka $v: no kafka_2.13-$v.jar after mvn (log: $d/mvn.log)"
  got=$(timeout 60 java -cp "$d/jars.tmp/*" kafka.Kafka --version 2>/dev/null | tail -n 1) || true
  [ "$got" = "$v" ] || die "Kafka $v: kafka.Kafka --version printed '$got'"
  mv "$d/jars.tmp" "$d/jars"
  echo "slf4j-api $slf4j, $binding $log4j$([ ${#extra[@]} = 1 ] || echo ", log4j-core $log4j added")" > "$d/jars.ok"
  echo "$d/jars"
}

echo "broker-versions.sh: jars in $CACHE"
declare -A JARS_OF=()
for v in "${VERSION_LIST[@]}"; do
  t0=$SECONDS
  JARS_OF[$v]=$(fetch_jars "$v")
  printf 'broker-versions.sh:   Kafka %-6s %s (%d files; %s; %d s)\n' "$v" "${JARS_OF[$v]}" \
    "$(find "${JARS_OF[$v]}" -name '*.jar' | wc -l)" "$(cat "$CACHE/$v/jars.ok")" $((SECONDS - t0))
done
[ "$FETCH_ONLY" = 0 ] || exit 0

# --- corum ----------------------------------------------------------------------------------------
if [ -z "$CORUM_BIN_ARG" ]; then
  echo "broker-versions.sh: cargo build --release -p corum-tools"
  (cd "$ROOT" && timeout "$BUILD_TIMEOUT_S" cargo build --release -p corum-tools) || die "cargo build failed"
  CORUM_BIN_ARG="${CARGO_TARGET_DIR:-$ROOT/target}/release/corum"
fi
[ -x "$CORUM_BIN_ARG" ] || die "no corum binary at $CORUM_BIN_ARG"
CORUM_BIN_ARG=$(cd "$(dirname "$CORUM_BIN_ARG")" && pwd)/$(basename "$CORUM_BIN_ARG")

release_for() {  # VERSION -> the release corum is formatted at
  local v="$1" r mm
  for r in ${RELEASES[@]+"${RELEASES[@]}"}; do
    [ "${r%%=*}" != "$v" ] || { echo "${r#*=}"; return 0; }
  done
  mm=$(cut -d. -f1,2 <<< "$v")
  if [ "$(printf '%s\n%s\n' "$mm" "$MAX_RELEASE" | sort -V | tail -n 1)" = "$MAX_RELEASE" ]; then echo "$mm"
  else echo "$MAX_RELEASE"; fi
}

[ -n "$OUT" ] || OUT="/var/tmp/corum-broker-versions/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
{
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "corum_bin=$CORUM_BIN_ARG"
  echo "corum_commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || echo +changes)"
  echo "tools_jars=$(java -cp "$COMPAT/jars/*" kafka.Kafka --version 2>/dev/null | tail -n 1)"
  echo "versions=$VERSIONS"
} > "$OUT/run.env"

# What runs now, so that an interruption stops exactly it.
SUITE_PID="" RUN_DIR=""
stop_run() {
  [ -z "$SUITE_PID" ] || { kill -TERM "$SUITE_PID" 2>/dev/null || true; wait "$SUITE_PID" 2>/dev/null || true; }
  SUITE_PID=""
  [ -n "$RUN_DIR" ] || return 0
  timeout "$STOP_TIMEOUT_S" "$COMPAT/brokers.sh" stop --dir "$RUN_DIR/brokers" --keep --timeout 20 >/dev/null 2>&1 || true
  timeout "$STOP_TIMEOUT_S" "$COMPAT/corum-quorum.sh" stop --dir "$RUN_DIR/controllers" --keep >/dev/null 2>&1 || true
  # The logs stay; the data goes (only once nothing runs on it).
  if [ "$KEEP_DATA" = 0 ] && ! pgrep -f -- "$RUN_DIR/" >/dev/null 2>&1; then
    rm -rf "$RUN_DIR"/controllers/node-*/data "$RUN_DIR"/brokers/broker-*/data
  fi
  RUN_DIR=""
}
trap 'stop_run' EXIT
trap 'echo "broker-versions.sh: interrupted; stopping the running suite" >&2; exit 130' INT TERM

# diagnose VERSION_DIR: what to look at first when a version failed.
or_none() { local x; x=$(cat); if [ -n "$x" ]; then echo "$x"; else echo "none"; fi; }
# By kind: the log lines matching $1 without their timestamps, digits as N, counted.
kinds() {
  grep -E "$1" | sed -E 's/^\[[^]]*\] //; s/^[0-9T:.-]+Z +//; s/[0-9]+/N/g' | cut -c1-240 \
    | sort | uniq -c | sort -rn | head -n 10 | or_none
}
# In a subshell without -e and pipefail: a grep that finds nothing is an answer here.
diagnose() (
  set +e +o pipefail
  local d="$1" f n api='UnsupportedVersion|unsupported version|API version problem|UNSUPPORTED_VERSION'
  {
    echo "== failed checks (suite.out)"
    grep -E '^(FAIL |STEP FAIL|broker-suite.sh: (FAILED|failed check))' "$d/suite.out" | or_none
    echo "== brokers: API version errors per log"
    for f in "$d"/suite/brokers/broker-*/logs/server.log*; do
      [ -f "$f" ] || continue
      n=$(grep -c -E "$api" "$f" || true)
      [ "$n" = 0 ] || echo "$f: $n"
    done | or_none
    echo "== brokers: API version errors, by kind"
    cat "$d"/suite/brokers/broker-*/logs/server.log* 2>/dev/null | kinds "$api"
    echo "== brokers: ERROR lines, by kind"
    cat "$d"/suite/brokers/broker-*/logs/server.log* 2>/dev/null | kinds '^\[[^]]*\] ERROR '
    echo "== corum: WARN and ERROR lines (but the single-core placement note), by kind"
    cat "$d"/suite/controllers/node-*/corum.log 2>/dev/null | grep -v 'single-core placement' | kinds ' (WARN|ERROR) '
    echo "== corum: requests a standby forwarded to the leader (per node start)"
    grep -h 'requests forwarded to the leader' "$d"/suite/controllers/node-*/corum.log 2>/dev/null \
      | sed -E 's/^[^ ]+ +//' | or_none
  } > "$d/diagnosis.txt" 2>&1
)

rc_all=0
for v in "${VERSION_LIST[@]}"; do
  r=$(release_for "$v")
  vd="$OUT/$v"
  free_mb=$(df -Pm "$OUT" | awk 'NR == 2 {print $4}')
  [ "${free_mb:-0}" -ge "$FREE_MB_MIN" ] || die "only ${free_mb} MB free in $OUT, a run needs $FREE_MB_MIN MB: stopped before Kafka $v"
  rm -rf "$vd"
  mkdir -p "$vd"
  RUN_DIR="$vd/suite"
  echo "broker-versions.sh: $(date +%H:%M:%S) Kafka $v brokers, corum formatted at release $r (log: $vd/suite.out)"
  load0=$(cut -d' ' -f1 /proc/loadavg)
  t0=$SECONDS
  rc=0
  if ! timeout "$QUORUM_TIMEOUT_S" "$COMPAT/corum-quorum.sh" start --nodes 3 --dir "$RUN_DIR/controllers" \
      --bin "$CORUM_BIN_ARG" --base-port "$CORUM_PORT" --release-version "$r" \
      --props broker.session.timeout.ms=9000 metadata.log.segment.bytes=67108864 >"$vd/quorum.out" 2>&1 </dev/null; then
    rc=1
    # In the suite's words, for the table.
    { echo "== $(date +%H:%M:%S) controllers (corum)"; cat "$vd/quorum.out"
      echo "STEP FAIL  controllers (corum) (the suite stopped here)"; } > "$vd/suite.out"
  else
    # In the background, so that a signal reaches the trap at once; timeout signals the suite's
    # whole process group (its brokers run in their own, the corum nodes too: stop_run stops them).
    timeout --kill-after=30 "$SUITE_TIMEOUT_S" "$COMPAT/broker-suite.sh" --controllers corum \
      --corum-quorum "$RUN_DIR/controllers" --kafka-jars "${JARS_OF[$v]}" --dir "$RUN_DIR" \
      --messages "$MESSAGES" --session-timeout-ms 9000 --fence-bound-ms 10000 --follow-bound-ms 5000 \
      --broker-base-port "$BROKER_PORT" --keep-going --keep \
      --results "$OUT/results.jsonl" >"$vd/suite.out" 2>&1 </dev/null &
    SUITE_PID=$!
    wait "$SUITE_PID" || rc=$?
    SUITE_PID=""
  fi
  wall=$((SECONDS - t0))
  stop_run
  [ "$rc" = 0 ] || rc_all=1
  cat > "$vd/run.env" <<EOF
version=$v
release=$r
rc=$rc
timed_out=$([ "$rc" = 124 ] || [ "$rc" = 137 ] && echo 1 || echo 0)
wall_s=$wall
load_before=$load0
load_after=$(cut -d' ' -f1 /proc/loadavg)
jars=${JARS_OF[$v]}
EOF
  diagnose "$vd"
  echo "broker-versions.sh: Kafka $v: $([ "$rc" = 0 ] && echo PASS || echo "FAIL (exit $rc)") in $wall s; $(grep -c '^STEP PASS' "$vd/suite.out" || true) step(s) passed"
done

python3 "$TABLE_PY" "$OUT" | tee "$OUT/table.md"
echo "broker-versions.sh: everything kept in $OUT"
exit $rc_all
