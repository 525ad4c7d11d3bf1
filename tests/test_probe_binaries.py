"""As root, a probe binary named by MPCOA_IPERF3_BINARY or MPCOA_NETPERFMETER runs only when it
and every folder above it are root's and nobody else can write them: a binary someone else
could have replaced is refused, with one line that names the setting, the file and why."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from service import settings_checks
from service.settings import Settings, get_settings, probe_setting

NOBODY = 65534


@pytest.fixture
def as_root(monkeypatch):
    """This process as root: for real where the tests run as root (CI); elsewhere the check is
    told it is, and a file of this user's is then not root's."""
    if os.geteuid() != 0:
        monkeypatch.setattr(settings_checks.os, "geteuid", lambda: 0)


@pytest.fixture
def tool(tmp_path) -> Path:
    """A root-owned, root-only-writable copy of a real binary, in a root-only folder."""
    folder = tmp_path / "bin"
    folder.mkdir(mode=0o755)
    path = folder / "iperf3-copy"
    shutil.copy("/bin/true", path)
    path.chmod(0o755)
    tmp_path.chmod(0o755)
    return path


def _refused(path: Path) -> str | None:
    try:
        Settings(iperf3_binary=str(path), _env_file=None)
    except ValueError as exc:
        return str(exc)
    return None


def test_a_binary_only_root_can_change_is_taken(as_root, tool):
    if os.geteuid() != 0:  # this user's file: not root's
        assert "not root" in _refused(tool)
        return
    assert _refused(tool) is None
    assert Settings(iperf3_binary="iperf3", _env_file=None).iperf3_binary == "iperf3"  # on PATH


@pytest.mark.parametrize("change", ["owner", "other-writable", "group-writable", "folder"])
def test_a_binary_someone_else_could_replace_is_refused(as_root, tool, change):
    real_root = os.geteuid() == 0
    if change == "owner" and real_root:
        os.chown(tool, NOBODY, NOBODY)
    elif change == "other-writable":
        tool.chmod(0o757)
    elif change == "group-writable" and real_root:
        os.chown(tool, 0, NOBODY)
        tool.chmod(0o775)
    elif change == "folder":
        tool.parent.chmod(0o777)
    why = _refused(tool)
    assert why is not None and f"refusing to run {tool} as root" in why
    if real_root:
        expected = {"owner": f"{tool} is owned by uid {NOBODY}, not root",
                    "other-writable": f"{tool} is writable by others",
                    "group-writable": f"{tool} is writable by group {NOBODY}",
                    "folder": f"{tool.parent} is writable by others"}[change]
        assert expected in why


def test_the_netperfmeter_setting_and_the_cli_say_so_in_one_line(as_root, tool, monkeypatch):
    tool.chmod(0o757)
    monkeypatch.setenv("MPCOA_NETPERFMETER", str(tool))
    with pytest.raises(ValueError, match=r"^MPCOA_NETPERFMETER: .*refusing to run .* as root"):
        probe_setting("netperfmeter")
    monkeypatch.delenv("MPCOA_NETPERFMETER")
    monkeypatch.setenv("MPCOA_IPERF3_BINARY", str(tool))
    monkeypatch.setenv("MPCOA_ENV_FILE", os.devnull)
    get_settings.cache_clear()
    try:
        r = CliRunner().invoke(app, ["token", "list"], catch_exceptions=False)
    finally:
        get_settings.cache_clear()
    assert r.exit_code == 2
    assert r.stderr == (f"mpcoa: error: MPCOA_IPERF3_BINARY: refusing to run {tool} as root: "
                        f"{tool} is writable by others\n")
