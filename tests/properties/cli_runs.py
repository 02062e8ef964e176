"""Running ``recon-spec`` from the tests: in this process, or as a user runs it.

A check runs its target in worker processes whichever way it is started, so most tests call
``properties.cli.main`` here, with the output captured, the working folder and environment
set for the call: that saves each test the import of torch, sympy and the catalogue in a
process of its own, half of what a small check costs. The tests about the process itself
(the entry point, signals, a closed pipe) pass ``in_process=False``.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path

from properties.cli import main

ROOT = Path(__file__).parents[2]


@contextlib.contextmanager
def _working_folder(folder: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def _apply(environ: MutableMapping[str, str], changes: Mapping[str, str | None]) -> None:
    """Set each variable of ``changes``; a value of None unsets it."""
    for name, value in changes.items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value


@contextlib.contextmanager
def _environment(changes: Mapping[str, str | None]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in changes}
    try:
        _apply(os.environ, changes)
        yield
    finally:
        _apply(os.environ, saved)


def run_cli(
    *args: str,
    cwd: Path = ROOT,
    timeout: int = 600,
    in_process: bool = True,
    environment: Mapping[str, str | None] | None = None,
) -> subprocess.CompletedProcess:
    """``recon-spec ARGS`` in ``cwd``: its exit status, stdout and stderr. An environment
    value of None unsets the variable for the run."""
    changes = dict(environment or {})
    if not in_process:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        _apply(env, changes)
        return subprocess.run(
            [sys.executable, "-m", "properties.cli", *args],
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=timeout,
            env=env,
        )
    out, err = io.StringIO(), io.StringIO()
    with (
        _working_folder(cwd),
        _environment(changes),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            status = main(list(args))
        except SystemExit as exit_:  # argparse's usage errors
            status = exit_.code if isinstance(exit_.code, int) else 2
    return subprocess.CompletedProcess(
        ["recon-spec", *args], status, out.getvalue(), err.getvalue()
    )
