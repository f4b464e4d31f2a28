"""What each client does when a write comes back NOT_CONTROLLER (41), seen rather than read.

A fake two-node Kafka cluster in one process (nodes 1 and 2 on two loopback ports), built from
kafka-python's message schemas, answers ApiVersions, Metadata and DescribeCluster (both nodes
brokers, the controller id as the scenario says) and answers the write under test (CreateTopics,
DeleteTopics or CreatePartitions) with error 41 as the scenario says:

  moved   node 1 answers 41 once and from then on Metadata names node 2 the controller, which
          accepts: does the client refresh its metadata and go to node 2?
  always  every node answers 41 every time: how often does the client retry, and what does the
          application see in the end?

Each client is driven by a few lines (one operation, a 20 s timeout); the probe prints, per
client and scenario, the requests the fake cluster received in order and what the application
got.

    .venv/bin/python probes/not_controller.py [--clients confluent,kafka-python,aiokafka,kafkajs,java]
                                               [--ops create,delete,partitions] [--base-port 19400]
"""

import argparse
import asyncio
import os
import struct
import subprocess
import sys
import threading
import time
import uuid

from kafka.protocol.admin import (CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse,
                                  DescribeClusterResponse)
from kafka.protocol.metadata import ApiVersionsResponse, MetadataResponse

COMPAT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOT_CONTROLLER = 41
UNSUPPORTED_VERSION = 35
TOPIC = "probe-topic"
TOPIC_ID = uuid.UUID("5e7c2f4e-63f4-4bd2-9a53-f0d2f7b1a001")

# What the fake cluster serves (each range within what kafka-python can encode).
SERVED = {18: (0, 4), 3: (0, 12), 19: (2, 7), 20: (1, 6), 37: (0, 3), 60: (0, 1)}
FLEXIBLE_FROM = {18: 3, 3: 9, 19: 5, 20: 4, 37: 2, 60: 0}
NAMES = {18: "ApiVersions", 3: "Metadata", 19: "CreateTopics", 20: "DeleteTopics", 37: "CreatePartitions",
         60: "DescribeCluster"}
WRITE_API = {"create": 19, "delete": 20, "partitions": 37}


