"""Request bodies the API once took for something else: `true` as an id, and a provisional
answer outside the buffer range it reports."""

from __future__ import annotations

import pytest

from tests.builders import site


@pytest.mark.parametrize("value", [True, "1", 1.0])
def test_a_topology_id_must_be_a_json_integer(client, auth, value):
    r = client.post("/recommendations", json={"topology_id": value}, headers=auth)
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["loc"][-1] == "topology_id"
    for path, body in (("/topologies", {"local_site_id": value, "remote_site_id": 2}),
                       ("/campaigns", {"topology_id": value})):
        r = client.post(path, json=body, headers=auth)
        assert r.status_code == 422, (path, r.text)


@pytest.mark.parametrize(("rtt_ms", "kbps", "bounds", "edge"), [
    (1e-300, 100, {}, "bs_min_mib"),  # 50 % of Eq. 1 is 0.006 MiB
    (300, 100_000, {"bs_max_mib": 2.0}, "bs_max_mib"),  # 11 MiB
])
def test_a_provisional_answer_stays_within_the_bounds_it_reports(client, auth, rtt_ms, kbps,
                                                                  bounds, edge):
    local, remote = site("Thin", [("a", kbps)]), site("Far", [("b", kbps)])
    body = {"topology": {"local": local, "remote": remote, "rtts_ms": {"a-b": rtt_ms}},
            **bounds}
    r = client.post("/recommendations", json=body, headers=auth)
    assert r.status_code == 202, r.text
    rec = r.json()
    assert rec["provisional"] and rec["traditional"]["available"]
    assert rec["bs_min_mib"] <= rec["obs_mib"] <= rec["bs_max_mib"]
    assert rec["obs_mib"] == rec[edge]
    assert "obs_at_bound" in rec["quality_flags"]
    half = rec["traditional"]["buffer_mib"] / 2
    assert any(f"50 % of Eq. 1 is {half:.6g} MiB" in n for n in rec["notes"])
