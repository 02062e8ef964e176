"""docs/GUIDE.md, "Checking your own implementation": the example adapter, as written,
passes ``recon-spec check``, and a one-character slip in it is caught; "Checking the whole
API": the example trainer's API adapter passes ``recon-spec check-api``, and a slip in it
is caught."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.properties.cli_runs import run_cli

GUIDE = Path(__file__).parents[2] / "docs" / "GUIDE.md"


API_SECTION = "Checking the whole API: `recon-spec check-api`"


def write_guide_files(folder: Path, title: str = "Checking your own implementation") -> dict:
    section = GUIDE.read_text().split(f"\n## {title}\n")[1]
    section = section.split("\n## ")[0]
    files = {}
    for block in re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL):
        name = re.match(r"# file: (\S+)\n", block)
        assert name, "every Python block of the section is a file of the example"
        files[name.group(1)] = block
        (folder / name.group(1)).write_text(block)
    return files


def check(folder: Path, *args: str, in_process: bool = True) -> subprocess.CompletedProcess:
    """``recon-spec check recon_adapter:losses ARGS``, run from ``folder`` as the guide says."""
    return run_cli("check", "recon_adapter:losses", *args, cwd=folder, in_process=in_process)


@pytest.mark.slow
@pytest.mark.heavy
def test_the_guide_adapter_passes_the_check(tmp_path: Path) -> None:
    files = write_guide_files(tmp_path)
    assert set(files) == {"mylab_losses.py", "recon_adapter.py"}
    done = check(
        tmp_path, "--profile", "dev", "--max-examples", "15", "--no-database", in_process=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 failed" in done.stdout


def test_a_slip_in_the_adapter_is_caught(tmp_path: Path) -> None:
    write_guide_files(tmp_path)
    adapter = tmp_path / "recon_adapter.py"
    # the classic slip: passing the valid-token mask where the code wants the padding mask
    adapter.write_text(adapter.read_text().replace("~mask.bool()", "mask.bool()"))
    done = check(tmp_path, "-i", "oracle-agreement", "--max-examples", "10", "--no-database")
    assert done.returncode == 1
    assert "FAILED oracle-agreement" in done.stdout


@pytest.mark.heavy
def test_the_guide_api_adapter_passes_check_api(tmp_path: Path) -> None:
    write_guide_files(tmp_path)  # mylab_losses.py, the trainer's stack
    files = write_guide_files(tmp_path, API_SECTION)
    assert set(files) == {"mylab_settings.py", "mylab_cli.py", "mylab_objective.py", "recon_api.py"}
    done = run_cli(
        "check-api",
        "recon_api",
        "--profile",
        "ci",
        "--max-examples",
        "15",
        "--no-database",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    from properties.api import select

    assert f"{len(select())} passed, 0 failed" in done.stdout


def test_a_slip_in_the_api_adapter_is_caught(tmp_path: Path) -> None:
    write_guide_files(tmp_path)
    write_guide_files(tmp_path, API_SECTION)
    adapter = tmp_path / "recon_api.py"
    # the classic slip again: the valid-token mask where the objective wants the padding
    adapter.write_text(adapter.read_text().replace("padding=~mask.bool()", "padding=mask.bool()"))
    done = run_cli(
        "check-api",
        "recon_api",
        "-i",
        "total-loss-reconstruction",
        "--profile",
        "ci",
        "--max-examples",
        "10",
        "--no-database",
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    assert "FAILED total-loss-reconstruction" in done.stdout


def test_adding_a_term_names_files_and_records_that_exist() -> None:
    """ "Adding a term": every file it names exists, and every record class it names is
    defined in the file it is named beside."""
    root = GUIDE.parents[1]
    section = GUIDE.read_text().split("\n## Adding a term\n")[1].split("\n## ")[0]
    paths = re.findall(r"`((?:spec|recon_impl|properties|tests|docs)/[\w/]+\.\w+)`", section)
    assert len(paths) >= 8, paths
    missing = [path for path in paths if not (root / path).is_file()]
    assert not missing, f"docs/GUIDE.md, 'Adding a term', names files that do not exist: {missing}"
    for record, path in (
        ("Output", "spec/terms.py"),
        ("Parameter", "spec/parameters.py"),
        ("Statistic", "spec/statistics.py"),
        ("Term", "recon_impl/terms.py"),
    ):
        assert f"`{record}`" in section and f"`{path}`" in section
        assert re.search(rf"^class {record}\b", (root / path).read_text(), flags=re.MULTILINE), (
            f"{path} defines no class {record}, which 'Adding a term' names"
        )
