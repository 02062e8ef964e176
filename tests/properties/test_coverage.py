"""Coverage guards: every term and parameter of the registries is reached by the zoo and
named by the spec's identities or the suite's invariants, and the independent API module
declares the seed's fields.

These replace lists kept by hand: a term or parameter added to ``spec`` without a zoo
mistake that touches it, or without any identity or invariant that speaks of it, fails
here, naming what is missing.
"""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
import torch

from properties.api import INVARIANTS as API_INVARIANTS
from properties.config import ReconstructionLossConfig
from properties.invariants import INVARIANTS
from properties.zoo.api.correct import api
from properties.zoo.textbook import MISTAKES, textbook_losses
from spec.api import CONFIG_CLASSES
from spec.identities import IDENTITIES
from spec.parameters import PARAMETERS, Parameter
from spec.terms import TERMS, Output
from spec.terms import distinct_weights as spread_weights

#: two values of each parameter, both valid with any input: its first and last edge values
_MOVES: dict[str, tuple[float, float]] = {
    p.field: (p.edge_values[0], p.edge_values[-1]) for p in PARAMETERS
}


def _batches() -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """A few small batches with uneven lengths, an empty row and varied b (finite padding,
    so that only the mistakes' arithmetic, not NaN handling, makes a difference)."""
    generator = torch.Generator().manual_seed(0)
    batches = []
    for rows, length in ((3, 4), (4, 6)):
        l = torch.rand(rows, length, generator=generator, dtype=torch.float64) * 3 + 0.1
        b = torch.rand(rows, length, generator=generator, dtype=torch.float64) * 2 + 0.05
        mask = torch.ones(rows, length, dtype=torch.bool)
        mask[0, length // 2 :] = False
        mask[1, 0] = False
        mask[-1] = False
        batches.append((l, b, mask))
    return batches


def _config(**values: float) -> ReconstructionLossConfig:
    weights = spread_weights(tuple(1.0 + 0.25 * k for k in range(len(TERMS))))
    parameters = {field: low for field, (low, _) in _MOVES.items()}
    return ReconstructionLossConfig(**{**weights, **parameters, **values})


def _outputs(mistake: str | None, config: ReconstructionLossConfig) -> list[dict[str, float]]:
    return [
        {k: float(v.detach()) for k, v in textbook_losses(l, b, m, config, mistake=mistake).items()}
        for l, b, m in _batches()
    ]


def _differ(x: float, y: float) -> bool:
    return not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("parameter", PARAMETERS, ids=lambda p: p.field)
def test_every_parameter_has_two_values_that_move_the_outputs(parameter: Parameter) -> None:
    low, high = _MOVES[parameter.field]
    assert low != high, f"{parameter.field}: its draw has a single valid edge value"
    at_low, at_high = (_outputs(None, _config(**{parameter.field: v})) for v in (low, high))
    assert any(
        _differ(x[name], y[name]) for x, y in zip(at_low, at_high, strict=True) for name in x
    ), f"{parameter.field} = {low} and {high} give the same outputs"


def _changed_terms(mistake: str, config: ReconstructionLossConfig) -> set[str]:
    right, wrong = _outputs(None, config), _outputs(mistake, config)
    return {
        term.name
        for term in TERMS
        if any(_differ(r[term.name], w[term.name]) for r, w in zip(right, wrong, strict=True))
    }


@pytest.mark.parametrize("term", TERMS, ids=lambda t: t.name)
def test_every_term_is_changed_by_a_zoo_mistake_of_its_own(term: Output) -> None:
    """A mistake of the term's own: one that changes it and fewer than half of the terms (a
    mistake most terms share, such as counting padding, does not count for any of them)."""
    config = _config()
    own = [
        mistake
        for mistake in MISTAKES
        if term.name in (changed := _changed_terms(mistake, config))
        and len(changed) < len(TERMS) / 2
    ]
    assert own, (
        f"no mistake of properties/zoo/textbook.py changes {term.name} and fewer than half of "
        "the terms: add one of the slips people make in its formula"
    )


@pytest.mark.parametrize("parameter", PARAMETERS, ids=lambda p: p.field)
def test_every_parameter_is_misread_by_a_zoo_mistake(parameter: Parameter) -> None:
    """A mistake concerns a parameter when moving it moves some output of the mistaken
    stack by a different amount than the correct one's."""
    low, high = _MOVES[parameter.field]
    configs = _config(**{parameter.field: low}), _config(**{parameter.field: high})
    right = [_outputs(None, c) for c in configs]

    def misreads(mistake: str) -> bool:
        wrong = [_outputs(mistake, c) for c in configs]
        for r0, r1, w0, w1 in zip(*right, *wrong, strict=True):
            if any(_differ(r1[k] - r0[k], w1[k] - w0[k]) for k in r0):
                return True
        return False

    assert any(misreads(m) for m in MISTAKES), (
        f"no mistake of properties/zoo/textbook.py reads {parameter.field} wrongly"
    )


def _speaks_of(text: str, *names: str) -> bool:
    """``text`` names one of ``names`` as a word of its own (``c`` is not in ``scale``)."""
    return any(
        name and re.search(rf"(?<![A-Za-z_\\]){re.escape(name)}(?![A-Za-z_])", text)
        for name in names
    )


def _specific(texts: list[str], names: dict[str, tuple[str, ...]], name: str) -> list[str]:
    """The texts that name ``name`` and not every one of ``names`` (a statement written
    over the whole registry, such as linearity in l, names each term without saying
    anything of one)."""
    return [
        text
        for text in texts
        if _speaks_of(text, *names[name]) and not all(_speaks_of(text, *n) for n in names.values())
    ]


@pytest.mark.parametrize("term", TERMS, ids=lambda t: t.name)
def test_every_term_is_named_by_an_identity_or_invariant_of_its_own(term: Output) -> None:
    texts = [i.statement + " " + i.latex for i in IDENTITIES]
    texts += [i.statement for i in (*INVARIANTS, *API_INVARIANTS)]
    names = {t.name: (t.latex, t.name, t.weight_field or "") for t in TERMS}
    assert _specific(texts, names, term.name), (
        f"no identity of spec/identities.py or invariant names {term.name} ({term.latex}) "
        "without naming every term"
    )


@pytest.mark.parametrize("parameter", PARAMETERS, ids=lambda p: p.field)
def test_every_parameter_is_named_by_an_identity_or_invariant_of_its_own(
    parameter: Parameter,
) -> None:
    texts = [i.latex for i in IDENTITIES]
    texts += [i.statement for i in (*INVARIANTS, *API_INVARIANTS)]
    names = {p.field: (p.latex, p.field) for p in PARAMETERS}
    assert _specific(texts, names, parameter.field), (
        f"no identity or invariant names {parameter.field} ({parameter.latex}) without naming "
        "every parameter"
    )


@pytest.mark.parametrize("class_name", CONFIG_CLASSES)
def test_the_independent_api_module_declares_the_seeds_fields(class_name: str) -> None:
    declared = [(f.name, f.default) for f in CONFIG_CLASSES[class_name]]
    cls = getattr(api(), class_name)
    found = [
        (f.name, None if f.default is dataclasses.MISSING else f.default)
        for f in dataclasses.fields(cls)
    ]
    assert found == declared, f"properties/zoo/api/correct.py's {class_name}"


def test_every_zoo_entry_has_the_words_its_report_must_name_it_by() -> None:
    from properties.zoo.api.wrong import WRONG_APIS
    from properties.zoo.reported import names_mistake, phrases
    from properties.zoo.wrong import WRONG_IMPLEMENTATIONS

    entries = [("check", n) for n in WRONG_IMPLEMENTATIONS]
    entries += [("check-api", n) for n in WRONG_APIS]
    assert [e for e in entries if not phrases(*e)] == []
    # the entry's own name (the target and rerun lines) does not name its mistake
    assert not names_mistake("check", "terms_detached", "check properties.zoo.wrong:terms_detached")
    assert names_mistake("check", "global_token_mean", "[1] x is the variant global-token-mean")
