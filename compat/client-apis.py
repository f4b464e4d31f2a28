"""Which Kafka APIs, at which versions, each compatibility session's client sent, as Markdown
tables: read from a kafka-kraft.sh cluster's request logs (every node's kafka.request.logger
lines: API key, version, client id, listener) and, when the cluster ran with --record, from
recorder.jsonl (the bytes each request carried after its body).

    client-apis.py CLUSTER_DIR > table.md

Only the sessions' client ids (compat-*) are counted; the brokers' own traffic and the tools
kafka-kraft.sh runs for itself are left out.
"""

import collections
import glob
import json
import os
import re
import sys

# client.id -> what the table calls the client
CLIENTS = {
    "compat-kcat": "kcat 1.7.1 (librdkafka 2.0.2) `-L`",
    "compat-kcat-setup": None,  # kafka-python creating the kcat session's topic
    "compat-confluent": "confluent-kafka 2.16.1 (librdkafka 2.16.0) AdminClient",
    "compat-kafka-python": "kafka-python 3.0.12 KafkaAdminClient",
    "compat-kafka-python-cli": "kafka-python 3.0.12 `python -m kafka.admin`",
    "compat-aiokafka": "aiokafka 0.14.0 AIOKafkaAdminClient",
    "compat-kafkajs": "kafkajs 2.2.4 admin",
    "compat-java-admin": "Kafka 4.1.2 Java Admin (bootstrap.servers)",
    "compat-java-admin-controller": "Kafka 4.1.2 Java Admin (bootstrap.controllers)",
    "compat-java-tools": "Kafka 4.1.2 tools (kafka-topics, -configs, -features, -metadata-quorum)",
}

LINE = re.compile(r"Completed request:(\{.*\})\s*$")


def api_name(upper):
    """METADATA -> Metadata, CREATE_TOPICS -> CreateTopics (Kafka's message names)."""
    return "".join(w.capitalize() for w in upper.split("_"))


def read_request_logs(cluster_dir):
    seen = collections.defaultdict(lambda: {"versions": set(), "listeners": set(), "count": 0, "forwarded": 0})
    for path in sorted(glob.glob(os.path.join(cluster_dir, "node-*", "logs", "request.log*"))):
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.search(line)
                if not m:
                    continue
                try:
                    r = json.loads(m.group(1))
                except json.JSONDecodeError:
                    continue
                h = r.get("requestHeader", {})
                client = h.get("clientId")
                if CLIENTS.get(client) is None:
                    continue
                key = (client, h["requestApiKey"], api_name(h.get("requestApiKeyName", str(h["requestApiKey"]))))
                if r.get("isForwarded"):
                    # A broker passed the client's request on to the active controller (KIP-590's
                    # Envelope); the client sent it to the broker, which logged it too.
                    seen[key]["forwarded"] += 1
                    continue
                seen[key]["versions"].add(h["requestApiVersion"])
                seen[key]["listeners"].add(r.get("listener", "?"))
                seen[key]["count"] += 1
    return seen


def read_recorder(cluster_dir):
    trailing = collections.Counter()
    totals = collections.Counter()
    path = os.path.join(cluster_dir, "recorder.jsonl")
    if not os.path.exists(path):
        return None, None
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            client = r.get("client_id")
            if CLIENTS.get(client) is None or "api_key" not in r:
                continue
            key = (client, r["api"], r["version"])
            totals[key] += 1
            if r.get("trailing_bytes"):
                trailing[key + (r["trailing_bytes"],)] += 1
    return trailing, totals


def versions(vs):
    vs = sorted(vs)
    return ", ".join(f"v{v}" for v in vs)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    cluster_dir = sys.argv[1]
    seen = read_request_logs(cluster_dir)
    if not seen:
        sys.exit(f"client-apis.py: no session requests in {cluster_dir}/node-*/logs/request.log")
    print("| client | API (key): versions sent [listener when not PLAINTEXT]; → forwarded by the broker to the controller |")
    print("|---|---|")
    order = list(CLIENTS)
    by_client = collections.defaultdict(list)
    for (client, key, name), v in seen.items():
        by_client[client].append((key, name, v))
    for client in sorted(by_client, key=order.index):
        cells = []
        for key, name, v in sorted(by_client[client]):
            where = "" if v["listeners"] == {"PLAINTEXT"} else f" [{', '.join(sorted(v['listeners']))}]"
            forwarded = " →" if v["forwarded"] else ""
            cells.append(f"{name} ({key}): {versions(v['versions'])}{where}{forwarded}")
        print(f"| {CLIENTS[client]} | {'; '.join(cells)} |")
    trailing, totals = read_recorder(cluster_dir)
    if trailing is None:
        return
    print()
    if not trailing:
        print(f"No request carried bytes after its body ({sum(totals.values())} requests recorded).")
        return
    print("| client | request | requests with bytes after the body | bytes |")
    print("|---|---|---|---|")
    for (client, api, version, n), count in sorted(trailing.items()):
        print(f"| {CLIENTS[client]} | {api} v{version} | {count} of {totals[(client, api, version)]} | {n} |")


if __name__ == "__main__":
    main()
