"""docs/GUIDE.md, "Checking your own implementation": the example adapter, as written,
passes ``recon-spec check``, and a one-character slip in it is caught."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

GUIDE = Path(__file__).parents[2] / "docs" / "GUIDE.md"


def write_guide_files(folder: Path) -> dict[str, str]:
    section = GUIDE.read_text().split("\n## Checking your own implementation\n")[1]
    section = section.split("\n## ")[0]
    files = {}
    for block in re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL):
        name = re.match(r"# file: (\S+)\n", block)
        assert name, "every Python block of the section is a file of the example"
        files[name.group(1)] = block
        (folder / name.group(1)).write_text(block)
    return files


def check(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "properties.cli", "check", "recon_adapter:losses", *args],
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=600,
    )


def test_the_guide_adapter_passes_the_check(tmp_path: Path) -> None:
    files = write_guide_files(tmp_path)
    assert set(files) == {"mylab_losses.py", "recon_adapter.py"}
    done = check(tmp_path, "--profile", "dev", "--max-examples", "15", "--no-database")
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
