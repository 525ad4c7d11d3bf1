"""The `mpcoa` command: one CLI in front of the algorithm, the testbed, the API and the workers."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="mpcoa",
    help="Measure, fit and recommend MPTCP path manager, congestion control and buffer size.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

# --- sub-apps and commands from other modules are registered below this line ---
from cli.algorithm import register as register_algorithm  # noqa: E402

register_algorithm(app)

from cli.serve import register as register_serve  # noqa: E402

register_serve(app)
from cli.testbed import app as testbed_app  # noqa: E402

app.add_typer(testbed_app, name="testbed")
