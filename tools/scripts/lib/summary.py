"""The end of an A/B measurement script: each case's mean over its rounds and the ratio of two
cases' means, each with one standard error from the rounds' spread (imported, not run).

On a shared host the rounds of one run scatter by more than many a cost being measured, so a
ratio is only quoted with its error. A script's rounds are `WORK/<case><round>.json`, each
`corum loadgen --json`'s output.

    sys.path.insert(0, LIB); import summary
    means = summary.means(work, rounds, ("without", "with"), "writes/s")
    value, text = summary.ratio(means, "with", "without")
"""
import json
import os
import statistics


def means(work, rounds, cases, unit, key="ops_per_sec"):
    """Prints and returns each case's mean and standard error (None from a single round).
    A case with no rounds in `work` is left out."""
    out = {}
    width = max(len(c) for c in cases)
    for c in cases:
        if not os.path.exists(f"{work}/{c}1.json"):
            continue
        runs = [json.load(open(f"{work}/{c}{r}.json"))[key] for r in range(1, rounds + 1)]
        mean = statistics.mean(runs)
        error = statistics.stdev(runs) / len(runs) ** 0.5 if len(runs) > 1 else None
        out[c] = (mean, error)
        shown = "" if error is None else f" (± {error:.0f})"
        print(f"{c:{width}} mean {mean:.0f} {unit}{shown}")
    return out


def ratio(means, a, b):
    """The ratio of case `a`'s mean to `b`'s, and its text with one standard error (first
    order, the two cases' errors taken as independent)."""
    (ma, ea), (mb, eb) = means[a], means[b]
    r = ma / mb
    if ea is None or eb is None:
        return r, f"{r:.2f}"
    e = r * ((ea / ma) ** 2 + (eb / mb) ** 2) ** 0.5
    return r, f"{r:.2f} (± {e:.2f})"
