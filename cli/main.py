"""The `mpcoa` command: one CLI in front of the algorithm, the testbed, the API and the workers."""

from __future__ import annotations

import faulthandler
import sys
from importlib.metadata import PackageNotFoundError, version

import typer
from pydantic import ValidationError
from sqlalchemy.exc import DBAPIError, OperationalError
from typer._click import core as click_core
from typer._click import exceptions as click_errors  # typer ships its own click
from typer.core import TyperGroup

from cli.algorithm import register as register_algorithm
from cli.apply import register as register_apply
from cli.bundle import register as register_bundle
from cli.campaigns import app as campaign_app
from cli.demo import register as register_demo
from cli.errors import (
    EXIT_FAILED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    PREFIX,
    database_problem,
    fail,
)
from cli.inventory import site_app, topology_app
from cli.output import configure, restore
from cli.report import register as register_report
from cli.serve import register as register_serve
from cli.testbed import app as testbed_app
from cli.workers import register as register_workers
from service.upgrade_guard import UpgradeFailed

# A crash in native code (an extension, the interpreter's finalisation) prints every thread's
# Python stack on stderr instead of a bare "Segmentation fault": what an operator can report.
faulthandler.enable()


class MpcoaGroup(TyperGroup):
    """The top-level command: a usage error (unknown option, a value out of range or not one of
    the choices) ends like every other error, `mpcoa: error: ...` after the usage line, status
    2; a database that cannot be reached, wherever a command meets it, is one line and status 4
    (cli/errors.py), an automatic upgrade that failed its check one line and status 1, never a
    traceback."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        _flags_show_no_type(self)
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click_errors.NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click_errors.UsageError as exc:
            if exc.ctx is not None:
                typer.echo(exc.ctx.get_usage(), err=True)
                typer.echo(f"Try '{exc.ctx.command_path} --help' for help.", err=True)
            # typer checks choices with pydantic, whose message starts "Value error, "
            typer.echo(PREFIX + exc.format_message().replace("Value error, ", ""), err=True)
            sys.exit(EXIT_USAGE)
        except click_errors.ClickException as exc:
            typer.echo(PREFIX + exc.format_message(), err=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        except ValidationError as exc:
            if exc.title not in ("Settings", "ProbeSettings"):
                raise
            typer.echo(PREFIX + settings_problem(exc), err=True)  # the environment or .env
            sys.exit(EXIT_USAGE)
        except UpgradeFailed as exc:  # any command's automatic upgrade of a SQLite file
            typer.echo(PREFIX + str(exc), err=True)
            sys.exit(EXIT_FAILED)
        except DBAPIError as exc:
            if not (isinstance(exc, OperationalError) or exc.connection_invalidated):
                raise
            typer.echo(PREFIX + database_problem(exc), err=True)
            sys.exit(EXIT_UNAVAILABLE)
        sys.exit(code if isinstance(code, int) else 0)


def _flags_show_no_type(command) -> None:
    """An on/off flag takes no value, so its help shows none: typer prints every option's type
    (`<bool>` for `--json`), which for a flag reads as if it wanted one."""
    helper = command.get_help_option(click_core.Context(command))  # made once, then cached
    for param in [*command.params, *([helper] if helper is not None else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _flags_show_no_type(sub)


def settings_problem(exc: ValidationError) -> str:
    """A setting the environment or the .env file got wrong, named as it is set."""
    return "; ".join(
        f"MPCOA_{'_'.join(str(p) for p in e['loc']).upper()}: "
        f"{e['msg'].removeprefix('Value error, ')}" if e["loc"] else e["msg"]
        for e in exc.errors(include_url=False))


def _version(show: bool) -> None:
    if show:
        try:
            typer.echo(f"mpcoa {version('mpcoa')}")
        except PackageNotFoundError:  # run from a checkout that was never installed
            typer.echo("mpcoa (not installed)")
        raise typer.Exit(0)


app = typer.Typer(
    name="mpcoa",
    cls=MpcoaGroup,
    help="Measure, fit and recommend MPTCP path manager, congestion control and buffer size.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(
    ctx: typer.Context,
    show_version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="print the version and exit"),
    quiet: bool = typer.Option(False, "-q", "--quiet",
                               help="errors only: no output for people, no progress, no logs "
                               "below ERROR (a --json result is still printed)"),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="debug logging on stderr"),
) -> None:
    """Measure, fit and recommend MPTCP path manager, congestion control and buffer size.
    Exit status: 0 done, 1 the outcome is a failure, 2 usage or invalid input, 3 not found,
    4 database unavailable (docs/cli.md)."""
    if quiet and verbose:
        fail("-q and -v: give one of them")
    configure(quiet=quiet, verbose=verbose)
    ctx.call_on_close(restore)


register_algorithm(app)  # solve, fit, impact, recommend
register_serve(app)  # serve, db, token
register_workers(app)  # calibrate, worker, beat
register_demo(app)  # demo
register_bundle(app)  # export, import
register_report(app)  # report, show
register_apply(app)  # apply --dry-run | --rollback
app.add_typer(testbed_app, name="testbed")  # testbed up | down | status
app.add_typer(site_app, name="site")  # site add | list
app.add_typer(topology_app, name="topology")  # topology add FILE | list
app.add_typer(campaign_app, name="campaign")  # campaign list | cancel
