"""recon_impl's term table: equal to the spec's registries, the one source of the config,
the flags and the names, and generic in the stack (a per-token term and a per-example term
weighted by a statistic of b, added by a table of their own, get their values and
gradients with no other edit)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import io
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import torch

import spec.api
import spec.terms
import tests.impl.test_batch_decomposition as test_batch_decomposition
import tests.impl.test_distributed as test_distributed
import tests.impl.test_hand_computed as test_hand_computed
import tests.impl.test_memory as test_memory
import tests.impl.test_stack as test_stack
from recon_impl import (
    DIAGNOSTIC_NAMES,
    RECONSTRUCTION_LOSS_NAMES,
    RECONSTRUCTION_TERM_NAMES,
    ReconstructionLossConfig,
    ReconstructionLosses,
    add_reconstruction_loss_arguments,
)
from recon_impl.stack import Plan, ReconstructionStack, stack_values
from recon_impl.terms import (
    CONFIG_FIELDS,
    DEFAULTS,
    FLAGS,
    INVERSE_SURPRISAL,
    PARAMETERS,
    RULES,
    TERMS,
    TOTAL_NAME,
    ExampleDivisor,
    Term,
    layout_of,
)
from recon_impl.trainer_flags import RECONSTRUCTION_FLAGS
from recon_impl.validation import raise_for_invalid_values
from tests.impl.configs import EVERY_TERM_CONFIG, EVERY_WEIGHT

ROOT = Path(__file__).resolve().parents[2]


# --- the table is the spec's ---------------------------------------------------------------


def test_terms_are_the_specs() -> None:
    ours = [(t.name, t.weight_field, t.flag) for t in TERMS]
    theirs = [(t.name, t.weight_field, t.flag) for t in spec.terms.TERMS]
    assert ours == theirs
    assert DIAGNOSTIC_NAMES == spec.terms.DIAGNOSTIC_NAMES
    assert TOTAL_NAME == spec.terms.TOTAL_NAME
    assert RECONSTRUCTION_LOSS_NAMES == spec.terms.LOSS_NAMES


def test_fields_defaults_rules_and_flags_are_the_specs() -> None:
    theirs = [(f.name, f.default, f.rule, f.flag) for f in spec.api.RECONSTRUCTION_FIELDS]
    weights = [(t.weight_field, t.default, "non-negative", t.flag) for t in TERMS]
    parameters = [(p.field, p.default, p.rule, p.flag) for p in PARAMETERS]
    assert weights + parameters == theirs
    assert [(name, DEFAULTS[name], RULES[name]) for name in CONFIG_FIELDS] == [
        (f.name, f.default, f.rule) for f in spec.api.RECONSTRUCTION_FIELDS
    ]


# --- everything else derives from it ----------------------------------------------------------


def test_config_fields_and_defaults_derive_from_the_table() -> None:
    fields = dataclasses.fields(ReconstructionLossConfig)
    assert tuple(f.name for f in fields) == CONFIG_FIELDS
    assert {f.name: f.default for f in fields} == DEFAULTS
    assert ReconstructionLossConfig().to_dict() == DEFAULTS
    doc = ReconstructionLossConfig.__doc__ or ""
    assert all(f"{name}:" in doc for name in CONFIG_FIELDS)


@pytest.mark.parametrize("field", CONFIG_FIELDS)
def test_each_field_is_validated_by_its_rule(field: str) -> None:
    bad, rule = (-1.0, ">= 0") if RULES[field] == "non-negative" else (0.0, "> 0")
    with pytest.raises(ValueError, match=rf"ReconstructionLossConfig\.{field} must be {rule}"):
        ReconstructionLossConfig(**{field: bad})


def test_flags_and_their_help_derive_from_the_table() -> None:
    expected = {t.flag: (t.weight_field, t.help) for t in TERMS}
    expected |= {p.flag: (p.field, p.help) for p in PARAMETERS if p.flag is not None}
    assert RECONSTRUCTION_FLAGS == FLAGS == expected
    parser = argparse.ArgumentParser()
    add_reconstruction_loss_arguments(parser)
    actions = {a.option_strings[0]: a for a in parser._actions if a.option_strings}
    for flag, (field, meaning) in expected.items():
        assert actions[flag].dest == field and actions[flag].default == DEFAULTS[field]
        assert actions[flag].help == f"{meaning} (default: %(default)s)"


def test_names_bundle_and_plan_derive_from_the_table() -> None:
    assert tuple(t.name for t in TERMS) == RECONSTRUCTION_TERM_NAMES
    assert (*RECONSTRUCTION_TERM_NAMES, *DIAGNOSTIC_NAMES, TOTAL_NAME) == RECONSTRUCTION_LOSS_NAMES
    assert tuple(f.name for f in dataclasses.fields(ReconstructionLosses)) == (
        RECONSTRUCTION_LOSS_NAMES
    )
    plan = Plan.of(EVERY_TERM_CONFIG, torch.float64, validate=False)
    assert plan.weights == {t.name: EVERY_WEIGHT[t.weight_field] for t in TERMS}
    assert plan.parameters == {p.field: getattr(EVERY_TERM_CONFIG, p.field) for p in PARAMETERS}
    assert plan.layout.names == RECONSTRUCTION_LOSS_NAMES


# --- every term weighted in every shared config ---------------------------------------------


def _benchmark():
    spec_ = importlib.util.spec_from_file_location(
        "bench_stack", ROOT / "benchmarks/bench_stack.py"
    )
    assert spec_ is not None and spec_.loader is not None
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module


SHARED_CONFIGS = {
    "configs.EVERY_TERM_CONFIG": EVERY_TERM_CONFIG,
    "test_hand_computed.ALL_WEIGHTS": ReconstructionLossConfig(**test_hand_computed.ALL_WEIGHTS),
    "test_memory.WEIGHTS": ReconstructionLossConfig(**test_memory.WEIGHTS),
    "test_distributed.CONFIG": test_distributed.CONFIG,
}


@pytest.mark.parametrize("where", SHARED_CONFIGS)
def test_every_term_is_weighted_in_each_shared_config(where: str) -> None:
    config = SHARED_CONFIGS[where]
    assert [t.name for t in TERMS if getattr(config, t.weight_field) == 0] == [], where


#: the shared configs whose parameters matter: each takes every parameter off its default
PARAMETER_CONFIGS = {
    "configs.EVERY_TERM_CONFIG": EVERY_TERM_CONFIG,
    "test_distributed.CONFIG": test_distributed.CONFIG,
    "test_stack.config": test_stack.config(1.3),
    "test_batch_decomposition.config": test_batch_decomposition.config(1.3),
}


@pytest.mark.parametrize("where", PARAMETER_CONFIGS)
def test_every_parameter_is_off_its_default_in_each_shared_config(where: str) -> None:
    # a parameter left at its default in every test is a parameter no test reads
    config = PARAMETER_CONFIGS[where]
    assert [p.field for p in PARAMETERS if getattr(config, p.field) == p.default] == [], where


def test_every_term_is_weighted_in_the_benchmark() -> None:
    bench = _benchmark()
    for alpha in bench.ALPHAS:
        assert all(getattr(bench.config(alpha), t.weight_field) != 0 for t in TERMS)


def test_the_benchmark_runs_at_a_tiny_size() -> None:
    out = io.StringIO()
    argv = ["--only", "stack", "--rounds", "1", "--batch", "2", "--length", "8", "--threads", "1"]
    threads = torch.get_num_threads()
    try:
        with redirect_stdout(out):
            assert _benchmark().main(argv) == 0
    finally:
        torch.set_num_threads(threads)
    text = out.getvalue()
    assert "## stack: forward + backward, B=2, T=8" in text
    assert all(f"| {alpha:g} |" in text for alpha in (0.0, 0.5, 1.0, 2.0)), text
    assert "targets:" in text


# --- a per-token term, added by a table of its own ------------------------------------------


def _token_inverse_surprisal(b_valid, valid, count, plan):
    """k_it = 1 / (n_i (b_it + eps)) at valid positions: R = mean_i mean_t l_it/(b_it + eps)."""
    eps = plan.parameters["example_inverse_surprisal_epsilon"]
    return torch.where(valid, 1.0 / ((b_valid + eps) * count[:, None]), 0.0)


PER_TOKEN = Term(
    "token_inverse_surprisal_loss",
    "tis",
    "token_inverse_surprisal_weight",
    "--token-inverse-surprisal-weight",
    "a per-token weight",
    0.0,
    "per-token",
    token_coefficient=_token_inverse_surprisal,
)
# the same, divided by c and by each example's bbar + eps: every part of the generic path
SCALED_PER_TOKEN = dataclasses.replace(
    PER_TOKEN,
    name="scaled_token_inverse_surprisal_loss",
    scale_field="zfree_reference_scale",
    divisor=INVERSE_SURPRISAL,
)


def _largest_b(b_valid, valid, count, plan):
    """max_t b_it + eps: a statistic of b that the statistics stage does not hold."""
    return b_valid.amax(1) + plan.parameters["example_inverse_surprisal_epsilon"]


# a per-example term whose divisor is built from b: R = mean_i lbar_i / (max_t b_it + eps)
PER_EXAMPLE = Term(
    "largest_surprisal_normalized_loss",
    "max",
    "largest_surprisal_normalized_weight",
    "--largest-surprisal-normalized-weight",
    "a per-example weight from the largest b",
    0.0,
    "per-example",
    divisor=ExampleDivisor("max b + epsilon", from_tokens=_largest_b),
)
TABLE = (*TERMS, PER_TOKEN, SCALED_PER_TOKEN, PER_EXAMPLE)


def _batch():
    generator = torch.Generator().manual_seed(3)
    l = torch.rand(5, 7, generator=generator, dtype=torch.float64) * 4
    b = torch.rand(5, 7, generator=generator, dtype=torch.float64) * 3
    mask = torch.rand(5, 7, generator=generator) < 0.7
    mask[:, 0], mask[4] = True, False  # every row keeps a token but the last, which is dropped
    b[2] = 0.0  # no share mass: uniform shares
    return l, b, mask


def _plan(alpha: float, table=TABLE) -> Plan:
    config = dataclasses.replace(EVERY_TERM_CONFIG, token_weight_alpha=alpha)
    weights = {t.name: float(index + 1) / 4 for index, t in enumerate(table)}
    parameters = {p.field: getattr(config, p.field) for p in PARAMETERS}
    return Plan(torch.float64, parameters, weights, False, layout_of(table))


def test_a_term_of_the_wrong_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="token_coefficient exactly for kind 'per-token'"):
        layout_of((dataclasses.replace(PER_TOKEN, kind="per-example"),))
    with pytest.raises(ValueError, match="its divisor needs one of compute, from_tokens"):
        layout_of((dataclasses.replace(PER_EXAMPLE, divisor=ExampleDivisor("none")),))


@pytest.mark.parametrize("alpha", [0.0, 1.3])
def test_a_per_token_term_has_its_value_and_gradient(alpha: float) -> None:
    l, b, mask = _batch()
    plan = _plan(alpha)
    leaf = l.clone().requires_grad_()
    outputs = dict(
        zip(plan.layout.names, ReconstructionStack.apply(leaf, b, mask, plan), strict=True)
    )
    # the values: the design's terms as reconstruction_losses has them, the new ones by hand
    eps, c = (
        plan.parameters["example_inverse_surprisal_epsilon"],
        plan.parameters["zfree_reference_scale"],
    )
    n = mask.sum(1).clamp(min=1)
    kept = mask.any(1)
    per_example = torch.where(mask, l / (b + eps), 0.0).sum(1) / n
    bbar = torch.where(mask, b, 0.0).sum(1) / n
    largest = torch.where(mask, b, 0.0).amax(1) + eps
    lbar = torch.where(mask, l, 0.0).sum(1) / n
    expected = {
        PER_TOKEN.name: per_example[kept].mean(),
        SCALED_PER_TOKEN.name: (per_example / (bbar + eps))[kept].mean() / c,
        PER_EXAMPLE.name: (lbar / largest)[kept].mean(),
    }
    design, _, _ = stack_values(l, b, mask, _plan(alpha, TERMS))
    expected |= {name: design[name] for name in (*RECONSTRUCTION_TERM_NAMES, *DIAGNOSTIC_NAMES)}
    expected[TOTAL_NAME] = sum(plan.weights[t.name] * expected[t.name] for t in TABLE)
    for name, value in expected.items():
        torch.testing.assert_close(outputs[name], value, rtol=1e-13, atol=0.0)
    # the gradient of a mix of every term and the total: the analytic backward against
    # autograd through the two stages, and the per-token terms' closed form alone
    generator = torch.Generator().manual_seed(int(alpha * 10))
    upstream = {t.name: torch.randn((), generator=generator, dtype=torch.float64) for t in TABLE}
    upstream[TOTAL_NAME] = torch.tensor(0.75, dtype=torch.float64)
    analytic = _grad(outputs, upstream, leaf)
    reference_leaf = l.clone().requires_grad_()
    reference, _, _ = stack_values(reference_leaf, b, mask, plan)
    expected_grad = _grad(reference, upstream, reference_leaf)
    torch.testing.assert_close(analytic, expected_grad, rtol=1e-12, atol=1e-15)
    assert torch.all(analytic[~mask] == 0)
    # alone: dR/dl_it = k_it / (C d_i B') (per-token), 1 / (d_i B' n_i) (per-example)
    coefficient = torch.where(mask, 1.0 / ((b + eps) * n[:, None]), 0.0) / kept.sum()
    for term, closed in (
        (PER_TOKEN, coefficient),
        (SCALED_PER_TOKEN, coefficient / (c * (bbar + eps))[:, None]),
        (PER_EXAMPLE, torch.where(mask, 1.0 / (kept.sum() * n * largest)[:, None], 0.0)),
    ):
        fresh = l.clone().requires_grad_()
        values = dict(
            zip(plan.layout.names, ReconstructionStack.apply(fresh, b, mask, plan), strict=True)
        )
        (grad,) = torch.autograd.grad(values[term.name], fresh)
        torch.testing.assert_close(grad, closed, rtol=1e-13, atol=0.0)


def _grad(outputs, upstream, leaf) -> torch.Tensor:
    names = list(upstream)
    (grad,) = torch.autograd.grad(
        [outputs[name] for name in names], leaf, [upstream[name] for name in names]
    )
    return grad


def _squared_largest_b(b_valid, valid, count, plan):
    """1 + max_t b_it^2: a divisor built from b that overflows float32 for b past 2e19."""
    return 1.0 + b_valid.amax(1) ** 2


def test_a_divisor_built_from_b_that_overflows_is_flagged_and_named() -> None:
    squared = dataclasses.replace(
        PER_EXAMPLE, divisor=ExampleDivisor("1 + max b^2", from_tokens=_squared_largest_b)
    )
    l, b, mask = (t.float() if t.is_floating_point() else t for t in _batch())
    plan = Plan(
        torch.float32, _plan(1.0).parameters, {squared.name: 1.0}, True, layout_of((squared,))
    )
    _, fine, _ = stack_values(l, b, mask, plan)
    assert torch.isfinite(fine)
    b[1, 0] = 1e20  # within float32, but its square is not: R would be 0 without a word
    _, flagged, (stats, _) = stack_values(l, b, mask, plan)
    assert not torch.isfinite(flagged)
    with pytest.raises(
        ValueError, match=r"zfree_token_nll is too large.*example 1's divisor 1 \+ max b\^2"
    ):
        raise_for_invalid_values(
            l,
            b,
            mask,
            {},
            dtype=torch.float32,
            epsilon=1e-8,
            scale=1.0,
            token_divisors=lambda: stats.token_divisors,
        )


def test_every_classified_mutant_is_still_a_mutant_of_the_source() -> None:
    # benchmarks/mutation_score.py keys each classified survivor by its source line: a line
    # changed since (a term added to the checksum, say) would leave a classification that
    # matches nothing, and its survivor unexplained, until a two-hour run shows it
    path = Path(__file__).parents[2] / "benchmarks" / "mutation_score.py"
    loader = importlib.util.spec_from_file_location("mutation_score", path)
    assert loader is not None and loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    sys.modules["mutation_score"] = module  # its dataclasses look their module up
    loader.loader.exec_module(module)
    keys = {mutant.key for mutant in module.mutants(module.ROOT, module.FILES)}
    stale = sorted((set(module.EQUIVALENT) | set(module.OUTSIDE_CONTRACT)) - keys)
    assert not stale, f"classified in benchmarks/mutation_score.py, no longer mutants: {stale}"
