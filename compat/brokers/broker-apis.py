"""What real brokers sent their controllers, from Kafka controllers' request logs
(kafka.request.logger at DEBUG, which kafka-kraft.sh sets: one JSON line per request with its
header, body and response), as Markdown: a table of APIs and versions, then example requests and
responses.

    broker-apis.py CONTROLLERS_DIR [--examples] [--max-chars N]

CONTROLLERS_DIR is a kafka-kraft.sh directory (node-*/logs/request.log*), e.g. the controllers/
directory broker-suite.sh --keep leaves. Senders are told apart by the request header's client id
and the body: a broker's node-to-controller channels use its node id as client id, its metadata
log replication (KafkaRaftClient) "raft-client-<id>", and a request a broker forwarded for a client
(Envelope) is logged as the inner request with isForwarded=true. Broker ids are those that sent
BrokerRegistration or fetched the metadata log without being a controller, controller ids those
that sent ControllerRegistration; tools talking to the controllers directly (--bootstrap-controller) are counted apart.
"""

import argparse
import collections
import glob
import json
import os
import re
import sys

LINE = re.compile(r"^\[([^\]]+)\] Completed request:(\{.*\})\s*$")


def api_name(upper):
    return "".join(w.capitalize() for w in upper.split("_"))


def read(cluster_dir):
    out = []
    for path in sorted(glob.glob(os.path.join(cluster_dir, "node-*", "logs", "request.log*"))):
        node = re.search(r"node-(\d+)", path).group(1)
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.match(line)
                if not m:
                    continue
                try:
                    r = json.loads(m.group(2))
                except json.JSONDecodeError:
                    continue
                r["_time"] = m.group(1)
                r["_node"] = int(node)
                out.append(r)
    out.sort(key=lambda r: r["_time"])
    return out


def errors_of(resp):
    """Every non-zero errorCode anywhere in a response."""
    found = collections.Counter()

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "errorCode" and isinstance(v, int) and v != 0:
                    found[v] += 1
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(resp)
    return found


def classify(r, brokers, controllers):
    h = r["requestHeader"]
    cid = h.get("clientId") or ""
    if r.get("isForwarded"):
        return "broker", f"Envelope (forwarded for client `{re.sub(r'-[0-9]+$', '-N', cid)}`)"
    m = re.fullmatch(r"raft-client-(\d+)", cid)
    if m:
        i = int(m.group(1))
        if i in controllers:
            return "controller", "KafkaRaftClient (`raft-client-<id>`)"
        return "broker", "KafkaRaftClient (`raft-client-<id>`)"
    if cid.isdigit():
        i = int(cid)
        if i in controllers:
            return "controller", "node-to-controller channel (client id `<id>`)"
        return "broker", "node-to-controller channel (client id `<id>`)"
    return "tool", cid


def table(reqs, who, brokers, controllers):
    rows = collections.OrderedDict()
    for r in reqs:
        w, channel = classify(r, brokers, controllers)
        if w != who:
            continue
        h = r["requestHeader"]
        key = (h["requestApiKey"], api_name(h["requestApiKeyName"]), channel)
        row = rows.setdefault(key, {"versions": set(), "count": 0, "errors": collections.Counter(), "senders": set()})
        row["versions"].add(h["requestApiVersion"])
        row["count"] += 1
        row["errors"].update(errors_of(r.get("response", {})))
        cid = h.get("clientId") or ""
        row["senders"].add(cid)
    lines = ["| API (key) | versions | requests | sent by | error codes in answers (count) |", "|---|---|---|---|---|"]
    for (k, name, channel), row in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][2])):
        errs = ", ".join(f"{c}×{n}" for c, n in sorted(row["errors"].items())) or "none"
        lines.append(f"| {name} ({k}) | {', '.join(map(str, sorted(row['versions'])))} | {row['count']} | {channel} | {errs} |")
    return "\n".join(lines)


def shorten(x, max_list=4):
    """Long lists cut to their first few items (ApiVersions' key list, Fetch's records...)."""
    if isinstance(x, dict):
        return {k: shorten(v, max_list) for k, v in x.items()}
    if isinstance(x, list):
        if len(x) > max_list:
            return [shorten(v, max_list) for v in x[:max_list]] + [f"... {len(x) - max_list} more"]
        return [shorten(v, max_list) for v in x]
    return x


