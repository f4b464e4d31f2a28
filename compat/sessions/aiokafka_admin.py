"""aiokafka AIOKafkaAdminClient session.

Create topics (partitions and replicas given, an explicit assignment, configs, validate_only; an
existing topic's error), list topics, describe topics (Metadata), create partitions, describe
topic and broker configs, alter topic configs (AlterConfigs), describe cluster (Metadata: aiokafka
has no DescribeCluster), delete topics; after the failover pause everything acknowledged is
still there. aiokafka's NewTopic cannot leave both partitions and replication factor to the
cluster (-1/-1), so that case is not asked here (the other sessions ask it).
"""

import asyncio

from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaConnectionError, NodeNotReadyError

from common import Session, check, check_eq

TIMEOUT_MS = 10000
TOPIC_ALREADY_EXISTS = 36
UNKNOWN_TOPIC_OR_PARTITION = 3


async def session(s):
    class Client:
        admin = None

    async def connect():
        if Client.admin is not None:
            await Client.admin.close()
        Client.admin = AIOKafkaAdminClient(bootstrap_servers=s.bootstrap, client_id=s.client_id,
                                           request_timeout_ms=TIMEOUT_MS)
        await Client.admin.start()

    await connect()
    # aiokafka sends controller requests to the controller of its cached metadata and waits, up to
    # the request timeout, for that node to become ready; a dead node there is raised to the
    # caller. After the failover an undelivered operation is retried with a new client.
    s.undelivered = lambda e: isinstance(e, (KafkaConnectionError, NodeNotReadyError, asyncio.TimeoutError))
    s.reconnect = connect
    loop = asyncio.get_running_loop()
    astep, eventually = s.astep, s.aeventually

    async def describe_cluster():
        d = await Client.admin.describe_cluster()
        ids = sorted(b["node_id"] for b in d["brokers"])
        check(ids, "describe_cluster: no brokers")
        check(d.get("cluster_id"), "describe_cluster: empty cluster id")
        check(d["controller_id"] in ids, f"controller {d['controller_id']} is not one of the brokers {ids}")
        return ids

    nodes = await astep("describe cluster (Metadata)", describe_cluster)
    brokers = s.step("replica brokers", s.replica_brokers, nodes)
    rf = min(3, len(brokers))
    a, c, d, v, e = (s.topic(x) for x in "acdve")

    async def create(topics, validate_only=False):
        r = (await Client.admin.create_topics(topics, timeout_ms=TIMEOUT_MS, validate_only=validate_only)).to_object()
        return {t["topic"]: t["error_code"] for t in r["topic_errors"]}

    async def create_topics():
        got = await create([
            NewTopic(a, 3, rf),
            NewTopic(c, -1, -1, replica_assignments={0: [brokers[0]], 1: [brokers[-1]]}),
            NewTopic(d, 1, rf, topic_configs={"cleanup.policy": "compact", "retention.ms": "86400000"}),
        ])
        check_eq(got, {a: 0, c: 0, d: 0}, "create_topics error codes")
        s.acked_topics.update({a: 3, c: 2, d: 1})
        s.acked_configs[d] = {"cleanup.policy": "compact", "retention.ms": "86400000"}

    await astep("create topics (3 partitions; explicit assignment; configs)", create_topics)

    async def validate_only():
        check_eq(await create([NewTopic(v, 2, rf)], validate_only=True), {v: 0}, "validate_only")

    await astep("create topic validate_only", validate_only)

    async def existing():
        check_eq(await create([NewTopic(a, 3, rf)]), {a: TOPIC_ALREADY_EXISTS}, "error")

    await astep("create existing topic -> TOPIC_ALREADY_EXISTS", existing)

    async def listed():
        names = set(await Client.admin.list_topics())
        for name in s.acked_topics:
            check(name in names, f"topic {name} missing from list_topics")
        for name in s.acked_deleted | {v}:
            check(name not in names, f"topic {name} listed but deleted or validate_only")
        described = {t["topic"]: t for t in await Client.admin.describe_topics(sorted(s.acked_topics))}
        for name, n in s.acked_topics.items():
            check_eq(described[name]["error_code"], 0, f"describe_topics error of {name}")
            check_eq(len(described[name]["partitions"]), n, f"partitions of {name}")
        return described

    async def list_topics():
        t = await listed()
        replicas = {p["partition"]: p["replicas"] for p in t[c]["partitions"]}
        check_eq(replicas, {0: [brokers[0]], 1: [brokers[-1]]}, f"replicas of {c} (explicit assignment)")
        check_eq(len(t[a]["partitions"][0]["replicas"]), rf, f"replication factor of {a}")

    await astep("list and describe topics", lambda: eventually(list_topics, "topics not as created"))

    async def create_partitions():
        await Client.admin.create_partitions({a: NewPartitions(5)}, timeout_ms=TIMEOUT_MS)
        s.acked_topics[a] = 5
        await eventually(listed, "partition count after create_partitions")

    await astep("create partitions 3 -> 5", create_partitions)

    async def configs(rtype, name):
        [resp] = await Client.admin.describe_configs([ConfigResource(rtype, name)])
        [res] = resp.to_object()["resources"]
        check_eq(res["error_code"], 0, f"describe_configs error of {name}")
        return {c["config_names"]: c for c in res["config_entries"]}

    async def check_configs(name, want):
        got = await configs(ConfigResourceType.TOPIC, name)
        for k, val in want.items():
            check(k in got, f"{name}: config {k} not described")
            check_eq(got[k]["config_value"], val, f"{name} {k}")
            check_eq(got[k]["config_source"], 1, f"{name} {k} source (1 = DYNAMIC_TOPIC_CONFIG)")
        return got

    async def describe_topic_configs():
        got = await eventually(lambda: check_configs(d, s.acked_configs[d]), "configs set at creation")
        for k in ("retention.bytes", "segment.bytes", "min.insync.replicas", "max.message.bytes",
                  "compression.type"):
            check(k in got, f"{d}: default config {k} not described")

    await astep("describe topic configs", describe_topic_configs)

    async def describe_broker_configs():
        got = await configs(ConfigResourceType.BROKER, str(brokers[0]))
        for k in ("num.partitions", "default.replication.factor", "log.segment.bytes"):
            check(k in got, f"broker {brokers[0]}: config {k} not described")

    await astep("describe broker configs", describe_broker_configs)

    async def alter_configs():
        [resp] = await Client.admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, a, {"retention.ms": "3600000"})])
        check_eq([r[0] for r in resp.resources], [0], "alter_configs error code")
        s.acked_configs[a] = {"retention.ms": "3600000"}
        await eventually(lambda: check_configs(a, s.acked_configs[a]), "config after alter_configs")

    await astep("alter configs (AlterConfigs)", alter_configs)

    async def delete(names):
        r = (await Client.admin.delete_topics(names, timeout_ms=TIMEOUT_MS)).to_object()
        return {t["topic"]: t["error_code"] for t in r["topic_error_codes"]}

    async def delete_topics():
        check_eq(await delete([c]), {c: 0}, f"delete {c}")
        del s.acked_topics[c]
        s.acked_deleted.add(c)
        await eventually(listed, "topics after delete")
        missing = s.topic("never-created")
        check_eq(await delete([missing]), {missing: UNKNOWN_TOPIC_OR_PARTITION}, "delete of an unknown topic")

    await astep("delete topics (and an unknown one -> UNKNOWN_TOPIC_OR_PARTITION)", delete_topics)

    if await loop.run_in_executor(None, s.pause):
        await astep("after failover: acknowledged topics still there", lambda: eventually(listed, "topics"))
        for name, cfg in list(s.acked_configs.items()):
            await astep(f"after failover: configs of {name} still set",
                        lambda: eventually(lambda: check_configs(name, cfg), "configs"))
        await astep("after failover: describe cluster", lambda: s.acall(describe_cluster))

    async def create_after():
        check_eq(await s.acall(lambda: create([NewTopic(e, 1, 1)])), {e: 0}, "create_topics error code")
        s.acked_topics[e] = 1
        await eventually(listed, "topic created last")

    await astep("create one more topic", create_after)

    async def cleanup():
        names = sorted(s.acked_topics)
        check_eq(await s.acall(lambda: delete(names)), {t: 0 for t in names}, "delete error codes")
        s.acked_deleted.update(names)
        s.acked_topics.clear()
        await eventually(listed, "topics after the final delete")

    await astep("delete the session's topics", cleanup)
    await Client.admin.close()


def main():
    s = Session("aiokafka", __doc__)
    asyncio.run(session(s))
    s.done()


if __name__ == "__main__":
    main()
