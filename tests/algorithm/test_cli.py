"""`mpcoa solve | fit | impact | recommend` as a user runs them: the command's own app, in this
process (Typer's runner: a second of interpreter start per call saved), and once the installed
command itself."""

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app

ROOT = Path(__file__).resolve().parents[2]
MPCOA = str(Path(sys.executable).parent / "mpcoa")
CURVES = str(ROOT / "examples/srl-hu-curves.json")


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def run(*args, stdin=None) -> Ran:
    r = CliRunner().invoke(app, list(args), input=stdin, catch_exceptions=False)
    return Ran(r.exit_code, r.stdout, r.stderr)


@pytest.mark.slow
def test_the_installed_command_runs_the_same_app():
    out = subprocess.run([MPCOA, "solve", "--json", "--curves", CURVES],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == json.loads(
        run("solve", "--json", "--curves", CURVES).stdout)


def test_solve_reproduces_table5_srl_hu():
    out = run("solve", "--json", "--curves", CURVES)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["opm"], doc["occ"]) == ("PCDC", "hybla")
    assert doc["obs_mib"] == pytest.approx(12.36, abs=0.05)
    assert doc["otp_mbps"] == pytest.approx(74.65, rel=1e-3)
    assert len(doc["arms"]) == 12 and sum(a["chosen"] for a in doc["arms"]) == 1


def test_solve_flags_override_the_file():
    out = run("solve", "--json", "--curves", CURVES, "--delta", "0")
    doc = json.loads(out.stdout)
    assert doc["delta"] == 0 and doc["obs_mib"] == pytest.approx(doc["tp_max_bs_mib"], abs=1e-4)


@pytest.mark.slow
def test_fit_output_is_accepted_by_solve(tmp_path):
    fitted = run("fit", "--json", "--samples", str(ROOT / "examples/srl-hu-samples.csv"))
    assert fitted.returncode == 0, fitted.stderr
    doc = json.loads(fitted.stdout)
    assert {f["pm"] for f in doc["fits"]} == {"PCDC", "FullMesh"}
    assert all(0 <= f["r2"] <= 1 and "gate_passed" in f for f in doc["fits"])
    curves = tmp_path / "curves.json"
    curves.write_text(fitted.stdout)
    solved = run("solve", "--json", "--curves", str(curves))
    assert solved.returncode == 0, solved.stderr
    assert json.loads(solved.stdout)["occ"] == "hybla"


@pytest.mark.slow
def test_recommend_is_fit_then_solve_and_json_samples_work(tmp_path):
    rows = [
        line.split(",")
        for line in (ROOT / "examples/srl-hu-samples.csv").read_text().splitlines()[1:]
    ]
    samples = {
        "samples": [
            {"pm": p, "cc": c, "bs_mib": float(b), "tp_mbps": float(t)} for p, c, b, t in rows
        ],
        "same_as_fullmesh": ["vegas"],
    }
    path = tmp_path / "samples.json"
    path.write_text(json.dumps(samples))
    out = run("recommend", "--json", "--samples", str(path), "--model", "per-arm")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["opm"], doc["occ"]) == ("PCDC", "hybla")
    assert doc["fits"][0]["model"] == "per-arm"


