"""spec: the executable specification of the reconstruction loss stack.

The math of MATH.md as sympy expressions, every identity it states with a proof, and an
oracle that evaluates the expressions at high precision:

* ``spec.definitions`` — per-example quantities, the terms, the two diagnostics,
  the total ``J`` and the closed forms of ``dJ/dl`` and of each term's ``dR_k/dl``;
* ``spec.family`` — seed 000's generic family ``L[pi, omega, C]``, the terms as
  members, the policy-matched scale ``C_{pi,omega}``;
* ``spec.identities`` — ``IDENTITIES``, the catalogue of identities and their proofs;
* ``spec.oracle`` — ``evaluate`` and ``evaluate_details``;
* ``spec.document`` — renders ``docs/SPEC.md`` (``recon-spec doc``);
* ``spec.plots`` — the document's figures (needs the ``plots`` extra, matplotlib).

Example:
    >>> import spec
    >>> # every field: the weights not given are 0, the parameters not given their defaults
    >>> config = spec.config_mapping(raw_weight=1.0, token_weighted_weight=1.0)
    >>> values = spec.evaluate([[2.0, 4.0, 0.0]], [[1.0, 3.0, float("nan")]],
    ...                        [[True, True, False]], config)
    >>> values["reconstruction_loss"], values["token_weighted_reconstruction_loss"]
    (3.0, 3.5)
"""

from spec.definitions import (
    DIAGNOSTIC_NAMES,
    LOSS_NAMES,
    SYMBOLIC,
    TERM_NAMES,
    Example,
    ExampleSummary,
    ExplicitBatch,
    ExplicitTokens,
    IndexedBatch,
    IndexedTokens,
    Parameters,
    indexed_example,
    loss_terms,
    per_example_contributions,
    share,
    term_gradient,
    token_gradient,
    total_loss,
)
from spec.family import (
    FAMILY_INSTANCES,
    family_member,
    policy_matched_scale,
    share_policy,
    uniform_policy,
)
from spec.identities import IDENTITIES, IDENTITY_BY_ID, Identity
from spec.oracle import OracleResult, evaluate, evaluate_details
from spec.terms import config_mapping

__all__ = [
    "DIAGNOSTIC_NAMES",
    "FAMILY_INSTANCES",
    "IDENTITIES",
    "IDENTITY_BY_ID",
    "LOSS_NAMES",
    "SYMBOLIC",
    "TERM_NAMES",
    "Example",
    "ExampleSummary",
    "ExplicitBatch",
    "ExplicitTokens",
    "Identity",
    "IndexedBatch",
    "IndexedTokens",
    "OracleResult",
    "Parameters",
    "config_mapping",
    "evaluate",
    "evaluate_details",
    "family_member",
    "indexed_example",
    "loss_terms",
    "per_example_contributions",
    "policy_matched_scale",
    "share",
    "share_policy",
    "term_gradient",
    "token_gradient",
    "total_loss",
    "uniform_policy",
]
