"""Competing traffic for the emulated testbed: one process per end of one ``cross`` entry.

    ip netns exec <ns> python -m probes.testbed.crossgen CONFIG.json

``role: sink`` accepts TCP connections and discards what they carry, counting bytes;
``role: source`` connects to the sink and sends, as its ``kind`` says:

- ``bulk``: ``flows`` long connections, each sending as fast as its congestion control (``cc``,
  set with TCP_CONGESTION) lets it, reconnecting if one breaks;
- ``onoff``: one connection sending ``mbps`` in 20 ms ticks for ``on_s`` seconds, then nothing for
  ``off_s`` seconds (a tick the socket cannot take is skipped: like a video stream, it never sends
  faster to catch up);
- ``web``: short connections arriving as a Poisson process, sizes Pareto-distributed (shape 1.5,
  clipped at 100 x the mean), the arrival rate chosen so that the offered load averages ``mbps``.

Both write ``stats_file`` once a second; both exit on SIGTERM/SIGINT and by themselves when their
namespace disappears, so neither outlives the testbed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import sys
import time

CHUNK = b"\0" * 65536
TICK_S = 0.02
PARETO_SHAPE = 1.5
WEB_MEAN_BYTES = 100_000
WEB_CLIP = 100  # x the mean
WEB_MAX_OPEN = 64


class Counters:
    def __init__(self) -> None:
        self.bytes = 0
        self.connections = 0
        self.open = 0
        self.skipped = 0


def web_clipped_mean(mean: float, shape: float = PARETO_SHAPE, clip: float = WEB_CLIP) -> float:
    """E[min(X, clip x mean)] for Pareto X of this mean and shape: the arrival rate divides the
    offered load by it, so clipping the tail does not lower the average."""
    xm = mean * (shape - 1) / shape
    c = clip * mean
    return mean - xm ** shape * c ** (1 - shape) / (shape - 1)


def web_size(rng: random.Random, mean: float = WEB_MEAN_BYTES) -> int:
    xm = mean * (PARETO_SHAPE - 1) / PARETO_SHAPE
    return max(1, int(min(rng.paretovariate(PARETO_SHAPE) * xm, WEB_CLIP * mean)))


async def _connect(cfg: dict) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if cfg.get("cc"):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cfg["cc"].encode())
        sock.bind((cfg["bind"], 0))
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (cfg["connect"], cfg["port"]))
    except BaseException:
        sock.close()
        raise
    return await asyncio.open_connection(sock=sock)


async def _bulk_flow(cfg: dict, c: Counters) -> None:
    while True:
        try:
            _r, w = await _connect(cfg)
            c.connections += 1
            c.open += 1
            try:
                while True:
                    w.write(CHUNK)
                    await w.drain()
                    c.bytes += len(CHUNK)
            finally:
                c.open -= 1
                w.close()
        except OSError:
            await asyncio.sleep(0.5)


async def _onoff(cfg: dict, c: Counters) -> None:
    per_tick = max(1, int(cfg["mbps"] * 1e6 / 8 * TICK_S))
    data = b"\0" * per_tick
    while True:
        try:
            _r, w = await _connect(cfg)
        except OSError:
            await asyncio.sleep(0.5)
            continue
        c.connections += 1
        c.open = 1
        try:
            while True:
                end_on = time.monotonic() + cfg["on_s"]
                nxt = time.monotonic()
                while time.monotonic() < end_on:
                    if w.transport.get_write_buffer_size() < per_tick:
                        w.write(data)
                        c.bytes += per_tick
                    else:
                        c.skipped += 1
                    nxt += TICK_S
                    await asyncio.sleep(max(0.0, nxt - time.monotonic()))
                    if w.transport.is_closing():
                        raise ConnectionError("closed")
                await asyncio.sleep(cfg["off_s"])
        except OSError:
            c.open = 0
            w.close()
            await asyncio.sleep(0.5)


async def _web_flow(cfg: dict, size: int, c: Counters) -> None:
    c.open += 1
    try:
        _r, w = await _connect(cfg)
        c.connections += 1
        left = size
        while left > 0:
            n = min(left, len(CHUNK))
            w.write(CHUNK[:n])
            await w.drain()
            left -= n
            c.bytes += n
        w.close()
        await w.wait_closed()
    except OSError:
        pass
    finally:
        c.open -= 1


async def _web(cfg: dict, c: Counters) -> None:
    rng = random.Random(cfg.get("seed"))  # noqa: S311 - emulation, not crypto
    rate = cfg["mbps"] * 1e6 / 8 / web_clipped_mean(WEB_MEAN_BYTES)  # flows per second
    tasks: set[asyncio.Task] = set()
    while True:
        await asyncio.sleep(rng.expovariate(rate))
        if c.open >= WEB_MAX_OPEN:
            c.skipped += 1  # the link is full: a real browser's flows would wait, not pile up
            continue
        t = asyncio.create_task(_web_flow(cfg, web_size(rng), c))
        tasks.add(t)
        t.add_done_callback(tasks.discard)


async def _sink(cfg: dict, c: Counters) -> asyncio.Server:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        c.connections += 1
        c.open += 1
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                c.bytes += len(data)
        except OSError:
            pass
        finally:
            c.open -= 1
            writer.close()

    return await asyncio.start_server(serve, cfg["listen"], cfg["port"], reuse_address=True)


async def _watch(cfg: dict, c: Counters, stop: asyncio.Event) -> None:
    """Stats once a second; stop when the namespace is gone."""
    ready = cfg.get("ready_file")
    if ready:
        with open(ready, "w", encoding="ascii") as f:
            f.write(str(os.getpid()))
    last_bytes, last_t = 0, time.monotonic()
    while not stop.is_set():
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)
        if cfg.get("netns_file") and not os.path.exists(cfg["netns_file"]):
            stop.set()
        now = time.monotonic()
        stats = {"role": cfg["role"], "kind": cfg["kind"], "bytes": c.bytes,
                 "connections": c.connections, "open": c.open, "skipped": c.skipped,
                 "mbps": round((c.bytes - last_bytes) * 8 / 1e6 / max(now - last_t, 1e-3), 3),
                 "updated": time.time()}
        last_bytes, last_t = c.bytes, now
        if cfg.get("stats_file"):
            tmp = cfg["stats_file"] + ".tmp"
            with open(tmp, "w", encoding="ascii") as f:
                json.dump(stats, f)
            os.replace(tmp, cfg["stats_file"])


async def main_async(cfg: dict) -> int:
    c = Counters()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = None
    work: list = []
    if cfg["role"] == "sink":
        server = await _sink(cfg, c)  # listening before the ready file says so
    elif cfg["kind"] == "bulk":
        work = [_bulk_flow(cfg, c) for _ in range(cfg["flows"])]
    elif cfg["kind"] == "onoff":
        work = [_onoff(cfg, c)]
    else:
        work = [_web(cfg, c)]
    tasks = [asyncio.create_task(w) for w in work]
    await _watch(cfg, c, stop)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if server is not None:
        server.close()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m probes.testbed.crossgen CONFIG.json", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        cfg = json.load(f)
    return asyncio.run(main_async(cfg))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