def test_impact_omega_and_series():
    out = run("impact", "--json", "--omega", str(ROOT / "examples/srl-hu-omega.json"))
    doc = json.loads(out.stdout)
    by_cc = {r["cc"]: r for r in doc["impact"]}
    assert set(by_cc["hybla"]["subset"]) == {"K-C", "K-CU", "U-C", "U-CU"}
    series = json.dumps({"series": {"Reno": {"tp0": [10, 10], "excluded": {"A-B": [9, 9]}}}})
    out = run("impact", "--json", "--series", "-", stdin=series)
    assert json.loads(out.stdout)["impact"][0]["omegas"]["A-B"] == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("args", "stdin", "needle"),
    [
        (["solve", "--curves", "-"], "{not json", "invalid JSON"),
        (["solve", "--curves", "-"], '{"curves": []}', "curves"),
        (
            ["solve", "--curves", "-"],
            '{"curves": [{"pm": "x", "cc": "cubic", "a": 1, "b": 1, "c": 0}]}',
            "curves.0.pm",
        ),
        (
            ["solve", "--curves", "-"],
            '{"curves": [{"pm": "PCDC", "cc": "cubic", "a": NaN, "b": 1, "c": 0}]}',
            "NaN",
        ),
        (
            ["solve", "--curves", "-"],
            '{"curves": [{"pm": "PCDC", "cc": "cubic", "a": 1e999, "b": 1, "c": 0}]}',
            "curves.0.a",
        ),
        (
            ["solve", "--curves", "-", "--delta", "1"],
            '{"curves": [{"pm": "PCDC", "cc": "cubic", "a": 1, "b": 1, "c": 0}]}',
            "delta",
        ),
        (
            ["solve", "--curves", "-"],
            '{"delta": -1, "curves": [{"pm": "PCDC", "cc": "cubic", "a": 1, "b": 1, "c": 0}]}',
            "delta",
        ),
        (["solve", "--curves", "/no/such/file"], None, "no such file"),
        (["fit", "--samples", "-"], "pm,cc,bs_mib,tp_mbps\n", "no data"),
        (["fit", "--samples", "-"], "pm,cc,bs\nPCDC,cubic,1\n", "header"),
        (["fit", "--samples", "-"], "pm,cc,bs_mib,tp_mbps\nPCDC,cubic,1,nan\n", "tp_mbps"),
        (["fit", "--samples", "-"], "pm,cc,bs_mib,tp_mbps\nPCDC,cubic,1,2\n", "distinct"),
        (["impact", "--omega", "-"], '{"omega": {"cubic": {}}}', "omega.cubic"),
        (
            ["impact", "--series", "-"],
            '{"series": {"cubic": {"tp0": [0], "excluded": {"A-B": [1]}}}}',
            "no throughput",
        ),
    ],
)
def test_bad_input_is_one_line_and_status_2(args, stdin, needle):
    out = run(*args, stdin=stdin)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mpcoa: error:"), out.stderr
    assert needle in lines[0]


def test_an_unknown_model_is_a_usage_error_naming_the_choices():
    out = run("fit", "--json", "--samples", "-", "--model", "magic", stdin='{"samples": []}')
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert lines[0].startswith("Usage: ") and lines[-1].startswith("mpcoa: error: "), out.stderr
    assert "'magic' is not one of 'paper', 'per-arm', 'saturating', 'auto'" in lines[-1]


def _csv(rows) -> str:
    return "pm,cc,bs_mib,tp_mbps\n" + "".join(
        f"{r.pm},{r.cc},{r.bs_mib},{r.tp_mbps}\n" for r in rows
    )


@pytest.mark.slow
def test_auto_model_writes_saturating_curves_that_solve_reads(tmp_path):
    from .test_saturating import ramp_plateau

    fitted = run("fit", "--json", "--samples", "-", "--model", "auto",
                 stdin=_csv(ramp_plateau(seed=1)))
    assert fitted.returncode == 0, fitted.stderr
    doc = json.loads(fitted.stdout)
    (curve,) = doc["curves"]
    assert curve["kind"] == "saturating" and curve["knee_mib"] == pytest.approx(2.0, abs=0.1)
    (arm,) = doc["fits"][0]["arms"]
    assert arm["model"] == "saturating" and arm["aic_saturating"] < arm["aic_quadratic"]
    assert doc["fits"][0]["failing_arms"] == []
    solved = run("solve", "--json", "--curves", "-", stdin=fitted.stdout)
    assert solved.returncode == 0, solved.stderr
    answer = json.loads(solved.stdout)
    assert answer["obs_mib"] == pytest.approx(1.86, abs=0.05)
    assert answer["arms"][0]["kind"] == "saturating"
    bad = json.dumps({"curves": [{**curve, "knee_mib": -1}]})
    out = run("solve", "--json", "--curves", "-", stdin=bad)
    assert out.returncode == 2 and "curves.0.knee_mib" in out.stderr


