"""What an error message names (docs/API.md, "What an error names"): whole words, and no
other argument of the call."""

from __future__ import annotations

import pytest

from properties.messages import names_word, naming


@pytest.mark.parametrize(
    ("message", "name", "named"),
    [
        ("token_nll must be finite", "token_nll", True),
        ("zfree_token_nll must be finite", "token_nll", False),
        ("router_marginal_kl_to_prior must be given", "kl", False),
        ("kl must be given: beta = 1.0", "kl", True),
        ("config.token_weighted_weight must be >= 0", "token_weighted_weight", True),
        (
            "normalized_concentration_corrected_token_weighted_weight must be >= 0",
            "token_weighted_weight",
            False,
        ),
        ("ref_nll must be finite", "nll", False),
        ("`nll` must be finite", "nll", True),
        ("nll's dtype must be floating", "nll", True),
        ("token_nll2 must be finite", "token_nll", False),
        ("Token_nll must be finite", "token_nll", False),
    ],
)
def test_a_name_is_named_as_a_whole_word(message: str, name: str, named: bool) -> None:
    assert names_word(message, name) is named


def test_a_message_naming_another_argument_instead_is_wrong() -> None:
    found = naming("zfree_token_nll must be finite", ("token_nll",), [("zfree_token_nll",)])
    assert not found.named and found.wrong == ("zfree_token_nll",)
    assert found.problem == "must name token_nll, but names zfree_token_nll instead"


def test_a_message_naming_another_argument_as_well_is_wrong() -> None:
    message = "token_nll and zfree_token_nll must be finite"
    found = naming(message, ("token_nll",), [("zfree_token_nll",), ("mask",)])
    assert found.named and found.wrong == ("zfree_token_nll",)
    assert "as well" in found.problem


def test_an_own_name_counts_for_the_argument_and_for_the_others() -> None:
    others = [("zfree_token_nll", "ref_nll")]
    assert naming("nll must be finite", ("token_nll", "nll"), others).problem is None
    found = naming("ref_nll must be finite", ("token_nll", "nll"), others)
    assert found.wrong == ("ref_nll",) and not found.named


def test_a_message_that_names_nothing_says_what_it_must_name() -> None:
    assert naming("invalid input", ("mask",)).problem == "must name mask"
