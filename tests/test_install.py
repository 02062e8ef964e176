"""install.sh never asks pip for a torch that may be the CUDA build: where none is
installed, it asks for torch 2.13.0+cpu, else takes torch from PyTorch's CPU index.

The script runs with ``PYTHON`` a stub that writes down what it was asked and answers as
the environment of each test would (no torch installed; an index with or without +cpu).
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def installs(tmp_path: Path, *, torch_installed: bool, cpu_wheel: bool) -> list[str]:
    """The stub's commands, one line each, after running install.sh with it."""
    log = tmp_path / "asked"
    stub = tmp_path / "python"
    stub.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {log}\n'
        f'case "$*" in "-c import torch") exit {0 if torch_installed else 1};; esac\n'
        f'case "$*" in *"torch==2.13.0+cpu"*) exit {0 if cpu_wheel else 1};; esac\n'
        "exit 0\n"
    )
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    environment = {**os.environ, "PYTHON": str(stub)}
    environment.pop("TORCH_INDEX_URL", None)
    done = subprocess.run(
        ["sh", str(ROOT / "install.sh")], env=environment, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return [line for line in log.read_text().splitlines() if "torch==" in line]


@pytest.mark.parametrize(
    ("torch_installed", "cpu_wheel", "expected"),
    [
        (True, True, []),
        (False, True, ["-m pip install torch==2.13.0+cpu"]),
        (
            False,
            False,  # plain PyPI: no +cpu wheel, and its Linux torch is the CUDA build
            [
                "-m pip install torch==2.13.0+cpu",
                f"-m pip install --index-url {CPU_INDEX} torch==2.13.0",
            ],
        ),
    ],
)
def test_torch_comes_as_the_cpu_build(
    tmp_path: Path, torch_installed: bool, cpu_wheel: bool, expected: list[str]
) -> None:
    assert installs(tmp_path, torch_installed=torch_installed, cpu_wheel=cpu_wheel) == expected
