"""deploy/systemd/'s units, scripts/install and the firewall files of docs/deploy.md: the units
are what the guide's blocks run (its test runs those), `systemd-analyze verify` accepts them,
`nft -c` the rules, and the install is argument-checked and installs no test tool."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from . import guide_blocks as gb

REPO = Path(__file__).resolve().parents[2]
UNITS = REPO / "deploy" / "systemd"
VENV_BIN = "/opt/mpcoa/venv/bin/"  # docs/deploy.md's and scripts/install's prefix
BIN = Path(sys.executable).parent
#: unit -> the guide block (host, name) that runs its ExecStart
GUIDE_BLOCK = {"mpcoa-api.service": ("control", "api"),
               "mpcoa-control-worker.service": ("control", "control-worker"),
               "mpcoa-beat.service": ("control", "beat"),
               "mpcoa-site-worker.service": ("SRL", "worker")}


def unit(name: str) -> dict[str, str]:
    keys: dict[str, str] = {}
    for line in (UNITS / name).read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            assert key not in keys, f"{name}: {key} twice"
            keys[key] = value
    return keys


def guide_block(host: str, name: str) -> gb.Block:
    return next(b for b in gb.blocks() if (b.host, b.name) == (host, name))


def heredoc_env(block: gb.Block) -> dict[str, str]:
    return dict(line.split("=", 1) for line in block.body.splitlines()[1:-1])


def test_the_shipped_units_are_the_four():
    assert sorted(p.name for p in UNITS.iterdir()) == sorted(GUIDE_BLOCK)


@pytest.mark.parametrize("name", sorted(GUIDE_BLOCK))
def test_each_unit_restarts_reads_its_settings_and_is_hardened(name):
    keys = unit(name)
    assert keys["Restart"] == "on-failure" and keys["NoNewPrivileges"] == "yes"
    site = name == "mpcoa-site-worker.service"
    assert keys["EnvironmentFile"] == f"/etc/mpcoa/{'site' if site else 'control'}.env"
    if site:  # root, as compose's site worker; its journal survives restarts
        assert keys["User"] == "root" and keys["RuntimeDirectoryPreserve"] == "yes"
        assert keys["ProtectSystem"] == "full" and "ProtectKernelTunables" not in keys
        assert set(keys["CapabilityBoundingSet"].split()) >= {"CAP_NET_ADMIN", "CAP_BPF"}
    else:
        assert keys["User"] == "mpcoa" and keys["CapabilityBoundingSet"] == ""
        assert keys["ProtectSystem"] == "strict" and keys["StateDirectory"] == "mpcoa"


@pytest.mark.parametrize("name", sorted(GUIDE_BLOCK))
def test_the_guide_runs_what_each_unit_starts(name):
    """The deploy-guide test (tests/sites/test_deploy_guide.py) runs these blocks: the units'
    commands, the site's with its settings' values for ${...}."""
    exec_start = unit(name)["ExecStart"]
    assert exec_start.startswith(VENV_BIN), exec_start
    command = exec_start.removeprefix(VENV_BIN)
    host, block = GUIDE_BLOCK[name]
    if host != "control":
        env = heredoc_env(guide_block(host, "settings"))
        command = re.sub(r"\$\{(\w+)\}", lambda m: env[m[1]], command)
    assert shlex.split(command) == shlex.split(guide_block(host, block).body)
    assert guide_block(host, block).background


def test_the_install_installs_these_units_and_no_test_tool():
    script = (REPO / "scripts" / "install").read_text()
    for name in GUIDE_BLOCK:
        assert name in script
    assert "[dev" not in script and "trust" not in script
    assert "-c constraints.txt" in script
    tested = set((REPO / "scripts" / "debian-packages.txt").read_text().split())
    for role in ("site", "control"):
        listed = [w for w in (REPO / "deploy" / f"packages-{role}.txt").read_text().splitlines()
                  if w and not w.startswith("#")]
        assert "chromium" not in listed and "faketime" not in listed
        assert set(listed) - {"ca-certificates", "curl", "openssl"} <= tested, role


@pytest.mark.slow
def test_systemd_analyze_verify_accepts_the_units(tmp_path):
    """With the venv's path pointed at this one (verify wants ExecStart's file to exist); any
    warning (an unknown key, a value it ignores) fails too."""
    for path in UNITS.iterdir():
        text = path.read_text().replace(VENV_BIN, f"{BIN}/")
        (tmp_path / path.name).write_text(text)
    done = subprocess.run(["systemd-analyze", "verify", *sorted(map(str, tmp_path.iterdir()))],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("rules", "define"), [
    ("nftables-site.nft", "PROBE_PORTS=20000-31999"),
    ("nftables-control.nft", "SITE_HOSTS={ 198.51.100.7, 203.0.113.9 }"),
])
def test_nft_checks_the_firewall_rules(rules, define):
    """`nft -c` (check only) in a network namespace of its own: nothing host-wide changes."""
    argv = ["unshare", "--net", "nft", "-c", "-f", str(REPO / "deploy" / rules), "-D", define]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    bad = subprocess.run([*argv[:-1], define.split("=")[0] + "=nonsense"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode != 0


def install(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "scripts" / "install"), *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize(("args", "message"), [
    ((), "usage:"), (("server",), "unknown argument server"),
    (("site", "control"), "give one role"), (("site", "--prefix"), "--prefix needs"),
    (("site", "--prefix", "opt"), "absolute path"), (("site", "--prefix", "/a b"), "letters"),
    (("site", "--prefix=/x;rm"), "letters"),
])
def test_install_refuses_bad_arguments(args, message):
    done = install(*args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("role", ["site", "control"])
def test_install_dry_run_installs_the_locked_runtime_only(role, tmp_path):
    done = install(role, "--dry-run", "--prefix", str(tmp_path / "p"))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"-c constraints.txt {REPO}\n" in out  # the project alone: no [dev], no extra
    assert "[dev" not in out and "chromium" not in out and "pg_hba" not in out
    for name in (n for n, (host, _) in GUIDE_BLOCK.items()
                 if (host == "control") == (role == "control")):
        assert f"/etc/systemd/system/{name}" in out
    assert not (tmp_path / "p").exists()  # a dry run changes nothing
    assert install("--help").returncode == 0
