"""What every Python compatibility session shares: arguments, steps, checks, and the pause.

A session is a script of admin operations, each checked against the answer a Kafka cluster
gives. It stops at the first wrong answer with a message naming the step and what was expected,
and exits 1 (2 for a usage error). Steps are printed as they pass, so a failure's log shows how
far the session got.

Reads of state another node may not have caught up with yet (a real Kafka broker's metadata cache
lags its controller) are repeated until they match or ``--settle-s`` runs out (``eventually``).

The failover pause (``--through-failover DIR``): at the point the session marks, it creates
``DIR/paused`` and waits for ``DIR/resume`` to appear (the harness kills the active controller in
between, then creates it), then goes on and checks that everything acknowledged before the pause
is still there. Before the pause the session never retries an operation: only the client library
does. After it, an operation the client reports as never delivered (it could not connect to the
node it chose: that node was killed) is tried again, with a new client where the session says
how to make one, for at most ``--settle-s``; each such retry is logged with the client's error.
That is what an application does when its client gives up on a dead node, and some clients do
give up (see client-apis.md); an operation that reached a server is never retried.
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
                            help="how long a read may take to show an acknowledged change, and how "
                                 "long undelivered operations are retried after the failover (default 30)")
        parser.add_argument("--prefix", help="topic-name prefix (default: unique per run)")
        parser.add_argument("--broker-ids", metavar="ID,ID...",
                            help="the registered brokers, for replica assignments, the replication "
                                 "factor and the broker-config steps (default: every node the cluster "
                                 "lists; give it where that list also holds controllers, as corum's does)")
        self.args = parser.parse_args()
        self.client = client
        self.prefix = self.args.prefix or unique_prefix(client)
        self.client_id = f"compat-{client}"
        self.started = time.monotonic()
        # What the cluster acknowledged; checked again after the failover pause.
        self.acked_topics = {}        # name -> partition count
        self.acked_deleted = set()    # names whose deletion was acknowledged
        self.acked_configs = {}       # topic -> {key: value}
        # Set by the session: does this exception mean the request never reached a server? And,
        # optionally, how to replace the client (for a client that keeps a dead node as its target;
        # a coroutine function in the asyncio sessions).
        self.undelivered = lambda e: False
        self.reconnect = None
        self.failed_over = False
        self.retries_after_failover = 0

    def replica_brokers(self, listed):
        """The broker ids replicas go to: --broker-ids, each of which the cluster must list, or
        every listed node."""
        if not self.args.broker_ids:
            return sorted(listed)
        ids = sorted(int(x) for x in self.args.broker_ids.split(","))
        missing = [i for i in ids if i not in listed]
        check(not missing, f"--broker-ids {missing} not among the nodes the cluster lists {sorted(listed)}")
        return ids

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

    def _retry_undelivered(self, e, deadline):
        """After the failover, whether to try again after exception e (and prepares the retry)."""
        if not (self.failed_over and self.undelivered(e)) or time.monotonic() >= deadline:
            return False
        self.retries_after_failover += 1
        self.log(f"retry: undelivered after the failover ({type(e).__name__}: {e})"
                 + ("; with a new client" if self.reconnect else ""))
        return True

    def call(self, fn):
        """Runs one client operation (a write); see the module doc for its retry after the failover."""
        deadline = time.monotonic() + self.args.settle_s
        delay = 0.2
        while True:
            try:
                return fn()
            except WrongAnswer:
                raise
            except Exception as e:
                if not self._retry_undelivered(e, deadline):
                    raise
                if self.reconnect:
                    self.reconnect()
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

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
            except Exception as e:
                if not self._retry_undelivered(e, deadline):
                    raise
                if self.reconnect:
                    self.reconnect()
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def acall(self, fn):
        """call() for a coroutine function (aiokafka)."""
        deadline = time.monotonic() + self.args.settle_s
        delay = 0.2
        while True:
            try:
                return await fn()
            except WrongAnswer:
                raise
            except Exception as e:
                if not self._retry_undelivered(e, deadline):
                    raise
                if self.reconnect:
                    await self.reconnect()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

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
            except Exception as e:
                if not self._retry_undelivered(e, deadline):
                    raise
                if self.reconnect:
                    await self.reconnect()
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
        self.failed_over = True
        return True

    def done(self):
        retries = (f"; {self.retries_after_failover} undelivered operation(s) retried after the failover"
                   if self.retries_after_failover else "")
        self.log(f"PASS ({time.monotonic() - self.started:.1f} s{retries})")
        sys.exit(0)
