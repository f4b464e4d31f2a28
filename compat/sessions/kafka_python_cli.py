"""kafka-python's command line, `python -m kafka.admin --format json ...`, one process per command.

cluster describe (DescribeCluster), cluster describe-quorum (DescribeQuorum), cluster
describe-features and update-features (validate-only; a real upgrade of metadata.version when one
is left), cluster api-versions; topics create (partitions and replication factor given, and left to
the cluster) / list / describe / delete; partitions create; configs describe (topic, broker) /
alter (set, del: IncrementalAlterConfigs) / reset; an existing topic's and an unknown topic's
errors. After the failover pause everything acknowledged is still there.
"""

import json
import subprocess
import sys

from common import Session, WrongAnswer, check, check_eq


class Undelivered(Exception):
    """The command could not connect to the node it chose (kafka-python raises and exits)."""


def main():
    s = Session("kafka-python-cli", __doc__)
    # Each command is a new process, so a retry is a new client.
    s.undelivered = lambda e: isinstance(e, Undelivered)
    base = [sys.executable, "-m", "kafka.admin", "--format", "json", "-C", f"client_id={s.client_id}",
            "-l", "ERROR"]
    for server in s.bootstrap.split(","):
        base += ["-b", server]

    def cli(*argv, expect_error=None):
        """Runs one command; returns its JSON, or checks the "[Error N]" it printed."""
        p = subprocess.run(base + list(argv), capture_output=True, text=True, timeout=120)
        out = p.stdout.strip()
        if p.returncode != 0 and any(x in p.stderr for x in ("KafkaConnectionError", "NodeNotReadyError")):
            raise Undelivered(p.stderr.strip().splitlines()[-1])
        if expect_error is not None:
            check(f"[Error {expect_error}]" in out + p.stderr,
                  f"`{' '.join(argv)}`: want [Error {expect_error}], got exit {p.returncode}: {out[:300]!r}")
            return None
        check(p.returncode == 0 and not out.startswith("[Error"),
              f"`{' '.join(argv)}` exited {p.returncode}: {(out + p.stderr)[-600:]!r}")
        try:
            return json.loads(out)
        except json.JSONDecodeError as e:
            raise WrongAnswer(f"`{' '.join(argv)}` printed no JSON ({e}): {out[:300]!r}")

    def describe_cluster():
        d = cli("cluster", "describe")
        ids = sorted(b["broker_id"] for b in d["brokers"])
        check(d["cluster_id"], "empty cluster id")
        check(ids, "no brokers")
        check(d["controller_id"] in ids, f"controller {d['controller_id']} is not one of the brokers {ids}")
        return ids

    nodes = s.step("cluster describe", describe_cluster)
    brokers = s.step("replica brokers", s.replica_brokers, nodes)
    rf = min(3, len(brokers))
    a, b, e = s.topic("a"), s.topic("b"), s.topic("e")

    def describe_quorum():
        q = cli("cluster", "describe-quorum")
        [p] = q["topics"][0]["partitions"]
        voters = [v["replica_id"] for v in p["current_voters"]]
        check(p["leader_id"] in voters, f"leader {p['leader_id']} not among voters {voters}")
        check(p["high_watermark"] > 0, f"high watermark {p['high_watermark']}")

    s.step("cluster describe-quorum", describe_quorum)

    def features():
        f = cli("cluster", "describe-features")
        check("metadata.version" in f, f"metadata.version not described: {sorted(f)}")
        lo, hi = f["metadata.version"]["supported"]
        fin = f["metadata.version"]["finalized"][1]
        check(lo <= fin <= hi, f"finalized {fin} outside supported {lo}..{hi}")
        check_eq(cli("cluster", "update-features", "-f", f"metadata.version={hi}", "--validate-only"),
                 {"metadata.version": "OK"}, "validate-only upgrade")
        if fin < hi:
            check_eq(cli("cluster", "update-features", "-f", f"metadata.version={fin + 1}"),
                     {"metadata.version": "OK"}, f"upgrade to {fin + 1}")
            s.eventually(lambda: check_eq(cli("cluster", "describe-features")["metadata.version"]["finalized"][1],
                                          fin + 1, "finalized metadata.version"), "upgrade not visible")
        else:
            s.log(f"metadata.version already at its highest level {hi}: only the validate-only upgrade ran")

    s.step("cluster describe-features / update-features", features)

    def api_versions():
        v = cli("cluster", "api-versions")
        for api in ("ApiVersions", "Metadata", "CreateTopics", "DeleteTopics", "DescribeConfigs"):
            check(api in v, f"{api} not among the APIs the client and the server share: {sorted(v)}")
            lo, hi = v[api]
            check(0 <= lo <= hi, f"{api} version range {lo}..{hi}")

    s.step("cluster api-versions", api_versions)

    def create_topics():
        r = cli("topics", "create", "-t", a, "--num-partitions", "3", "--replication-factor", str(rf))
        check_eq([t["error_code"] for t in r["topics"]], [0], f"create {a}")
        s.acked_topics[a] = 3
        r = cli("topics", "create", "-t", b)  # -1/-1: the cluster's defaults
        check_eq([t["error_code"] for t in r["topics"]], [0], f"create {b}")
        cli("topics", "create", "-t", a, "--num-partitions", "3", expect_error=36)

    s.step("topics create (3 partitions; -1/-1; existing -> 36)", create_topics)

    def listed():
        names = set(cli("topics", "list"))
        for name in s.acked_topics:
            check(name in names, f"topic {name} missing from `topics list`")
        for name in s.acked_deleted:
            check(name not in names, f"topic {name} listed but deleted")
        if s.acked_topics:
            argv = ["topics", "describe"]
            for name in sorted(s.acked_topics):
                argv += ["-t", name]
            described = {t["name"]: t for t in cli(*argv)}
            for name, n in s.acked_topics.items():
                check_eq(len(described[name]["partitions"]), n, f"partitions of {name}")
        return names

    def list_topics():
        listed()
        [t] = cli("topics", "describe", "-t", b)
        check_eq(t["error_code"], 0, f"describe {b}")
        s.acked_topics[b] = len(t["partitions"])
        check(s.acked_topics[b] >= 1, f"{b} has no partitions")

    s.step("topics list / describe", lambda: s.eventually(list_topics, "topics not as created"))

    def create_partitions():
        r = cli("partitions", "create", "-p", f"{a}:5")
        check_eq([x["error_code"] for x in r["results"]], [0], "partitions create error code")
        s.acked_topics[a] = 5
        s.eventually(listed, "partition count after partitions create")
        cli("partitions", "create", "-p", f"{a}:4", expect_error=37)

    s.step("partitions create 3 -> 5 (5 -> 4 -> 37)", create_partitions)

    def configs(name, rtype="topic"):
        return cli("configs", "describe", "-r", rtype, "-n", name)[rtype][name]

    def check_configs(name, want, source="DYNAMIC_TOPIC_CONFIG"):
        got = configs(name)
        for k, val in want.items():
            check(k in got, f"{name}: config {k} not described")
            check_eq(got[k]["value"], val, f"{name} {k}")
            check_eq(got[k]["config_source"], source, f"{name} {k} source")

    def alter_configs():
        check_eq(cli("configs", "alter", "-r", "topic", "-n", a, "-c", "retention.ms=3600000",
                     "-c", "cleanup.policy=set(compact)"), {"topic": {a: "OK"}}, "configs alter")
        s.eventually(lambda: check_configs(a, {"retention.ms": "3600000", "cleanup.policy": "compact"}),
                     "configs after alter")
        check_eq(cli("configs", "alter", "-r", "topic", "-n", a, "-c", "cleanup.policy=del()"),
                 {"topic": {a: "OK"}}, "configs alter del()")
        s.eventually(lambda: check_configs(a, {"cleanup.policy": "delete"}, "DEFAULT_CONFIG"),
                     "config after del()")
        s.acked_configs[a] = {"retention.ms": "3600000"}
        check_eq(cli("configs", "alter", "-r", "topic", "-n", b, "-c", "retention.ms=7200000"),
                 {"topic": {b: "OK"}}, "configs alter")
        check_eq(cli("configs", "reset", "-r", "topic", "-n", b, "-c", "retention.ms"),
                 {"topic": {b: "OK"}}, "configs reset")
        s.eventually(lambda: check_eq(configs(b).get("retention.ms", {}).get("config_source"),
                                      "DEFAULT_CONFIG", f"{b} retention.ms source after reset"),
                     "config after reset")

    s.step("configs alter (set, del) / reset / describe", alter_configs)

    def broker_configs():
        got = configs(str(brokers[0]), "broker")
        for k in ("num.partitions", "default.replication.factor", "log.segment.bytes"):
            check(k in got, f"broker {brokers[0]}: config {k} not described")

    s.step("configs describe broker", broker_configs)

    def delete_topics():
        r = cli("topics", "delete", "-t", b)
        check_eq([t["error_code"] for t in r["topics"]], [0], f"delete {b}")
        del s.acked_topics[b]
        s.acked_deleted.add(b)
        s.eventually(listed, "topics after delete")
        cli("topics", "delete", "-t", s.topic("never-created"), expect_error=3)

    s.step("topics delete (and an unknown one -> 3)", delete_topics)

    if s.pause():
        s.step("after failover: acknowledged topics still there", lambda: s.eventually(listed, "topics"))
        s.step("after failover: configs still set",
               lambda: s.eventually(lambda: check_configs(a, s.acked_configs[a]), "configs"))
        s.step("after failover: cluster describe", lambda: s.call(describe_cluster))
        s.step("after failover: cluster describe-quorum", lambda: s.call(describe_quorum))

    def create_after():
        r = s.call(lambda: cli("topics", "create", "-t", e, "--num-partitions", "1"))
        check_eq([t["error_code"] for t in r["topics"]], [0], f"create {e}")
        s.acked_topics[e] = 1
        s.eventually(listed, "topic created last")

    s.step("topics create one more", create_after)

    def cleanup():
        argv = ["topics", "delete"]
        for name in sorted(s.acked_topics):
            argv += ["-t", name]
        r = s.call(lambda: cli(*argv))
        check_eq(sorted(t["error_code"] for t in r["topics"]), [0] * len(s.acked_topics), "delete error codes")
        s.acked_deleted.update(s.acked_topics)
        s.acked_topics.clear()
        s.eventually(listed, "topics after the final delete")

    s.step("topics delete the session's topics", cleanup)
    s.done()


if __name__ == "__main__":
    main()
