"""Bad input that once ended in a traceback: each now gets one `mpcoa: error:` line and the
documented status (2: usage or invalid input), and nothing is stored. The command's own app in
this process (Typer's runner), on a migrated SQLite copy; the files are made here."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.base import ProbeError
from probes.site import apply as siteapply
from probes.testbed.spec import SpecError, load_spec


def one_error(stderr: str) -> str:
    """The one `mpcoa: error:` line (a usage error prints the usage above it), no traceback."""
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("mpcoa: error: ")]
    assert len(errors) == 1, stderr
    return errors[0]


def _deep(tmp_path: Path, suffix: str, depth: int = 5000) -> Path:
    path = tmp_path / f"deep{suffix}"
    path.write_text('{"a":' * depth + "1" + "}" * depth if suffix == ".json"
                    else "[" * depth + "]" * depth)
    return path


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_topology_add_of_a_file_nested_5000_deep(mpcoa, tmp_path, suffix):
    path = _deep(tmp_path, suffix)
    code, _out, err = mpcoa("topology", "add", str(path))
    assert code == 2
    assert one_error(err) == f"mpcoa: error: {path}: nested deeper than 32 levels"
    code, out, _err = mpcoa("topology", "list")
    assert code == 0 and "SRL" not in out


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_load_spec_of_a_file_nested_5000_deep(tmp_path, suffix):
    path = _deep(tmp_path, suffix)
    with pytest.raises(SpecError, match=r"nested deeper than 32 levels$"):
        load_spec(path)


def test_load_spec_and_topology_add_of_a_file_that_is_not_utf8(mpcoa, tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: Tromsø\n".encode("latin-1"))
    with pytest.raises(SpecError, match=r"latin1.yaml: not UTF-8 text$"):
        load_spec(path)
    code, _out, err = mpcoa("topology", "add", str(path))
    assert code == 2 and one_error(err) == f"mpcoa: error: {path}: not UTF-8 text"


def test_duplicate_yaml_keys_are_refused(mpcoa, tmp_path):
    topology = tmp_path / "dup.yaml"
    topology.write_text("local: {name: A, isps: [{name: a, label: a, down_kbps: 1000, "
                        "up_kbps: 1000}]}\nremote: {name: B, isps: [{name: b, label: b, "
                        "down_kbps: 1000, up_kbps: 1000}]}\nremote: {name: C}\n")
    code, _out, err = mpcoa("topology", "add", str(topology))
    assert code == 2
    assert one_error(err) == f"mpcoa: error: {topology}: line 3: the key 'remote' is given twice"
    testbed = tmp_path / "bed.yaml"
    testbed.write_text("name: dup\nsites: []\nname: other\n")
    with pytest.raises(SpecError, match=r"line 3: the key 'name' is given twice$"):
        load_spec(testbed)


def test_calibrate_a_topology_id_past_any_integer_column(mpcoa):
    code, _out, err = mpcoa("calibrate", "99999999999999999999")
    assert code == 2
    assert "less than or equal to 2147483647" in one_error(err)


def test_token_expiry_past_any_date(mpcoa):
    code, _out, err = mpcoa("token", "create", "x", "--expires-days", "1e308")
    assert code == 2
    assert "'--expires-days': Input should be less than or equal to 36600" in one_error(err)
    code, out, _err = mpcoa("token", "list", "--json")
    assert code == 0 and out == "[]\n"


@pytest.mark.parametrize("name", ["a\nforged\tactive\twrite", "tab\there", " padded", "bell\a"])
def test_token_names_that_would_forge_a_row_of_token_list(mpcoa, name):
    code, _out, err = mpcoa("token", "create", name)
    assert code == 2
    assert one_error(err) == ("mpcoa: error: a token's name is 1 to 64 printable characters (no "
                              "line break or tab, no space at either end)")
    code, out, _err = mpcoa("token", "list", "--json")
    assert code == 0 and out == "[]\n"


def test_db_upgrade_to_a_revision_that_does_not_exist(mpcoa):
    code, _out, err = mpcoa("db", "upgrade", "nosuchrev")
    assert code == 2
    assert one_error(err).startswith(
        "mpcoa: error: no revision 'nosuchrev': give head, base or one of 0001..")
    code, _out, err = mpcoa("db", "downgrade", "nosuchrev")
    assert code == 2 and "no revision 'nosuchrev'" in one_error(err)


@pytest.mark.parametrize("ns", ["../../etc/cron.d", "..", ".", "a/b", "", "x" * 65, "ns\n"])
def test_siteapply_refuses_a_namespace_that_is_a_path(tmp_path, ns):
    """The namespace comes from the apply's plan in the database: never a folder elsewhere."""
    root = tmp_path / "state" / "apply"
    with pytest.raises(ProbeError, match="is not a network namespace's name"):
        siteapply.state_dir(ns, root)
    with pytest.raises(ProbeError, match="is not a network namespace's name"):
        siteapply.status(ns=ns, root=root)
    assert not (tmp_path / "etc").exists() and not root.exists()
    assert siteapply.state_dir("mpcoa-demo-site-A", root) == root / "mpcoa-demo-site-A"


@pytest.mark.parametrize(("args", "says"), [
    (["-q", "-v", "site", "list"], "-q and -v: give one of them"),
    (["apply", "1", "--confirm-s", "1"], "'--confirm-s': Input should be greater than or equal"),
    (["apply", "1", "--seconds", "1"], "'--seconds': Input should be greater than or equal"),
    (["apply", "1", "--timeout-s", "0"], "'--timeout-s': Input should be greater than or equal"),
    (["apply", "1", "--hold-s", "nan"], "'--hold-s'"),
    (["calibrate", "1", "--duration-s", "0"], "'--duration-s': Input should be greater than"),
    (["calibrate", "1", "--duration", "1e9"], "'--duration': Input should be less than"),
    (["demo", "--duration-s", "1"], "'--duration-s': Input should be greater than or equal"),
    (["report", "0"], "campaign id 0: not in 1..2147483647"),
    (["report", "99999999999999"], "not a campaign id"),
    (["report", "no-such.tar.gz"], "no-such.tar.gz: no such file, and not a campaign id"),
    (["show", "no-such.tar.gz"], "no-such.tar.gz: no such file"),
    (["solve", "--json", "--curves", "-", "--delta", "x"], "'--delta': Input should be"),
    (["site", "add", "X", "--isp", "K:1"], "give LABEL:DOWN_KBPS:UP_KBPS[:NAME]"),
])
def test_the_new_options_refuse_bad_values_in_one_line(mpcoa, args, says):
    code, out, err = mpcoa(*args)
    assert code == 2 and out == "", (out, err)
    assert says in one_error(err), err


def test_a_worker_isp_with_rates_is_refused_before_anything_runs(mpcoa):
    code, out, err = mpcoa("worker", "--site", "SRL", "--isp", "K:1000:1000@eth1", "--check")
    assert code == 1 and out == ""
    assert "a worker takes no rates" in one_error(err)
