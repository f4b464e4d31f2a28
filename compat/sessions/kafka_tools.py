"""Apache Kafka's own command-line tools, run as classes from compat/jars (what kafka-topics.sh,
kafka-configs.sh, kafka-features.sh and kafka-metadata-quorum.sh run), their printed output
checked.

kafka-topics (org.apache.kafka.tools.TopicCommand): --create (partitions and replication factor
given; left to the cluster; --replica-assignment; --config), an existing topic's error, --list,
--describe, --alter --partitions, --delete. kafka-configs (kafka.admin.ConfigCommand): --alter
--add-config / --delete-config and --describe (--all) for a topic, --describe --all for a broker,
and with --bootstrap-controller for a controller. kafka-features (FeatureCommand): describe with
--bootstrap-server and --bootstrap-controller, upgrade --dry-run, a real upgrade of
metadata.version when one is left, an upgrade above the supported range refused.
kafka-metadata-quorum (MetadataQuorumCommand): describe --status and --replication, with
--bootstrap-controller (and --bootstrap-server). After the failover pause everything acknowledged
is still there. Without --controller-bootstrap the --bootstrap-controller steps are skipped, and
the session says so.
"""

import os
import re
import shlex
import subprocess

from common import Session, WrongAnswer, check, check_eq

COMPAT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JAVA_OPTS = shlex.split(os.environ.get(
    "COMPAT_JAVA_OPTS",
    f"-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto "
    f"-Dlog4j2.configurationFile={COMPAT}/log4j2-tools.properties"))
CLASSPATH = os.path.join(os.environ.get("COMPAT_JARS", os.path.join(COMPAT, "jars")), "*")

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "kafka.admin.ConfigCommand"
FEATURES = "org.apache.kafka.tools.FeatureCommand"
QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"


