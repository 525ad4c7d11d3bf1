"""docker-compose.yml: no engine here, so the file is parsed and its services checked."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def _compose(name: str = "docker-compose.yml") -> dict:
    return yaml.safe_load((REPO / name).read_text())


def _depends(service: dict) -> dict:
    deps = service.get("depends_on", {})
    return deps if isinstance(deps, dict) else {d: {} for d in deps}


MPCOA_SERVICES = ("api", "control-worker", "beat", "flower")


def test_services_images_and_healthchecks():
    services = _compose()["services"]
    assert {"postgres", "redis", *MPCOA_SERVICES} == set(services)
    assert services["postgres"]["image"].startswith("postgres:15")
    assert services["redis"]["image"].startswith("redis:")
    for name, service in services.items():
        assert "healthcheck" in service and service["healthcheck"]["test"], name
    mpcoa = [services[n] for n in MPCOA_SERVICES]
    assert all(s["image"] == "${MPCOA_IMAGE:-mpcoa:latest}" for s in mpcoa)
    assert (REPO / "Dockerfile").exists()


def test_commands_and_queues():
    services = _compose()["services"]
    assert services["api"]["command"][:2] == ["mpcoa", "serve"]
    # The control host's worker takes the control queue only: no site's probes run there (a
    # worker without its ISPs would look for an emulated testbed that a real host does not have).
    # `mpcoa worker` with no --site serves the control queue alone (tests/cli/test_worker_cli.py)
    assert services["control-worker"]["command"] == ["mpcoa", "worker"]
    assert not [n for n, s in services.items() if "--site" in s.get("command", [])]
    assert services["beat"]["command"] == ["mpcoa", "beat"]
    beat_dir = services["beat"]["environment"]["MPCOA_DATA_DIR"]
    assert f"{beat_dir}/celerybeat.pid" in services["beat"]["healthcheck"]["test"][1]
    assert list(_compose("docker-compose.site.yml")["services"]) == ["site-worker"]
    beats = [n for n, s in services.items() if "beat" in s.get("command", [])]
    assert beats == ["beat"] and services["beat"]["deploy"]["replicas"] == 1
    assert "flower" in services["flower"]["command"]


def test_dependencies_wait_for_health():
    services = _compose()["services"]
    api = _depends(services["api"])
    assert api["postgres"]["condition"] == "service_healthy"
    assert api["redis"]["condition"] == "service_healthy"
    for name, service in services.items():
        if name in ("control-worker", "beat"):
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


def test_site_worker_file():
    """A real site's worker: host networking, the privileges probing and applying need, the ISP
    map with no default, the journal on the host, in a file of its own (the control host's
    `up` does not start it) that names none of the control host's secrets."""
    text = (REPO / "docker-compose.site.yml").read_text()
    for secret in (*SECRETS, "MPCOA_FLOWER_BASIC_AUTH", "POSTGRES_"):
        assert secret not in text, secret
    site = _compose("docker-compose.site.yml")["services"]["site-worker"]
    assert site["network_mode"] == "host" and site["user"] == "0"
    assert {"NET_ADMIN", "BPF", "PERFMON"} <= set(site["cap_add"])
    assert "privileged" not in site  # the capabilities it needs, named, not all of them
    assert "systempaths=unconfined" in site["security_opt"]  # /proc/sys/net is written by apply
    cmd = site["command"]
    assert cmd[:3] == ["mpcoa", "worker", "--site"] and cmd.count("--isp") >= 2
    assert cmd[3] == "${MPCOA_SITE:-}"  # no default site: two hosts never both become SRL
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--isp"] == [
        "${MPCOA_SITE_FIRST_ISP:-}", "${MPCOA_SITE_SECOND_ISP:-}"]  # no default ISP either
    assert "depends_on" not in site  # the database and broker are on the central host
    # The apply journal outlives the container (a recreated one still knows what to roll back).
    env = site["environment"]
    assert env["MPCOA_APPLY_STATE"].startswith("/run/mpcoa/")
    assert "/run/mpcoa:/run/mpcoa" in site["volumes"]
    # the control host's URLs, from the site host's .env: no fallback to a local database
    assert env["MPCOA_DATABASE_URL"].startswith("${MPCOA_DATABASE_URL:?")
    assert env["MPCOA_BROKER_URL"].startswith("${MPCOA_BROKER_URL:?")
    assert set(env) == {"MPCOA_ENVIRONMENT", "MPCOA_DATABASE_URL", "MPCOA_BROKER_URL",
                        "MPCOA_APPLY_STATE", "MPCOA_BPF_CC_CACHE"}


def test_image_has_the_bpf_toolchain():
    """A site worker compiles and registers its BPF congestion controls in the container."""
    text = (REPO / "Dockerfile").read_text()
    for package in ("clang", "bpftool", "libbpf-dev", "iperf3", "mptcpize"):
        assert f" {package}" in text, package


