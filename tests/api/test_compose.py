"""docker-compose.yml: no engine here, so the file is parsed and its services checked."""

from __future__ import annotations

from pathlib import Path

import pytest
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


# --- issue 14, item 9: no default secrets --------------------------------------------------
SECRETS = ("POSTGRES_PASSWORD", "REDIS_PASSWORD", "MPCOA_SECRET_KEY", "FLOWER_BASIC_AUTH")


def test_secrets_have_no_fallback_and_compose_refuses_without_them():
    import re

    text = (REPO / "docker-compose.yml").read_text()
    assert "change-me" not in text and "changethis" not in text
    for name in SECRETS:
        uses = re.findall(r"\$\{" + name + r"(:?[-?])?", text)
        assert uses and all(op == ":?" for op in uses), (name, uses)
    env = _compose()["x-mpcoa"]["environment"]
    assert env["MPCOA_ENVIRONMENT"] == "production"
    example = dict(line.split("=", 1) for line in (REPO / ".env.example").read_text().splitlines()
                   if "=" in line and not line.startswith("#"))
    assert all(example[name] == "" for name in SECRETS)


def _compose_command() -> list[str]:
    """Docker Compose without an engine: `config` only reads and interpolates the file.
    Debian's docker-compose (scripts/debian-packages.txt), or the docker CLI's plugin."""
    import shutil

    if shutil.which("docker-compose"):
        return [shutil.which("docker-compose")]
    assert shutil.which("docker"), "neither docker-compose nor docker is installed (bootstrap)"
    return ["docker", "compose"]


@pytest.mark.slow
def test_compose_config_fails_without_secrets(tmp_path):
    import subprocess

    # A copy beside its own .env: the services' `env_file: .env` is read from the file's folder.
    (tmp_path / "docker-compose.yml").write_text((REPO / "docker-compose.yml").read_text())

    def config(env_text: str):
        (tmp_path / ".env").write_text(env_text)
        return subprocess.run(
            [*_compose_command(), "-f", str(tmp_path / "docker-compose.yml"), "--env-file",
             str(tmp_path / ".env"), "config"], capture_output=True, text=True, check=False,
            env={"PATH": "/usr/bin:/bin:/usr/local/bin"}, timeout=60)

    out = config("")
    assert out.returncode != 0 and "POSTGRES_PASSWORD" in out.stdout + out.stderr
    secrets = "\n".join(f"{name}=not-a-placeholder-{k}" for k, name in enumerate(SECRETS))
    out = config(secrets + "\n")
    assert out.returncode == 0, out.stdout + out.stderr


def test_site_worker_profile():
    """A real site's worker (issue 11 item 7): host networking, NET_ADMIN, the ISP map, only
    under the `site` profile (the central stack's `up` does not start it)."""
    site = _compose()["services"]["site-worker"]
    assert site["profiles"] == ["site"]
    assert site["network_mode"] == "host" and "NET_ADMIN" in site["cap_add"]
    cmd = site["command"]
    assert cmd[:3] == ["mpcoa", "worker", "--site"] and cmd.count("--isp") >= 2
    assert cmd[3] == "${MPCOA_SITE:-}"  # no default site: two hosts never both become SRL
    assert "depends_on" not in site  # the database and broker are on the central host


@pytest.mark.slow
def test_compose_config_with_the_site_profile(tmp_path):
    import subprocess

    (tmp_path / "docker-compose.yml").write_text((REPO / "docker-compose.yml").read_text())
    secrets = "\n".join(f"{name}=not-a-placeholder-{k}" for k, name in enumerate(SECRETS))
    (tmp_path / ".env").write_text(secrets + "\nMPCOA_SITE=HU\nMPCOA_SITE_FIRST_ISP=C=@eth1\n")
    out = subprocess.run(
        [*_compose_command(), "-f", str(tmp_path / "docker-compose.yml"), "--env-file",
         str(tmp_path / ".env"), "--profile", "site", "config"], capture_output=True, text=True,
        check=False, env={"PATH": "/usr/bin:/bin:/usr/local/bin"}, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    import yaml

    site = yaml.safe_load(out.stdout)["services"]["site-worker"]
    assert site["command"][3:7] == ["HU", "--isp", "C=@eth1", "--isp"]
