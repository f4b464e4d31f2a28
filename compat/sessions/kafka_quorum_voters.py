"""Apache Kafka's kafka-metadata-quorum (org.apache.kafka.tools.MetadataQuorumCommand, from
compat/jars) changing a dynamic quorum's voters through --bootstrap-controller (KIP-853), its
printed output checked:

  describe --status         every voter with its directory id and endpoints; the controller of
                            --controller-config among them, with the directory id of its
                            meta.properties and the controller listener of its properties
  remove-controller         that controller, by id and directory id; it keeps running and
                            describe --replication lists it as an Observer, not a voter
  add-controller            the same controller again, from its properties file (--command-config:
                            node.id, controller.listener.names, listeners / advertised.listeners,
                            metadata.log.dir's meta.properties); asked again while the leader
                            answers that it is not caught up yet
  describe --replication    the controller back as a Follower
  describe --status         the voters as at the start

With --static the quorum is a static one (controller.quorum.voters): remove-controller of
--controller-id / --controller-directory-id must fail, and the tool must say that the voters of
the quorum cannot change (UNSUPPORTED_VERSION). Then Kafka's kafka-features
(org.apache.kafka.tools.FeatureCommand, --bootstrap-controller) upgrades the quorum (KIP-853):

  kafka-features describe           kraft.version supported 0..1, not finalized above 0
  kafka-features upgrade            --feature kraft.version=1 (--dry-run first: nothing changes)
  kafka-features describe           kraft.version finalized at 1
  describe --status                 every voter now with its directory id
  remove-controller                 the same controller as before, now removed

Not part of run.sh's default sessions: it needs a dynamic quorum and one of its controllers'
properties files, and it changes the quorum. tools/tests/tools/kafka_compat.rs runs it against
corum (`kafka_metadata_quorum_*` tests).
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import time

from common import WrongAnswer, check, check_eq

COMPAT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JAVA_OPTS = shlex.split(os.environ.get(
    "COMPAT_JAVA_OPTS",
    f"-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto "
    f"-Dlog4j2.configurationFile={COMPAT}/log4j2-tools.properties"))
CLASSPATH = os.path.join(os.environ.get("COMPAT_JARS", os.path.join(COMPAT, "jars")), "*")
QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
FEATURES = "org.apache.kafka.tools.FeatureCommand"

STARTED = time.monotonic()


def log(message):
    print(f"[java-quorum-voters {time.monotonic() - STARTED:7.2f}s] {message}", flush=True)


def quorum(cboot, *argv, config=None):
    """Runs the tool; returns (exit code, stdout, stdout + stderr)."""
    cmd = ["java", *JAVA_OPTS, "-cp", CLASSPATH, QUORUM, "--bootstrap-controller", cboot]
    if config:
        cmd += ["--command-config", config]
    cmd += list(argv)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    return p.returncode, p.stdout, p.stdout + p.stderr


def features(cboot, *argv):
    """Runs kafka-features; returns (exit code, stdout + stderr)."""
    cmd = ["java", *JAVA_OPTS, "-cp", CLASSPATH, FEATURES, "--bootstrap-controller", cboot, *argv]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    return p.returncode, p.stdout + p.stderr


def kraft_version_line(cboot):
    """(supported max, finalized level) of kraft.version in kafka-features describe."""
    rc, both = features(cboot, "describe")
    check(rc == 0, f"kafka-features describe exited {rc}: {both.strip()[-900:]}")
    line = next((l for l in both.splitlines() if re.search(r"Feature:\s*kraft\.version\b", l)), None)
    check(line, f"kafka-features describe lists no kraft.version: {both.strip()!r}")
    fields = dict(re.findall(r"(\w+):\s*(\S+)", line))
    return fields.get("SupportedMaxVersion"), fields.get("FinalizedVersionLevel")


def ok(cboot, *argv, config=None):
    rc, out, both = quorum(cboot, *argv, config=config)
    check(rc == 0, f"`kafka-metadata-quorum {' '.join(argv)}` exited {rc}: {both.strip()[-900:]}")
    return out


def properties(path):
    """A Java properties file's key=value lines (enough for the files corum and Kafka write)."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", "!")) and "=" in line:
                k, v = line.split("=", 1)
                out[k.strip()] = v.strip()
    return out


