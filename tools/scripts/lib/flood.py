#!/usr/bin/env python3
"""A connection flood for bad-input-load.sh (run, not imported).

    flood.py COUNT SECONDS RATE HOST:PORT[,HOST:PORT...] [SOURCE_IP]

Opens COUNT TCP connections to the addresses (cycled) that send nothing and holds them open;
each one the node closes (refused at max.connections, or idle) is opened again, at most RATE
a second, so the node's accept loop meets the flood for the whole run. Stops after SECONDS or
on SIGTERM and prints one JSON line: connections opened, closed by the node, connect errors,
open at the end. One process holds at most its open-file limit: the script runs several.
With SOURCE_IP (e.g. 127.0.0.2) the connections come from that address, as from another host.
"""
import json
import resource
import select
import signal
import socket
import sys
import time

count, seconds, rate = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
addrs = []
for item in sys.argv[4].split(","):
    host, port = item.rsplit(":", 1)
    addrs.append((host, int(port)))

source = sys.argv[5] if len(sys.argv) > 5 else None

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < hard:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
signal.signal(signal.SIGINT, on_term)

ep = select.epoll()
socks = {}  # fd -> socket
opened = closed = errors = 0
next_addr = 0


def open_one():
    global opened, errors, next_addr
    addr = addrs[next_addr % len(addrs)]
    next_addr += 1
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    if source:
        s.bind((source, 0))
    try:
        s.connect(addr)
    except OSError:
        s.close()
        errors += 1
        return False
    s.setblocking(False)
    ep.register(s.fileno(), select.EPOLLIN | select.EPOLLRDHUP)
    socks[s.fileno()] = s
    opened += 1
    return True


end = time.monotonic() + seconds
# The first fill is not paced: the flood arrives at once.
for _ in range(count):
    if stop or time.monotonic() >= end:
        break
    if not open_one():
        time.sleep(0.001)
print(json.dumps({"event": "filled", "open": len(socks), "errors": errors}), flush=True)
budget_per_round = max(1, rate // 20)
while not stop and time.monotonic() < end:
    round_end = time.monotonic() + 0.05
    for fd, _ in ep.poll(0.05):
        s = socks.pop(fd, None)
        if s is None:
            continue
        ep.unregister(fd)
        s.close()
        closed += 1
    for _ in range(min(budget_per_round, count - len(socks))):
        open_one()
    # Rounds of 50 ms: at most `rate` reconnects a second, however fast the node closes.
    rest = round_end - time.monotonic()
    if rest > 0:
        time.sleep(rest)
print(json.dumps({"event": "end", "opened": opened, "closed_by_node": closed,
                  "connect_errors": errors, "open": len(socks)}), flush=True)
