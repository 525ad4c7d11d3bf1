"""With the sites up (the emulated testbed), a provisional answer (POST /recommendations: no
probe ran) is refused by POST /topologies/{id}/apply with 409 and applied only when the request
asks for it, its buffer within the configured ceiling; rolled back, the sites are as before."""

from __future__ import annotations

import os
import secrets

import pytest

from probes.site import config as sc
from tests.apply import livebed
from tests.support import SERVE_START_S, wait_for

pytestmark = pytest.mark.netns


def _database(tmp_path, bed_name: str) -> tuple[int, str, dict]:
    from service.db import make_engine, session_scope, upgrade
    from service.store import tokens
    from service.store.inventory import ensure_topology

    url = f"sqlite:///{tmp_path / 'mpcoa.sqlite3'}"
    upgrade(url)
    engine = make_engine(url)
    spec = livebed.topology()
    with session_scope(engine) as s:
        tid = ensure_topology(s, spec=spec,
                              rtts_ms={n: 20.0 for n in spec.subflow_names()}).id
        token = tokens.create_token(s, name=f"unm{secrets.token_hex(3)}")
    engine.dispose()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCOA_")}
    env.update({"MPCOA_DATABASE_URL": url, "MPCOA_DATA_DIR": str(tmp_path),
                "MPCOA_TESTBED": bed_name, "MPCOA_APPLY_STATE": str(tmp_path / "apply"),
                # the provisional answer's campaign is queued, not run: no probe touches the bed
                "MPCOA_RUN_CAMPAIGNS": "false", "MPCOA_APPLY_BUFFER_CEILING_MIB": "1"})
    return tid, token, env


def test_a_provisional_answer_is_applied_only_when_asked_for(bed, tmp_path):
    import httpx

    from tests.processes import kill_group
    from tests.support import free_port

    before = {n: sc.read_state(bed.ns(n)) for n in ("A", "B")}
    tid, token, env = _database(tmp_path, bed.name)
    port = free_port()
    server = livebed.serve(env, tmp_path, port)
    c = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30,
                     headers={"Authorization": f"Bearer {token}"})
    try:
        wait_for(lambda: livebed.up(port, server), SERVE_START_S, "mpcoa serve to answer")
        ans = c.post("/recommendations", json={"topology_id": tid})
        assert ans.status_code == 202 and ans.json()["provisional"], ans.text
        obs = ans.json()["obs_mib"]
        assert obs is not None and obs > 1.0, ans.json()  # Eq. 1's half, above the ceiling

        body = {"confirm": False, "watch": False}
        r = c.post(f"/topologies/{tid}/apply", json=body)
        assert r.status_code == 409, r.text
        assert "provisional: no probe measured it" in r.json()["detail"]
        assert c.get(f"/topologies/{tid}/applied").json() == []
        assert {n: sc.read_state(bed.ns(n)) for n in ("A", "B")} == before

        # lower_ceilings: written exactly, below the namespaces' own 64 MiB, so the cap shows
        r = c.post(f"/topologies/{tid}/apply", json={**body, "allow_unmeasured": True,
                                                     "lower_ceilings": True})
        assert r.status_code == 202, r.text
        row = wait_for(lambda: (a := c.get(f"/topologies/{tid}/applied").json()[0])["state"]
                       != "applying" and a, 60, "the apply")
        assert row["state"] == "applied", row
        assert row["plan"]["allow_unmeasured"] is True
        assert row["plan"]["buffer"]["capped_by"] == "ceiling"
        wmem = sc.read_state(bed.ns("A"))["sysctls"]["net.ipv4.tcp_wmem"]
        assert int(wmem.split()[2]) == 2 * 2**20  # twice the 1 MiB ceiling, not Eq. 1's OBS

        assert c.post(f"/topologies/{tid}/rollback").status_code == 202
        wait_for(lambda: c.get(f"/topologies/{tid}/applied").json()[0]["state"]
                 == "rolled_back", 60, "the rollback")
        assert {n: sc.read_state(bed.ns(n)) for n in ("A", "B")} == before
    finally:
        c.close()
        kill_group(server)