class FakeCluster:
    def __init__(self, base_port, scenario, write_api):
        self.ports = {1: base_port, 2: base_port + 1}
        self.scenario = scenario
        self.write_api = write_api
        self.controller = 1
        self.partitions = 1
        self.topic_exists = write_api != 19  # delete and create-partitions need it there
        self.log = []

    def record(self, node, client_id, key, version, answer):
        self.log.append(f"node {node}: {NAMES.get(key, key)} v{version} -> {answer}")

    def brokers(self, cls):
        return [cls(node_id=n, host="127.0.0.1", port=p, rack=None) for n, p in self.ports.items()]

    def answer(self, node, key, version, body):
        """(response bytes, what to log) for one request, or None to close the connection."""
        if key == 18:
            if version > SERVED[18][1]:  # KIP-511: answer v0 with the range ApiVersions has
                r = ApiVersionsResponse(error_code=UNSUPPORTED_VERSION,
                                        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)])
                return r.encode(version=0), "v0 UNSUPPORTED_VERSION"
            r = ApiVersionsResponse(error_code=0, throttle_time_ms=0, api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in sorted(SERVED.items())])
            return r.encode(version=version), "ok"
        if key == 3:
            topics = []
            if self.topic_exists:
                P = MetadataResponse.MetadataResponseTopic.MetadataResponsePartition
                topics = [MetadataResponse.MetadataResponseTopic(
                    error_code=0, name=TOPIC, topic_id=TOPIC_ID, is_internal=False,
                    partitions=[P(error_code=0, partition_index=i, leader_id=1, leader_epoch=0,
                                  replica_nodes=[1], isr_nodes=[1], offline_replicas=[])
                                for i in range(self.partitions)])]
            r = MetadataResponse(throttle_time_ms=0, brokers=self.brokers(MetadataResponse.MetadataResponseBroker),
                                 cluster_id="probe-cluster", controller_id=self.controller, topics=topics)
            return r.encode(version=version), f"controller_id {self.controller}"
        if key == 60:
            r = DescribeClusterResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                        cluster_id="probe-cluster", controller_id=self.controller,
                                        brokers=self.brokers(DescribeClusterResponse.DescribeClusterBroker),
                                        cluster_authorized_operations=-2147483648)
            return r.encode(version=version), f"controller_id {self.controller}"
        if key == self.write_api:
            refuse = self.scenario == "always" or node != self.controller or (
                self.scenario == "moved" and self.controller == 1)
            code = NOT_CONTROLLER if refuse else 0
            if refuse and self.scenario == "moved":
                self.controller = 2
            if not refuse:
                if key == 19:
                    self.topic_exists = True
                elif key == 20:
                    self.topic_exists = False
                else:
                    self.partitions = 2
            if key == 19:
                r = CreateTopicsResponse(throttle_time_ms=0, topics=[CreateTopicsResponse.CreatableTopicResult(
                    name=TOPIC, topic_id=TOPIC_ID, error_code=code, error_message=None,
                    topic_config_error_code=0, num_partitions=1, replication_factor=1, configs=[])])
            elif key == 20:
                r = DeleteTopicsResponse(throttle_time_ms=0, responses=[DeleteTopicsResponse.DeletableTopicResult(
                    name=TOPIC, topic_id=TOPIC_ID, error_code=code, error_message=None)])
            else:
                r = CreatePartitionsResponse(throttle_time_ms=0, results=[
                    CreatePartitionsResponse.CreatePartitionsTopicResult(name=TOPIC, error_code=code, error_message=None)])
            return r.encode(version=version), "NOT_CONTROLLER" if refuse else "ok"
        return None, "not served: connection closed"

    async def serve_node(self, node):
        async def handle(reader, writer):
            try:
                while True:
                    (size,) = struct.unpack(">i", await reader.readexactly(4))
                    frame = await reader.readexactly(size)
                    key, version, correlation, client_len = struct.unpack_from(">hhih", frame, 0)
                    client_id = frame[10:10 + max(client_len, 0)].decode("utf-8", "replace")
                    body, what = self.answer(node, key, version, frame)
                    self.record(node, client_id, key, version, what)
                    if body is None:
                        break
                    header = struct.pack(">i", correlation)
                    if key != 18 and version >= FLEXIBLE_FROM.get(key, 99):
                        header += b"\x00"  # response header v1: no tagged fields
                    writer.write(struct.pack(">i", len(header) + len(body)) + header + body)
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        return await asyncio.start_server(handle, "127.0.0.1", self.ports[node])


def run_cluster(cluster, ready, stop):
    async def main():
        servers = [await cluster.serve_node(n) for n in cluster.ports]
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.05)
        for s in servers:
            s.close()
    asyncio.run(main())


