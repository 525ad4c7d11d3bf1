"""GET /campaigns/{id}/bundle streams the bundle from a temporary file that spills to disk: the
memory a download takes stays bounded however many raw outputs the campaign holds."""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import os
import tarfile
import tracemalloc

import pytest
from fastapi.responses import StreamingResponse

from api.routers.campaigns import download_bundle
from service.algorithm.topology import TopologySpec
from service.flows.takeaways import bundle_archive, bundle_export, measurement_table
from service.store import artifacts, inventory, measurements
from tests.apply.measured import measured_answer

from .conftest import HU, SRL

pytestmark = pytest.mark.postgres

MIB = 2**20
ARTIFACT_BYTES = MIB  # random: gzip leaves them as large in the bundle
ARTIFACTS = 24  # 24 MiB of raw outputs


@pytest.fixture
def heavy(db_session):
    """A campaign of one probe run carrying ARTIFACTS raw outputs."""
    spec = TopologySpec.model_validate({"local": SRL, "remote": HU})
    topology = inventory.ensure_topology(db_session, spec=spec)
    rec = measured_answer(db_session, topology.id)
    (run,) = measurements.list_runs(db_session, campaign_id=rec.campaign_id, phases=("buffer",))
    for k in range(ARTIFACTS):
        artifacts.store_artifacts(db_session, measurement_id=run.id,
                                  artifacts={f"capture-{k}.bin": os.urandom(ARTIFACT_BYTES)})
    db_session.commit()
    db_session.expunge_all()  # what a request's fresh session starts from
    return rec.campaign_id


def _drain(response: StreamingResponse) -> tuple[int, int]:
    """(bytes, chunks) of a streaming response's body, read as the server sends it."""
    async def read():
        total = chunks = 0
        async for chunk in response.body_iterator:
            total, chunks = total + len(chunk), chunks + 1
        return total, chunks

    # a thread of its own: a test before this one in the process may have left an event loop
    # running in this thread, where asyncio.run refuses to start
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, read()).result()


def test_the_route_streams_from_a_spooled_file_in_bounded_memory(db_session, heavy,
                                                                 monkeypatch):
    # the spool's memory part is a setting (8 MiB); smaller here, so that what is measured is
    # the rest: one raw output at a time, never the whole bundle
    monkeypatch.setattr(bundle_export, "SPOOL_BYTES", MIB)
    # a running server has imported pandas and pyarrow (the tables) long before: not measured
    measurement_table.to_parquet(measurement_table.table_rows([]))
    tracemalloc.start()
    try:
        response = download_bundle(heavy, db_session)
        assert isinstance(response, StreamingResponse)
        size = int(response.headers["content-length"])
        total, chunks = _drain(response)
        _, peak = tracemalloc.get_traced_memory()
    finally:

        tracemalloc.stop()
    assert total == size > ARTIFACTS * ARTIFACT_BYTES
    assert chunks >= size // (256 * 1024)  # pieces, not one body
    # the whole bundle was never held: one raw output, the spool's memory part, the rows
    assert peak < size / 2, f"peak {peak / MIB:.1f} MiB for a {size / MIB:.1f} MiB bundle"
    print(f"bundle {size / MIB:.1f} MiB streamed in {chunks} chunks; peak Python memory "
          f"{peak / MIB:.1f} MiB")


def test_the_spool_spills_to_disk_and_reads_back_as_the_same_bundle(db_session, heavy):
    spool = bundle_export.spooled_bundle(db_session, campaign_id=heavy)
    with spool:
        assert spool._rolled  # past SPOOL_BYTES the bundle lives in a temporary file
        assert spool.tell() == 0
        data = spool.read()
    bundle = bundle_archive.read(data)
    listed = [a for m in bundle.document["measurements"] for a in m["artifacts"]]
    assert len(listed) == ARTIFACTS
    for entry in listed:
        index = int(entry["path"].split("/")[1])
        assert len(bundle.artifacts[index][entry["name"]]) == entry["size"]
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        names = tar.getnames()
    assert names[0] == "bundle.json" and names == (
        names[:3] + sorted(names[3:], key=lambda n: (int(n.split("/")[1]), n)))


def test_over_http_the_download_is_whole_and_an_unknown_campaign_is_404(client, auth, heavy):
    with client.stream("GET", f"/campaigns/{heavy}/bundle", headers=auth) as r:
        assert r.status_code == 200
        assert r.headers["content-type"] == "application/gzip"
        data = b"".join(r.iter_bytes())
    assert len(data) == int(r.headers["content-length"])
    assert bundle_archive.read(data).document["source"]["campaign_id"] == heavy
    r = client.get("/campaigns/999999/bundle", headers=auth)
    assert r.status_code == 404 and "not found" in r.json()["detail"]

