"""kcat session: `kcat -L` (Metadata through librdkafka as Debian ships it, an older one than
confluent-kafka's), read as JSON (-J) and checked.

kcat only reads, so a topic for it to find (3 partitions, an explicit assignment) is created and
deleted at the end with kafka-python; a failure there says so. Checks: the broker list (ids,
host:port), a controller id among the brokers, the topic with its partitions and replicas, the
all-topics listing, and an unknown topic's error; after the failover pause the same again.
"""

import json
import shutil
import subprocess

from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaConnectionError, NodeNotReadyError, UnknownBrokerIdError

from common import Session, WrongAnswer, check, check_eq

TIMEOUT_MS = 30000


def main():
    s = Session("kcat", __doc__)
    kcat = shutil.which("kcat")
    if kcat is None:
        s.fail("kcat is not on the PATH (run compat/install.sh)")

    def metadata(topic=None):
        cmd = [kcat, "-L", "-J", "-b", s.bootstrap, "-m", "30",
               "-X", f"client.id={s.client_id}", "-X", "allow.auto.create.topics=false"]
        if topic:
            cmd += ["-t", topic]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, f"kcat -L exited {p.returncode}: {p.stderr.strip()[-500:]}")
        try:
            return json.loads(p.stdout)
        except json.JSONDecodeError as e:
            raise WrongAnswer(f"kcat -L -J printed no JSON ({e}): {p.stdout[:300]!r}")

    def check_brokers(md):
        brokers = {b["id"]: b["name"] for b in md["brokers"]}
        check(brokers, "no brokers listed")
        for bid, name in brokers.items():
            host, _, port = name.rpartition(":")
            check(host and port.isdigit() and 0 < int(port) < 65536, f"broker {bid} endpoint {name!r}")
        check(md["controllerid"] in brokers,
              f"controller id {md['controllerid']} is not one of the brokers {sorted(brokers)}")
        return sorted(brokers)

    nodes = s.step("kcat -L: brokers and controller", lambda: check_brokers(metadata()))
    brokers = s.step("replica brokers", s.replica_brokers, nodes)
    topic = s.topic("a")
    assignment = {0: [brokers[0]], 1: [brokers[-1]], 2: [brokers[0]]}

    class Setup:
        admin = None

    def connect():
        if Setup.admin is not None:
            Setup.admin.close()
        Setup.admin = KafkaAdminClient(bootstrap_servers=s.bootstrap.split(","), client_id=s.client_id + "-setup",
                                       request_timeout_ms=TIMEOUT_MS)

    # The setup client keeps a killed controller as its target (see kafka_python_admin.py).
    s.undelivered = lambda e: isinstance(e, (KafkaConnectionError, NodeNotReadyError, UnknownBrokerIdError))
    s.reconnect = connect

    def setup():
        connect()
        r = Setup.admin.create_topics({topic: {"assignments": assignment}}, timeout_ms=TIMEOUT_MS,
                                      raise_errors=False)
        check_eq([t["error_code"] for t in r["topics"]], [0], "create_topics (kafka-python) error code")

    s.step("setup: create a topic with kafka-python", setup)

    def check_topic(md):
        t = {x["topic"]: x for x in md["topics"]}
        check(topic in t, f"topic {topic} not listed")
        check("error" not in t[topic], f"topic {topic}: error {t[topic].get('error')}")
        parts = {p["partition"]: p for p in t[topic]["partitions"]}
        check_eq(sorted(parts), [0, 1, 2], f"partitions of {topic}")
        for p, want in assignment.items():
            check_eq([r["id"] for r in parts[p]["replicas"]], want, f"replicas of {topic}-{p}")
            check(parts[p]["leader"] in want, f"leader {parts[p]['leader']} of {topic}-{p} not a replica")
            check("error" not in parts[p], f"{topic}-{p}: error {parts[p].get('error')}")

    def all_topics():
        md = metadata()
        check_brokers(md)
        check_topic(md)
        for t in md["topics"]:
            check(t["partitions"] or "error" in t, f"topic {t['topic']} listed with no partitions and no error")

    s.step("kcat -L: all topics", lambda: s.eventually(all_topics, "topic not listed as created"))
    s.step("kcat -L -t TOPIC", lambda: s.eventually(lambda: check_topic(metadata(topic)), "topic"))

    def unknown():
        missing = s.topic("never-created")
        t = {x["topic"]: x for x in metadata(missing)["topics"]}
        check(missing in t, f"{missing} not in the answer")
        check_eq(t[missing].get("error"), "Broker: Unknown topic or partition", "error of an unknown topic")

    s.step("kcat -L -t UNKNOWN -> Unknown topic or partition", unknown)

    if s.pause():
        s.step("after failover: kcat -L", lambda: s.eventually(all_topics, "topic"))
        s.step("after failover: kcat -L -t TOPIC", lambda: s.eventually(lambda: check_topic(metadata(topic)), "topic"))

    def cleanup():
        r = s.call(lambda: Setup.admin.delete_topics([topic], timeout_ms=TIMEOUT_MS, raise_errors=False))
        check_eq([t["error_code"] for t in r["topics"]], [0], "delete_topics (kafka-python) error code")
        Setup.admin.close()

        def gone():
            check(topic not in {x["topic"] for x in metadata()["topics"]}, f"{topic} still listed after delete")

        s.eventually(gone, "deleted topic")

    s.step("cleanup: delete the topic with kafka-python; kcat -L no longer lists it", cleanup)
    s.done()


if __name__ == "__main__":
    main()
