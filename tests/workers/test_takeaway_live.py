"""What a researcher and an operator take away, from a real (short) campaign on the emulated
testbed: `/metrics` scraped while it runs shows the probe counters move; afterwards `mpcoa
report` renders its figures, and its bundle, imported into another database, re-derives the
same answer."""

from __future__ import annotations

import io
import subprocess
import time

import httpx
import pytest
from PIL import Image
from prometheus_client.parser import text_string_to_metric_families

from tests.processes import stop_group
from tests.support import SERVE_START_S, free_port, wait_for

from .conftest import BIN, embedded_database

pytestmark = pytest.mark.netns

BUFFERS = ["0.03125", "0.0625", "0.125", "0.25", "0.5"]


def probes_done(text: str) -> float:
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "mpcoa_probes_total")


def run(args, env, timeout=300) -> subprocess.CompletedProcess:
    out = subprocess.run([str(BIN / "mpcoa"), *args], env=env, capture_output=True, text=True,
                         timeout=timeout, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def test_metrics_move_during_a_campaign_then_report_and_bundle(sites, testbed, tmp_path):
    topology_id, env = embedded_database(sites, tmp_path)
    token = run(["token", "create", "live"], env).stdout.strip()
    port = free_port()
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115
    serve = subprocess.Popen([str(BIN / "mpcoa"), "serve", "--port", str(port)], env=env,
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    seen: list[tuple[str, float]] = []  # (campaign state, probes counted) per scrape
    try:
        with httpx.Client(base_url=base, timeout=10,
                          headers={"Authorization": f"Bearer {token}"}) as c:
            def up():
                try:
                    return c.get("/health").status_code == 200
                except httpx.TransportError:
                    assert serve.poll() is None, (tmp_path / "serve.log").read_text()
                    return False

            wait_for(up, SERVE_START_S, "mpcoa serve to answer")
            r = c.post("/campaigns", json={
                "topology_id": topology_id, "ccs": ["reno", "cubic"], "runs": 1,
                "duration_s": 2, "mode": "adaptive", "probe_seconds_budget": 70,
                "buffer_grid_mib": [float(b) for b in BUFFERS]})  # about 35 probes
            assert r.status_code == 202, r.text
            cid = r.json()["id"]
            deadline = time.monotonic() + 400
            while time.monotonic() < deadline:
                state = c.get(f"/campaigns/{cid}").json()["state"]
                metrics = c.get("/metrics")
                assert metrics.status_code == 200
                seen.append((state, probes_done(metrics.text)))
                if state not in ("queued", "running"):
                    break
                time.sleep(1.0)
            assert state == "done", (state, (tmp_path / "serve.log").read_text()[-3000:])
            final = c.get("/metrics").text
            assert c.get("/campaigns/999999/bundle").status_code == 404
            assert c.get(f"/campaigns/{cid}/measurements",
                         params={"format": "ods"}).status_code == 422
            parquet = c.get(f"/campaigns/{cid}/measurements", params={"format": "parquet"})
            assert parquet.status_code == 200
    finally:
        stop_group(serve)
        log.close()
    during = [n for state, n in seen if state == "running"]
    print(f"probe counter while running: {during}")
    assert len(set(during)) >= 3 and during == sorted(during), seen  # moved, never back
    assert probes_done(final) >= max(during)
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(parquet.content))
    assert table.num_rows == probes_done(final)

    # The report, from the campaign just measured.
    pages = tmp_path / "pages"
    run(["report", str(cid), "-o", str(tmp_path / "report.pdf"), "--png", str(pages)], env)
    assert (tmp_path / "report.pdf").read_bytes().startswith(b"%PDF")
    pngs = sorted(pages.glob("report-*.png"))
    assert [p.name for p in pngs] == [f"report-{k}.png" for k in range(1, 5)]
    for p in pngs:
        assert Image.open(p).size == (1169, 827)

    # The bundle, imported into another database: the one solve gives the same answer.
    run(["export", str(cid), "-o", str(tmp_path / "bundle.tar.gz")], env)
    other = {**env, "MPCOA_DATABASE_URL": f"sqlite:///{tmp_path / 'other.sqlite3'}"}
    run(["db", "upgrade"], other)
    out = run(["import", str(tmp_path / "bundle.tar.gz")], other)
    assert "re-derived: OPM=" in out.stdout and "the bundle's answer" in out.stdout, out.stdout
    bad = subprocess.run([str(BIN / "mpcoa"), "import", str(tmp_path / "report.pdf")],
                         env=other, capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "not a readable gzip-compressed tar file" in bad.stderr
    assert "Traceback" not in bad.stderr
