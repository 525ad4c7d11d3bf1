"""What a probe does around its tool, made cheaper: the checks' reads at once (`run_many`), the
client ended at its log's last line (`ToolRun.done_log`). Real processes, real sockets."""

from __future__ import annotations

import socket
import sys
import time

import pytest

from probes.base import ProbeError
from probes.netns import run, run_many
from probes.tools import hygiene
from probes.tools.context import mptcp_settings, mptcp_settings_of
from probes.tools.netperfmeter import ACTIVE_DONE, build_commands, done_when_logged
from probes.tools.runner import RunOutput, ToolRun, _run_until_logged, logged_done

pytestmark = pytest.mark.slow  # starts processes


def test_run_many_answers_in_order_with_each_return_code():
    done = run_many([["sh", "-c", "sleep 0.2; echo one"], ["sh", "-c", "echo two; exit 3"],
                     ["echo", "three"]])
    assert [cp.stdout.strip() for cp in done] == ["one", "two", "three"]
    assert [cp.returncode for cp in done] == [0, 3, 0]
    with pytest.raises(ProbeError, match="not installed"):
        run_many([["echo", "x"], ["/nonexistent/tool-h34"]])
    with pytest.raises(ProbeError, match="no answer"):
        run_many([["sleep", "5"]], timeout=0.2)


def test_run_many_runs_at_once():
    t = time.monotonic()
    run_many([["sleep", "0.4"]] * 4)
    assert time.monotonic() - t < 1.2  # one after another: 1.6 s


def test_settings_read_at_once_are_the_ones_read_alone():
    alone = mptcp_settings(None)
    together = mptcp_settings_of([None, None])
    assert together == [alone, alone]
    assert alone["net.mptcp.enabled"] is not None and "limits" in alone


def test_the_quiet_check_reads_a_busy_socket_as_before():
    """A connection with unread data in its Recv-Q is busy: the reads made at once see what
    one read after another saw."""
    lis = socket.create_server(("127.0.0.1", 0))
    port = lis.getsockname()[1]
    cli = socket.create_connection(("127.0.0.1", port))
    srv, _ = lis.accept()
    try:
        cli.sendall(b"x" * 1000)  # never read by `srv`
        time.sleep(0.1)
        ours = f":{port}"
        alone = [d for d, _ in hygiene.busy_sockets(None) if ours in d]
        socks, _ = hygiene._busy_now([None], [None], {})
        assert alone and alone == [d for d, _ in socks if ours in d]
    finally:
        for s in (cli, srv, lis):
            s.close()


def _script(tmp_path, body: str) -> list[str]:
    path = tmp_path / "tool.py"
    path.write_text(body)
    return [sys.executable, str(path)]


def test_a_client_is_ended_at_its_logs_last_line(tmp_path):
    """The line that says it is done ends it (taken as exit 0); it would have slept 20 s."""
    log = tmp_path / "run.log"
    argv = _script(tmp_path, f"""
import sys, time
with open({str(log)!r}, "a") as f:
    f.write("starting\\n"); f.flush()
    time.sleep(0.3)
    f.write("\\x1b[34m{ACTIVE_DONE}\\x1b[0m\\n"); f.flush()
print("out"); sys.stdout.flush()
time.sleep(20)
sys.exit(5)
""")
    cmd = ToolRun(tool="t", server_argv=[], client_argv=argv, data_port=1, listen_port=1,
                  ports=[1], client_timeout_s=10, done_log=str(log), done_marker=ACTIVE_DONE,
                  done_not_before_s=0.1)
    out = RunOutput()
    t = time.monotonic()
    _run_until_logged(argv, cmd, out)
    assert time.monotonic() - t < 5
    assert out.client_returncode == 0 and out.client_ended_after_log
    assert out.client_stdout.strip() == "out"


def test_a_client_that_ends_by_itself_keeps_its_status(tmp_path):
    """No done line (or one that is not the last): the client's own end and status count."""
    log = tmp_path / "run.log"
    argv = _script(tmp_path, f"""
import sys, time
with open({str(log)!r}, "a") as f:
    f.write("{ACTIVE_DONE}\\nbut then an error\\n"); f.flush()
time.sleep(0.5)
sys.stderr.write("failed\\n")
sys.exit(3)
""")
    cmd = ToolRun(tool="t", server_argv=[], client_argv=argv, data_port=1, listen_port=1,
                  ports=[1], client_timeout_s=10, done_log=str(log), done_marker=ACTIVE_DONE)
    out = RunOutput()
    _run_until_logged(argv, cmd, out)
    assert out.client_returncode == 3 and not out.client_ended_after_log
    assert "failed" in out.client_stderr
    assert not logged_done(str(log), ACTIVE_DONE)
    assert not logged_done(str(tmp_path / "missing.log"), ACTIVE_DONE)


def test_a_client_that_never_ends_is_a_probe_error(tmp_path):
    argv = ["sleep", "31.25"]
    cmd = ToolRun(tool="t", server_argv=[], client_argv=argv, data_port=1, listen_port=1,
                  ports=[1], client_timeout_s=0.5, done_log=str(tmp_path / "none.log"),
                  done_marker=ACTIVE_DONE)
    with pytest.raises(ProbeError, match="no end after"):
        _run_until_logged(argv, cmd, RunOutput())
    # and it is gone, not left running
    assert run(["pgrep", "-fx", "sleep 31.25"], check=False).stdout.strip() == ""


def test_netperfmeter_2_writes_its_log_to_a_file_1_9_does_not(tmp_path):
    from probes.base import MeasurementRequest

    request = MeasurementRequest(sender="A", receiver="B", duration_s=5)
    _, active = build_commands(request, version="2.0.10", address="10.2.0.1", port=9000,
                               outdir=str(tmp_path))
    # the level first: the file takes the level set before it
    assert active.index("--loglevel") < active.index("--logfile")
    assert active[active.index("--logfile") + 1] == f"{tmp_path}/active.log"
    assert done_when_logged("2.0.10", str(tmp_path), request) == {
        "done_log": f"{tmp_path}/active.log", "done_marker": ACTIVE_DONE,
        "done_not_before_s": 5.0}
    _, legacy = build_commands(request, version="1.9.4", address="10.2.0.1", port=9000,
                               outdir=str(tmp_path))
    assert not any("log" in a for a in legacy)
    assert done_when_logged("1.9.4", str(tmp_path), request) == {}


def _listener(port: int) -> list[str]:
    """A stand-in passive side: listens on the control port P+1, as NetPerfMeter's does."""
    return [sys.executable, "-c", "import socket, time; "
            f"s = socket.create_server(('0.0.0.0', {port + 1})); time.sleep(60)"]


def test_a_spare_passive_side_is_taken_once_and_replaced():
    from probes.tools import npm_spare

    key = (None, None, "stand-in")
    try:
        first = npm_spare.prepare(key, _listener)
        got = npm_spare.take(key)
        assert got is first and got.server.proc.poll() is None
        assert npm_spare.take(key) is None  # taken: the next probe starts its own
        got.server.kill()
        second = npm_spare.prepare(key, _listener)
        third = npm_spare.prepare(key, _listener)  # a namespace keeps one spare
        assert second.server.proc.wait(5) is not None
        third.server.kill()  # one that ended is not used
        assert npm_spare.take(key) is None
    finally:
        npm_spare.discard_all()
