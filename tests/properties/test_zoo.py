"""The suite tests itself: it rejects every wrong implementation of the zoo, each
invariant rejects a known witness on its own, and correct-but-different implementations
(and the bundled one) pass everything."""

from __future__ import annotations

import pytest
import torch
from hypothesis import Phase, settings

from properties.cases import LossCase
from properties.invariants import by_id, select
from properties.invariants.validation import one_rule_broken
from properties.profiles import profile_settings
from properties.runner import run_invariant
from properties.strategies import Domain
from properties.zoo import correct, validation, wrong
from properties.zoo.textbook import fresh_process
from spec.parameters import EPSILON
from spec.terms import LOSS_NAMES

#: enough examples to find a wrong implementation; no shrinking, which only matters to
#: the person reading the report
REJECT = settings(profile_settings("ci"), max_examples=40, phases=[Phase.explicit, Phase.generate])
ACCEPT = settings(profile_settings("ci"), max_examples=25)

#: for each invariant, the wrong implementation it rejects on its own (on its record)
WITNESSES = {i.id: i.witness for i in select() if i.witness is not None}


def first_failure(implementation, name: str, invariants) -> str | None:
    for invariant in invariants:
        if invariant.fresh_process:  # its input is a process's first call: start as one starts
            fresh_process()
        result = run_invariant(invariant, implementation, target=name, settings=REJECT)
        if result.status == "failed":
            return invariant.id
    return None


@pytest.mark.parametrize("name", sorted(wrong.WRONG_IMPLEMENTATIONS))
def test_every_wrong_implementation_is_rejected(name: str) -> None:
    # the invariants that name this mistake first (whose witness it is, or NAMED_BY's),
    # then the others
    def names_it(invariant) -> bool:
        return invariant.witness == name or wrong.NAMED_BY.get(name) == invariant.id

    invariants = sorted(select(), key=lambda invariant: not names_it(invariant))
    caught_by = first_failure(getattr(wrong, name), f"properties.zoo.wrong:{name}", invariants)
    assert caught_by is not None, (
        f"no invariant rejects {name}: {wrong.WRONG_IMPLEMENTATIONS[name]}"
    )


def test_every_default_invariant_has_a_witness() -> None:
    assert set(WITNESSES) == {i.id for i in select()}


@pytest.mark.parametrize(("invariant_id", "name"), sorted(WITNESSES.items()))
def test_each_invariant_rejects_its_witness_on_its_own(invariant_id: str, name: str) -> None:
    assert first_failure(getattr(wrong, name), name, [by_id(invariant_id)]) == invariant_id


#: the invariants of the gradients group whose witness no other gradient invariant rejects:
#: each guards a use of the gradient the others do not make
EXCLUSIVE = ("output-gradients", "mixed-gradient", "second-order")


@pytest.mark.parametrize("invariant_id", EXCLUSIVE)
def test_a_gradient_witness_is_rejected_by_its_invariant_alone(invariant_id: str) -> None:
    name = by_id(invariant_id).witness
    others = [i for i in select(["gradients"]) if i.id != invariant_id]
    assert first_failure(getattr(wrong, name), name, others) is None


@pytest.mark.parametrize(("name", "invariant_id"), sorted(wrong.NAMED_BY.items()))
def test_each_named_mistake_is_rejected_by_the_invariant_that_names_it(
    name: str, invariant_id: str
) -> None:
    result = run_invariant(by_id(invariant_id), getattr(wrong, name), target=name, settings=REJECT)
    assert result.status == "failed", f"{invariant_id} does not reject {name}"
    # the report names the output that is wrong (or the key that should not be there)
    named = (*LOSS_NAMES, "token_weight_alpha")
    assert any(output in result.failure.message for output in named), result.failure.message


def test_a_bad_tensor_error_must_say_its_rule_not_only_the_argument() -> None:
    from properties.default_target import reconstruction_losses

    def wrong_rule(token_nll, zfree_token_nll, mask, config):
        if isinstance(token_nll, torch.Tensor) and not token_nll.is_floating_point():
            raise ValueError("token_nll must have the same shape as the other tensors")
        return reconstruction_losses(token_nll, zfree_token_nll, mask, config)

    result = run_invariant(by_id("rejects-bad-tensors"), wrong_rule, target="t", settings=REJECT)
    assert result.status == "failed" and "must say the rule" in result.failure.message


