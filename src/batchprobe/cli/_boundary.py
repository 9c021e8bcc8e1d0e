"""The one error boundary of the CLI: every error becomes an exit code and one line here.

Exit codes: 0 success/PASS; 1 FAIL (a verdict, a failed check: only commands decide that);
2 everything else: a usage error, a batchprobe error, an interrupt, or a bug (the last resort).
"""

from __future__ import annotations

import errno
import os
import sys
import traceback

import click

from batchprobe._safe import console_text
from batchprobe.errors import BatchprobeError, ConfigError

EXIT_OTHER = 2
_EXIT_KEY = "batchprobe.exit_code"

# Exit code of each error class; an error takes the entry of the nearest class in its MRO, so
# a new subclass needs no entry unless it means something else.
EXIT_CODES: dict[type[BatchprobeError], int] = {BatchprobeError: EXIT_OTHER}


def exit_code_for(exc: BatchprobeError) -> int:
    codes: dict[type, int] = dict(EXIT_CODES)
    return next(codes[k] for k in type(exc).__mro__ if k in codes)


def set_exit_code(code: int) -> None:
    """Record the command's exit code before it writes to stdout, so that a reader closing the
    pipe early (``batchprobe run | head -1``) does not change it."""
    click.get_current_context().meta[_EXIT_KEY] = code


def _option_for(command: click.Command | None, field: str) -> str | None:
    """The option spelled for a config field (``request_timeout_s`` is ``--request-timeout``)."""
    if command is None:
        return None
    for param in command.params:
        if param.name == field and isinstance(param, click.Option):
            return max(param.opts, key=len)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            found = _option_for(sub, field)
            if found is not None:
                return found
    return None


def _message(exc: BatchprobeError, command: click.Command | None) -> str:
    if isinstance(exc, ConfigError) and not exc.field.startswith("-"):
        option = _option_for(command, exc.field)
        if option is not None:
            return f"{option}: {str(exc).removeprefix(exc.field + ': ')}"
    return str(exc)


def _silence_stdout() -> None:
    # The reader is gone: later writes (and the interpreter's final flush) go nowhere.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class Boundary(click.Group):
    """The root group: translates what its subcommands raise, once for all of them."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort, click.ClickException):
            raise
        except BatchprobeError as exc:
            name = ctx.invoked_subcommand
            command = self.get_command(ctx, name) if name else None
            # A message and a log tail may quote a server or an engine: no control character
            # reaches the terminal.
            click.echo(console_text(f"batchprobe {name}: {_message(exc, command)}"), err=True)
            log_tail = getattr(exc, "log_tail", None)
            if log_tail:
                click.echo(console_text(log_tail.rstrip(), newlines=True), err=True)
            ctx.exit(exit_code_for(exc))
        except KeyboardInterrupt:
            click.echo("batchprobe: interrupted", err=True)
            ctx.exit(EXIT_OTHER)
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                _last_resort(ctx, exc)
            _silence_stdout()
            ctx.exit(ctx.meta.get(_EXIT_KEY, 0))
        except Exception as exc:  # noqa: BLE001 - the last resort, by design
            _last_resort(ctx, exc)
        return None


def _last_resort(ctx: click.Context, exc: BaseException) -> None:
    """A bug: say so, show where, exit 2 (never 1, which means FAIL). A run under way has
    already stored the traceback in its ``error`` verdict."""
    click.echo(f"batchprobe: internal error: {type(exc).__name__}: {exc}", err=True)
    click.echo("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)), err=True)
    ctx.exit(EXIT_OTHER)