def main():
    s = Session("java-tools", __doc__, controller_bootstrap=True)
    cboot = s.args.controller_bootstrap
    # Every tool gets the session's client id through the admin client's properties file.
    props = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"compat-java-tools-{os.getpid()}.properties")
    with open(props, "w") as f:
        f.write(f"client.id={s.client_id}\nrequest.timeout.ms=10000\ndefault.api.timeout.ms=30000\n")

    def tool(cls, *argv, rc=0, config_flag="--command-config"):
        cmd = ["java", *JAVA_OPTS, "-cp", CLASSPATH, cls, config_flag, props, *argv]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        out = p.stdout + p.stderr
        shown = " ".join(argv)
        if rc == 0:
            check(p.returncode == 0, f"`{cls.rsplit('.', 1)[-1]} {shown}` exited {p.returncode}: {out.strip()[-700:]}")
        else:
            check(p.returncode != 0, f"`{cls.rsplit('.', 1)[-1]} {shown}` succeeded, want a failure: {out.strip()[-300:]}")
        return p.stdout if rc == 0 else out

    def topics(*argv, rc=0):
        return tool(TOPICS, "--bootstrap-server", s.bootstrap, *argv, rc=rc)

    def configs(*argv, controller=False, rc=0):
        target = ["--bootstrap-controller", cboot] if controller else ["--bootstrap-server", s.bootstrap]
        return tool(CONFIGS, *target, *argv, rc=rc)

    def features(*argv, controller=False, rc=0):
        target = ["--bootstrap-controller", cboot] if controller else ["--bootstrap-server", s.bootstrap]
        return tool(FEATURES, *target, *argv, rc=rc)

    def quorum(*argv, controller=True):
        target = ["--bootstrap-controller", cboot] if controller else ["--bootstrap-server", s.bootstrap]
        return tool(QUORUM, *target, *argv)

    def describe_topics(pattern):
        """{topic: {partition: replicas}} from one `kafka-topics --describe --topic REGEX`."""
        out = topics("--describe", "--topic", pattern)
        counts = dict(re.findall(r"^Topic:\s*(\S+)\s+TopicId:\s*\S+\s+PartitionCount:\s*(\d+)", out, re.M))
        got = {t: {} for t in counts}
        for t, p, r in re.findall(r"^\s+Topic:\s*(\S+)\s+Partition:\s*(\d+)\s+Leader:\s*-?\d+\s+"
                                  r"Replicas:\s*([\d,]*)", out, re.M):
            got[t][int(p)] = [int(x) for x in r.split(",") if x]
        for t, n in counts.items():
            check_eq(len(got[t]), int(n), f"partition lines of {t} vs its PartitionCount")
        return got

    def describe_topic(name):
        got = describe_topics(re.escape(name))
        check(name in got, f"--describe --topic {name} did not describe it")
        return got[name]

    def brokers_listed():
        # kafka-topics lists no brokers; `kafka-configs --entity-type brokers --describe` names each
        # broker DescribeCluster returned.
        out = configs("--entity-type", "brokers", "--describe")
        ids = sorted({int(x) for x in re.findall(r"configs for broker (\d+) are", out)})
        check(ids, f"kafka-configs --entity-type brokers --describe named no broker: {out[:300]!r}")
        return ids

    nodes = s.step("kafka-configs --entity-type brokers --describe (the brokers)", brokers_listed)
    brokers = s.step("replica brokers", s.replica_brokers, nodes)
    rf = min(3, len(brokers))
    a, b, c, d, e = (s.topic(x) for x in "abcde")

    def create_topics():
        for argv in (["--topic", a, "--partitions", "3", "--replication-factor", str(rf)],
                     ["--topic", b],
                     ["--topic", c, "--replica-assignment", f"{brokers[0]},{brokers[-1]}"],
                     ["--topic", d, "--partitions", "1", "--replication-factor", str(rf),
                      "--config", "cleanup.policy=compact", "--config", "retention.ms=86400000"]):
            out = topics("--create", *argv)
            check(f"Created topic {argv[1]}." in out, f"--create {argv[1]} printed {out.strip()!r}")
        s.acked_topics.update({a: 3, c: 2, d: 1})
        s.acked_configs[d] = {"cleanup.policy": "compact", "retention.ms": "86400000"}
        out = topics("--create", "--topic", a, "--partitions", "3", rc=1)
        check("already exists" in out, f"--create of an existing topic printed {out.strip()[-300:]!r}")

    s.step("kafka-topics --create (3 partitions; defaults; --replica-assignment; --config; existing)",
           create_topics)

    def listed():
        names = set(topics("--list").split())
        for name in s.acked_topics:
            check(name in names, f"topic {name} missing from --list")
        for name in s.acked_deleted:
            check(name not in names, f"topic {name} listed but deleted")
        if not s.acked_topics:
            return
        described = describe_topics(re.escape(s.prefix) + ".*")
        for name, n in s.acked_topics.items():
            check(name in described, f"topic {name} not described")
            check_eq(len(described[name]), n, f"partitions of {name}")

    def list_topics():
        listed()
        described = describe_topics(re.escape(s.prefix) + ".*")
        check(b in described and len(described[b]) >= 1, f"{b} not described or has no partitions")
        s.acked_topics[b] = len(described[b])
        check_eq(described[c], {0: [brokers[0]], 1: [brokers[-1]]}, f"replicas of {c}")
        check_eq(len(described[a][0]), rf, f"replication factor of {a}")

    s.step("kafka-topics --list / --describe", lambda: s.eventually(list_topics, "topics not as created"))

    def alter_partitions():
        topics("--alter", "--topic", a, "--partitions", "5")
        s.acked_topics[a] = 5
        s.eventually(listed, "partition count after --alter --partitions")
        out = topics("--alter", "--topic", a, "--partitions", "4", rc=1)
        check("partition" in out.lower(), f"decrease printed {out.strip()[-300:]!r}")

    s.step("kafka-topics --alter --partitions 5 (and 4, refused)", alter_partitions)

    def topic_configs(name, all_keys=True):
        """{key: (value, source)} from `kafka-configs --describe [--all]` for a topic."""
        argv = ["--entity-type", "topics", "--entity-name", name, "--describe"] + (["--all"] if all_keys else [])
        out = configs(*argv)
        got = {}
        for k, val, syn in re.findall(r"^\s+([\w.]+)=(.*?) sensitive=\w+ synonyms=\{(.*)\}$", out, re.M):
            source = syn.split(":", 1)[0] if syn else ""
            got[k] = (val, source)
        return got

    def check_configs(name, want, source="DYNAMIC_TOPIC_CONFIG"):
        got = topic_configs(name)
        for k, val in want.items():
            check(k in got, f"{name}: config {k} not described")
            check_eq(got[k], (val, source), f"{name} {k} (value, source)")
        return got

    def describe_configs():
        got = s.eventually(lambda: check_configs(d, s.acked_configs[d]), "configs set at creation")
        for k in ("retention.bytes", "segment.bytes", "min.insync.replicas", "max.message.bytes",
                  "compression.type"):
            check(k in got, f"{d}: default config {k} not described")

    s.step("kafka-configs --describe --all (topic)", describe_configs)

    def alter_configs():
        configs("--entity-type", "topics", "--entity-name", a, "--alter",
                "--add-config", "retention.ms=3600000,cleanup.policy=[delete,compact]")
        s.eventually(lambda: check_configs(a, {"retention.ms": "3600000", "cleanup.policy": "delete,compact"}),
                     "configs after --add-config")
        configs("--entity-type", "topics", "--entity-name", a, "--alter", "--delete-config", "cleanup.policy")
        s.eventually(lambda: check_configs(a, {"cleanup.policy": "delete"}, "DEFAULT_CONFIG"),
                     "config after --delete-config")
        s.acked_configs[a] = {"retention.ms": "3600000"}
        dynamic = topic_configs(a, all_keys=False)
        check_eq(sorted(dynamic), ["retention.ms"], f"dynamic configs of {a} (--describe without --all)")

    s.step("kafka-configs --alter --add-config / --delete-config (topic)", alter_configs)

    def broker_configs():
        out = configs("--entity-type", "brokers", "--entity-name", str(brokers[0]), "--describe", "--all")
        for k in ("num.partitions", "default.replication.factor", "log.segment.bytes"):
            check(re.search(rf"^\s+{re.escape(k)}=", out, re.M), f"broker {brokers[0]}: {k} not described")

    s.step("kafka-configs --describe --all (broker)", broker_configs)

    def feature_levels(controller=False):
        """metadata.version's (finalized, supported max) level names from `kafka-features describe`."""
        out = features("describe", controller=controller)
        m = re.search(r"Feature: metadata\.version\s+SupportedMinVersion: (\S+)\s+SupportedMaxVersion: (\S+)\s+"
                      r"FinalizedVersionLevel: (\S+)", out)
        check(m, f"describe printed no metadata.version line: {out.strip()!r}")
        return m.group(3), m.group(2)

    def level_of(name):
        """A metadata.version name's numeric level, from the tool's own table (no server asked)."""
        out = features("version-mapping", "--release-version", name)
        m = re.search(r"metadata\.version=(\d+)", out)
        check(m, f"version-mapping {name} printed {out.strip()!r}")
        return int(m.group(1))

    def features_step():
        fin_name, max_name = feature_levels()
        fin, top = level_of(fin_name), level_of(max_name)
        out = features("upgrade", "--feature", f"metadata.version={top}", "--dry-run")
        check(f"can be upgraded to {top}" in out, f"upgrade --dry-run printed {out.strip()!r}")
        features("upgrade", "--feature", f"metadata.version={top + 1}", "--dry-run", rc=1)
        if fin < top:
            out = features("upgrade", "--feature", f"metadata.version={fin + 1}")
            check(f"was upgraded to {fin + 1}" in out, f"upgrade printed {out.strip()!r}")
            s.eventually(lambda: check_eq(level_of(feature_levels()[0]), fin + 1, "finalized metadata.version"),
                         "upgrade not visible")
        else:
            s.log(f"metadata.version already at its highest level {top}: only --dry-run upgrades ran")

    s.step("kafka-features describe / upgrade (--bootstrap-server)", features_step)

    def quorum_status(controller):
        out = quorum("describe", "--status", controller=controller)
        fields = dict(re.findall(r"^(\w+):\s+(.*)$", out, re.M))
        for k in ("ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "CurrentVoters"):
            check(k in fields, f"describe --status printed no {k}: {out.strip()!r}")
        voters = [int(x) for x in re.findall(r'"id":\s*(\d+)', fields["CurrentVoters"])]
        check(int(fields["LeaderId"]) in voters, f"leader {fields['LeaderId']} not among voters {voters}")
        check(int(fields["HighWatermark"]) > 0, f"high watermark {fields['HighWatermark']}")
        return voters

    def quorum_replication(controller):
        out = quorum("describe", "--replication", controller=controller)
        rows = [line.split() for line in out.strip().splitlines()[1:]]
        statuses = sorted(r[-1] for r in rows)
        check(statuses.count("Leader") == 1, f"describe --replication: not one Leader: {out.strip()!r}")
        return rows

    s.step("kafka-metadata-quorum --bootstrap-server describe --status", lambda: quorum_status(False))
    if cboot:
        def controller_steps():
            voters = quorum_status(True)
            rows = quorum_replication(True)
            check_eq(sorted(int(r[0]) for r in rows if r[-1] in ("Leader", "Follower")), sorted(voters),
                     "voters in --replication")
            fin_name, _ = feature_levels(controller=True)
            check(fin_name, "no finalized metadata.version through the controllers")
            out = configs("--entity-type", "brokers", "--entity-name", str(voters[0]), "--describe", "--all",
                          controller=True)
            check(re.search(r"^\s+[\w.]+=", out, re.M), f"controller {voters[0]}: no configs: {out[:300]!r}")

        s.step("--bootstrap-controller: metadata-quorum --status/--replication, features describe, "
               "configs --describe", controller_steps)
    else:
        s.log("no --controller-bootstrap: the --bootstrap-controller steps did not run")

    def delete_topic():
        topics("--delete", "--topic", b)
        del s.acked_topics[b]
        s.acked_deleted.add(b)
        s.eventually(listed, "topics after --delete")
        out = topics("--delete", "--topic", s.topic("never-created"), rc=1)
        check("does not exist" in out or "UnknownTopicOrPartition" in out,
              f"--delete of an unknown topic printed {out.strip()[-300:]!r}")

    s.step("kafka-topics --delete (and an unknown topic)", delete_topic)

    if s.pause():
        s.step("after failover: acknowledged topics still there", lambda: s.eventually(listed, "topics"))
        for name, cfg in s.acked_configs.items():
            s.step(f"after failover: configs of {name} still set",
                   lambda: s.eventually(lambda: check_configs(name, cfg), "configs"))
        if cboot:
            s.step("after failover: kafka-metadata-quorum --bootstrap-controller describe --status",
                   lambda: s.eventually(lambda: quorum_status(True), "quorum"))

    def create_after():
        out = topics("--create", "--topic", e, "--partitions", "1")
        check(f"Created topic {e}." in out, f"--create {e} printed {out.strip()!r}")
        s.acked_topics[e] = 1
        s.eventually(listed, "topic created last")

    s.step("kafka-topics --create one more", create_after)

    def cleanup():
        for name in sorted(s.acked_topics):
            topics("--delete", "--topic", name)
        s.acked_deleted.update(s.acked_topics)
        s.acked_topics.clear()
        s.eventually(listed, "topics after the final delete")

    s.step("kafka-topics --delete the session's topics", cleanup)
    os.unlink(props)
    s.done()


if __name__ == "__main__":
    try:
        main()
    except WrongAnswer as e:
        print(f"FAIL {e}")
        raise SystemExit(1)