def controller_of(config):
    """(node id, directory id, controller endpoints as NAME://HOST:PORT) from a controller's
    properties file and its meta.properties, as add-controller reads them."""
    props = properties(config)
    meta = properties(os.path.join(props["metadata.log.dir"], "meta.properties"))
    names = [n.strip().upper() for n in props["controller.listener.names"].split(",")]
    listeners = {}
    for key in ("listeners", "advertised.listeners"):
        for entry in filter(None, props.get(key, "").split(",")):
            name, addr = entry.strip().split("://", 1)
            listeners[name.upper()] = addr
    return int(props["node.id"]), meta["directory.id"], [f"{n}://{listeners[n]}" for n in names]


def voters_of_status(out):
    """{id: (directory id or None, [endpoints])} from describe --status's CurrentVoters."""
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", out, re.M))
    check("CurrentVoters" in fields, f"describe --status printed no CurrentVoters: {out.strip()!r}")
    voters = {}
    for obj in re.findall(r"\{[^}]*\}", fields["CurrentVoters"]):
        vid = re.search(r'"id":\s*(\d+)', obj)
        check(vid, f"a voter without an id: {obj!r}")
        dir_id = re.search(r'"directoryId":\s*"([^"]+)"', obj)
        endpoints = re.findall(r'"([A-Z0-9_]+://[^"]+)"', obj)
        voters[int(vid.group(1))] = (dir_id.group(1) if dir_id else None, endpoints)
    check(int(fields["LeaderId"]) in voters, f"leader {fields['LeaderId']} not among voters {voters}")
    return voters


def replication(cboot):
    """{id: status} from describe --replication."""
    out = ok(cboot, "describe", "--replication")
    rows = [line.split() for line in out.strip().splitlines()[1:]]
    return {int(r[0]): r[-1] for r in rows}


def eventually(fn, what, settle_s=30.0):
    deadline = time.monotonic() + settle_s
    while True:
        try:
            return fn()
        except WrongAnswer as e:
            if time.monotonic() >= deadline:
                raise WrongAnswer(f"{what} (still after {settle_s:.0f} s): {e}")
        time.sleep(0.3)


def step(name, fn):
    t0 = time.monotonic()
    try:
        result = fn()
    except WrongAnswer as e:
        log(f"FAIL step '{name}': wrong answer: {e}")
        sys.exit(1)
    log(f"ok   {name} ({(time.monotonic() - t0) * 1000:.0f} ms)")
    return result


def dynamic(args):
    cboot = args.controller_bootstrap
    node, dir_id, endpoints = controller_of(args.controller_config)
    log(f"controller {node}: directory id {dir_id}, endpoints {endpoints}")

    def status_names_every_voter():
        voters = voters_of_status(ok(cboot, "describe", "--status"))
        check(node in voters, f"controller {node} is not a voter: {voters}")
        check_eq(voters[node], (dir_id, endpoints), f"voter {node}'s directory id and endpoints")
        for vid, (d, e) in voters.items():
            check(d is not None and e, f"voter {vid} printed without a directory id or endpoints")
        return voters

    before = step("describe --status: voters with directory ids and endpoints", status_names_every_voter)

    def remove():
        out = ok(cboot, "remove-controller", "--controller-id", str(node),
                 "--controller-directory-id", dir_id)
        # Kafka 4.1 prints two spaces after "Removed".
        check(re.search(rf"Removed\s+KRaft controller {node} with directory id {re.escape(dir_id)}", out),
              f"printed {out!r}")

    step(f"remove-controller --controller-id {node}", remove)

    def observer():
        rows = replication(cboot)
        check_eq(rows.get(node), "Observer", f"controller {node} in describe --replication {rows}")
        check_eq(sorted(v for v, s in rows.items() if s in ("Leader", "Follower")),
                 sorted(v for v in before if v != node), "voters in describe --replication")

    step("describe --replication: the removed controller fetches as an Observer",
         lambda: eventually(observer, "the removed controller is not an observer"))

    def add():
        # The leader refuses a controller that has not caught up (REQUEST_TIMED_OUT); Kafka's
        # tool does not retry, so an operator asks again.
        deadline = time.monotonic() + 30
        while True:
            rc, out, both = quorum(cboot, "add-controller", config=args.controller_config)
            if rc == 0:
                break
            check("TimeoutException" in both and time.monotonic() < deadline,
                  f"add-controller exited {rc}: {both.strip()[-900:]}")
            log(f"add-controller refused for now: {both.strip().splitlines()[0]}")
            time.sleep(1)
        want = (f"Added controller {node} with directory id {dir_id} and endpoints: "
                f"{', '.join(endpoints)}")
        check(want in out, f"printed {out!r}, want {want!r}")

    step(f"add-controller --command-config {os.path.basename(args.controller_config)}", add)

    def follower():
        rows = replication(cboot)
        check_eq(rows.get(node), "Follower", f"controller {node} in describe --replication {rows}")

    step("describe --replication: the controller is a voter again",
         lambda: eventually(follower, "the added controller is not a follower"))
    step("describe --status: the voters as at the start",
         lambda: eventually(lambda: check_eq(voters_of_status(ok(cboot, "describe", "--status")), before,
                                             "voters"), "voters"))


