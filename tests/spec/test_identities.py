"""One test per identity of MATH.md: each runs the identity's proof (spec/identities.py).

A proof raises AssertionError when the current definitions no longer satisfy the identity,
so these tests fail when a formula changes. ``spec.IDENTITIES`` names each of these tests
(``Identity.test``); ``test_catalogue_names_these_tests`` keeps the two in step.
"""

from __future__ import annotations

import sys

from spec.identities import IDENTITIES, IDENTITY_BY_ID


def _prove(identity_id: str) -> None:
    checks = IDENTITY_BY_ID[identity_id].proof()
    assert checks, f"the proof of {identity_id} checked nothing"


def test_catalogue_names_these_tests() -> None:
    module = sys.modules[__name__]
    here = {name for name in dir(module) if name.startswith("test_")}
    named = {identity.test_name for identity in IDENTITIES}
    assert named <= here, f"identities without a test: {sorted(named - here)}"
    assert here - named == {"test_catalogue_names_these_tests"}
    assert len(IDENTITY_BY_ID) == len(IDENTITIES), "identity ids must be unique"
    for identity in IDENTITIES:
        assert identity.test == f"tests/spec/test_identities.py::{identity.test_name}"


def test_alpha0_uniform_shares() -> None:
    _prove("alpha0-uniform-shares")


def test_alpha0_kappa_one() -> None:
    _prove("alpha0-kappa-one")


def test_alpha0_tok_equals_raw() -> None:
    _prove("alpha0-tok-equals-raw")


def test_alpha0_cc_equals_dist() -> None:
    _prove("alpha0-cc-equals-dist")


def test_alpha1_linear_shares() -> None:
    _prove("alpha1-linear-shares")


def test_shares_sum_to_one() -> None:
    _prove("shares-sum-to-one")


def test_zero_to_the_zero() -> None:
    _prove("zero-to-the-zero")


def test_zero_base_uniform_fallback() -> None:
    _prove("zero-base-uniform-fallback")


def test_baseline_dist_one() -> None:
    _prove("baseline-dist-one")


def test_baseline_cc_one() -> None:
    _prove("baseline-cc-one")


def test_baseline_ex() -> None:
    _prove("baseline-ex")


def test_baseline_ex_one_at_eps0() -> None:
    _prove("baseline-ex-one-at-eps0")


def test_baseline_tok_equals_base() -> None:
    _prove("baseline-tok-equals-base")


def test_gradient_closed_form() -> None:
    _prove("gradient-closed-form")


def test_b_scale_invariance() -> None:
    _prove("b-scale-invariance")


def test_kappa_at_least_one() -> None:
    _prove("kappa-at-least-one")


def test_kappa_monotone_in_alpha() -> None:
    _prove("kappa-monotone-in-alpha")


def test_alpha_infinity_concentration() -> None:
    _prove("alpha-infinity-concentration")


def test_linearity_in_l() -> None:
    _prove("linearity-in-l")


def test_linearity_in_weights() -> None:
    _prove("linearity-in-weights")


def test_token_permutation_invariance() -> None:
    _prove("token-permutation-invariance")


def test_example_permutation_invariance() -> None:
    _prove("example-permutation-invariance")


def test_padding_invariance() -> None:
    _prove("padding-invariance")


def test_batch_mean_form() -> None:
    _prove("batch-mean-form")


def test_batch_decomposition() -> None:
    _prove("batch-decomposition")


def test_family_instances() -> None:
    _prove("family-instances")


def test_policy_matched_scale_baseline_one() -> None:
    _prove("policy-matched-scale-baseline-one")


def test_policy_matched_scale_of_cc() -> None:
    _prove("policy-matched-scale-of-cc")