@pytest.mark.parametrize("slip", sorted(validation.SLIPS))
def test_each_slip_of_a_message_is_rejected_by_the_invariant_that_names_it(slip: str) -> None:
    invariant_id, description = validation.SLIPS[slip]
    implementation = getattr(validation, slip.replace("-", "_"))
    # by the named inputs alone, which every run tries: a random draw missed one in six
    named_only = settings(REJECT, phases=[Phase.explicit])
    result = run_invariant(by_id(invariant_id), implementation, target=slip, settings=named_only)
    assert result.status == "failed", f"{invariant_id} does not reject {slip}: {description}"
    # the report says which argument the message names that it should not
    assert "but names" in result.failure.message, result.failure.message


def test_a_stack_whose_messages_each_name_their_argument_passes_the_validation_group() -> None:
    for invariant in select(["validation"], include_opt_in=True):
        result = run_invariant(
            invariant, validation.checked_losses, target="checked", settings=ACCEPT
        )
        assert result.status == "passed", result.failure.message if result.failure else ""


def test_an_error_may_name_any_tensor_where_all_break_its_rule_alike() -> None:
    # all three 3-D, all three empty: "mask must be 2-D" names a tensor that breaks it
    def names_another(token_nll, zfree_token_nll, mask, config):
        if all(isinstance(t, torch.Tensor) and t.dim() == 3 for t in (token_nll, mask)):
            raise ValueError("mask must be 2-D [B, T], got 3-D")
        if isinstance(token_nll, torch.Tensor) and token_nll.dim() == 2 and not mask.numel():
            raise ValueError("token_nll is empty: no valid token to average")
        return validation.checked_losses(token_nll, zfree_token_nll, mask, config)

    result = run_invariant(by_id("rejects-bad-tensors"), names_another, target="t", settings=ACCEPT)
    assert result.status == "passed", result.failure.message if result.failure else ""


def test_a_bad_value_breaks_one_rule_at_a_time() -> None:
    # a negative b can make a row's bbar 0, which with epsilon = 0 is the other error of
    # MATH.md "Errors": which one a target says first is its own choice, so a drawn input
    # breaks only the rule its kind names
    cancelling = LossCase(((1.0, 2.0),), ((-1.0, 1.0),), ((True, True),))
    cancelling = cancelling.with_config(**{EPSILON.field: 0.0})
    negative = "negative zfree_token_nll at a valid position"
    assert one_rule_broken(negative, cancelling).config.example_inverse_surprisal_epsilon > 0
    kept = one_rule_broken(EPSILON.repair.error, cancelling)
    assert kept.config.example_inverse_surprisal_epsilon == 0  # that error is the one made


def test_validation_invariants_reject_an_implementation_without_validation() -> None:
    for invariant_id in ("rejects-bad-values", "rejects-bad-tensors"):
        invariant = by_id(invariant_id)
        result = run_invariant(invariant, correct.textbook_losses, target="t", settings=REJECT)
        assert result.status == "failed", invariant_id


CORRECT = [
    # a loop in Python over every token: checked at sizes a test can wait for
    ("python_loop_losses", Domain(scale_length=1024, scale_batch=8, scale_positions=2048)),
    ("textbook_losses", Domain()),
    ("fused_losses", Domain()),
    ("naive_float64_losses", Domain(max_alpha=correct.NAIVE_MAX_ALPHA)),
]


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.parametrize(("name", "domain"), CORRECT, ids=[name for name, _ in CORRECT])
def test_correct_but_different_implementations_are_accepted(name: str, domain: Domain) -> None:
    failures = []
    for invariant in select():
        result = run_invariant(
            invariant,
            getattr(correct, name),
            target=f"properties.zoo.correct:{name}",
            settings=ACCEPT,
            domain=domain,
        )
        if result.status == "failed":
            failures.append(f"{invariant.id}: {result.failure.message}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("invariant", select(include_opt_in=True), ids=lambda i: i.id)
def test_the_bundled_implementation_conforms(invariant) -> None:
    from properties.default_target import reconstruction_losses

    result = run_invariant(
        invariant,
        reconstruction_losses,
        target="recon_impl:reconstruction_losses",
        settings=profile_settings("ci"),
    )
    assert result.status != "failed", result.failure.message if result.failure else ""


def test_a_write_into_the_buffer_a_view_shares_is_a_modified_input() -> None:
    # MATH.md, "Contract": no storage an input shares is written, a view's room included
    def writes_the_room(token_nll, zfree_token_nll, mask, config):
        storage = torch.empty(0, dtype=token_nll.dtype).set_(token_nll.untyped_storage())
        if token_nll.storage_offset() > 0:  # a view with room before its values
            storage.data[0] = 0.0
        return correct.textbook_losses(token_nll, zfree_token_nll, mask, config)

    named_only = settings(REJECT, phases=[Phase.explicit])
    result = run_invariant(
        by_id("inputs-unmodified"), writes_the_room, target="t", settings=named_only
    )
    assert result.status == "failed", result
    assert "the buffer it views" in result.failure.message, result.failure.message
