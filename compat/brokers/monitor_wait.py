"""Waits until the brokers' view that BrokerMonitor writes (one JSON line per change, see
brokers/java/BrokerMonitor.java) satisfies a condition, and prints when it first did.

    monitor_wait.py MONITOR.jsonl --cond EXPR [--after EPOCH_MS] [--timeout S]
    monitor_wait.py MONITOR.jsonl --always EXPR --after EPOCH_MS [--until EPOCH_MS]
    monitor_wait.py MONITOR.jsonl --last

EXPR is a Python expression over one state, with these names:
    fenced(id), unfenced(id)   the broker is listed fenced / unfenced
    registered(id)             listed at all
    leaders(id)                partitions (of the monitored topics) it leads
    isr(id)                    partitions whose ISR holds it
    partitions, offline        partitions of the monitored topics; those without a leader
    topics                     the monitored topics that exist
e.g. "fenced(5) and leaders(5) == 0" or "unfenced(5) and isr(5) == partitions".
The state in force at --after counts (states are written only when they change), then every later
one. Prints "t_ms=T after_ms=A delta_ms=T-A" (T = --after when the state in force already held)
and exits 0; exits 1 after --timeout seconds without a match; 2 on a bad expression.
--always checks that EXPR held in every state from the one in force at --after to --until (default
now; states reporting an error are skipped), printing the first that broke it and exiting 1 if one
did. --last prints the newest state that is not an error.
"""

import argparse
import json
import sys
import time


def names(state):
    unf = set(state.get("unfenced", []))
    fen = set(state.get("fenced", []))
    leaders = state.get("leaders", {})
    isr = state.get("isr", {})
    return {
        "fenced": lambda i: i in fen,
        "unfenced": lambda i: i in unf,
        "registered": lambda i: i in unf or i in fen,
        "leaders": lambda i: leaders.get(str(i), 0),
        "isr": lambda i: isr.get(str(i), 0),
        "partitions": state.get("partitions", 0),
        "offline": state.get("offline", 0),
        "topics": state.get("topics", []),
    }


def holds(expr, state):
    if "error" in state:
        return False
    return bool(eval(expr, {"__builtins__": {}}, names(state)))


def states(path):
    with open(path) as f:
        for line in f:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def always(a):
    expr = compile(a.always, "<always>", "eval")
    until = a.until or int(time.time() * 1000)
    in_force, window = None, []
    for s in states(a.file):
        if "error" in s:
            continue
        if s["t"] <= a.after:
            in_force = s
        elif s["t"] <= until:
            window.append(s)
    if in_force is not None:
        window.insert(0, in_force)
    for s in window:
        if not holds(expr, s):
            print(f"monitor_wait.py: {a.always!r} broken at t_ms={s['t']}: {json.dumps(s)}", file=sys.stderr)
            return 1
    print(f"held in {len(window)} state(s) from {a.after} to {until}")
    return 0


def last(a):
    good = [s for s in states(a.file) if "error" not in s]
    if not good:
        print("monitor_wait.py: no state yet", file=sys.stderr)
        return 1
    print(json.dumps(good[-1]))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--cond")
    ap.add_argument("--always")
    ap.add_argument("--last", action="store_true")
    ap.add_argument("--after", type=int, default=0)
    ap.add_argument("--until", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    if a.last:
        return last(a)
    if a.always:
        return always(a)
    if not a.cond:
        ap.error("one of --cond, --always, --last")
    try:
        expr = compile(a.cond, "<cond>", "eval")
    except SyntaxError as e:
        print(f"monitor_wait.py: bad expression {a.cond!r}: {e}", file=sys.stderr)
        return 2
    deadline = time.monotonic() + a.timeout
    pos = 0
    in_force = None  # the last good state written at or before --after
    checked_in_force = False
    buf = ""
    latest = None
    while True:
        with open(a.file) as f:
            f.seek(pos)
            buf += f.read()
            pos = f.tell()
        *lines, buf = buf.split("\n")
        for line in lines:
            if not line.strip():
                continue
            try:
                s = json.loads(line)
            except json.JSONDecodeError:
                continue
            latest = s
            if s["t"] <= a.after:
                if "error" not in s:
                    in_force = s
                continue
            if not checked_in_force:
                checked_in_force = True
                if in_force is not None and holds(expr, in_force):
                    print(f"t_ms={a.after} after_ms={a.after} delta_ms=0")
                    return 0
            if holds(expr, s):
                print(f"t_ms={s['t']} after_ms={a.after} delta_ms={s['t'] - a.after}")
                return 0
        if not checked_in_force and in_force is not None and int(time.time() * 1000) > a.after:
            # Nothing newer yet: the state in force is the current one.
            if holds(expr, in_force):
                print(f"t_ms={a.after} after_ms={a.after} delta_ms=0")
                return 0
        if time.monotonic() > deadline:
            print(f"monitor_wait.py: {a.cond!r} did not hold within {a.timeout} s; last state: {json.dumps(latest)}",
                  file=sys.stderr)
            return 1
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
