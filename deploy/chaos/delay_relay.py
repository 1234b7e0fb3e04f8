#!/usr/bin/env python3
"""A transparent TCP relay that delays each direction of every connection: the latency fault of the
chaos suite, because this kernel has no netem (shared/design/TOOLCHAIN.md: CONFIG_NET_SCH_NETEM is
not set; tbf's `latency` is a queue bound, not a delay).

Run inside a host's network namespace together with an nftables rule that redirects the host's
outgoing TCP connections to the relay's port (faults.py, `nat output ... redirect to :PORT`). For each
accepted connection the relay reads the original destination (SO_ORIGINAL_DST), connects to it with
SO_MARK set (the redirect rule skips marked packets, so the relay's own connection is not redirected
again) and copies bytes both ways. Every chunk read is released DELAY ± JITTER ms (uniform, like
`netem delay 50ms 20ms`) after it arrived, but never before the chunk read before it: the stream's
order is kept, as TCP would keep it. So one relay on the connecting host delays both directions of
its connections, which is what netem on every host's egress gives (one-way delay DELAY, round trip
about 2 x DELAY). Each direction has a bounded queue (back-pressure instead of unbounded memory).

--target HOST:PORT relays every connection to that address instead of the original destination (for
tests, without nftables). Prints one line when listening, and a summary on SIGTERM.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import signal
import socket
import struct
import sys

SO_ORIGINAL_DST = 80   # linux/netfilter_ipv4.h
SO_MARK = 36           # asm-generic/socket.h
CHUNK = 65536
QUEUE_CHUNKS = 64      # per direction: at most 4 MiB in flight inside the relay


def original_destination(sock: socket.socket) -> tuple[str, int]:
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    (port,) = struct.unpack_from("!H", raw, 2)
    return socket.inet_ntoa(raw[4:8]), port


def release_times(arrivals: list[float], delays: list[float]) -> list[float]:
    """When each chunk leaves: arrival + its delay, but not before the previous chunk (order kept)."""
    out, last = [], float("-inf")
    for t, d in zip(arrivals, delays):
        last = max(last, t + max(0.0, d))
        out.append(last)
    return out


class Relay:
    def __init__(self, delay_ms: float, jitter_ms: float, mark: int, target: tuple[str, int] | None, seed: int | None):
        self.delay = delay_ms / 1000.0
        self.jitter = jitter_ms / 1000.0
        self.mark = mark
        self.target = target
        self.rng = random.Random(seed)
        self.connections = 0
        self.failed = 0
        self.bytes = 0

    def sample(self) -> float:
        return max(0.0, self.rng.uniform(self.delay - self.jitter, self.delay + self.jitter))

    async def pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue(maxsize=QUEUE_CHUNKS)

        async def read():
            last = 0.0
            while True:
                try:
                    data = await reader.read(CHUNK)
                except (ConnectionError, OSError):
                    data = b""
                last = max(last, loop.time() + self.sample())
                await queue.put((last, data))
                if not data:
                    return

        async def write():
            while True:
                release, data = await queue.get()
                wait = release - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    try:
                        if writer.can_write_eof():
                            writer.write_eof()
                    except (ConnectionError, OSError, RuntimeError):
                        pass
                    return
                self.bytes += len(data)
                try:
                    writer.write(data)
                    await writer.drain()
                except (ConnectionError, OSError, RuntimeError):
                    return

        reading = asyncio.ensure_future(read())
        try:
            await write()
        finally:
            reading.cancel()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.connections += 1
        sock = writer.get_extra_info("socket")
        up_writer = None
        try:
            dest = self.target or original_destination(sock)
            up = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            up.setsockopt(socket.SOL_SOCKET, SO_MARK, self.mark)
            up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            up.setblocking(False)
            try:
                await asyncio.get_running_loop().sock_connect(up, dest)
            except OSError:
                up.close()
                raise
            up_reader, up_writer = await asyncio.open_connection(sock=up)
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await asyncio.gather(self.pump(reader, up_writer), self.pump(up_reader, writer))
        except (ConnectionError, OSError):
            self.failed += 1
        except asyncio.CancelledError:  # the relay is stopping
            pass
        finally:
            for w in (writer, up_writer):
                if w is not None:
                    try:
                        w.close()
                    except (ConnectionError, OSError, RuntimeError):
                        pass


async def serve(args) -> None:
    target = None
    if args.target:
        host, _, port = args.target.rpartition(":")
        target = (host, int(port))
    relay = Relay(args.delay_ms, args.jitter_ms, args.mark, target, args.seed)
    server = await asyncio.start_server(relay.handle, args.listen_host, args.port, reuse_address=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    port = server.sockets[0].getsockname()[1]
    print(f"delay relay listening on {args.listen_host}:{port}: {args.delay_ms:g} ms +- {args.jitter_ms:g} ms each "
          f"way{' to ' + args.target if args.target else ' (original destinations)'}", flush=True)
    async with server:
        await stop.wait()
    print(f"delay relay: {relay.connections} connections ({relay.failed} failed), {relay.bytes} bytes relayed",
          flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True, help="port to listen on (0: any, printed)")
    ap.add_argument("--listen-host", default="127.0.0.1")
    ap.add_argument("--delay-ms", type=float, required=True)
    ap.add_argument("--jitter-ms", type=float, default=0.0)
    ap.add_argument("--mark", type=lambda s: int(s, 0), default=0x5C, help="SO_MARK of the relay's own connections")
    ap.add_argument("--target", help="HOST:PORT for every connection instead of the original destination")
    ap.add_argument("--seed", type=int)
    args = ap.parse_args(argv)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
