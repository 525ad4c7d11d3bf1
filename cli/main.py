"""The `mpcoa` command: one CLI in front of the algorithm, the testbed, the API and the workers."""

from __future__ import annotations

import faulthandler

import typer

from cli.algorithm import register as register_algorithm
from cli.apply import register as register_apply
from cli.bundle import register as register_bundle
from cli.demo import register as register_demo
from cli.report import register as register_report
from cli.serve import register as register_serve
from cli.testbed import app as testbed_app
from cli.workers import register as register_workers

# A crash in native code (an extension, the interpreter's finalisation) prints every thread's
# Python stack on stderr instead of a bare "Segmentation fault": what an operator can report.
faulthandler.enable()

app = typer.Typer(
    name="mpcoa",
    help="Measure, fit and recommend MPTCP path manager, congestion control and buffer size.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

register_algorithm(app)  # solve, fit, impact, recommend
register_serve(app)  # serve, db, token
register_workers(app)  # calibrate, worker, beat
register_demo(app)  # demo
register_bundle(app)  # export, import
register_report(app)  # report
register_apply(app)  # apply --dry-run | --rollback
app.add_typer(testbed_app, name="testbed")  # testbed up | down | status