def test_api_metrics_add_up_across_its_processes():
    """`--workers 2` needs prometheus_client's multiprocess mode, in a directory that starts
    empty."""
    api = _compose()["services"]["api"]
    cmd = api["command"]
    assert int(cmd[cmd.index("--workers") + 1]) > 1
    directory = api["environment"]["PROMETHEUS_MULTIPROC_DIR"]
    assert directory in api["tmpfs"]
    # The shared environment is kept beside it (a service's own `environment` replaces it).
    assert api["environment"]["MPCOA_SECRET_KEY"].startswith("${MPCOA_SECRET_KEY:?")


def test_every_port_is_published_only_where_env_says():
    """PostgreSQL, Redis, the API and Flower: loopback unless .env names an address (the API
    and Flower speak plain HTTP: the reverse proxy on the host is what the network reaches)."""
    services = _compose()["services"]
    for name, port in (("postgres", 5432), ("redis", 6379), ("api", 8000), ("flower", 5555)):
        (published,) = services[name]["ports"]
        assert published.startswith("${MPCOA_PUBLISH_ADDR:-127.0.0.1}:"), published
        assert published.endswith(f":{port}")


@pytest.mark.slow
def test_compose_config_of_a_site_host(tmp_path):
    """The site host's .env holds the site, its ISPs and the two URLs, no secret of the control
    host's; the worker's environment has none either."""
    import subprocess

    (tmp_path / "docker-compose.site.yml").write_text(
        (REPO / "docker-compose.site.yml").read_text())
    (tmp_path / ".env").write_text(
        "MPCOA_SITE=HU\nMPCOA_SITE_FIRST_ISP=C=@eth1\n"
        "MPCOA_DATABASE_URL=postgresql+psycopg://mpcoa_site:pw@control.example.net/mpcoa\n"
        "MPCOA_BROKER_URL=rediss://:pw@control.example.net:6379/0\n")

    def config():
        return subprocess.run(
            [*_compose_command(), "-f", str(tmp_path / "docker-compose.site.yml"),
             "--env-file", str(tmp_path / ".env"), "config"], capture_output=True, text=True,
            check=False, env={"PATH": "/usr/bin:/bin:/usr/local/bin"}, timeout=60)

    out = config()
    assert out.returncode == 0, out.stdout + out.stderr
    site = yaml.safe_load(out.stdout)["services"]["site-worker"]
    assert site["command"][3:7] == ["HU", "--isp", "C=@eth1", "--isp"]
    assert not {"MPCOA_SECRET_KEY", "MPCOA_FLOWER_BASIC_AUTH"} & set(site["environment"])
    assert site["environment"]["MPCOA_DATABASE_URL"].startswith("postgresql+psycopg://mpcoa_site:")
    (tmp_path / ".env").write_text("MPCOA_SITE=HU\n")  # no URL: refused, naming it
    out = config()
    assert out.returncode != 0 and "MPCOA_DATABASE_URL" in out.stdout + out.stderr


def test_compose_config_with_tls(tmp_path):
    """The control host's file with docker-compose.tls.yml: Redis on TLS only, PostgreSQL with
    ssl on and TLS-only TCP clients, published on the address .env gives."""
    import subprocess

    for name in ("docker-compose.yml", "docker-compose.tls.yml"):
        (tmp_path / name).write_text((REPO / name).read_text())
    secrets = "\n".join(f"{name}=not-a-placeholder-{k}" for k, name in enumerate(SECRETS))
    (tmp_path / ".env").write_text(secrets + "\nMPCOA_PUBLISH_ADDR=192.0.2.10\n")
    out = subprocess.run(
        [*_compose_command(), "-f", str(tmp_path / "docker-compose.yml"), "-f",
         str(tmp_path / "docker-compose.tls.yml"), "--env-file", str(tmp_path / ".env"),
         "config"], capture_output=True, text=True, check=False,
        env={"PATH": "/usr/bin:/bin:/usr/local/bin"}, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    import yaml

    services = yaml.safe_load(out.stdout)["services"]
    redis = services["redis"]["command"]
    assert redis[redis.index("--port") + 1] == "0" and "--tls-port" in redis
    assert "--tls" in services["redis"]["healthcheck"]["test"]
    assert "ssl=on" in services["postgres"]["command"]
    for name in ("api", "control-worker", "beat", "flower"):
        url = services[name]["environment"]["MPCOA_BROKER_URL"]
        assert url.startswith("rediss://") and "ssl_cert_reqs=required" in url, (name, url)
        assert services[name]["environment"]["MPCOA_SECRET_KEY"]  # merged, not replaced
    ports = str(services["postgres"]["ports"])
    assert "192.0.2.10" in ports
    hba = (REPO / "deploy" / "pg_hba.conf").read_text().splitlines()
    rules = [line.split() for line in hba if line.strip() and not line.startswith("#")]
    assert all(rule[0] in ("local", "hostssl") for rule in rules), rules
