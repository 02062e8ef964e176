r"""The generic reconstruction family of seed 000 and its policy-matched scale.

.. math::

    L[\pi, \omega, C] = \frac{1}{C}\operatorname{mean}_i \omega_i \sum_t \pi_{it} l_{it},
    \qquad
    C_{\pi,\omega} = \operatorname{mean}_i \omega_i \sum_t \pi_{it} b_{it}

A token policy ``pi`` says which positions matter more, an example weight ``omega`` which
examples matter more, and ``C`` how the whole is scaled. Each term of MATH.md
is a member (``FAMILY_INSTANCES``, from the term registry; identity ``family-instances``).
The policy-matched scale ``C_{pi,omega}`` makes every member equal 1 at the z-free baseline
(identity ``policy-matched-scale-baseline-one``) — the seed's reason to consider it, and also its
drawback: the scale then depends on the policy it is meant to measure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sympy as sp

from spec import symbols as sym
from spec.definitions import (
    POLICIES,
    SYMBOLIC,
    Batch,
    Example,
    IndexedBatch,
    Parameters,
    Token,
    indexed_example,
)
from spec.terms import TERMS

#: ``pi(example, token)``: the weight of one token within its example.
Policy = Callable[[Example, Token], sp.Expr]
#: ``omega(example, params)``: the weight of one example within the batch.
ExampleWeight = Callable[[Example, Parameters], sp.Expr]


#: ``pi_it = 1/n_i``: every valid token counts the same.
uniform_policy: Policy = POLICIES["uniform"]
#: ``pi_it = b_it^alpha / sum_s b_is^alpha``: the tempered surprisal shares.
share_policy: Policy = POLICIES["shares"]


def family_member(
    batch: Batch, policy: Policy, omega: Callable[[Example], sp.Expr], scale: sp.Expr
) -> sp.Expr:
    """``L[pi, omega, C] = (1/C) mean_i omega_i sum_t pi_it l_it``."""

    def example_value(example: Example) -> sp.Expr:
        return omega(example) * example.tokens.total(lambda tok: policy(example, tok) * tok.loss)

    return batch.mean(example_value) / scale


def policy_matched_scale(
    batch: Batch, policy: Policy, omega: Callable[[Example], sp.Expr]
) -> sp.Expr:
    """``C_{pi,omega} = mean_i omega_i sum_t pi_it b_it``: the member's own value at ``l = b``."""

    def example_value(example: Example) -> sp.Expr:
        return omega(example) * example.tokens.total(lambda tok: policy(example, tok) * tok.base)

    return batch.mean(example_value)


@dataclass(frozen=True)
class FamilyInstance:
    """How one of the terms is ``L[pi, omega, C]``."""

    term: str
    policy_name: str
    policy: Policy
    omega_latex: str
    omega: ExampleWeight
    scale_latex: str
    scale: Callable[[Parameters], sp.Expr]

    def member(self, batch: Batch, params: Parameters = SYMBOLIC) -> sp.Expr:
        """The family member with this instance's arguments."""
        return family_member(
            batch, self.policy, lambda e: self.omega(e, params), self.scale(params)
        )

    def matched_scale(self, batch: Batch, params: Parameters = SYMBOLIC) -> sp.Expr:
        """``C_{pi,omega}`` for this instance's policy and example weight."""
        return policy_matched_scale(batch, self.policy, lambda e: self.omega(e, params))


#: The terms as members, from their records in the term registry: R_raw = L[uniform,
#: 1, 1], R_dist = L[uniform, 1, c], R_ex = L[uniform, 1/(bbar+eps), 1], R_tok = L[shares,
#: 1, 1], R_cc = L[shares, 1/kappa, c].
FAMILY_INSTANCES: tuple[FamilyInstance, ...] = tuple(
    FamilyInstance(
        term.name,
        term.policy,
        POLICIES[term.policy],
        term.omega_latex,
        term.omega,
        term.scale_latex,
        term.scale,
    )
    for term in TERMS
)


def _generic_policy(example: Example, token: Token) -> sp.Expr:
    """``pi[i, t]``: a token policy left symbolic."""
    return sym.pi_indexed[example.tokens.row, token.t]


def _generic_weight(example: Example) -> sp.Expr:
    """``omega[i]``: an example weight left symbolic."""
    return sym.omega_indexed[example.tokens.row]


def _general_batch() -> IndexedBatch:
    return IndexedBatch(example=indexed_example)


def generic_member() -> sp.Expr:
    """``L[pi, omega, C]`` with symbolic ``pi[i, t]``, ``omega[i]`` and ``C``, at general sizes."""
    return family_member(_general_batch(), _generic_policy, _generic_weight, sym.scale_C)


def generic_matched_scale() -> sp.Expr:
    """``C_{pi,omega}`` with symbolic ``pi[i, t]`` and ``omega[i]``, at general sizes."""
    return policy_matched_scale(_general_batch(), _generic_policy, _generic_weight)
