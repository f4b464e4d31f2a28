"""What every Python compatibility session shares: arguments, steps, checks, and the pause.

A session is a script of admin operations, each checked against the answer a Kafka cluster
gives. It stops at the first wrong answer with a message naming the step and what was expected,
and exits 1 (2 for a usage error). Steps are printed as they pass, so a failure's log shows how
far the session got.

The failover pause (``--through-failover DIR``): at the point the session marks, it creates
``DIR/paused`` and waits for ``DIR/resume`` to appear (the harness kills the active controller in
between, then creates it), then goes on and checks that everything acknowledged before the pause
is still there. The session never retries an operation itself: whatever retrying happens is the
client library's own. Reads of state another node may not have caught up with yet (a real Kafka
broker's metadata cache lags its controller) are repeated until they match or ``--settle-s``
runs out.
"""

import argparse
import asyncio
import os
import sys
import time
import traceback


class WrongAnswer(Exception):
    """The cluster answered something other than what Kafka's semantics require."""


def check(condition, message):
    if not condition:
        raise WrongAnswer(message)


def check_eq(got, want, what):
    if got != want:
        raise WrongAnswer(f"{what}: got {got!r}, want {want!r}")


def unique_prefix(client):
    """A topic-name prefix no earlier run used, so sessions can share one cluster."""
    return f"compat-{client}-{int(time.time() * 1000) % 10**9:09d}-{os.getpid() % 1000:03d}-"


class Session:
    def __init__(self, client, description, controller_bootstrap=False):
        parser = argparse.ArgumentParser(description=description)
        parser.add_argument("--bootstrap", required=True,
                            help="HOST:PORT[,HOST:PORT...] of the cluster's Kafka listeners")
        if controller_bootstrap:
            parser.add_argument("--controller-bootstrap",
                                help="HOST:PORT[,...] of the controllers (KIP-919); "
                                     "the controller-side steps are skipped without it")
        parser.add_argument("--through-failover", metavar="DIR",
                            help="pause at the marked point: create DIR/paused, wait for DIR/resume")
        parser.add_argument("--pause-timeout-s", type=float, default=300.0,
                            help="how long to wait for DIR/resume (default 300)")
        parser.add_argument("--settle-s", type=float, default=30.0,
                            help="how long a read may take to show an acknowledged change (default 30)")
        parser.add_argument("--prefix", help="topic-name prefix (default: unique per run)")
        self.args = parser.parse_args()
        self.client = client
        self.prefix = self.args.prefix or unique_prefix(client)
        self.client_id = f"compat-{client}"
        self.started = time.monotonic()
        # What the cluster acknowledged; checked again after the failover pause.
        self.acked_topics = {}        # name -> partition count
        self.acked_deleted = set()    # names whose deletion was acknowledged
        self.acked_configs = {}       # topic -> {key: value}

    @property
    def bootstrap(self):
        return self.args.bootstrap

    def topic(self, suffix):
        return self.prefix + suffix

    def log(self, message):
        print(f"[{self.client} {time.monotonic() - self.started:7.2f}s] {message}", flush=True)

    def step(self, name, fn, *args, **kwargs):
        """Runs one step; a WrongAnswer or an exception from the client ends the session."""
        t0 = time.monotonic()
        try:
            result = fn(*args, **kwargs)
        except WrongAnswer as e:
            self.fail(f"step '{name}': wrong answer: {e}")
        except Exception as e:  # the client library refused or failed: also a failure
            traceback.print_exc(file=sys.stderr)
            self.fail(f"step '{name}': {type(e).__name__}: {e}")
        self.log(f"ok   {name} ({(time.monotonic() - t0) * 1000:.0f} ms)")
        return result

    async def astep(self, name, fn):
        """step() for a coroutine function (aiokafka)."""
        t0 = time.monotonic()
        try:
            result = await fn()
        except WrongAnswer as e:
            self.fail(f"step '{name}': wrong answer: {e}")
        except Exception as e:  # the client library refused or failed: also a failure
            traceback.print_exc(file=sys.stderr)
            self.fail(f"step '{name}': {type(e).__name__}: {e}")
        self.log(f"ok   {name} ({(time.monotonic() - t0) * 1000:.0f} ms)")
        return result

    def fail(self, message):
        self.log(f"FAIL {message}")
        sys.exit(1)

    def eventually(self, fn, what):
        """Calls fn until it returns without WrongAnswer, for at most --settle-s seconds."""
        deadline = time.monotonic() + self.args.settle_s
        delay = 0.05
        while True:
            try:
                return fn()
            except WrongAnswer as e:
                if time.monotonic() >= deadline:
                    raise WrongAnswer(f"{what} (still after {self.args.settle_s:.0f} s): {e}")
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def aeventually(self, fn, what):
        """eventually() for a coroutine function (aiokafka)."""
        deadline = time.monotonic() + self.args.settle_s
        delay = 0.05
        while True:
            try:
                return await fn()
            except WrongAnswer as e:
                if time.monotonic() >= deadline:
                    raise WrongAnswer(f"{what} (still after {self.args.settle_s:.0f} s): {e}")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    def pause(self):
        """The failover point: nothing to do without --through-failover."""
        d = self.args.through_failover
        if not d:
            return False
        os.makedirs(d, exist_ok=True)
        resume = os.path.join(d, "resume")
        with open(os.path.join(d, "paused"), "w") as f:
            f.write(f"{self.client}\n")
        self.log(f"paused: waiting for {resume}")
        deadline = time.monotonic() + self.args.pause_timeout_s
        while not os.path.exists(resume):
            if time.monotonic() >= deadline:
                self.fail(f"nobody created {resume} within {self.args.pause_timeout_s:.0f} s")
            time.sleep(0.1)
        self.log("resumed")
        return True

    def done(self):
        self.log(f"PASS ({time.monotonic() - self.started:.1f} s)")
        sys.exit(0)
