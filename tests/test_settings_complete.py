"""Settings in one place: every MPCOA_ variable the code names is read by service/settings.py
(no os.environ read of one elsewhere) and listed in .env.example."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from service.settings import ProbeSettings, Settings

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("cli", "api", "workers", "service", "models", "probes", "migrations")
NAME = re.compile(r"\bMPCOA_[A-Z0-9_]*[A-Z0-9]\b")
# a read of an MPCOA_ variable from the process environment (a write, `environ[X] = v`, is not)
DIRECT_READ = re.compile(
    r"""(?:environ\.get|getenv)\(\s*["']MPCOA_|environ\[\s*["']MPCOA_[A-Z0-9_]+["']\s*\](?!\s*=[^=])""")


def _sources() -> list[Path]:
    files = [p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")]
    scripts = [p for p in (REPO / "scripts").iterdir() if p.is_file()]
    return [*files, REPO / "docker-compose.yml", REPO / "Dockerfile", *scripts]


def _listed() -> set[str]:
    """The names .env.example sets or shows commented out (`# MPCOA_X=...`)."""
    text = (REPO / ".env.example").read_text()
    return set(re.findall(r"^#?\s*(MPCOA_[A-Z0-9_]+)=", text, flags=re.M))


def test_every_mpcoa_variable_is_listed_in_env_example():
    named = {name for path in _sources() for name in NAME.findall(path.read_text())}
    fields = {f"MPCOA_{n.upper()}" for cls in (Settings, ProbeSettings) for n in cls.model_fields}
    assert len(named) > 20 and fields
    missing = sorted((named | fields) - _listed())
    assert missing == [], f"add to .env.example: {missing}"


def test_only_service_settings_reads_mpcoa_variables():
    readers = {str(path.relative_to(REPO)) for path in _sources()
               if path.suffix == ".py" and DIRECT_READ.search(path.read_text())}
    assert readers == set(), readers
    # the check finds what it looks for
    assert DIRECT_READ.search('raw = os.environ.get("MPCOA_X", "1")')
    assert DIRECT_READ.search('os.environ["MPCOA_X"]')
    assert not DIRECT_READ.search('os.environ["MPCOA_X"] = "1"')


def test_the_probes_settings_follow_the_environment_and_are_built_once_while_it_stays(
        monkeypatch, tmp_path):
    """A probe asks for its settings about ten times: they are built again only when an
    MPCOA_ variable or the .env file changed, and a change is seen at the next ask."""
    from service import probe_settings as settings_module
    from service.settings import probe_setting

    monkeypatch.setenv("MPCOA_ENV_FILE", str(tmp_path / ".env"))  # an .env of this test's own
    monkeypatch.setenv("MPCOA_QUIET_TIMEOUT_S", "7")
    assert probe_setting("quiet_timeout_s") == 7.0
    built = settings_module._probe_settings
    assert probe_setting("quiet_timeout_s") == 7.0 and settings_module._probe_settings is built
    monkeypatch.setenv("MPCOA_QUIET_TIMEOUT_S", "8")
    assert probe_setting("quiet_timeout_s") == 8.0
    monkeypatch.delenv("MPCOA_QUIET_TIMEOUT_S")
    (tmp_path / ".env").write_text("MPCOA_EXCLUDED_MAX_BYTES=9000\n")
    assert probe_setting("excluded_max_bytes") == 9000
    (tmp_path / ".env").write_text("MPCOA_EXCLUDED_MAX_BYTES=12345\n")
    assert probe_setting("excluded_max_bytes") == 12345
    monkeypatch.setenv("MPCOA_QUIET_TIMEOUT_S", "-1")  # refused, and nothing kept
    with pytest.raises(ValueError, match="MPCOA_QUIET_TIMEOUT_S"):
        probe_setting("quiet_timeout_s")
    monkeypatch.setenv("MPCOA_QUIET_TIMEOUT_S", "3")
    assert probe_setting("quiet_timeout_s") == 3.0


def test_the_env_file_is_the_operators_never_the_current_directorys(monkeypatch, tmp_path):
    """A root worker started in a folder others can write must not take that folder's .env
    (its MPCOA_IPERF3_BINARY would run as root): the repository root's, or MPCOA_ENV_FILE's."""
    from service.probe_settings import ProbeSettings as Probes
    from service.settings_checks import REPOSITORY_ROOT, env_file

    monkeypatch.delenv("MPCOA_ENV_FILE", raising=False)
    monkeypatch.delenv("MPCOA_QUIET_TIMEOUT_S", raising=False)
    monkeypatch.delenv("MPCOA_SESSION_HOURS", raising=False)
    planted = tmp_path / "writable-by-others"
    planted.mkdir()
    (planted / ".env").write_text("MPCOA_QUIET_TIMEOUT_S=1\nMPCOA_SESSION_HOURS=1\n")
    monkeypatch.chdir(planted)
    assert env_file() == REPOSITORY_ROOT / ".env"
    assert Settings().session_hours == 8.0 and Probes().quiet_timeout_s is None
    mine = tmp_path / "operator.env"
    mine.write_text("MPCOA_QUIET_TIMEOUT_S=2\nMPCOA_SESSION_HOURS=2\n")
    monkeypatch.setenv("MPCOA_ENV_FILE", str(mine))
    assert env_file() == mine
    assert Settings().session_hours == 2.0 and Probes().quiet_timeout_s == 2.0
    assert Settings(_env_file=None).session_hours == 8.0  # an explicit choice still wins