def driver(client, op, bootstrap):
    """The command that makes one client do one operation and print what the application got."""
    py = os.path.join(COMPAT, ".venv", "bin", "python")
    if client == "confluent":
        call = {"create": f"a.create_topics([NewTopic('{TOPIC}', 1, 1)], request_timeout=20)",
                "delete": f"a.delete_topics(['{TOPIC}'], request_timeout=20)",
                "partitions": f"a.create_partitions([NewPartitions('{TOPIC}', 2)], request_timeout=20)"}[op]
        code = ("from confluent_kafka.admin import AdminClient, NewTopic, NewPartitions\n"
                f"a = AdminClient({{'bootstrap.servers': '{bootstrap}', 'client.id': 'probe'}})\n"
                f"fs = {call}\n"
                "for t, f in fs.items():\n"
                "    try: f.result(); print('application got: success')\n"
                "    except Exception as e: print('application got:', e)\n")
        return [py, "-c", code]
    if client == "kafka-python":
        call = {"create": f"a.create_topics({{'{TOPIC}': {{'num_partitions': 1, 'replication_factor': 1}}}})",
                "delete": f"a.delete_topics(['{TOPIC}'])",
                "partitions": f"a.create_partitions({{'{TOPIC}': 2}})"}[op]
        code = ("from kafka.admin import KafkaAdminClient\n"
                f"a = KafkaAdminClient(bootstrap_servers='{bootstrap}', client_id='probe', request_timeout_ms=20000)\n"
                f"try: {call}; print('application got: success')\n"
                "except Exception as e: print('application got:', type(e).__name__, str(e)[:200])\n")
        return [py, "-c", code]
    if client == "aiokafka":
        call = {"create": f"a.create_topics([NewTopic('{TOPIC}', 1, 1)])",
                "delete": f"a.delete_topics(['{TOPIC}'])",
                "partitions": f"a.create_partitions({{'{TOPIC}': NewPartitions(2)}})"}[op]
        code = ("import asyncio\nfrom aiokafka.admin import AIOKafkaAdminClient, NewTopic, NewPartitions\n"
                "async def main():\n"
                f"    a = AIOKafkaAdminClient(bootstrap_servers='{bootstrap}', client_id='probe', request_timeout_ms=20000)\n"
                "    await a.start()\n"
                f"    try: r = await {call}; print('application got:', r)\n"
                "    except Exception as e: print('application got:', type(e).__name__, e)\n"
                "    await a.close()\n"
                "asyncio.run(main())\n")
        return [py, "-c", code]
    if client == "kafkajs":
        call = {"create": f"admin.createTopics({{ topics: [{{ topic: '{TOPIC}', numPartitions: 1, replicationFactor: 1 }}], waitForLeaders: false }})",
                "delete": f"admin.deleteTopics({{ topics: ['{TOPIC}'] }})",
                "partitions": f"admin.createPartitions({{ topicPartitions: [{{ topic: '{TOPIC}', count: 2 }}] }})"}[op]
        code = ("const { Kafka, logLevel } = require('kafkajs')\n"
                f"const admin = new Kafka({{ clientId: 'probe', brokers: '{bootstrap}'.split(','), logLevel: logLevel.NOTHING }}).admin()\n"
                "admin.connect().then(() => " + call + ")\n"
                "  .then(r => console.log('application got: success', r))\n"
                "  .catch(e => console.log('application got:', e.name, e.message, e.type || (e.cause && e.cause.type) || ''))\n"
                "  .finally(() => admin.disconnect())\n")
        return ["node", "-e", code]
    if client == "java":
        src = os.path.join(COMPAT, "probes", "NotControllerProbe.java")
        return ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                f"-Dlog4j2.configurationFile={COMPAT}/log4j2-tools.properties",
                "-cp", os.path.join(COMPAT, "jars", "*"), src, bootstrap, op, TOPIC]
    raise ValueError(client)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="confluent,kafka-python,aiokafka,kafkajs,java")
    parser.add_argument("--ops", default="create,delete,partitions")
    parser.add_argument("--scenarios", default="moved,always")
    parser.add_argument("--base-port", type=int, default=19400)
    args = parser.parse_args()
    for op in args.ops.split(","):
        for scenario in args.scenarios.split(","):
            for client in args.clients.split(","):
                cluster = FakeCluster(args.base_port, scenario, WRITE_API[op])
                ready, stop = threading.Event(), threading.Event()
                t = threading.Thread(target=run_cluster, args=(cluster, ready, stop), daemon=True)
                t.start()
                ready.wait(10)
                bootstrap = f"127.0.0.1:{args.base_port}"
                t0 = time.monotonic()
                try:
                    p = subprocess.run(driver(client, op, bootstrap), capture_output=True, text=True,
                                       timeout=90, cwd=COMPAT)
                    got = [line for line in p.stdout.splitlines() if line.startswith("application got")]
                    outcome = got[-1] if got else f"no answer (exit {p.returncode}): {p.stderr.strip()[-300:]}"
                except subprocess.TimeoutExpired:
                    outcome = "no answer within 90 s"
                took = time.monotonic() - t0
                stop.set()
                t.join(5)
                writes = [line for line in cluster.log if NAMES[WRITE_API[op]] in line]
                print(f"## {client}, {NAMES[WRITE_API[op]]}, scenario {scenario} ({took:.1f} s)")
                print(f"   {outcome[:300]}")
                shown = [line for line in cluster.log if "ApiVersions" not in line]
                if len(shown) > 10:
                    shown = shown[:8] + [f"... {len(shown) - 10} more ..."] + shown[-2:]
                print(f"   writes: {len(writes)}; requests: " + "; ".join(shown))
                sys.stdout.flush()


if __name__ == "__main__":
    main()
