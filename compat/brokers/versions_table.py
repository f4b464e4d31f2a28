#!/usr/bin/env python3
"""The tables of a broker-versions.sh run: pass/fail per suite step and the timings, per version.

    versions_table.py OUT_DIR

Reads OUT_DIR/run.env (the run), and per version OUT_DIR/V/run.env (exit status, release, wall
time, load) and OUT_DIR/V/suite.out (broker-suite.sh's output: its "== HH:MM:SS step" headings,
"STEP PASS|FAIL step" summary, "TIMING name N ms" and "FAIL [step] ..." lines). Prints Markdown.
"""
import os
import re
import sys

# broker-suite.sh's step headings (prefixes) and the column each gets.
STEPS = [
    ("controllers", "corum up"),
    ("brokers start", "register, unfence"),
    ("kafka-topics --create on the controllers", "create on corum"),
    ("traffic A", "broker kill"),
    ("broker 5 restart", "restart, ISR"),
    ("SIGTERM", "controlled shutdown"),
    ("traffic B", "controller kill"),
    ("kafka-metadata-quorum", "quorum, features"),
    ("stop", "stop"),
]

TIMINGS = [
    ("brokers_start_to_all_unfenced", "start → unfenced"),
    ("broker_kill_to_fenced", "kill → fenced"),
    ("broker_restart_to_unfenced", "restart → unfenced"),
    ("broker_restart_to_in_every_isr", "restart → every ISR"),
    ("broker_term_to_leaders_moved", "SIGTERM → leaders moved"),
    ("broker_term_to_exit", "SIGTERM → exit"),
    ("ctl_kill_to_brokers_follow_new_leader", "ctl kill → follow"),
    ("ctl_kill_to_heartbeats_to_new_leader", "ctl kill → heartbeats"),
    ("traffic_a_elapsed", "traffic A"),
    ("traffic_b_elapsed", "traffic B"),
]


def read_env(path):
    env = {}
    try:
        with open(path) as f:
            for line in f:
                k, sep, v = line.rstrip("\n").partition("=")
                if sep:
                    env[k] = v
    except FileNotFoundError:
        pass
    return env


def step_key(title):
    for prefix, name in STEPS:
        if title.startswith(prefix):
            return name
    return None


def parse_suite(path):
    """The steps reached, their outcomes, the timings, the failed checks and the finalized level."""
    reached, outcome, timings, fails, mv = [], {}, {}, [], ""
    try:
        lines = open(path, errors="replace").read().splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        m = re.match(r"^== \d\d:\d\d:\d\d (.*)$", line)
        if m and step_key(m.group(1)):
            reached.append(step_key(m.group(1)))
        m = re.match(r"^STEP (PASS|FAIL)  (.*?)(?: \((\d+) failed check\(s\)\)| \((the suite stopped here)\))?$", line)
        if m and step_key(m.group(2)):
            if m.group(1) == "PASS":
                outcome[step_key(m.group(2))] = "pass"
            elif m.group(4):
                outcome[step_key(m.group(2))] = "**stopped**"
            elif m.group(3):
                outcome[step_key(m.group(2))] = f"**FAIL** ({m.group(3)})"
            else:
                outcome[step_key(m.group(2))] = "**FAIL**"
        m = re.match(r"^TIMING (\S+)\s+(-?\d+) ms$", line)
        if m:
            timings[m.group(1)] = int(m.group(2))
        if line.startswith("FAIL ["):
            fails.append(line[5:])
        m = re.search(r"Feature: metadata\.version.*FinalizedVersionLevel: (\S+)", line)
        if m and not mv:
            mv = m.group(1)
    return reached, outcome, timings, fails, mv


def fmt_ms(v):
    return "–" if v is None else f"{v:,}"


def main():
    out = sys.argv[1]
    run = read_env(os.path.join(out, "run.env"))
    versions = [v for v in run.get("versions", "").split(",") if v]
    if not versions:
        versions = sorted(d for d in os.listdir(out) if os.path.isfile(os.path.join(out, d, "run.env")))
    print(f"Run of {run.get('date', '?')}: corum {run.get('corum_commit', '?')} ({run.get('corum_bin', '?')}), "
          f"tools and clients Kafka {run.get('tools_jars', '?')}; brokers as listed.\n")
    cols = [name for _, name in STEPS]
    print("| brokers | corum formatted at | metadata.version finalized | " + " | ".join(cols) + " | result |")
    print("|---" * (len(cols) + 4) + "|")
    details = {}
    for v in versions:
        env = read_env(os.path.join(out, v, "run.env"))
        reached, outcome, timings, fails, mv = parse_suite(os.path.join(out, v, "suite.out"))
        details[v] = (env, timings, fails)
        cells = []
        for name in cols:
            if name in outcome:
                cells.append(outcome[name])
            elif env.get("timed_out") == "1" and reached and name == reached[-1]:
                cells.append("**timed out**")
            elif name in reached:
                cells.append("?")
            else:
                cells.append("–")
        if not env:
            result = "not run"
        elif env.get("rc") == "0":
            result = f"PASS ({env.get('wall_s')} s)"
        elif env.get("timed_out") == "1":
            result = f"**TIMEOUT** ({env.get('wall_s')} s)"
        else:
            result = f"**FAIL** ({len(fails)} check(s), {env.get('wall_s')} s)"
        print(f"| {v} | {env.get('release', '?')} | {mv or '–'} | " + " | ".join(cells) + f" | {result} |")
    print("\nTimings (ms; the brokers' view polled every 100 ms; load = the 1-minute load average before/after):\n")
    print("| brokers | " + " | ".join(name for _, name in TIMINGS) + " | wall | load |")
    print("|---" * (len(TIMINGS) + 3) + "|")
    for v in versions:
        env, timings, _ = details[v]
        print(f"| {v} | " + " | ".join(fmt_ms(timings.get(k)) for k, _ in TIMINGS)
              + f" | {env.get('wall_s', '?')} s | {env.get('load_before', '?')}/{env.get('load_after', '?')} |")
    failed = [(v, details[v][2]) for v in versions if details[v][2]]
    if failed:
        print("\nFailed checks:\n")
        for v, fails in failed:
            for f in fails:
                print(f"- {v}: {f[:400]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
