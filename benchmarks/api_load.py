"""Load test: POST /recommendations for a calibrated topology vs a trivial FastAPI endpoint.

32 concurrent clients for 20 s against each, on PostgreSQL (a throw-away database on localhost),
the same uvicorn server (`mpcoa serve`'s launcher, `--workers` processes) serving all of them on
127.0.0.1. Prints requests/s, p50, p99 and the server's CPU time per request for each endpoint and
checks the target: POST /recommendations at least half the trivial endpoint's throughput, p99
under 50 ms.

    .venv/bin/python benchmarks/api_load.py [--duration 20] [--concurrency 32] [--workers 2]

A third, reference line (not part of the target) shows the floor any stored answer has on this
machine: `POST /bench/insert-only` stores one recommendations row (INSERT ... RETURNING id, COMMIT)
and does nothing else -- no token, no reads, no solve -- run the same way as the real endpoint.
`--no-insert-only` skips it.

The load generator (raw HTTP/1.1 on asyncio streams) runs in this process on the same 2 cores
as the server, so both figures include its cost; the ratio is what the target is about.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
import psycopg
from fastapi import Request

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PG = {"host": os.environ.get("MPCOA_BENCH_PG_HOST", "localhost"), "user": "postgres"}
# Table 4 of the paper, SRL-HU: pm -> cc -> (a, b, c).
from service.algorithm.paper_tables import TABLE4  # noqa: E402 - needs the sys.path above

CURVES = TABLE4["SRL-HU"]
SRL = {"name": "SRL", "isps": [
    {"name": "Uninett", "label": "U", "down_kbps": 100000, "up_kbps": 100000},
    {"name": "Kvantel", "label": "K", "down_kbps": 1000000, "up_kbps": 1000000},
    {"name": "PowerTech", "label": "P", "down_kbps": 6000, "up_kbps": 256},
    {"name": "Telenor", "label": "T", "down_kbps": 3000, "up_kbps": 768}]}
HU = {"name": "HU", "isps": [
    {"name": "CERNET", "label": "C", "down_kbps": 100000, "up_kbps": 100000},
    {"name": "CnUnicom", "label": "CU", "down_kbps": 20000, "up_kbps": 20000}]}


def make_app():
    """The real app plus the endpoints to compare with (uvicorn --factory)."""
    from api.app import create_app
    from api.deps import in_lane
    from models import Recommendation, utcnow
    from service.store.recommendations import add_recommendation

    app = create_app()

    @app.get("/trivial", include_in_schema=False)
    async def trivial():
        return {"ok": True}

    def insert_only(factory, values) -> dict:
        session = factory()
        try:
            rec = add_recommendation(session, **values, created_at=utcnow())
            session.commit()
            return {"id": rec.id}
        finally:
            session.close()

    @app.post("/bench/insert-only", include_in_schema=False)
    async def bench_insert_only(request: Request):
        """The floor: store one recommendations row like POST /recommendations, nothing else."""
        state = request.app.state
        if not hasattr(state, "bench_row"):
            with state.session_factory() as session:
                row = session.query(Recommendation).order_by(Recommendation.id).first()
                state.bench_row = {
                    c.key: getattr(row, c.key)
                    for c in Recommendation.__table__.columns
                    if c.key not in ("id", "created_at")
                }
        return await in_lane("work", insert_only, state.session_factory, state.bench_row)

    return app


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of these processes (Linux /proc; 0 elsewhere)."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            pass
    return total


def _server_pids(pid: int) -> list[int]:
    """The server process and its worker processes."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [pid, *map(int, f.read().split())]
    except OSError:
        return [pid]


def seed(url: str) -> tuple[int, str]:
    """A calibrated SRL-HU topology (buffer-phase runs from Table 4 + noise, fitted) and a token."""
    from service import db
    from service.algorithm.topology import TopologySpec
    from service.flows.campaign import recording
    from service.flows.campaign.derive import fit_from_runs
    from service.flows.campaign.dispatch import start_campaign
    from service.flows.campaign.plan import CampaignParameters
    from service.settings import Settings
    from service.store import campaigns, inventory, results, tokens
    from service.store.measurements import MeasurementRecord

    db.upgrade(url)
    rng = np.random.default_rng(1)
    engine = db.make_engine(url)
    with db.session_scope(engine) as s:
        topo = inventory.ensure_topology(
            s, spec=TopologySpec.model_validate({"local": SRL, "remote": HU}),
            rtts_ms={f"{a}-{b}": 310.0 for a in "UKPT" for b in ("C", "CU")},
        )
        params = CampaignParameters(buffer_grid_mib=[0.5 * k for k in range(1, 61)], runs=3,
                                    duration_s=30)
        c = start_campaign(s, topology_id=topo.id, params=params, reason="bench",
                           settings=Settings(run_campaigns=False))
        campaigns.set_state(s, campaign_id=c.id, state="running")
        t0 = datetime.now(UTC) - timedelta(days=2)
        n = 0
        for pm, curves in CURVES.items():
            for cc, (a, b, cq) in curves.items():
                for bs in c.buffer_grid_mib:
                    for run in range(c.runs):
                        tp = max(0.0, a + b * bs + cq * bs * bs + rng.normal(0, 0.5))
                        start = t0 + timedelta(seconds=31 * n)
                        recording.record(
                            s, MeasurementRecord(
                                campaign_id=c.id, phase="buffer", pm=pm, cc=cc, bs_mib=bs, run=run,
                                subflows=["K-C"], duration_s=30, goodput_mbps=[tp] * 30,
                                rtt_ms={"K-C": 300.0}, tool="synthetic", started_at=start,
                                finished_at=start + timedelta(seconds=30)))
                        n += 1
        results.store_fits(s, campaign_id=c.id, fits=fit_from_runs(s, campaign=c).fits)
        campaigns.set_state(s, campaign_id=c.id, state="done")
        token = tokens.create_token(s, name="bench")
        topology_id = topo.id
    engine.dispose()
    return topology_id, token


