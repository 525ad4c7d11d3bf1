"""`GET /metrics`: the figures are the database's rows, so a probe stored by any process moves
them; failed probes are counted by reason; each topology's last calibration has an age."""

from __future__ import annotations

from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from service.algorithm.topology import TopologySpec
from service.flows.campaign import recording
from service.store import inventory
from service.store.measurements import MeasurementRecord
from service.store.metrics import failure_reason
from tests.api.calibration import seed_srl_hu
from tests.builders import paper_site
from tests.conftest import new_campaign
from tests.support import ago

pytestmark = pytest.mark.postgres


def scrape(client) -> dict[tuple[str, tuple], float]:
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.text) for s in family.samples}


def value(samples, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_follow_the_rows(client, db_session):
    spec = TopologySpec(local=paper_site("SRL"), remote=paper_site("HU"))
    topology = inventory.ensure_topology(db_session, spec=spec)
    db_session.commit()
    before = scrape(client)
    assert value(before, "mpcoa_topology_calibrated", topology_id=str(topology.id),
                 local="SRL", remote="HU") == 0
    seeded = seed_srl_hu(db_session, topology.id, runs=1, model_kind=None)
    after = scrape(client)
    ok = value(after, "mpcoa_probes_total", phase="buffer", status="ok", reason="") \
        - value(before, "mpcoa_probes_total", phase="buffer", status="ok", reason="")
    impact = value(after, "mpcoa_probes_total", phase="impact", status="ok", reason="")
    assert ok + impact - value(before, "mpcoa_probes_total", phase="impact", status="ok",
                               reason="") == seeded["measurements"]
    assert value(after, "mpcoa_probe_seconds_total", phase="buffer") \
        - value(before, "mpcoa_probe_seconds_total", phase="buffer") == pytest.approx(10.0 * ok)
    labels = {"topology_id": str(topology.id), "local": "SRL", "remote": "HU"}
    assert value(after, "mpcoa_topology_calibrated", **labels) == 1
    assert 0 <= value(after, "mpcoa_last_calibration_age_seconds", **labels) < 3600
    assert value(after, "mpcoa_campaigns", state="done") >= 1
    assert value(after, "mpcoa_queue_depth", queue="campaigns") == value(
        after, "mpcoa_campaigns", state="queued")

    # A probe that fell back to TCP, stored failed: counted under its reason.
    campaign = new_campaign(db_session, topology.id, ccs=["cubic"], runs=1)
    t0 = ago(hours=1)
    recording.record(db_session, MeasurementRecord(
        campaign_id=campaign.id, phase="impact", pm="FullMesh", cc="cubic", bs_mib=1.0, run=0,
        subflows=[], duration_s=2, goodput_mbps=[], tool="iperf3", status="failed",
        error="not fitted: fell back to TCP", started_at=t0,
        finished_at=t0 + timedelta(seconds=2)))
    db_session.commit()
    last = scrape(client)
    assert value(last, "mpcoa_probes_total", phase="impact", status="failed",
                 reason="no_mptcp") == value(after, "mpcoa_probes_total", phase="impact",
                                             status="failed", reason="no_mptcp") + 1
    assert value(last, "mpcoa_queue_depth", queue="campaigns") >= 1


def test_failure_reasons():
    assert failure_reason("not fitted: sites not quiet before the probe: ns1") == "not_quiet"
    assert failure_reason("not fitted: subflow A-U: allowed but in backup") == "subflow_set"
    assert failure_reason("not fitted: no goodput interval after the warm-up of 1 s") \
        == "no_interval"
    assert failure_reason("iperf3 timed out (after 3 attempts)") == "timeout"
    assert failure_reason("something else") == "probe_error"
    assert failure_reason(None) == "probe_error"


def test_answer_latency_is_observed(client, auth):
    body = {"topology": {"local": _body("SRL"), "remote": _body("HU")}}
    assert client.post("/recommendations", json=body, headers=auth).status_code == 202
    samples = scrape(client)
    assert value(samples, "mpcoa_answer_latency_seconds_count", source="provisional") >= 1


def _body(name: str) -> dict:
    return paper_site(name).model_dump(mode="json")


@pytest.mark.broker
def test_queue_depths_come_from_the_broker(tmp_path, pg_database_url, session_factory, db_session):
    import redis
    from fastapi.testclient import TestClient

    from api.app import create_app
    from service.settings import Settings
    from tests.conftest import REDIS_HOST, redis_database

    spec = TopologySpec(local=paper_site("SRL"), remote=paper_site("HU"))
    inventory.ensure_topology(db_session, spec=spec)
    db_session.commit()
    with redis_database() as index:
        url = f"redis://{REDIS_HOST}:6379/{index}"
        client = redis.Redis.from_url(url)
        client.rpush("site.SRL", b"{}", b"{}")
        client.rpush("mpcoa.control", b"{}")
        settings = Settings(database_url=pg_database_url, broker_url=url, data_dir=tmp_path,
                            run_campaigns=False, _env_file=None)
        # a broker: a shared server, whose reads (the metrics too) need a token
        from service.store import tokens

        reader = tokens.create_token(db_session, name="metrics-reader", scope="read")
        db_session.commit()
        with TestClient(create_app(settings, session_factory=session_factory),
                        base_url="http://localhost") as c:
            assert c.get("/metrics").status_code == 401
            c.headers["Authorization"] = f"Bearer {reader}"
            samples = scrape(c)
        client.close()
    assert value(samples, "mpcoa_queue_depth", queue="site.SRL") == 2
    assert value(samples, "mpcoa_queue_depth", queue="site.HU") == 0
    assert value(samples, "mpcoa_queue_depth", queue="mpcoa.control") == 1
    assert value(samples, "mpcoa_broker_up") == 1