def example(title, r, max_chars, max_list=4):
    h = r["requestHeader"]
    req = json.dumps(shorten(r.get("request", {}), max_list), separators=(",", ":"))
    resp = json.dumps(shorten(r.get("response", {}), max_list), separators=(",", ":"))
    if len(req) > max_chars:
        req = req[:max_chars] + "…"
    if len(resp) > max_chars:
        resp = resp[:max_chars] + "…"
    return (f"**{title}** — {api_name(h['requestApiKeyName'])} v{h['requestApiVersion']}, client id "
            f"`{h.get('clientId')}`, to controller {r['_node']} at {r['_time']}"
            f"{' (forwarded: inner request of an Envelope)' if r.get('isForwarded') else ''}\n\n"
            f"```json\nrequest:  {req}\nresponse: {resp}\n```\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--examples", action="store_true")
    ap.add_argument("--max-chars", type=int, default=1500)
    a = ap.parse_args()
    reqs = read(a.dir)
    if not reqs:
        print(f"broker-apis.py: no request log lines under {a.dir}/node-*/logs", file=sys.stderr)
        return 1
    brokers = {r["request"]["brokerId"] for r in reqs if r["requestHeader"]["requestApiKeyName"] == "BROKER_REGISTRATION"}
    controllers = {r["request"]["controllerId"] for r in reqs
                   if r["requestHeader"]["requestApiKeyName"] == "CONTROLLER_REGISTRATION"}
    # Voters also vote; a node that never registered or voted but fetches is a broker (observer).
    controllers |= {r["request"].get("voterId", r["request"].get("candidateId", -1)) for r in reqs
                    if r["requestHeader"]["requestApiKeyName"] == "VOTE"} - {-1}
    brokers |= {int(m.group(1)) for r in reqs
                for m in [re.fullmatch(r"raft-client-(\d+)", r["requestHeader"].get("clientId") or "")] if m} - controllers
    print(f"Brokers {sorted(brokers)}, controllers {sorted(controllers)}; {len(reqs)} requests logged "
          f"from {reqs[0]['_time']} to {reqs[-1]['_time']}.\n")
    print("### Brokers → controllers\n")
    print(table(reqs, "broker", brokers, controllers))
    print("\n### Controllers → controllers\n")
    print(table(reqs, "controller", brokers, controllers))
    tools = collections.Counter((api_name(r["requestHeader"]["requestApiKeyName"]), r["requestHeader"]["requestApiVersion"])
                                for r in reqs if classify(r, brokers, controllers)[0] == "tool")
    print("\nTools sent directly to the controllers (not counted above): "
          + (", ".join(f"{n} v{v}×{c}" for (n, v), c in sorted(tools.items())) or "nothing") + "\n")
    if not a.examples:
        return 0

    def by_broker(name, pred=lambda r: True):
        return [r for r in reqs if r["requestHeader"]["requestApiKeyName"] == name
                and classify(r, brokers, controllers)[0] == "broker" and pred(r)]

    print("### Examples\n")
    picks = []
    reg = by_broker("BROKER_REGISTRATION")
    if reg:
        picks.append(("first registration", reg[0]))
    rereg = [r for r in reg if r["request"].get("previousBrokerEpoch", -1) >= 0]
    if rereg:
        picks.append(("a restarted broker's registration (previousBrokerEpoch set)", rereg[0]))
    av = by_broker("API_VERSIONS", lambda r: (r["requestHeader"].get("clientId") or "").isdigit())
    if av:
        picks.append(("a broker channel's ApiVersions", av[0]))
    hb = by_broker("BROKER_HEARTBEAT")
    if hb:
        picks.append(("first heartbeat", hb[0]))
        steady = [r for r in hb if not r["request"].get("wantFence") and not r["request"].get("wantShutDown")]
        if steady:
            picks.append(("a steady-state heartbeat", steady[len(steady) // 2]))
        shut = [r for r in hb if r["request"].get("wantShutDown")]
        if shut:
            picks.append(("controlled shutdown: first heartbeat with wantShutDown", shut[0]))
            done = [r for r in shut if r.get("response", {}).get("shouldShutDown")]
            if done:
                picks.append(("controlled shutdown: the answer that lets it exit", done[0]))
    fetch = by_broker("FETCH")
    if fetch:
        picks.append(("a broker's first metadata Fetch", fetch[0]))
        recs = [r for r in fetch if any(p.get("recordsSizeInBytes", 0) > 0
                                        for t in r.get("response", {}).get("responses", [])
                                        for p in t.get("partitions", []))]
        if recs:
            picks.append(("a metadata Fetch answered with records", recs[-1]))
        errs = [r for r in fetch if errors_of(r.get("response", {})) and r is not fetch[0]]
        if errs:
            picks.append(("a metadata Fetch answered with an error", errs[0]))
    for name, title in (("FETCH_SNAPSHOT", "FetchSnapshot"), ("ALTER_PARTITION", "AlterPartition"),
                        ("ALLOCATE_PRODUCER_IDS", "AllocateProducerIds"),
                        ("ASSIGN_REPLICAS_TO_DIRS", "AssignReplicasToDirs")):
        x = by_broker(name)
        if x:
            picks.append((title, x[0]))
    ct = by_broker("CREATE_TOPICS", lambda r: not r.get("isForwarded"))
    if ct:
        picks.append(("a broker's own CreateTopics (an internal topic)", ct[0]))
    fw = [r for r in reqs if r.get("isForwarded")]
    seen = set()
    for r in fw:
        n = r["requestHeader"]["requestApiKeyName"]
        if n not in seen:
            seen.add(n)
            picks.append((f"forwarded {api_name(n)}", r))
    for title, r in picks:
        print(example(title, r, a.max_chars))
    return 0


if __name__ == "__main__":
    sys.exit(main())
