"""docs/SPEC.md: current with the spec, byte-identical on regeneration, complete."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sympy as sp

from properties.cli import main as cli_main
from spec.document import (
    default_path,
    recorded_sympy_version,
    render_spec_document,
    write_spec_document,
)
from spec.identities import IDENTITIES

COMMITTED = default_path()


def _skip_unless_same_sympy() -> str:
    text = COMMITTED.read_text(encoding="utf-8")
    recorded = recorded_sympy_version(text)
    if recorded != sp.__version__:
        pytest.skip(
            f"docs/SPEC.md was rendered with sympy {recorded}, this is sympy {sp.__version__}: "
            "its LaTeX may differ between releases"
        )
    return text


def test_committed_document_is_current() -> None:
    committed = _skip_unless_same_sympy()
    assert committed == render_spec_document(), "docs/SPEC.md is stale: run `recon-spec doc`"


def test_cli_check_passes_on_the_committed_document(capsys: pytest.CaptureFixture[str]) -> None:
    _skip_unless_same_sympy()
    assert cli_main(["doc", "--check"]) == 0
    assert capsys.readouterr().out == ""


def test_regeneration_is_byte_identical(tmp_path: Path) -> None:
    first, second = tmp_path / "a.md", tmp_path / "b.md"
    assert write_spec_document(path=first) == 0
    assert write_spec_document(path=second) == 0
    assert first.read_bytes() == second.read_bytes()
    assert write_spec_document(check=True, path=first) == 0


def test_check_reports_a_stale_or_missing_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "SPEC.md"
    assert write_spec_document(check=True, path=path) == 1
    assert not path.exists(), "check must not write"
    write_spec_document(path=path)
    path.write_text(path.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
    capsys.readouterr()
    assert write_spec_document(check=True, path=path) == 1
    output = capsys.readouterr().out
    assert output.count("\n") == 1 and "stale" in output
    assert path.read_text(encoding="utf-8").endswith("edited\n")


def test_document_lists_every_identity_with_its_test() -> None:
    text = render_spec_document()
    for identity in IDENTITIES:
        assert f"### {identity.id}\n" in text
        assert f"Test: `{identity.test}`." in text


def test_document_records_sympy_and_no_dates() -> None:
    text = render_spec_document()
    assert recorded_sympy_version(text) == sp.__version__
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text)


def test_figures_the_document_shows_are_committed() -> None:
    images = re.findall(r"!\[[^\]]*\]\((img/[^)]+\.png)\)", render_spec_document())
    assert images
    for image in images:
        png = COMMITTED.parent / image
        assert png.is_file(), f"{png} is missing: run `python -m spec.plots`"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
