"""docker-compose.yml: no engine here, so the file is parsed and its services checked."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def _depends(service: dict) -> dict:
    deps = service.get("depends_on", {})
    return deps if isinstance(deps, dict) else {d: {} for d in deps}


def test_services_images_and_healthchecks():
    services = _compose()["services"]
    workers = {n: s for n, s in services.items() if n.startswith("worker-")}
    assert {"postgres", "redis", "api", "beat", "flower"} <= set(services)
    assert len(workers) >= 2
    assert services["postgres"]["image"].startswith("postgres:15")
    assert services["redis"]["image"].startswith("redis:")
    for name, service in services.items():
        assert "healthcheck" in service and service["healthcheck"]["test"], name
    mpcoa = [services[n] for n in ("api", "beat", "flower", *workers)]
    assert all(s["image"] == "${MPCOA_IMAGE:-mpcoa:latest}" for s in mpcoa)
    assert (REPO / "Dockerfile").exists()


def test_commands_and_queues():
    services = _compose()["services"]
    assert services["api"]["command"][:2] == ["mpcoa", "serve"]
    queues = []
    for name, service in services.items():
        if name.startswith("worker-"):
            cmd = service["command"]
            assert cmd[:4] == ["celery", "-A", "workers.app", "worker"]
            # Its own site's queue, plus the shared control queue (resume, beat's tasks).
            own = [q for q in cmd[cmd.index("-Q") + 1].split(",") if q != "mpcoa.control"]
            assert len(own) == 1 and own[0].startswith("site."), own
            queues.append(own[0])
            assert cmd[cmd.index("-P") + 1] == "solo"  # one probe at a time per site
    assert len(queues) == len(set(queues)), "one queue per site"
    beats = [n for n, s in services.items() if "beat" in s.get("command", [])]
    assert beats == ["beat"] and services["beat"]["deploy"]["replicas"] == 1
    assert "flower" in services["flower"]["command"]


def test_dependencies_wait_for_health():
    services = _compose()["services"]
    api = _depends(services["api"])
    assert api["postgres"]["condition"] == "service_healthy"
    assert api["redis"]["condition"] == "service_healthy"
    for name, service in services.items():
        if name.startswith("worker-") or name == "beat":
            deps = _depends(service)
            assert {"postgres", "redis", "api"} <= set(deps), name
            assert all(d["condition"] == "service_healthy" for d in deps.values())
    assert "redis" in _depends(services["flower"])
    env = services["api"]["environment"]
    assert env["MPCOA_DATABASE_URL"].split(":-", 1)[1].startswith("postgresql+psycopg://")
    assert env["MPCOA_BROKER_URL"].split(":-", 1)[1].startswith("redis://")


def test_env_example_names_every_variable_the_compose_file_uses():
    import re

    used = set(re.findall(r"\$\{([A-Z_]+)", (REPO / "docker-compose.yml").read_text()))
    lines = (REPO / ".env.example").read_text().splitlines()
    defined = {line.split("=", 1)[0] for line in lines if "=" in line and not line.startswith("#")}
    assert used <= defined, used - defined
