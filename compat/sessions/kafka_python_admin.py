"""kafka-python KafkaAdminClient session.

The confluent session's operations through kafka-python (create topics with validate_only,
explicit assignments, configs and -1 defaults, and the errors for an existing topic, zero
partitions, too many replicas; list and describe topics; create partitions; describe, alter and
incrementally alter configs; delete topics), plus describe cluster (DescribeCluster), describe
the metadata quorum (DescribeQuorum) and features (ApiVersions' feature fields, UpdateFeatures);
then, after the failover pause, everything acknowledged is still there.
"""

from kafka.admin import AlterConfigOp, ConfigResource, KafkaAdminClient, UpdateFeatureType
from kafka.errors import KafkaConnectionError, NodeNotReadyError, UnknownBrokerIdError

from common import Session, check, check_eq

TIMEOUT_MS = 30000

# Kafka's error codes the session expects.
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
UNKNOWN_TOPIC_OR_PARTITION = 3


def main():
    s = Session("kafka-python", __doc__)

    class Client:
        admin = None

    def connect():
        if Client.admin is not None:
            Client.admin.close()
        Client.admin = KafkaAdminClient(bootstrap_servers=s.bootstrap.split(","), client_id=s.client_id,
                                        request_timeout_ms=TIMEOUT_MS)

    connect()
    # kafka-python keeps the controller id it first learned for the client's whole life and refreshes
    # it only on NOT_CONTROLLER; a refused connection to it is raised to the caller every time. So
    # after the failover an undelivered operation is retried with a new client.
    s.undelivered = lambda e: isinstance(e, (KafkaConnectionError, NodeNotReadyError, UnknownBrokerIdError))
    s.reconnect = connect

    def describe_cluster():
        d = Client.admin.describe_cluster()
        check(d["cluster_id"], "describe_cluster: empty cluster id")
        ids = sorted(b["broker_id"] for b in d["brokers"])
        check(ids, "describe_cluster: no brokers")
        check(d["controller_id"] in ids,
              f"describe_cluster: controller {d['controller_id']} is not one of the brokers {ids}")
        return ids

    nodes = s.step("describe cluster", describe_cluster)
    brokers = s.step("replica brokers", s.replica_brokers, nodes)
    rf = min(3, len(brokers))
    a, b, c, d, v, e = (s.topic(x) for x in "abcdve")

    def create(topics, validate_only=False):
        r = Client.admin.create_topics(topics, timeout_ms=TIMEOUT_MS, validate_only=validate_only,
                                raise_errors=False)
        return {t["name"]: t["error_code"] for t in r["topics"]}

    def create_topics():
        got = create({
            a: {"num_partitions": 3, "replication_factor": rf},
            b: {},  # partitions and replication factor -1: the cluster's defaults
            c: {"assignments": {0: [brokers[0]], 1: [brokers[-1]]}},
            d: {"num_partitions": 1, "replication_factor": rf,
                "configs": {"cleanup.policy": "compact", "retention.ms": "86400000"}},
        })
        check_eq(got, {a: 0, b: 0, c: 0, d: 0}, "create_topics error codes")
        s.acked_topics.update({a: 3, c: 2, d: 1})
        s.acked_configs[d] = {"cleanup.policy": "compact", "retention.ms": "86400000"}

    s.step("create topics (3 partitions; -1/-1; explicit assignment; configs)", create_topics)
    s.step("create topic validate_only",
           lambda: check_eq(create({v: {"num_partitions": 2, "replication_factor": rf}}, True),
                            {v: 0}, "validate_only"))
    s.step("create existing topic -> TOPIC_ALREADY_EXISTS",
           lambda: check_eq(create({a: {"num_partitions": 3, "replication_factor": rf}}),
                            {a: TOPIC_ALREADY_EXISTS}, "error"))
    bad = s.topic("bad")
    s.step("create with 0 partitions -> INVALID_PARTITIONS",
           lambda: check_eq(create({bad: {"num_partitions": 0, "replication_factor": rf}}),
                            {bad: INVALID_PARTITIONS}, "error"))
    s.step("create with more replicas than brokers -> INVALID_REPLICATION_FACTOR",
           lambda: check_eq(create({bad: {"num_partitions": 1, "replication_factor": len(nodes) + 1}}),
                            {bad: INVALID_REPLICATION_FACTOR}, "error"))

    def listed():
        names = set(Client.admin.list_topics())
        for name in s.acked_topics:
            check(name in names, f"topic {name} missing from list_topics")
        for name in s.acked_deleted | {v}:
            check(name not in names, f"topic {name} listed but deleted or validate_only")
        described = {t["name"]: t for t in Client.admin.describe_topics(sorted(s.acked_topics))}
        for name, n in s.acked_topics.items():
            check_eq(described[name]["error_code"], 0, f"describe_topics error of {name}")
            check_eq(len(described[name]["partitions"]), n, f"partitions of {name}")
        return names

    def list_topics():
        listed()
        t = {t["name"]: t for t in Client.admin.describe_topics([a, b, c])}
        check_eq(t[b]["error_code"], 0, f"describe_topics error of {b}")
        check(len(t[b]["partitions"]) >= 1, f"{b} has no partitions")
        s.acked_topics[b] = len(t[b]["partitions"])
        replicas = {p["partition_index"]: p["replica_nodes"] for p in t[c]["partitions"]}
        check_eq(replicas, {0: [brokers[0]], 1: [brokers[-1]]}, f"replicas of {c} (explicit assignment)")
        check_eq(len(t[a]["partitions"][0]["replica_nodes"]), rf, f"replication factor of {a}")

    s.step("list and describe topics", lambda: s.eventually(list_topics, "topics not as created"))

    def create_partitions():
        r = Client.admin.create_partitions({a: 5}, timeout_ms=TIMEOUT_MS, raise_errors=False)
        check_eq([x.error_code for x in r.results], [0], "create_partitions error code")
        s.acked_topics[a] = 5
        s.eventually(listed, "partition count after create_partitions")
        r = Client.admin.create_partitions({a: 4}, timeout_ms=TIMEOUT_MS, raise_errors=False)
        check_eq([x.error_code for x in r.results], [INVALID_PARTITIONS], "decrease to 4 partitions")

    s.step("create partitions 3 -> 5 (and 5 -> 4 refused)", create_partitions)

    def topic_configs(name):
        return Client.admin.describe_configs([ConfigResource("TOPIC", name)], config_filter="all")["topic"][name]

    def check_configs(name, want, source="DYNAMIC_TOPIC_CONFIG"):
        got = topic_configs(name)
        for k, val in want.items():
            check(k in got, f"{name}: config {k} not described")
            check_eq(got[k]["value"], val, f"{name} {k}")
            check_eq(str(got[k]["config_source"]), source, f"{name} {k} source")
        return got

    def describe_topic_configs():
        got = s.eventually(lambda: check_configs(d, s.acked_configs[d]), "configs set at creation")
        for k in ("retention.bytes", "segment.bytes", "min.insync.replicas", "max.message.bytes",
                  "compression.type"):
            check(k in got, f"{d}: default config {k} not described")
        check(str(got["segment.bytes"]["config_source"]) in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG"),
              f"source of an unset key: {got['segment.bytes']['config_source']}")

    s.step("describe topic configs", describe_topic_configs)

    def alter(name, configs, incremental, validate_only=False):
        r = Client.admin.alter_configs([ConfigResource("TOPIC", name, configs)], incremental=incremental,
                                validate_only=validate_only)
        check_eq(r, {"topic": {name: "OK"}}, f"alter_configs of {name}")

    def alter_configs():
        alter(a, {"retention.ms": "3600000"}, incremental=False)
        s.acked_configs[a] = {"retention.ms": "3600000"}
        s.eventually(lambda: check_configs(a, s.acked_configs[a]), "config after AlterConfigs")

    s.step("alter configs (AlterConfigs)", alter_configs)

    def incremental_alter_configs():
        alter(b, {"retention.ms": (AlterConfigOp.SET, "7200000"),
                  "cleanup.policy": (AlterConfigOp.SET, "compact")}, incremental=True)
        s.eventually(lambda: check_configs(b, {"retention.ms": "7200000", "cleanup.policy": "compact"}),
                     "configs after incremental SET")
        alter(b, {"cleanup.policy": (AlterConfigOp.DELETE, None)}, incremental=True)
        s.eventually(lambda: check_configs(b, {"cleanup.policy": "delete"}, "DEFAULT_CONFIG"),
                     "config after incremental DELETE")
        alter(b, {"retention.ms": (AlterConfigOp.SET, "1000")}, incremental=True, validate_only=True)
        check_configs(b, {"retention.ms": "7200000"})

    s.step("incremental alter configs (SET, DELETE, validate_only)", incremental_alter_configs)

    def describe_broker_configs():
        got = Client.admin.describe_configs([ConfigResource("BROKER", str(brokers[0]))],
                                     config_filter="all")["broker"][str(brokers[0])]
        for k in ("num.partitions", "default.replication.factor", "log.segment.bytes"):
            check(k in got, f"broker {brokers[0]}: config {k} not described")

    s.step("describe broker configs", describe_broker_configs)

    def describe_quorum():
        q = Client.admin.describe_metadata_quorum()
        parts = q["topics"][0]["partitions"]
        check_eq(q["topics"][0]["topic_name"], "__cluster_metadata", "quorum topic")
        check(parts[0]["error"] is None, f"describe quorum error {parts[0]['error']}")
        voters = [x["replica_id"] for x in parts[0]["current_voters"]]
        check(parts[0]["leader_id"] in voters, f"leader {parts[0]['leader_id']} not among voters {voters}")
        check(parts[0]["high_watermark"] > 0, "high watermark not positive")

    s.step("describe metadata quorum", describe_quorum)

    def features():
        f = Client.admin.describe_features()
        check("metadata.version" in f, f"metadata.version not described: {sorted(f)}")
        mv = f["metadata.version"]
        lo, hi = mv["supported"]
        fin = mv["finalized"][1]
        check(lo <= fin <= hi, f"metadata.version finalized {fin} outside supported {lo}..{hi}")
        r = Client.admin.update_features({"metadata.version": (UpdateFeatureType.UPGRADE, hi)}, validate_only=True)
        check_eq(r, {"metadata.version": "OK"}, f"validate-only upgrade to {hi}")
        if fin < hi:
            r = Client.admin.update_features({"metadata.version": (UpdateFeatureType.UPGRADE, fin + 1)})
            check_eq(r, {"metadata.version": "OK"}, f"upgrade to {fin + 1}")
            s.eventually(lambda: check_eq(Client.admin.describe_features()["metadata.version"]["finalized"][1],
                                          fin + 1, "finalized metadata.version after upgrade"),
                         "upgrade not visible")
        else:
            s.log(f"metadata.version already at its highest level {hi}: only the validate-only upgrade ran")

    s.step("describe features; upgrade metadata.version", features)

    def delete_topics():
        r = Client.admin.delete_topics([b], timeout_ms=TIMEOUT_MS, raise_errors=False)
        check_eq({t["name"]: t["error_code"] for t in r["topics"]}, {b: 0}, f"delete {b}")
        del s.acked_topics[b]
        s.acked_deleted.add(b)
        s.eventually(listed, "topics after delete")
        missing = s.topic("never-created")
        r = Client.admin.delete_topics([missing], timeout_ms=TIMEOUT_MS, raise_errors=False)
        check_eq({t["name"]: t["error_code"] for t in r["topics"]}, {missing: UNKNOWN_TOPIC_OR_PARTITION},
                 "delete of an unknown topic")

    s.step("delete topics (and an unknown one -> UNKNOWN_TOPIC_OR_PARTITION)", delete_topics)

    if s.pause():
        s.step("after failover: acknowledged topics still there", lambda: s.eventually(listed, "topics"))
        for name, cfg in s.acked_configs.items():
            s.step(f"after failover: configs of {name} still set",
                   lambda: s.eventually(lambda: check_configs(name, cfg), "configs"))
        s.step("after failover: describe cluster", lambda: s.call(describe_cluster))
        s.step("after failover: describe metadata quorum", lambda: s.call(describe_quorum))

    def create_after():
        check_eq(s.call(lambda: create({e: {"num_partitions": 1}})), {e: 0}, "create_topics error code")
        s.acked_topics[e] = 1
        s.eventually(listed, "topic created last")

    s.step("create one more topic", create_after)

    def cleanup():
        names = sorted(s.acked_topics)
        r = s.call(lambda: Client.admin.delete_topics(names, timeout_ms=TIMEOUT_MS, raise_errors=False))
        check_eq({t["name"]: t["error_code"] for t in r["topics"]}, {t: 0 for t in names}, "delete error codes")
        s.acked_deleted.update(names)
        s.acked_topics.clear()
        s.eventually(listed, "topics after the final delete")

    s.step("delete the session's topics", cleanup)
    Client.admin.close()
    s.done()


if __name__ == "__main__":
    main()