def static(args):
    cboot = args.controller_bootstrap

    def refused():
        rc, _, both = quorum(cboot, "remove-controller", "--controller-id", str(args.controller_id),
                             "--controller-directory-id", args.controller_directory_id)
        check(rc != 0, f"remove-controller on a static quorum succeeded: {both.strip()[-300:]}")
        check("UnsupportedVersionException" in both and "static" in both,
              f"remove-controller on a static quorum: no clear reason: {both.strip()[-600:]}")

    step("remove-controller on a static quorum: refused with the reason", refused)

    def static_version():
        supported, finalized = kraft_version_line(cboot)
        check_eq(supported, "1", "kraft.version's SupportedMaxVersion")
        check(finalized in (None, "0", "-"), f"a static quorum finalized kraft.version {finalized}")

    step("kafka-features describe: kraft.version 0 (static)", static_version)

    def dry_run():
        rc, both = features(cboot, "upgrade", "--feature", "kraft.version=1", "--dry-run")
        check(rc == 0, f"kafka-features upgrade --dry-run exited {rc}: {both.strip()[-900:]}")
        static_version()

    step("kafka-features upgrade --feature kraft.version=1 --dry-run: nothing changes", dry_run)

    def upgrade():
        rc, both = features(cboot, "upgrade", "--feature", "kraft.version=1")
        check(rc == 0, f"kafka-features upgrade exited {rc}: {both.strip()[-900:]}")
        check("kraft.version was upgraded to 1" in both, f"printed {both.strip()!r}")
        check_eq(kraft_version_line(cboot)[1], "1", "kraft.version's FinalizedVersionLevel")

    step("kafka-features upgrade --feature kraft.version=1", upgrade)

    def voters_with_directories():
        voters = voters_of_status(ok(cboot, "describe", "--status"))
        for vid, (d, e) in voters.items():
            check(d is not None and e, f"voter {vid} printed without a directory id or endpoints")
        check_eq(voters.get(args.controller_id, (None,))[0], args.controller_directory_id,
                 f"voter {args.controller_id}'s directory id")

    step("describe --status: every voter with its directory id", voters_with_directories)

    def removed():
        out = ok(cboot, "remove-controller", "--controller-id", str(args.controller_id),
                 "--controller-directory-id", args.controller_directory_id)
        check(re.search(rf"Removed\s+KRaft controller {args.controller_id}", out), f"printed {out!r}")

    step(f"remove-controller --controller-id {args.controller_id}: dynamic now", removed)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--controller-bootstrap", required=True,
                        help="HOST:PORT[,...] of the controllers' Kafka listeners (KIP-919)")
    parser.add_argument("--controller-config",
                        help="the properties file of the controller to remove and add back")
    parser.add_argument("--static", action="store_true",
                        help="the quorum is static: remove-controller must be refused")
    parser.add_argument("--controller-id", type=int, help="with --static: the voter to remove")
    parser.add_argument("--controller-directory-id", help="with --static: its directory id")
    args = parser.parse_args()
    if args.static:
        if args.controller_id is None or not args.controller_directory_id:
            parser.error("--static needs --controller-id and --controller-directory-id")
        static(args)
    else:
        if not args.controller_config:
            parser.error("--controller-config is required (or --static)")
        dynamic(args)
    log(f"PASS ({time.monotonic() - STARTED:.1f} s)")


if __name__ == "__main__":
    main()
