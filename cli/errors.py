"""How every `mpcoa` command ends when it cannot do what was asked: one line on stderr that
starts with `mpcoa: error: `, and an exit status a script can tell apart (docs/cli.md):

0  done;
1  the command ran and its outcome is a failure (a campaign failed, an apply was not
   confirmed, a site check found problems, an import's answer differs);
2  a usage error or invalid input: an unknown option, a value out of range or not one of the
   choices, a file that does not parse, a request the stored state refuses;
3  not found: an id or name that is not stored;
4  unavailable: the database cannot be reached (or is not migrated); retrying may help.
"""

from __future__ import annotations

import json
from typing import NoReturn

import typer

from service.errors import NotFound, ServiceError

PREFIX = "mpcoa: error: "
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_UNAVAILABLE = 4


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """One line on stderr and the status: bad input never shows a traceback."""
    typer.echo(PREFIX + message.replace("\n", "; "), err=True)
    raise typer.Exit(code)


def service_failure(exc: ServiceError, prefix: str = "") -> NoReturn:
    """A refusal of the service layer: not found is 3, anything else the input's fault (2)."""
    fail(prefix + exc.message, EXIT_NOT_FOUND if isinstance(exc, NotFound) else EXIT_USAGE)


def validation_message(exc) -> str:
    """A pydantic ValidationError as `field: why` parts, without its links to the docs."""
    return "; ".join(
        (".".join(str(p) for p in e["loc"]) + ": " if e["loc"] else "") + e["msg"]
        for e in exc.errors(include_url=False)
    )


def database_problem(exc: Exception) -> str:
    """One line for a database that cannot be read: unreachable, or not migrated."""
    first = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [""])[0][:200]
    return f"database: {first} (is it reachable, and migrated: `mpcoa db upgrade`?)"


def unavailable(exc: Exception) -> NoReturn:
    fail(database_problem(exc), EXIT_UNAVAILABLE)


def emit_json(document) -> None:
    """A result as JSON on stdout (what `--json` prints): strict JSON, no NaN."""
    from cli.output import result_stream

    typer.echo(json.dumps(document, indent=2, allow_nan=False, default=_plain),
               file=result_stream())


def _plain(value):
    """Dates as ISO 8601 (what the API gives), anything else as its text."""
    iso = getattr(value, "isoformat", None)
    return iso() if iso is not None else str(value)
