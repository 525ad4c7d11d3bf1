"""How `mpcoa` prints: tables for people (rich), JSON behind `--json`, and how much of it
`-q`/`-v` let through (docs/cli.md).

`-q` keeps errors only: the human output on stdout, progress bars and log records below ERROR
are dropped; a `--json` document is the result asked for and is still printed. `-v` turns on
DEBUG logging (on stderr) for every library the command uses."""

from __future__ import annotations

import io
import logging
import os
import sys
from typing import Annotated, TextIO

import typer
from rich import box
from rich.console import Console
from rich.table import Table

JsonOpt = Annotated[bool, typer.Option("--json", help="print the result as JSON")]


class _State:
    quiet = False
    stdout: TextIO | None = None  # the real stdout while -q hides the rest
    logging: tuple[int, logging.Handler | None] | None = None  # what -q/-v replaced


state = _State()


def configure(*, quiet: bool, verbose: bool) -> None:
    """The root callback's -q/-v, for this invocation (`restore` undoes it when the command
    ends). Without either, logging is left as Python sets it up (warnings and errors)."""
    state.quiet = quiet
    state.stdout = None
    state.logging = None
    if not (quiet or verbose):
        return
    root = logging.getLogger()
    handler = None
    if verbose and not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    state.logging = (root.level, handler)
    root.setLevel(logging.ERROR if quiet else logging.DEBUG)
    logging.getLogger("mpcoa.cli").debug("debug logging on (pid %d)", os.getpid())
    if quiet:
        state.stdout = sys.stdout
        sys.stdout = io.StringIO()  # dropped


def restore() -> None:
    if state.stdout is not None:
        sys.stdout = state.stdout
        state.stdout = None
    if state.logging is not None:
        level, handler = state.logging
        root = logging.getLogger()
        root.setLevel(level)
        if handler is not None:
            root.removeHandler(handler)
        state.logging = None
    state.quiet = False


def result_stream() -> TextIO:
    """Where a `--json` document goes: stdout, even under -q."""
    return state.stdout or sys.stdout


def console(stderr: bool = False) -> Console:
    """A console on the current stdout (or stderr); silent under -q. Not a terminal: no colour,
    and wide enough that a table's rows stay one line each when piped."""
    file = sys.stderr if stderr else sys.stdout
    tty = file.isatty()
    return Console(file=file, quiet=state.quiet, width=None if tty else 160,
                   no_color=not tty, highlight=False, soft_wrap=False)


def show(renderable) -> None:
    """A table (or any rich renderable) on stdout; piped, without the spaces rich pads each
    line with, so a script's `cut`/`awk` and a diff see only the cells."""
    out = console()
    if out.is_terminal:
        out.print(renderable)
        return
    with out.capture() as captured:
        out.print(renderable)
    text = "\n".join(line.rstrip() for line in captured.get().splitlines())
    if text and not out.quiet:
        out.file.write(text + "\n")


def say(text: str) -> None:
    """One line for people on stdout (nothing under -q); never read as markup."""
    console().print(text, markup=False, highlight=False)


def table(*columns: str, title: str | None = None) -> Table:
    """A list for people: a header rule, one row per item, no frame."""
    return Table(*columns, title=title, box=box.SIMPLE_HEAD, title_justify="left",
                 show_edge=False, pad_edge=False, header_style="bold")


def never(value, empty: str = "never") -> str:
    """A date for people: ISO 8601 without microseconds, or `empty` (an unset expiry is
    "never", not "None")."""
    if value is None:
        return empty
    iso = getattr(value, "isoformat", None)
    return iso(sep=" ", timespec="seconds") if iso is not None else str(value)
