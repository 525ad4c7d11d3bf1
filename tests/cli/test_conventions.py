"""What every `mpcoa` command shares: no `<bool>` shown for a flag in any --help, `-q` (errors
only, a --json result still printed) and `-v` (debug logging), lists as tables, and an unset
date or revision said in words. The command's own app in this process, on a migrated SQLite
copy."""

from __future__ import annotations

import json
import logging
import os

import typer
from typer.testing import CliRunner

from cli.main import app


def _commands(group, path=()):
    """Every command path of the app, groups included."""
    yield path
    for name, sub in sorted(getattr(group, "commands", {}).items()):
        yield from _commands(sub, (*path, name))


def test_no_help_shows_a_type_for_a_flag():
    paths = list(_commands(typer.main.get_command(app)))
    assert ("apply",) in paths and ("token", "list") in paths and ("show",) in paths
    for path in paths:
        r = CliRunner().invoke(app, [*path, "--help"], catch_exceptions=False,
                               env={"COLUMNS": "200"})
        assert r.exit_code == 0, (path, r.stderr)
        assert "<bool>" not in r.stdout, path
        assert "--json" in r.stdout or not _prints_results(path), path


def test_help_texts_are_not_eaten_as_markup():
    """Rich reads `[...]` as markup: a syntax's optional parts and a default must show."""
    def helped(*path):
        return CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "250"}).stdout

    assert "LABEL:DOWN_KBPS:UP_KBPS[:NAME][@ADDRESS]" in helped("site", "add")
    assert "(default 0.07)" in helped("solve")
    assert "(default: campaign-ID.pdf" in helped("report")


def test_seconds_are_one_spelling_and_the_old_ones_are_hidden():
    """Every option in seconds ends in -s; --duration, --seconds and --timeout still parse
    (their bounds checked as the new ones') but are not offered."""
    runner = CliRunner()
    for path, new, old in [(("calibrate",), "--duration-s", "--duration"),
                           (("demo",), "--duration-s", "--duration"),
                           (("apply",), "--confirm-s", "--seconds"),
                           (("apply",), "--timeout-s", "--timeout")]:
        text = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "250"}).stdout
        assert new in text and f"{old} " not in text, (path, old)
    assert "--hold-s" in runner.invoke(app, ["apply", "--help"]).stdout


def _prints_results(path: tuple[str, ...]) -> bool:
    """The commands that print a result (the rest run a server, a worker or a testbed)."""
    return path in {("solve",), ("fit",), ("impact",), ("recommend",), ("report",), ("show",),
                    ("site", "list"), ("topology", "list"), ("campaign", "list"),
                    ("token", "list"), ("db", "current"), ("calibrate",), ("export",),
                    ("import",)}


def test_quiet_keeps_errors_and_json_only(mpcoa):
    assert mpcoa("-q", "site", "add", "SRL", "--isp", "K:100000:40000") == (0, "", "")
    code, out, _ = mpcoa("-q", "site", "list", "--json")
    assert code == 0 and [s["name"] for s in json.loads(out)["items"]] == ["SRL"]
    assert mpcoa("--quiet", "site", "list") == (0, "", "")
    code, out, err = mpcoa("-q", "campaign", "cancel", "999")
    assert (code, out) == (3, "") and err.startswith("mpcoa: error: ")
    code, out, _ = mpcoa("site", "list")  # -q ended with its command
    assert code == 0 and "SRL" in out


def test_verbose_logs_debug_for_the_command_only(mpcoa, caplog):
    before = logging.getLogger().level
    assert mpcoa("-v", "site", "list")[0] == 0
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG
            and r.name == "mpcoa.cli"] == [f"debug logging on (pid {os.getpid()})"]
    assert logging.getLogger().level == before  # restored when the command ended
    caplog.clear()
    assert mpcoa("site", "list")[0] == 0
    assert not [r for r in caplog.records if r.name == "mpcoa.cli"]


def test_lists_are_tables_and_unset_values_are_words(mpcoa):
    assert mpcoa("token", "list")[1] == "no tokens (create one: mpcoa token create NAME)\n"
    assert mpcoa("token", "create", "ops")[0] == 0
    code, out, _ = mpcoa("token", "list")
    header, rule, row = out.splitlines()
    assert header.split() == ["name", "state", "scope", "created", "last", "used", "expires"]
    assert set(rule.strip()) == {"─"}
    assert row.split()[:3] == ["ops", "active", "write"] and row.split()[-2:] == ["never",
                                                                               "never"]
    assert "None" not in out
    mpcoa("site", "add", "SRL", "--isp", "K:100000:40000:Kabelnett@2001:db8::2")
    mpcoa("site", "add", "HU", "--isp", "U:1000:1000")
    code, out, _ = mpcoa("site", "list", "--limit", "1")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "sites 1-1 of 2" and lines[1].split()[:2] == ["id", "name"]
    assert lines[3].split()[:3] == ["1", "SRL", "K=Kabelnett"] and "\t" not in out
