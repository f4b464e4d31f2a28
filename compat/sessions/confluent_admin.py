"""confluent-kafka (librdkafka) AdminClient session.

Create topics (validate_only, explicit assignments, configs, partitions and replication factor -1),
the errors for an existing topic, zero partitions and too many replicas; list topics; create
partitions (and a decrease, refused); describe, alter and incrementally alter configs (topic and
broker); describe cluster; delete topics (and an unknown one); then, after the failover pause,
everything acknowledged is still there and the cluster still takes writes.
"""

import sys
import warnings

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewPartitions, NewTopic, ResourceType)

from common import Session, WrongAnswer, check, check_eq

TIMEOUT_S = 30


def error_code(future):
    """The Kafka error code a future failed with, or 0 when it succeeded."""
    try:
        future.result(timeout=TIMEOUT_S)
        return 0
    except KafkaException as e:
        return e.args[0].code()


def main():
    s = Session("confluent", __doc__)
    # librdkafka re-resolves the controller and retries by itself: the session retries nothing
    # (Session.undelivered stays false).
    admin = AdminClient({
        "bootstrap.servers": s.bootstrap,
        "client.id": s.client_id,
        "socket.timeout.ms": 10000,
    })

    def topics_metadata():
        return admin.list_topics(timeout=TIMEOUT_S).topics

    def describe_cluster():
        d = admin.describe_cluster(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
        check(d.cluster_id, "describe_cluster: empty cluster id")
        ids = sorted(n.id for n in d.nodes)
        check(ids, "describe_cluster: no brokers")
        check(d.controller is not None and d.controller.id in ids,
              f"describe_cluster: controller {d.controller} is not one of the brokers {ids}")
        md = admin.list_topics(timeout=TIMEOUT_S)
        check_eq(sorted(md.brokers), ids, "Metadata brokers vs DescribeCluster nodes")
        return ids

    nodes = s.step("describe cluster", describe_cluster)
    brokers = s.step("replica brokers", s.replica_brokers, nodes)
    rf = min(3, len(brokers))
    a, b, c, d, v, e = (s.topic(x) for x in "abcdve")

    def create(topics, validate_only=False):
        fs = admin.create_topics(topics, validate_only=validate_only,
                                 operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S)
        return {t: error_code(f) for t, f in fs.items()}

    def create_topics():
        assignment = [[brokers[0]], [brokers[-1]]]
        got = create([
            NewTopic(a, num_partitions=3, replication_factor=rf),
            NewTopic(b),  # partitions and replication factor -1: the cluster's defaults
            NewTopic(c, num_partitions=len(assignment), replica_assignment=assignment),
            NewTopic(d, num_partitions=1, replication_factor=rf,
                     config={"cleanup.policy": "compact", "retention.ms": "86400000"}),
        ])
        check_eq(got, {a: 0, b: 0, c: 0, d: 0}, "create_topics error codes")
        s.acked_topics.update({a: 3, c: 2, d: 1})
        s.acked_configs[d] = {"cleanup.policy": "compact", "retention.ms": "86400000"}

    s.step("create topics (3 partitions; -1/-1; explicit assignment; configs)", create_topics)
    s.step("create topic validate_only",
           lambda: check_eq(create([NewTopic(v, 2, rf)], validate_only=True), {v: 0}, "validate_only"))
    s.step("create existing topic -> TOPIC_ALREADY_EXISTS",
           lambda: check_eq(create([NewTopic(a, 3, rf)]), {a: KafkaError.TOPIC_ALREADY_EXISTS}, "error"))
    s.step("create with 0 partitions -> INVALID_PARTITIONS",
           lambda: check_eq(create([NewTopic(s.topic("bad"), 0, rf)]),
                            {s.topic("bad"): KafkaError.INVALID_PARTITIONS}, "error"))
    s.step("create with more replicas than brokers -> INVALID_REPLICATION_FACTOR",
           lambda: check_eq(create([NewTopic(s.topic("bad"), 1, len(nodes) + 1)]),
                            {s.topic("bad"): KafkaError.INVALID_REPLICATION_FACTOR}, "error"))

    def listed():
        t = topics_metadata()
        for name, n in s.acked_topics.items():
            check(name in t, f"topic {name} missing from Metadata")
            check_eq(len(t[name].partitions), n, f"partitions of {name}")
        for name in s.acked_deleted | {v}:
            check(name not in t, f"topic {name} listed but deleted or validate_only")
        return t

    def list_topics():
        t = listed()
        check(b in t, f"topic {b} (default partitions) missing")
        check(len(t[b].partitions) >= 1, f"{b} has no partitions")
        s.acked_topics[b] = len(t[b].partitions)
        replicas = {p: t[c].partitions[p].replicas for p in t[c].partitions}
        check_eq(replicas, {0: [brokers[0]], 1: [brokers[-1]]}, f"replicas of {c} (explicit assignment)")
        check_eq(len(t[a].partitions[0].replicas), rf, f"replication factor of {a}")

    s.step("list topics", lambda: s.eventually(list_topics, "topics not as created"))

    def create_partitions():
        code = error_code(admin.create_partitions([NewPartitions(a, 5)], operation_timeout=TIMEOUT_S,
                                                  request_timeout=TIMEOUT_S)[a])
        check_eq(code, 0, "create_partitions error code")
        s.acked_topics[a] = 5
        s.eventually(listed, "partition count after create_partitions")
        code = error_code(admin.create_partitions([NewPartitions(a, 4)], request_timeout=TIMEOUT_S)[a])
        check_eq(code, KafkaError.INVALID_PARTITIONS, "decrease to 4 partitions")

    s.step("create partitions 3 -> 5 (and 5 -> 4 refused)", create_partitions)

    def topic_configs(name):
        r = ConfigResource(ResourceType.TOPIC, name)
        return admin.describe_configs([r], request_timeout=TIMEOUT_S)[r].result(timeout=TIMEOUT_S)

    def check_configs(name, want, source=ConfigSource.DYNAMIC_TOPIC_CONFIG):
        got = topic_configs(name)
        for k, val in want.items():
            check(k in got, f"{name}: config {k} not described")
            check_eq(got[k].value, val, f"{name} {k}")
            check_eq(ConfigSource(got[k].source), source, f"{name} {k} source")
        return got

    def describe_topic_configs():
        got = s.eventually(lambda: check_configs(d, s.acked_configs[d]), "configs set at creation")
        for k in ("retention.bytes", "segment.bytes", "min.insync.replicas", "max.message.bytes",
                  "compression.type"):
            check(k in got, f"{d}: default config {k} not described")
        check_eq(ConfigSource(got["segment.bytes"].source) in
                 (ConfigSource.DEFAULT_CONFIG, ConfigSource.STATIC_BROKER_CONFIG), True,
                 "source of an unset key is a default")

    s.step("describe topic configs", describe_topic_configs)

    def alter_configs():
        r = ConfigResource(ResourceType.TOPIC, a, set_config={"retention.ms": "3600000"})
        with warnings.catch_warnings():  # deprecated in the client, still served by Kafka 4
            warnings.simplefilter("ignore", DeprecationWarning)
            admin.alter_configs([r], request_timeout=TIMEOUT_S)[r].result(timeout=TIMEOUT_S)
        s.acked_configs[a] = {"retention.ms": "3600000"}
        s.eventually(lambda: check_configs(a, s.acked_configs[a]), "config after alter_configs")

    s.step("alter configs (AlterConfigs)", alter_configs)

    def incremental(name, entries, validate_only=False):
        r = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        admin.incremental_alter_configs([r], validate_only=validate_only,
                                        request_timeout=TIMEOUT_S)[r].result(timeout=TIMEOUT_S)

    def incremental_alter_configs():
        incremental(b, [ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
                        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
        s.eventually(lambda: check_configs(b, {"retention.ms": "7200000", "cleanup.policy": "compact"}),
                     "configs after incremental SET")
        incremental(b, [ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE)])
        s.eventually(lambda: check_configs(b, {"cleanup.policy": "delete"}, ConfigSource.DEFAULT_CONFIG),
                     "config after incremental DELETE")
        incremental(b, [ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)],
                    validate_only=True)
        check_configs(b, {"retention.ms": "7200000"})

    s.step("incremental alter configs (SET, DELETE, validate_only)", incremental_alter_configs)

    def describe_broker_configs():
        r = ConfigResource(ResourceType.BROKER, str(brokers[0]))
        got = admin.describe_configs([r], request_timeout=TIMEOUT_S)[r].result(timeout=TIMEOUT_S)
        for k in ("num.partitions", "default.replication.factor", "log.segment.bytes"):
            check(k in got, f"broker {brokers[0]}: config {k} not described")

    s.step("describe broker configs", describe_broker_configs)

    def delete_topics():
        fs = admin.delete_topics([b], operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S)
        check_eq(error_code(fs[b]), 0, f"delete {b}")
        del s.acked_topics[b]
        s.acked_deleted.add(b)
        s.eventually(listed, "topics after delete")
        missing = s.topic("never-created")
        fs = admin.delete_topics([missing], request_timeout=TIMEOUT_S)
        check_eq(error_code(fs[missing]), KafkaError.UNKNOWN_TOPIC_OR_PART, "delete of an unknown topic")

    s.step("delete topics (and an unknown one -> UNKNOWN_TOPIC_OR_PARTITION)", delete_topics)

    if s.pause():
        s.step("after failover: acknowledged topics still there", lambda: s.eventually(listed, "topics"))
        for name, cfg in s.acked_configs.items():
            s.step(f"after failover: configs of {name} still set",
                   lambda: s.eventually(lambda: check_configs(name, cfg), "configs"))
        s.step("after failover: describe cluster", lambda: s.call(describe_cluster))

    def create_after():
        check_eq(s.call(lambda: create([NewTopic(e, 1)])), {e: 0}, "create_topics error code")
        s.acked_topics[e] = 1
        s.eventually(listed, "topic created last")

    s.step("create one more topic", create_after)

    def cleanup():
        names = sorted(s.acked_topics)
        fs = s.call(lambda: admin.delete_topics(names, operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S))
        check_eq({t: error_code(f) for t, f in fs.items()}, {t: 0 for t in names}, "delete error codes")
        s.acked_deleted.update(names)
        s.acked_topics.clear()
        s.eventually(listed, "topics after the final delete")

    s.step("delete the session's topics", cleanup)
    s.done()


if __name__ == "__main__":
    try:
        main()
    except WrongAnswer as e:  # raised outside a step
        print(f"FAIL {e}", file=sys.stderr)
        sys.exit(1)
