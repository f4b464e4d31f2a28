"""The first line of Kafka server logs, after a moment, that matches a pattern: when a broker
logged that it follows a new metadata leader, that its heartbeats go to a new controller, and so
on. Timestamps are log4j's "[yyyy-MM-dd HH:mm:ss,SSS]" in this machine's time zone.

    log_first.py --after EPOCH_MS --regex RE [--not-group VALUE] [--each] LOG...

RE may have one group (e.g. the leader's id); a line whose group equals --not-group is skipped
(the old leader). Prints "t_ms=T delta_ms=T-AFTER group=G file=F" for the earliest matching line
over all LOGs and exits 0, or exits 1 when no line matches. With --each: one such line per LOG
(its first match), then "last_delta_ms=D" (when the last of them matched); exits 1 unless every
LOG has a match.
"""

import argparse
import datetime
import re
import sys

STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--after", type=int, required=True)
    ap.add_argument("--regex", required=True)
    ap.add_argument("--not-group")
    ap.add_argument("--each", action="store_true")
    a = ap.parse_args()
    pattern = re.compile(a.regex)
    firsts = {}
    for path in a.logs:
        try:
            f = open(path, errors="replace")
        except FileNotFoundError:
            continue
        with f:
            for line in f:
                m = STAMP.match(line)
                if not m:
                    continue
                t = int(datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp()) * 1000 \
                    + int(m.group(2))
                if t < a.after:
                    continue
                p = pattern.search(line)
                if not p:
                    continue
                g = p.group(1) if p.groups() else ""
                if a.not_group is not None and g == a.not_group:
                    continue
                firsts[path] = (t, g)
                break  # a file's lines are in time order: its first match is its earliest
    if a.each:
        for path in a.logs:
            if path in firsts:
                t, g = firsts[path]
                print(f"t_ms={t} delta_ms={t - a.after} group={g} file={path}")
            else:
                print(f"log_first.py: no line of {path} after {a.after} matches {a.regex!r}", file=sys.stderr)
        if len(firsts) < len(a.logs):
            return 1
        print(f"last_delta_ms={max(t for t, _ in firsts.values()) - a.after}")
        return 0
    if not firsts:
        print(f"log_first.py: no line after {a.after} matches {a.regex!r}", file=sys.stderr)
        return 1
    path, (t, g) = min(firsts.items(), key=lambda kv: kv[1][0])
    print(f"t_ms={t} delta_ms={t - a.after} group={g} file={path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
