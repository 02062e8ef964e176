"""The reproduction script of a file target runs wherever it is saved and run from, as the
checked target did: the GUIDE's layout, an adapter in ``lab/`` that imports its neighbour,
checked from the folder above ``lab/``."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.properties.cli_runs import run_cli
from tests.properties.test_cli import reproduction_of

#: a stack wrong by 1 in one output, and the GUIDE's adapter, which imports it by its name
WRONG_STACK = """\
from properties.default_target import reconstruction_losses


def wrong_terms(token_nll, zfree_token_nll, mask, config):
    out = dict(reconstruction_losses(token_nll, zfree_token_nll, mask, config))
    out["reconstruction_loss"] = out["reconstruction_loss"] + 1.0
    return out
"""
ADAPTER = """\
from mylab_losses import wrong_terms


def losses(token_nll, zfree_token_nll, mask, config):
    return wrong_terms(token_nll, zfree_token_nll, mask, config)
"""
#: an API whose flags set each other's fields, re-exported by an adapter beside it
WRONG_API = "from properties.zoo.api.wrong import crossed_flags as API\n"
API_ADAPTER = "from mylab_api import API\n\napi = API\n"


def _layout(tmp_path: Path, files: dict[str, str]) -> Path:
    """The check's folder, with ``lab/`` and its files in it."""
    project = tmp_path / "project"
    (project / "lab").mkdir(parents=True)
    for name, text in files.items():
        (project / "lab" / name).write_text(text)
    return project


def _runs(script: str, tmp_path: Path, project: Path) -> list[subprocess.CompletedProcess]:
    """``script`` saved in the check's folder and run there, as the report's heading says,
    then saved in another folder and run by its path from a third one."""
    elsewhere, other = tmp_path / "elsewhere", tmp_path / "other"
    elsewhere.mkdir()
    other.mkdir()
    done = []
    for saved_in, cwd in ((project, project), (elsewhere, other)):
        path = saved_in / "reproduce.py"
        path.write_text(script)
        done.append(
            subprocess.run(
                [sys.executable, str(path)], capture_output=True, text=True, cwd=cwd, timeout=120
            )
        )
    return done


def _ran(replay: subprocess.CompletedProcess) -> None:
    assert "ModuleNotFoundError" not in replay.stderr, replay.stderr
    assert "FileNotFoundError" not in replay.stderr, replay.stderr
    assert replay.returncode == 0, replay.stderr


@pytest.mark.heavy
@pytest.mark.slow
def test_a_file_targets_script_runs_from_anywhere(tmp_path: Path) -> None:
    project = _layout(tmp_path, {"mylab_losses.py": WRONG_STACK, "recon_adapter.py": ADAPTER})
    done = run_cli(
        "check", "lab/recon_adapter.py:losses", "-x", "-i", "oracle-agreement", "--no-database",
        cwd=project,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    script = reproduction_of(done.stdout)
    missed = re.search(r"^# What the spec expects: (\S+) \S+ \(observed (\S+)\)", script, re.M)
    assert missed, script
    for replay in _runs(script, tmp_path, project):
        _ran(replay)
        (printed,) = [ast.literal_eval(line) for line in replay.stdout.splitlines()]
        assert printed[missed[1]] == pytest.approx(float(missed[2])), replay.stdout


@pytest.mark.heavy
@pytest.mark.slow
def test_an_api_file_targets_script_runs_from_anywhere(tmp_path: Path) -> None:
    project = _layout(tmp_path, {"mylab_api.py": WRONG_API, "recon_api.py": API_ADAPTER})
    done = run_cli(
        "check-api", "lab/recon_api.py:api", "-x", "-i", "flags-round-trip", "--no-database",
        cwd=project,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    script = reproduction_of(done.stdout)
    crossed = re.search(r"^# What the spec expects: .*?: (\w+) is (\S+), not its", script, re.M)
    assert crossed, script
    for replay in _runs(script, tmp_path, project):
        _ran(replay)
        assert f"{crossed[1]}={crossed[2]}" in replay.stdout, replay.stdout
