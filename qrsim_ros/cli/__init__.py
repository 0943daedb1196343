"""Command-line tools of qrsim_ros (pure Python; no rclpy), and what their subcommands share: the one
error type (``CliError``) and how it is reported, one-line usage errors, the standalone entry point and
atomic file output."""

from __future__ import annotations

import argparse
import contextlib
import csv
import fcntl
import io
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from typing import Any, BinaryIO, NoReturn

from qrsim_ros.cli.leftovers import remove_stale_temporaries, temporary_prefix


class CliError(ValueError):
    """Bad command-line input, the one error type of every ``qrsim`` subcommand.

    The message names the option, file or value at fault; ``report`` prints it as one stderr line,
    ``PROG: message``. The subcommand returns status 2 for bad input found before anything runs (the
    usual case) and 1 when an output cannot be written after the work is done.
    """


def report(prog: str, exc: BaseException, status: int = 2) -> int:
    """Print ``exc`` as one stderr line ``PROG: message`` (line breaks become spaces); return ``status``."""
    print(f"{prog}: {' '.join(str(exc).splitlines())}", file=sys.stderr)
    return status


def one_line_errors(parser: argparse.ArgumentParser, prog: str, *,
                    dash_hint: str = "") -> argparse.ArgumentParser:
    """Make ``parser`` report a usage error as one stderr line, ``PROG: message (see 'PROG --help')``,
    with exit status 2 (argparse prints the usage and the message on two lines). ``dash_hint`` is
    appended when an option misses its value, most likely one starting with '-'."""
    def error(message: str) -> NoReturn:
        if dash_hint and "expected one argument" in message:
            message += f" ({dash_hint})"
        parser.exit(2, f"{prog}: {message} (see '{prog} --help')\n")

    parser.error = error  # type: ignore[method-assign]
    return parser


def finish_parser(parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int], prog: str,
                  **one_line: str) -> argparse.ArgumentParser:
    """The last step of a subcommand's arguments: ``run`` as its function, one-line usage errors."""
    parser.set_defaults(func=run)
    return one_line_errors(parser, prog, **one_line)


def subcommand_parser(subparsers: argparse._SubParsersAction, name: str, help_text: str,
                      doc: str | None) -> argparse.ArgumentParser:
    """A ``qrsim NAME`` subcommand's parser on the top-level ``subparsers``, its module docstring as the
    description (kept as written)."""
    return subparsers.add_parser(name, help=help_text, description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)


def standalone_main(add_arguments: Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
                    run: Callable[[argparse.Namespace], int], prog: str, doc: str | None,
                    argv: list[str] | None) -> int:
    """A subcommand run as ``python -m qrsim_ros.cli.<name>``: parse ``argv`` with the subcommand's
    arguments and run it; a usage error (status 2, one line) or --help (0) returns its status."""
    parser = add_arguments(argparse.ArgumentParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return run(args)


# --- output files --------------------------------------------------------------------------------------

def check_output_path(path: str, inputs: Iterable[tuple[str, str | os.PathLike[str] | None]] = ()) -> None:
    """Fail (CliError) before any work if ``path`` obviously cannot be written: its directory is
    missing, it is a directory, or it is one of the ``inputs`` (``(what, path)`` pairs, e.g.
    ``("--inputs", "log.csv")``) under any name: a symbolic link, another relative path or a hard
    link to the same file (same device and inode) would be overwritten by the output. Removes the
    temporaries of earlier writers of ``path`` that were killed (``leftovers.remove_stale_temporaries``;
    a live writer's stays)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CliError(f"{path}: cannot write: directory {directory} does not exist")
    if os.path.isdir(path):
        raise CliError(f"{path}: cannot write: it is a directory")
    for what, source in inputs:
        if source is not None and _same_file(path, source):
            raise CliError(f"{path}: refusing to write the output over the input {what} "
                           f"{os.fspath(source)} (the same file); choose another output path")
    remove_stale_temporaries(path)


def _same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name one existing file (os.path.samefile: device and inode)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # either does not exist (yet): they cannot be the same file
        return False


def write_csv_atomic(path: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Write a CSV (``\\n`` line ends, UTF-8) atomically (``write_atomic``), the rows streamed into the
    temporary as they are formatted (a large output is never held in memory whole)."""

    def write(f: BinaryIO) -> None:
        text = io.TextIOWrapper(f, encoding="utf-8", newline="")
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
        text.flush()
        text.detach()  # the temporary is closed by write_atomic

    write_atomic(path, write)


def write_bytes_atomic(path: str, data: bytes) -> None:
    """Write ``data`` atomically (``write_atomic``)."""
    write_atomic(path, lambda f: f.write(data))


def write_atomic(path: str, write: Callable[[BinaryIO], Any]) -> None:
    """Call ``write`` on a temporary file in the same directory, then ``os.replace`` it onto ``path``: an
    existing file is never half-written or lost. The new file gets the old file's permissions, or the
    umask's. An OSError becomes a CliError naming ``path``; on any error the temporary is removed.

    The temporary is flock-ed while it is written: if this process is killed, the next writer of
    ``path`` finds it unlocked and removes it (``leftovers.remove_stale_temporaries``)."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp_path = None
    try:
        remove_stale_temporaries(path)
        with tempfile.NamedTemporaryFile("wb", dir=directory, prefix=temporary_prefix(path),
                                         suffix=".tmp", delete=False) as f:
            tmp_path = f.name
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # held until the file is closed (or we die)
            write(f)
        os.chmod(tmp_path, _new_file_mode(path))  # mkstemp makes 0600
        os.replace(tmp_path, path)
        tmp_path = None
    except OSError as exc:
        raise CliError(f"{path}: cannot write: {exc.strerror or exc}") from None
    finally:
        if tmp_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_path)


def _new_file_mode(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o777  # keep an existing file's permissions
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
