"""The invariant catalog: ids, statements and pointers into the spec."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

import spec
from properties.api import INVARIANTS as API_INVARIANTS
from properties.api.invariant import API_GROUPS
from properties.invariant import GROUPS
from properties.invariants import INVARIANTS, by_id, select

DOCS = Path(__file__).parents[2] / "docs"


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but - and _ dropped."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).strip().replace(" ", "-")


def _anchors(page: str) -> set[str]:
    text = (DOCS / page).read_text()
    return {_anchor(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}


#: the sections an invariant may cite: MATH.md (the stack) and API.md (seed 001's surface)
ANCHORS = {page: _anchors(page) for page in ("MATH.md", "API.md")}
MATH_ANCHORS = ANCHORS["MATH.md"]
IDENTITY_IDS = {identity.id for identity in spec.IDENTITIES}


def test_ids_are_unique_and_stable_looking() -> None:
    ids = [i.id for i in INVARIANTS]
    assert len(ids) == len(set(ids))
    for invariant_id in ids:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", invariant_id), invariant_id


@pytest.mark.parametrize("invariant", INVARIANTS + API_INVARIANTS, ids=lambda i: i.id)
def test_every_invariant_points_at_its_statement_in_the_spec(invariant) -> None:
    assert invariant.group in (GROUPS if invariant in INVARIANTS else API_GROUPS)
    assert "\n" not in invariant.statement and len(invariant.statement) < 160
    assert invariant.all_refs
    for ref in invariant.all_refs:
        page, _, anchor = ref.partition("#")
        if anchor:
            assert anchor in ANCHORS[page], f"{ref}: no such section in docs/{page}"
        else:
            assert ref in IDENTITY_IDS, f"{ref} is not an identity of spec.IDENTITIES"


def test_selection_by_id_group_and_opt_in() -> None:
    default = select()
    assert all(not i.opt_in for i in default)
    assert {i.group for i in default} == set(GROUPS) - {"validation"}
    assert [i.id for i in select(["kappa-bounds"])] == ["kappa-bounds"]
    assert {i.group for i in select(["validation"])} == {"validation"}
    assert len(select(include_opt_in=True)) == len(INVARIANTS)
    with pytest.raises(KeyError, match="no invariant 'nope'"):
        by_id("nope")


def test_every_math_identity_is_checked_against_implementations() -> None:
    # Identities about implementations (not only about the algebra) each have an invariant.
    referenced = {ref for i in INVARIANTS for ref in i.all_refs}
    for identity in (
        "alpha0-uniform-shares",
        "alpha1-linear-shares",
        "baseline-dist-one",
        "baseline-cc-one",
        "baseline-ex",
        "linearity-in-l",
        "linearity-in-weights",
        "b-scale-invariance",
        "token-permutation-invariance",
        "example-permutation-invariance",
        "padding-invariance",
        "batch-decomposition",
        "gradient-closed-form",
        "kappa-at-least-one",
        "kappa-monotone-in-alpha",
        "alpha-infinity-concentration",
    ):
        assert identity in referenced, identity


def test_a_narrowed_domain_makes_some_invariants_not_applicable() -> None:
    import torch
    from hypothesis import settings

    from properties.default_target import reconstruction_losses
    from properties.profiles import profile_settings
    from properties.runner import run_invariant
    from properties.strategies import Domain

    quick = settings(profile_settings("ci"), max_examples=5)
    full_only = Domain(dtypes=(torch.float64,), max_alpha=10.0)
    half_only = Domain(dtypes=(torch.float16,))
    expectations = [
        ("oracle-agreement-low-precision", full_only, "not applicable"),
        ("huge-alpha-concentration", full_only, "not applicable"),
        ("oracle-agreement", full_only, "passed"),
        ("oracle-agreement", half_only, "not applicable"),
        ("oracle-agreement-low-precision", half_only, "passed"),
    ]
    for invariant_id, domain, status in expectations:
        result = run_invariant(
            by_id(invariant_id), reconstruction_losses, target="t", settings=quick, domain=domain
        )
        assert result.status == status, (invariant_id, domain, result.failure)


def _named_cases() -> list[tuple[str, object]]:
    """Every input the suite writes by hand, by where it is: the named edge cases, each
    invariant's examples (both catalogues) and the zoo's smallest witnesses."""
    from properties.cases import cases_in
    from properties.invariants.edge_cases import EDGE_CASES
    from properties.zoo import wrong
    from properties.zoo.api import smallest as api_smallest

    found = [(f"EDGE_CASES[{name!r}]", edge.case) for name, edge in EDGE_CASES.items()]
    for invariant in (*INVARIANTS, *API_INVARIANTS):
        found += [
            (f"{invariant.id}: {named.name}", case)
            for named in invariant.examples
            for case in cases_in(named.value)
        ]
    for name, entry in {**wrong.SMALLEST, **api_smallest.SMALLEST}.items():
        found += [(f"SMALLEST[{name!r}]", case) for case in cases_in(entry.witness)]
    return found


@pytest.mark.parametrize(("where", "case"), _named_cases(), ids=lambda x: str(x)[:60])
def test_a_named_input_holds_values_its_dtype_represents(where: str, case) -> None:
    # the oracle reads the values as written, the target their rounding to the dtype: a
    # value the dtype cannot hold (0.1 in float16) makes the two disagree by its rounding
    from properties.cases import round_to

    for tensor in ("token_nll", "zfree_token_nll"):
        for row in getattr(case, tensor):
            for value in row:
                if math.isfinite(value):
                    assert round_to(case.dtype, value) == value, (where, tensor, value)


@pytest.mark.parametrize(
    "narrowed",
    [
        {},
        {"max_alpha": 1.0},
        {"max_alpha": 0.0},
        {"max_loss": 1.0},
        {"max_loss": 1e-3},
        {"max_loss": 1e-30},
    ],
    ids=str,
)
def test_the_first_call_is_made_on_an_input_of_the_domain(narrowed: dict) -> None:
    # a target refuses what a narrowed domain leaves out (API.md, "What a target may raise"):
    # the plain input every worker starts with must be one it is meant for, in every dtype
    import torch

    from properties.cases import round_to
    from properties.invariants.contract import plain_input
    from properties.strategies import Domain

    for dtype in (torch.float64, torch.float32, torch.bfloat16, torch.float16):
        domain = Domain(dtypes=(dtype,), **narrowed)
        case = plain_input(domain)
        assert domain.admits(case), (narrowed, dtype, case)
        values = [v for rows in (case.token_nll, case.zfree_token_nll) for r in rows for v in r]
        assert all(round_to(dtype, v) == v for v in values), (dtype, values)
