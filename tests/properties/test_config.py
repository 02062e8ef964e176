"""The suite owns its inputs: its config record comes from the spec's registries, and only
the default target's adapter imports ``recon_impl``."""

from __future__ import annotations

import ast
import dataclasses
import math
from pathlib import Path

import pytest
import torch

import properties
from properties.config import ReconstructionLossConfig
from properties.target import DEFAULT_TARGET, adapted_target, load_target
from spec.api import RECONSTRUCTION_CONFIG, RECONSTRUCTION_FIELDS
from spec.parameters import PARAMETERS, RULES
from spec.terms import TERMS

PACKAGE = Path(properties.__file__).parent
#: the one module of properties that imports recon_impl: the default target's adapter
ADAPTER = PACKAGE / "default_target.py"


def _imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return modules


def test_only_the_default_target_adapter_imports_recon_impl() -> None:
    importing = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if any(m == "recon_impl" or m.startswith("recon_impl.") for m in _imported_modules(path))
    )
    assert importing == [str(ADAPTER.relative_to(PACKAGE))]


def test_the_import_scan_sees_every_form_of_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from recon_impl.stack import Plan\nimport recon_impl as r\n")
    assert _imported_modules(module) == {"recon_impl.stack", "recon_impl"}


def test_the_record_has_every_field_of_the_registries_in_order_with_the_defaults() -> None:
    declared = dataclasses.fields(ReconstructionLossConfig)
    assert [f.name for f in declared] == [
        *(term.weight_field for term in TERMS),
        *(p.field for p in PARAMETERS),
    ]
    assert [f.name for f in declared] == [f.name for f in RECONSTRUCTION_FIELDS]
    default = ReconstructionLossConfig()
    assert default.values() == {f.name: f.default for f in RECONSTRUCTION_FIELDS}
    assert ReconstructionLossConfig.__name__ == RECONSTRUCTION_CONFIG
    with pytest.raises(dataclasses.FrozenInstanceError):
        default.raw_weight = 2.0  # type: ignore[misc]


@pytest.mark.parametrize("spec_field", RECONSTRUCTION_FIELDS, ids=lambda f: f.name)
def test_the_record_validates_each_field_by_the_spec_rule(spec_field) -> None:
    bad = -1.0 if spec_field.rule == "non-negative" else 0.0
    with pytest.raises(ValueError) as raised:
        ReconstructionLossConfig(**{spec_field.name: bad})
    argument = f"{RECONSTRUCTION_CONFIG}.{spec_field.name}"
    assert str(raised.value) == RULES[spec_field.rule].message(argument, bad)
    for value in (math.nan, math.inf, True, "1", None, 10**400):
        with pytest.raises(ValueError, match=spec_field.name):
            ReconstructionLossConfig(**{spec_field.name: value})
    # a valid integer is kept as the float it stands for
    assert getattr(ReconstructionLossConfig(**{spec_field.name: 2}), spec_field.name) == 2.0


@pytest.mark.parametrize(
    "name",
    [DEFAULT_TARGET, "recon_impl.reconstruction:reconstruction_losses"],
)
def test_recon_impl_stack_is_checked_through_its_adapter_however_it_is_named(name) -> None:
    from properties import default_target

    assert adapted_target(name) == "properties.default_target:reconstruction_losses"
    assert load_target(name) == (name, default_target.reconstruction_losses)
    assert load_target(None)[1] is default_target.reconstruction_losses


def test_other_targets_are_loaded_as_named() -> None:
    assert adapted_target("properties.zoo.wrong:alpha_ignored") == (
        "properties.zoo.wrong:alpha_ignored"
    )
    assert adapted_target("recon_impl:token_nll_from_logits") == "recon_impl:token_nll_from_logits"


def test_the_adapter_gives_recon_impl_the_same_config() -> None:
    import recon_impl
    from properties.default_target import recon_impl_config, reconstruction_losses

    values = {f.name: 0.5 + k for k, f in enumerate(RECONSTRUCTION_FIELDS)}
    converted = recon_impl_config(ReconstructionLossConfig(**values))
    assert converted == recon_impl.ReconstructionLossConfig(**values)
    l, b = torch.tensor([[2.0, 4.0, 1.0]]), torch.tensor([[1.0, 3.0, 0.5]])
    mask = torch.tensor([[True, True, False]])
    ours = reconstruction_losses(l, b, mask, ReconstructionLossConfig(**values))
    theirs = recon_impl.reconstruction_losses(l, b, mask, converted)
    assert {k: v.item() for k, v in ours.items()} == {k: v.item() for k, v in theirs.items()}


@pytest.mark.parametrize("module_name", ["properties.config", "properties.default_target"])
def test_docstring_examples(module_name) -> None:
    import doctest
    import importlib

    module = importlib.import_module(module_name)
    failures, tried = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried > 0 and failures == 0