async def load(url: str, method: str, body, headers, duration: float, concurrency: int):
    """`concurrency` keep-alive HTTP/1.1 connections, each sending requests back to back.

    A minimal client on asyncio streams: httpx's own overhead would dominate the trivial endpoint.
    """
    parsed = httpx.URL(url)
    payload = b"" if body is None else json.dumps(body).encode()
    head = [f"{method} {parsed.raw_path.decode()} HTTP/1.1", f"Host: {parsed.host}:{parsed.port}"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    if body is not None:
        head += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    request = ("\r\n".join(head) + "\r\n\r\n").encode() + payload
    latencies: list[float] = []
    errors = 0
    stop = time.perf_counter() + duration

    async def one_client():
        nonlocal errors
        reader, writer = await asyncio.open_connection(parsed.host, parsed.port)
        try:
            while time.perf_counter() < stop:
                t = time.perf_counter()
                writer.write(request)
                status_line = await reader.readline()
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                latencies.append(time.perf_counter() - t)
                if int(status_line.split()[1]) >= 300:
                    errors += 1
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(one_client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    q = statistics.quantiles(sorted(latencies), n=100, method="inclusive")
    return {"requests": len(latencies), "rps": len(latencies) / elapsed, "p50_ms": q[49] * 1000,
            "p99_ms": q[98] * 1000, "errors": errors}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2,
                        help="uvicorn worker processes (default 2: one per core)")
    parser.add_argument("--no-insert-only", dest="insert_only", action="store_false",
                        help="skip the insert-only reference line")
    args = parser.parse_args()
    dbname = f"mpcoa_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dbname="postgres", autocommit=True, **PG) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    url = f"postgresql+psycopg://{PG['user']}@{PG['host']}/{dbname}"
    server = None
    try:
        topology_id, token = seed(url)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        env = {**os.environ, "MPCOA_DATABASE_URL": url, "PYTHONPATH": str(REPO)}
        launch = (
            "from cli.serve import run_uvicorn; "
            f"run_uvicorn('benchmarks.api_load:make_app', factory=True, host='127.0.0.1', "
            f"port={port}, workers={args.workers}, log_level='warning', access_log=False)"
        )
        server = subprocess.Popen([sys.executable, "-c", launch], cwd=REPO, env=env)
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                httpx.get(f"{base}/trivial", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        auth = {"Authorization": f"Bearer {token}"}
        body = {"topology_id": topology_id, "delta": 0.07}
        check = httpx.post(f"{base}/recommendations", json=body, headers=auth, timeout=10)
        assert check.status_code == 200, check.text
        rec = check.json()
        print(f"calibrated answer: {rec['opm']}/{rec['occ']} OBS {rec['obs_mib']:.2f} MiB "
              f"OTP {rec['otp_mbps']:.2f} Mbit/s")
        results = {}
        runs = [
            ("GET /trivial", "GET", "/trivial", None),
            ("POST /recommendations", "POST", "/recommendations", body),
        ]
        if args.insert_only:
            runs.append(("insert-only (ref.)", "POST", "/bench/insert-only", {}))
        time.sleep(1.0)  # let the workers finish starting
        pids = _server_pids(server.pid)
        for name, method, path, payload in runs:
            asyncio.run(load(base + path, method, payload, auth, 2.0, args.concurrency))  # warm-up
            cpu = _cpu_seconds(pids)
            results[name] = r = asyncio.run(
                load(base + path, method, payload, auth, args.duration, args.concurrency))
            r["server_cpu_us"] = (_cpu_seconds(pids) - cpu) / max(r["requests"], 1) * 1e6
        print(f"\n{args.concurrency} concurrent clients, {args.duration:.0f} s each, PostgreSQL, "
              f"{args.workers} uvicorn worker(s); load average {os.getloadavg()[0]:.1f}")
        print(f"{'endpoint':<24}{'requests':>10}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}"
              f"{'errors':>8}{'server CPU us/req':>19}")
        for name, r in results.items():
            print(f"{name:<24}{r['requests']:>10}{r['rps']:>10.1f}{r['p50_ms']:>10.1f}"
                  f"{r['p99_ms']:>10.1f}{r['errors']:>8}{r['server_cpu_us']:>19.0f}")
        rec_r, triv = results["POST /recommendations"], results["GET /trivial"]
        ratio = rec_r["rps"] / triv["rps"]
        ok = ratio >= 0.5 and rec_r["p99_ms"] < 50 and rec_r["errors"] == 0
        print(f"\nthroughput ratio {ratio:.2f} (target >= 0.50), p99 {rec_r['p99_ms']:.1f} ms "
              f"(target < 50): {'PASS' if ok else 'FAIL'}")
        if "insert-only (ref.)" in results:
            floor = results["insert-only (ref.)"]["rps"] / triv["rps"]
            print(f"insert-only floor: {floor:.2f} of the trivial endpoint's throughput "
                  "(the most any stored answer can reach here)")
        return 0 if ok else 1
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=20)
        with psycopg.connect(dbname="postgres", autocommit=True, **PG) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


if __name__ == "__main__":
    sys.exit(main())
