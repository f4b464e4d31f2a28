#!/usr/bin/env bash
# Installs everything the Kafka compatibility suite needs, and fails (non-zero, naming what is
# missing) when something cannot be installed. Idempotent: a second run checks and skips.
#
#   compat/install.sh
#
# What it installs (all pinned; the versions are the ones the suite was proven with):
#   kcat                      Debian's package (apt-get), with the librdkafka it links
#   nft, ip, setpriv          Debian's nftables, iproute2 and util-linux (apt-get): `corum chaos`
#                             (tools/tests/tools/chaos.rs) cuts links with nftables rules in
#                             network namespaces, and checks its refusal without root
#   losetup, mount, mkfs.ext4 util-linux, mount and e2fsprogs (apt-get): `corum chaos` and
#                             tools/tests/tools/disk_full.rs put nodes on loop filesystems
#   iptables, iptables-restore Debian's iptables (apt-get): `corum chaos`'s packet faults
#                             (delay, loss, reorder) queue a node's packets to a user-space
#                             worker with the NFQUEUE target; checked by adding and deleting
#                             such a rule in a throwaway network namespace
#   compat/.venv              Python venv: confluent-kafka, kafka-python, aiokafka (requirements.txt)
#   compat/node_modules       kafkajs (package.json, package-lock.json)
#   compat/jars               Apache Kafka's jars and their runtime dependencies, copied by Maven
#                             from pom.xml (kafka-clients, kafka-tools, kafka-server-common,
#                             kafka_2.13, kafka-shell): Kafka's tools run as classes from there
#   compat/build/classes      the Java session program (sessions/java) and Kafka's check of corum's
#                             metadata record codecs (kafka/metadata/MetadataRecordCheck.java, run
#                             by kafka/tests/metadata_kafka.rs), compiled against the jars
#   compat/build/brokers      brokers.sh's traffic check and broker monitor (brokers/java), likewise
# What it needs already on the machine: python3 (3.9+, with venv), node and npm (16+), a JDK 17+
# (java, javac) and mvn, and root or sudo for apt-get when kcat is missing.
set -uo pipefail

COMPAT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STAMPS="$COMPAT/.installed"
mkdir -p "$STAMPS"

missing=()
fail() { echo "install.sh: MISSING $1: $2" >&2; missing+=("$1"); }
step_start() { step_t0=$SECONDS; printf 'install.sh: %-8s ' "$1"; }
step_done() { echo "$1 ($((SECONDS - step_t0)) s)"; }

