"""A recording TCP proxy for Kafka's protocol: forwards bytes unchanged in both directions and
writes one JSON line per request a client sent: API key and name, version, header version,
correlation id, client id, frame size, and how many bytes were left after the request body
(decoded with kafka-python's schemas, which are Kafka's message JSON). Kafka ignores bytes after
a body; a server that must serve real clients has to as well, and this shows which clients send
them.

    recorder.py --map LISTEN_PORT=UPSTREAM_HOST:PORT [--map ...] --out FILE.jsonl

Only responses' sizes are read (to pair them with requests); their bytes are not changed, so a
Metadata answer still names the upstream's advertised endpoints: to see a client's traffic to
every node, make the nodes advertise the recorder's ports (kafka-kraft.sh start --record does).
Runs until SIGTERM or SIGINT.
"""

import argparse
import asyncio
import importlib
import json
import pkgutil
import signal
import struct
import sys
import time

FRAME_BYTES_MAX = 100 * 1024 * 1024


def request_classes():
    """{api_key: kafka-python request class}, for the APIs kafka-python has schemas for."""
    import kafka.protocol as protocol
    from kafka.protocol.api_message import ApiMessage
    out = {}
    for m in pkgutil.walk_packages(protocol.__path__, "kafka.protocol."):
        if ".old" in m.name or "generate" in m.name:
            continue
        try:
            mod = importlib.import_module(m.name)
        except Exception:  # a module kafka-python itself does not import on this Python
            continue
        for name in dir(mod):
            c = getattr(mod, name)
            if (isinstance(c, type) and issubclass(c, ApiMessage) and name.endswith("Request")
                    and getattr(c, "API_KEY", None) is not None):
                out[c.API_KEY] = c
    return out


REQUESTS = request_classes()
API_NAMES = {}
try:
    from kafka.protocol.api_key import ApiKey
    API_NAMES = {k.value: k.name for k in ApiKey}
except ImportError:
    pass


def read_uvarint(buf, pos):
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("varint runs past the frame")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ValueError("varint longer than 5 bytes")


def parse_request(frame):
    """What one request frame (without its size prefix) says about itself."""
    rec = {"size": len(frame)}
    if len(frame) < 10:
        rec["error"] = "frame shorter than a request header"
        return rec
    key, version, correlation, client_len = struct.unpack_from(">hhih", frame, 0)
    pos = 10
    client_id = None
    if client_len >= 0:
        if pos + client_len > len(frame):
            rec["error"] = "client id runs past the frame"
            return rec
        client_id = frame[pos:pos + client_len].decode("utf-8", "replace")
        pos += client_len
    rec.update(api_key=key, api=API_NAMES.get(key, f"api-{key}"), version=version,
               correlation_id=correlation, client_id=client_id)
    cls = REQUESTS.get(key)
    if cls is None or not 0 <= version <= cls.max_version:
        rec["body"] = "no schema"
        return rec
    flexible = cls.flexible_version_q(version)
    rec["header_version"] = 2 if flexible else 1
    try:
        if flexible:  # request header v2: tagged fields after the client id
            count, pos = read_uvarint(frame, pos)
            for _ in range(count):
                _, pos = read_uvarint(frame, pos)
                size, pos = read_uvarint(frame, pos)
                pos += size
        if pos > len(frame):
            raise ValueError("header tagged fields run past the frame")
        decode = cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible,
                                                  data_class=cls[None])
        _, end = decode(memoryview(frame), pos)
        # kafka-python's decoder slices without bounds checks: a length field larger than what
        # is left yields a short read and a position past the end rather than an error.
        if end > len(frame):
            raise ValueError(f"body runs {end - len(frame)} bytes past the frame")
        rec["body_bytes"] = end - pos
        rec["trailing_bytes"] = len(frame) - end
    except Exception as e:  # record it; the bytes are forwarded all the same
        rec["body"] = f"undecodable: {type(e).__name__}: {e}"
    return rec


class Recorder:
    def __init__(self, out):
        self.out = out
        self.connections = 0

    def write(self, rec):
        self.out.write(json.dumps(rec) + "\n")
        self.out.flush()

    async def serve(self, listen_port, upstream):
        host, port = upstream.rsplit(":", 1)

        async def handle(reader, writer):
            self.connections += 1
            conn = self.connections
            peer = "%s:%d" % writer.get_extra_info("peername")[:2]
            try:
                up_reader, up_writer = await asyncio.open_connection(host, int(port))
            except OSError as e:
                self.write({"t": time.time(), "listen": listen_port, "conn": conn, "peer": peer,
                            "event": f"upstream {upstream} refused: {e}"})
                writer.close()
                return

            async def requests():
                while True:
                    head = await reader.readexactly(4)
                    (size,) = struct.unpack(">i", head)
                    if not 0 <= size <= FRAME_BYTES_MAX:
                        self.write({"t": time.time(), "listen": listen_port, "conn": conn, "peer": peer,
                                    "event": f"bad frame size {size}"})
                        up_writer.write(head)
                        return
                    frame = await reader.readexactly(size)
                    rec = parse_request(frame)
                    rec.update(t=time.time(), listen=listen_port, upstream=upstream, conn=conn, peer=peer)
                    self.write(rec)
                    up_writer.write(head + frame)
                    await up_writer.drain()

            async def responses():
                while True:
                    data = await up_reader.read(65536)
                    if not data:
                        return
                    writer.write(data)
                    await writer.drain()

            tasks = [asyncio.create_task(requests()), asyncio.create_task(responses())]
            try:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for t in done:  # a peer closing mid-frame ends its direction; retrieved, not logged
                    t.cancelled() or t.exception()
            finally:
                for t in tasks:
                    t.cancel()
                for w in (writer, up_writer):
                    w.close()

        return await asyncio.start_server(handle, "127.0.0.1", listen_port)


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--map", action="append", required=True, metavar="PORT=HOST:PORT")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.out, "a") as out:
        rec = Recorder(out)
        servers = []
        for m in args.map:
            listen, upstream = m.split("=", 1)
            servers.append(await rec.serve(int(listen), upstream))
        print(f"recorder: {len(servers)} port(s), {len(REQUESTS)} request schemas, writing {args.out}",
              flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        for s in servers:
            s.close()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
