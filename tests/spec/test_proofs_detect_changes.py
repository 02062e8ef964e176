"""The proofs fail when a formula changes: a few deliberate mistakes, each one caught.

Each test swaps one definition for a wrong one (monkeypatch undoes it) and checks that the
proofs of the identities that depend on it now raise ``AssertionError``.
"""

from __future__ import annotations

import pytest

import spec.definitions as definitions
import spec.proofs as proofs
from spec.identities import IDENTITY_BY_ID


def _fails(identity_id: str) -> None:
    with pytest.raises(AssertionError):
        IDENTITY_BY_ID[identity_id].proof()


def test_wrong_tempering_exponent(monkeypatch: pytest.MonkeyPatch) -> None:
    original = definitions.share

    def share(b_t, tokens, alpha, *, zero_base=False):
        return original(b_t, tokens, alpha + 1, zero_base=zero_base)

    monkeypatch.setattr(definitions, "share", share)
    _fails("alpha0-uniform-shares")
    _fails("alpha1-linear-shares")


def test_kappa_without_its_normalization(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(definitions.Example, "kappa", property(lambda e: e.btok))
    _fails("alpha0-kappa-one")
    _fails("baseline-cc-one")
    _fails("b-scale-invariance")


def test_bbar_without_its_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        definitions.Example, "bbar", property(lambda e: e.tokens.total(lambda tok: tok.base))
    )
    _fails("baseline-dist-one")
    _fails("baseline-ex")


def test_gradient_without_the_batch_mean(monkeypatch: pytest.MonkeyPatch) -> None:
    original = proofs.token_gradient
    monkeypatch.setattr(
        proofs,
        "token_gradient",
        lambda e, tok, kept, *args: original(e, tok, kept, *args) * kept,
    )
    _fails("gradient-closed-form")


def test_example_term_without_epsilon(monkeypatch: pytest.MonkeyPatch) -> None:
    original = proofs.loss_terms
    name = "example_inverse_surprisal_weighted_reconstruction_loss"

    def loss_terms(batch, params=definitions.SYMBOLIC):
        terms = original(batch, params)
        terms[name] = batch.mean(lambda e: e.lbar / e.bbar)
        return terms

    monkeypatch.setattr(proofs, "loss_terms", loss_terms)
    _fails("baseline-ex")
    _fails("family-instances")


def test_concentration_term_with_kappa_squared(monkeypatch: pytest.MonkeyPatch) -> None:
    original = proofs.loss_terms
    name = "normalized_concentration_corrected_token_weighted_reconstruction_loss"

    def loss_terms(batch, params=definitions.SYMBOLIC):
        terms = original(batch, params)
        terms[name] = batch.mean(lambda e: e.ltok / e.kappa**2) / params.c
        return terms

    monkeypatch.setattr(proofs, "loss_terms", loss_terms)
    # (alpha0-cc-equals-dist still holds: kappa = 1 at alpha = 0.)
    _fails("baseline-cc-one")
    _fails("family-instances")


def test_uniform_fallback_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    original = definitions.share

    def share(b_t, tokens, alpha, *, zero_base=False):
        return original(b_t, tokens, alpha)  # the 0/0 formula even on an all-zero row

    monkeypatch.setattr(definitions, "share", share)
    _fails("zero-base-uniform-fallback")