# A stamp records the hash of the file that describes an install step, so a second run skips the
# step while that file is unchanged and what it installed is still there.
stamp_of() { cat "$@" | sha256sum | cut -c1-16; }
stamp_ok() { [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else return 1
  fi
}

kcat_version() { kcat -V 2>&1 | sed -n -E 's/^Version ([^ ]+) .*(librdkafka [^ ]+).*/kcat \1, \2/p'; }
major_version() { sed -E 's/^[^0-9]*([0-9]+).*/\1/'; }

# --- kcat (Debian package) -------------------------------------------------------------------
step_start kcat
if command -v kcat >/dev/null; then
  step_done "present: $(kcat_version)"
else
  if command -v apt-get >/dev/null \
     && as_root apt-get update -qq >"$STAMPS/apt.log" 2>&1 \
     && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >>"$STAMPS/apt.log" 2>&1 \
     && command -v kcat >/dev/null; then
    step_done "installed: $(kcat_version)"
  else
    echo
    fail kcat "apt-get install kcat failed (needs root or sudo and Debian's package lists; log: compat/.installed/apt.log)"
  fi
fi

# --- nftables, iptables, iproute2, util-linux, e2fsprogs (Debian packages, for corum chaos) ---
step_start netns
chaos_tools() {
  for t in nft iptables iptables-restore ip setpriv losetup mount mkfs.ext4; do
    command -v "$t" >/dev/null || return 1
  done
}
# The NFQUEUE target works: a rule using it is added and deleted in a throwaway namespace.
nfqueue_ok() {
  local ns="corum-install-nfq-$$" rule=(OUTPUT -o lo -j NFQUEUE --queue-num 18 --queue-bypass) rc
  as_root ip netns add "$ns" >>"$STAMPS/nfqueue.log" 2>&1 || return 1
  as_root ip netns exec "$ns" iptables -w 5 -A "${rule[@]}" >>"$STAMPS/nfqueue.log" 2>&1 \
    && as_root ip netns exec "$ns" iptables -w 5 -D "${rule[@]}" >>"$STAMPS/nfqueue.log" 2>&1
  rc=$?
  as_root ip netns del "$ns" >>"$STAMPS/nfqueue.log" 2>&1
  return $rc
}
if chaos_tools; then
  netns_got="present"
elif command -v apt-get >/dev/null \
     && as_root apt-get update -qq >"$STAMPS/apt-netns.log" 2>&1 \
     && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables iptables iproute2 util-linux mount e2fsprogs >>"$STAMPS/apt-netns.log" 2>&1 \
     && chaos_tools; then
  netns_got="installed"
else
  netns_got=""
  echo
  fail nftables "apt-get install nftables iptables iproute2 util-linux mount e2fsprogs failed (needs root or sudo and Debian's package lists; log: compat/.installed/apt-netns.log)"
fi
if [ -n "$netns_got" ]; then
  : >"$STAMPS/nfqueue.log"
  if nfqueue_ok; then
    step_done "$netns_got: $(nft --version 2>&1 | head -n 1), $(iptables --version 2>&1 | head -n 1) with NFQUEUE"
  else
    echo
    fail iptables-nfqueue "an iptables rule with the NFQUEUE target could not be added in a network namespace (needs root or sudo, and a kernel with CONFIG_NETFILTER_XT_TARGET_NFQUEUE and CONFIG_NETFILTER_NETLINK_QUEUE; log: compat/.installed/nfqueue.log)"
  fi
fi

# --- Python clients (venv) -------------------------------------------------------------------
step_start python
if ! command -v python3 >/dev/null; then
  echo; fail python3 "python3 (3.9 or newer, with the venv module) is not on the PATH"
else
  want=$(stamp_of "$COMPAT/requirements.txt")
  check='from importlib.metadata import version as v; import confluent_kafka, kafka, aiokafka; print(", ".join(p + " " + v(p) for p in ("confluent-kafka", "kafka-python", "aiokafka")) + " (librdkafka " + confluent_kafka.libversion()[0] + ")")'
  if stamp_ok venv "$want" && got=$("$COMPAT/.venv/bin/python" -c "$check" 2>/dev/null); then
    step_done "present: $got"
  else
    rm -f "$STAMPS/venv"
    if { [ -x "$COMPAT/.venv/bin/python" ] || python3 -m venv "$COMPAT/.venv"; } \
       && "$COMPAT/.venv/bin/pip" install -q --disable-pip-version-check -r "$COMPAT/requirements.txt" \
       && got=$("$COMPAT/.venv/bin/python" -c "$check"); then
      echo "$want" > "$STAMPS/venv"
      step_done "installed: $got"
    else
      echo; fail python-clients "pip install -r compat/requirements.txt into compat/.venv failed"
    fi
  fi
fi

# --- kafkajs (npm) ---------------------------------------------------------------------------
step_start node
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo; fail node "node and npm (16 or newer) are not on the PATH"
elif [ "$(node --version | major_version)" -lt 16 ]; then
  echo; fail node "node $(node --version) is older than 16"
else
  want=$(stamp_of "$COMPAT/package.json" "$COMPAT/package-lock.json")
  check="console.log(require('kafkajs/package.json').version)"
  if stamp_ok npm "$want" && got=$(cd "$COMPAT" && node -e "$check" 2>/dev/null); then
    step_done "present: kafkajs $got"
  else
    rm -f "$STAMPS/npm"
    if (cd "$COMPAT" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) \
       && got=$(cd "$COMPAT" && node -e "$check"); then
      echo "$want" > "$STAMPS/npm"
      step_done "installed: kafkajs $got"
    else
      echo; fail kafkajs "npm ci in compat/ failed"
    fi
  fi
fi

# --- Kafka's jars (Maven) and the Java session program ----------------------------------------
step_start java
java_ok=1
for tool in java javac; do
  command -v "$tool" >/dev/null || { [ $java_ok = 1 ] && echo; fail "$tool" "not on the PATH (a JDK 17 or newer is needed)"; java_ok=0; }
done
if [ $java_ok = 1 ]; then
  jv=$(java -version 2>&1 | awk -F'"' '/version/ {print $2}' | major_version)
  if [ "${jv:-0}" -lt 17 ]; then echo; fail java "java $jv is older than 17 (Kafka 4's tools need 17)"; java_ok=0; fi
fi
if [ $java_ok = 1 ]; then
  want=$(stamp_of "$COMPAT/pom.xml")
  jars_version() { java -cp "$COMPAT/jars/*" org.apache.kafka.tools.TopicCommand --version 2>/dev/null | awk '{print $1; exit}'; }
  if stamp_ok jars "$want" && got=$(jars_version) && [ -n "$got" ]; then
    step_done "present: Kafka $got jars ($(find "$COMPAT/jars" -name '*.jar' | wc -l) files)"
  else
    rm -f "$STAMPS/jars"
    rm -rf "$COMPAT/jars"
    if ! command -v mvn >/dev/null; then
      echo; fail mvn "not on the PATH (Maven copies Kafka's jars from Maven Central)"
      java_ok=0
    elif (cd "$COMPAT" && mvn -B -q dependency:copy-dependencies -DincludeScope=runtime \
          -DoutputDirectory="$COMPAT/jars" >"$STAMPS/mvn.log" 2>&1) \
       && got=$(jars_version) && [ -n "$got" ]; then
      echo "$want" > "$STAMPS/jars"
      step_done "installed: Kafka $got jars ($(find "$COMPAT/jars" -name '*.jar' | wc -l) files)"
    else
      echo; fail kafka-jars "mvn dependency:copy-dependencies on compat/pom.xml failed (log: compat/.installed/mvn.log)"
      java_ok=0
    fi
  fi
fi
if [ $java_ok = 1 ]; then
  step_start javac
  srcs=("$COMPAT"/sessions/java/*.java "$COMPAT"/../kafka/metadata/*.java)
  want=$(stamp_of "${srcs[@]}" "$STAMPS/jars")
  if stamp_ok classes "$want" && [ -d "$COMPAT/build/classes" ]; then
    step_done "present: ${#srcs[@]} source file(s) compiled"
  else
    rm -rf "$COMPAT/build/classes"
    if javac -Xlint:all -Werror -d "$COMPAT/build/classes" -cp "$COMPAT/jars/*" "${srcs[@]}" >"$STAMPS/javac.log" 2>&1; then
      echo "$want" > "$STAMPS/classes"
      step_done "compiled ${#srcs[@]} source file(s)"
    else
      echo; cat "$STAMPS/javac.log" >&2
      fail java-session "javac of compat/sessions/java and kafka/metadata failed"
    fi
  fi
fi

if [ $java_ok = 1 ]; then
  step_start brokers
  srcs=("$COMPAT"/brokers/java/*.java)
  want=$(stamp_of "${srcs[@]}" "$STAMPS/jars")
  if stamp_ok brokers "$want" && [ -d "$COMPAT/build/brokers" ]; then
    step_done "present: ${#srcs[@]} source file(s) compiled"
  else
    rm -rf "$COMPAT/build/brokers"
    if javac -Xlint:all -Werror -d "$COMPAT/build/brokers" -cp "$COMPAT/jars/*" "${srcs[@]}" >"$STAMPS/javac-brokers.log" 2>&1; then
      echo "$want" > "$STAMPS/brokers"
      step_done "compiled ${#srcs[@]} source file(s)"
    else
      echo; cat "$STAMPS/javac-brokers.log" >&2
      fail broker-programs "javac of compat/brokers/java failed"
    fi
  fi
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "install.sh: FAILED, missing: ${missing[*]}" >&2
  exit 1
fi
echo "install.sh: ok ($SECONDS s)"