def test_solve_reads_curves_of_mixed_kinds_and_names_the_bad_one():
    """One reader for every kind: a quadratic beside a saturating curve is solved as given, and
    an error names the curve's own index and field (no placeholder curve stands in for it)."""
    quadratic = {"pm": "PCDC", "cc": "hybla", "a": 24.49, "b": 6.16, "c": -0.17}
    saturating = {"kind": "saturating", "pm": "FullMesh", "cc": "cubic", "plateau_mbps": 36.7,
                  "knee_mib": 0.05, "sharpness": 12.0}
    solved = run("solve", "--json", "--curves", "-",
                 stdin=json.dumps({"curves": [saturating, quadratic]}))
    assert solved.returncode == 0, solved.stderr
    answer = json.loads(solved.stdout)
    assert [a["kind"] for a in answer["arms"]] == ["saturating", "quadratic"]
    assert (answer["opm"], answer["occ"]) == ("PCDC", "hybla")
    for bad, needle in [
        ({**quadratic, "a": "24.49"}, "curves.1.a: must be a number"),
        ({**quadratic, "same_as_fullmesh": "no"}, "curves.1.same_as_fullmesh"),
        ({k: v for k, v in quadratic.items() if k != "c"}, "curves.1.c: missing"),
    ]:
        out = run("solve", "--json", "--curves", "-",
                  stdin=json.dumps({"curves": [saturating, bad]}))
        assert out.returncode == 2 and needle in out.stderr, out.stderr


@pytest.mark.slow
def test_recommend_reports_the_measured_need_and_never_promises_more():
    from .test_saturating import DEMO_GRID, two_path_rows

    rows = two_path_rows()
    args = ["recommend", "--json", "--samples", "-", "--bs-min", str(DEMO_GRID[0]),
            "--bs-max", "1.0"]
    doc = json.loads(run(*args, stdin=_csv(rows)).stdout)
    cubic = [r for r in rows if (r.pm, r.cc) == ("PCDC", "cubic")]
    means = {b: sum(r.tp_mbps for r in cubic if r.bs_mib == b) / 2 for b in DEMO_GRID}
    measured_max = max(means.values())  # the largest mean over the two runs of a buffer
    assert (doc["opm"], doc["occ"]) == ("PCDC", "cubic")
    assert doc["otp_mbps"] <= measured_max and doc["measured_obs_mib"] == 0.125
    assert "tp_max_capped_to_measured" in doc["flags"]
    assert doc["arms"][0]["measured_max_mbps"] == pytest.approx(measured_max, abs=1e-6)


def test_people_get_a_summary_and_scripts_the_same_answer_as_json():
    """Without --json each command prints what a person reads (the answer, the arms, SP*, the
    fits' quality), and nothing of it is JSON; with --json, the document of docs/formats.md."""
    text = run("solve", "--curves", CURVES)
    assert text.returncode == 0 and text.stdout.startswith(
        "OPM=PCDC OCC=hybla OBS=12.37 MiB OTP=74.67 Mbit/s\n")
    assert re.search(r"PCDC +hybla +18\.12 +80\.29 +12\.37 +74\.67 +chosen", text.stdout)
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.stdout)
    impact = run("impact", "--omega", str(ROOT / "examples/srl-hu-omega.json")).stdout
    assert re.search(r"hybla: SP\* K-C, K-CU, U-C, U-CU\n", impact)
    assert re.search(r"P-C +-0\.313 +standby", impact)
    fitted = run("fit", "--samples", str(ROOT / "examples/srl-hu-samples.csv")).stdout
    assert "PCDC: paper model, n=1080, R²=0.974, quality gate passed" in fitted
