r"""The identities of MATH.md as a catalogue: ``IDENTITIES``.

Every record has a stable ``id`` (what the conformance suite points its invariants at), a
one-line ``statement``, the ``latex`` of the identity (rendered from the sympy
expressions), the ``proof`` (a function of ``spec.proofs`` that raises ``AssertionError``
when the identity does not hold for the current definitions and otherwise returns the
claims it checked), a line on the proof's ``method``, and the ``test`` that runs the proof.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import sympy as sp

from spec import proofs
from spec import symbols as sym
from spec.definitions import (
    SYMBOLIC,
    TERM_NAMES,
    ExampleSummary,
    IndexedBatch,
    per_example_contributions,
    term_gradient,
    token_gradient,
)
from spec.family import FAMILY_INSTANCES, generic_matched_scale, generic_member
from spec.notation import NamedExample, R, b_it, eq, i, kappa_i, l_it, n_i, pi_it, t
from spec.proofs import L_DEPENDENT, general_example, general_token, scale_indexed_b
from spec.terms import BTOK, CC, DIAGNOSTICS, DIST, EX, RAW, TERMS, TOK, TOTAL

TEST_FILE = "tests/spec/test_identities.py"


@dataclass(frozen=True)
class Identity:
    """One identity of MATH.md and how it is proven.

    ``test`` is the pytest node id of the test that runs ``proof``:
    ``tests/spec/test_identities.py::test_identity[<id>]`` (one test, parametrized over the
    catalogue).
    """

    id: str
    statement: str
    latex: str
    proof: Callable[[], tuple[str, ...]]
    method: str
    test: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "test", f"{TEST_FILE}::{self.test_name}")

    @property
    def test_name(self) -> str:
        """The name of the test, with its parameter."""
        return f"test_identity[{self.id}]"


# ---------------------------------------------------------------------------------------
# LaTeX of the identities, rendered from the definitions


def _general_share() -> sp.Expr:
    example = general_example()
    return example.share(general_token(example))


def _baseline_condition() -> str:
    c_value = sym.latex(sp.Eq(sym.c, IndexedBatch().mean(lambda e: e.bbar)))
    return rf"\quad \text{{at }} l_{{i,t}} = b_{{i,t}},\ {c_value}"


def _latex_alpha0_uniform() -> str:
    lhs = sp.Subs(_general_share(), sym.alpha, 0)
    return eq(lhs, 1 / n_i) + r" \quad \text{for every } b \ge 0"


def _latex_alpha1() -> str:
    example = general_example()
    linear = b_it / example.tokens.total(lambda tok: tok.base, index=sym.s)
    return eq(sp.Subs(_general_share(), sym.alpha, 1), linear)


def _latex_zero_base() -> str:
    condition = r"\quad \text{when } b_{i,s} = 0 \text{ for every } s"
    return rf"{sym.latex(pi_it)} = {sym.latex(1 / n_i)},\ {sym.latex(kappa_i)} = 1{condition}"


def _latex_baseline_ex() -> str:
    mean = IndexedBatch().mean(lambda e: e.bbar / (e.bbar + sym.epsilon))
    return eq(R[EX.name], mean) + _baseline_condition()


def _latex_gradient() -> str:
    closed = token_gradient(NamedExample(), None, sym.kept_count)
    return eq(sp.Derivative(TOTAL.symbol, l_it), closed)


def _latex_term_gradients() -> str:
    example = NamedExample()
    parts = [
        eq(sp.Derivative(term.symbol, l_it), term_gradient(term, example, None, sym.kept_count))
        for term in TERMS
    ]
    constant = ", ".join(sym.latex(sp.Derivative(d.symbol, l_it)) for d in DIAGNOSTICS)
    return r",\quad ".join(parts) + rf",\quad {constant} = 0"


def _latex_mixed_gradient() -> str:
    a_total = sp.Symbol("a_J")
    a = {term.name: proofs.mix_coefficient(term) for term in TERMS}
    mix = a_total * TOTAL.symbol + sp.Add(*(a[term.name] * term.symbol for term in TERMS))
    closed = sp.Add(
        *(
            (a[term.name] + a_total * term.weight) * sp.Derivative(term.symbol, l_it)
            for term in TERMS
        )
    )
    return eq(sp.Derivative(mix, l_it), closed) + r" \quad \text{for any real } a"


def _latex_scale() -> str:
    factor = sp.Symbol("lambda", positive=True)
    share = _general_share()
    shares = eq(scale_indexed_b(share, factor), share)
    return rf"{shares}, \quad \kappa_i(\lambda\,b) = \kappa_i(b) \quad \text{{for }} \lambda > 0"


def _latex_kappa_at_least_one() -> str:
    a, s = sym.alpha, sym.s
    b, n = sym.b_indexed, n_i
    pairs = sp.Sum((b[i, s] ** a - b[i, t] ** a) * (b[i, s] - b[i, t]), (t, 1, n), (s, 1, n))
    denominator = 2 * sp.Sum(b[i, t] ** a, (t, 1, n)) * sp.Sum(b[i, t], (t, 1, n))
    return f"{sym.latex(kappa_i - 1)} = {sym.latex(pairs / denominator)} \\ge 0"


def _latex_kappa_monotone() -> str:
    psi = sp.Function("psi")
    a = sym.alpha
    lhs = sp.Derivative(sp.log(kappa_i), a)
    variance = sp.Sum(pi_it * (sp.log(b_it) - psi(a)) ** 2, (t, 1, n_i))
    return (
        f"{sym.latex(lhs)} = {sym.latex(psi(a + 1) - psi(a))} \\ge 0, \\quad "
        f"{sym.latex(sp.Derivative(psi(a), a))} = {sym.latex(variance)} \\ge 0"
    )


def _latex_alpha_infinity() -> str:
    limit = sp.Limit(pi_it, sym.alpha, sp.oo)
    k = sp.Symbol("k", integer=True, positive=True)
    return (
        rf"{sym.latex(limit)} = \begin{{cases}} {sym.latex(1 / k)} & b_{{i,t}} = \max_s b_{{i,s}}"
        r" \\ 0 & \text{otherwise} \end{cases} \quad (k \text{ tokens share the maximum})"
    )


def _latex_linearity_in_l() -> str:
    return (
        r"R(p\,l + q\,m) = p\,R(l) + q\,R(m) \quad \text{for } R \in \{"
        + ", ".join(sym.latex(R[name]) for name in L_DEPENDENT)
        + r"\}"
    )


def _latex_linearity_in_weights() -> str:
    weighted = [f"{sym.latex(w)} {sym.latex(R[name])}" for name, w in SYMBOLIC.weights().items()]
    rendered = " + ".join(weighted)
    return rf"J = {rendered}, \quad \frac{{\partial J}}{{\partial w_k}} = R_k"


def _latex_batch_mean_form() -> str:
    parts = per_example_contributions(ExampleSummary.indexed(i))
    return ", \\quad ".join(
        f"{sym.latex(R[name])} = \\operatorname{{mean}}_i {sym.latex(parts[name])}"
        for name in TERM_NAMES
    )


def _latex_batch_decomposition() -> str:
    x1, x2 = sp.symbols("x_1 x_2")
    k1, k2 = sp.Symbol("B'_1"), sp.Symbol("B'_2")
    return eq(sp.Symbol("x_{1 \\cup 2}"), (k1 * x1 + k2 * x2) / (k1 + k2)) + (
        r" \quad \text{for every output } x"
    )


def _latex_family_instances() -> str:
    rows = []
    for instance in FAMILY_INSTANCES:
        policy = r"\frac{1}{n_i}" if instance.policy_name == "uniform" else r"\pi_{i,t}"
        arguments = f"{policy}, {instance.omega_latex}, {instance.scale_latex}"
        rows.append(f"{sym.latex(R[instance.term])} = L\\left[{arguments}\\right]")
    member = sym.latex(generic_member())
    return rf"L[\pi, \omega, C] = {member}; \quad " + ", \\quad ".join(rows)


def _latex_policy_matched() -> str:
    matched = generic_matched_scale()
    value = r"L[\pi, \omega, C_{\pi,\omega}] = 1 \quad \text{at } l = b"
    return rf"C_{{\pi,\omega}} = {sym.latex(matched)}, \quad {value}"


def _latex_policy_matched_cc() -> str:
    mean_bbar = sym.latex(IndexedBatch().mean(lambda e: e.bbar))
    return rf"C_{{\pi, 1/\kappa}} = C_{{1/n, 1}} = {mean_bbar}"


def _identity(
    id: str, statement: str, latex: str, proof: Callable[[], tuple[str, ...]], method: str
) -> Identity:
    return Identity(id=id, statement=statement, latex=latex, proof=proof, method=method)


_SYMBOLIC_14 = "sympy: difference simplifies to 0 for n = 1..4 and for general n (Sum)"
_BATCHES = (
    "sympy: difference simplifies to 0 on batches of 1..4-token examples and for general "
    "n_i, B' (Sum)"
)


def _catalogue() -> tuple[Identity, ...]:
    r = R
    return (
        _identity(
            "alpha0-uniform-shares",
            "At alpha = 0 every share is 1/n_i, also where b = 0 (0^0 = 1).",
            _latex_alpha0_uniform(),
            proofs.prove_alpha0_uniform_shares,
            _SYMBOLIC_14 + "; also with every b = 0",
        ),
        _identity(
            "alpha0-kappa-one",
            "At alpha = 0 the concentration factor kappa_i is 1.",
            eq(kappa_i, 1) + r" \quad \text{at } \alpha = 0",
            proofs.prove_alpha0_kappa_one,
            _SYMBOLIC_14,
        ),
        _identity(
            "alpha0-tok-equals-raw",
            "At alpha = 0 the token-weighted loss R_tok equals R_raw.",
            eq(r[TOK.name], r[RAW.name]) + r" \quad \text{at } \alpha = 0",
            proofs.prove_alpha0_tok_equals_raw,
            _BATCHES,
        ),
        _identity(
            "alpha0-cc-equals-dist",
            "At alpha = 0 the concentration-corrected loss R_cc equals R_dist.",
            eq(
                r[CC.name],
                r[DIST.name],
            )
            + r" \quad \text{at } \alpha = 0",
            proofs.prove_alpha0_cc_equals_dist,
            _BATCHES,
        ),
        _identity(
            "alpha1-linear-shares",
            "At alpha = 1 the shares are the linear surprisal shares b_it / sum_s b_is.",
            _latex_alpha1(),
            proofs.prove_alpha1_linear_shares,
            _SYMBOLIC_14,
        ),
        _identity(
            "shares-sum-to-one",
            "The shares of every kept example sum to 1 (the zero-base fallback included).",
            eq(sp.Sum(pi_it, (t, 1, n_i)), 1),
            proofs.prove_shares_sum_to_one,
            _SYMBOLIC_14,
        ),
        _identity(
            "zero-to-the-zero",
            "0^0 = 1 in sympy, in mpmath and in the oracle's shares at alpha = 0 with b = 0.",
            eq(sp.Pow(0, 0, evaluate=False), 1),
            proofs.prove_zero_to_the_zero,
            "sympy and mpmath evaluate 0^0; the oracle's lambdified shares at alpha = 0, n = 1..4",
        ),
        _identity(
            "zero-base-uniform-fallback",
            "A kept example whose valid b are all 0 gets uniform shares and kappa = 1: the "
            "limit of a row of equal b, where the formula itself is 0/0 for alpha > 0.",
            _latex_zero_base(),
            proofs.prove_zero_base_uniform_fallback,
            "sympy: shares on a row b = beta are 1/n for every alpha, and their limit as "
            "beta -> 0+ is the fallback; n = 1..4",
        ),
        _identity(
            "baseline-dist-one",
            "At the z-free baseline (l = b, c = mean_i bbar_i), R_dist = 1.",
            eq(r[DIST.name], 1) + _baseline_condition(),
            proofs.prove_baseline_dist_one,
            _BATCHES,
        ),
        _identity(
            "baseline-cc-one",
            "At the z-free baseline (l = b, c = mean_i bbar_i), R_cc = 1.",
            eq(r[CC.name], 1) + _baseline_condition(),
            proofs.prove_baseline_cc_one,
            _BATCHES,
        ),
        _identity(
            "baseline-ex",
            "At the z-free baseline, R_ex = mean_i bbar_i / (bbar_i + epsilon).",
            _latex_baseline_ex(),
            proofs.prove_baseline_ex,
            _BATCHES,
        ),
        _identity(
            "baseline-ex-one-at-eps0",
            "At the z-free baseline with epsilon = 0 (every bbar_i > 0), R_ex = 1 exactly.",
            eq(r[EX.name], 1) + r" \quad \text{at } l = b,\ \varepsilon = 0",
            proofs.prove_baseline_ex_one_at_eps0,
            _BATCHES,
        ),
        _identity(
            "baseline-tok-equals-base",
            "At the z-free baseline, R_tok equals token_weighted_base_loss.",
            eq(r[TOK.name], r[BTOK.name]) + r" \quad \text{at } l = b",
            proofs.prove_baseline_tok_equals_base,
            _BATCHES,
        ),
        _identity(
            "gradient-closed-form",
            "dJ/dl_it has the closed form of MATH.md, 'Gradients' (pi, kappa, bbar from b only).",
            _latex_gradient(),
            proofs.prove_gradient_closed_form,
            "sympy: diff(J, l_it) minus the closed form simplifies to 0 on batches of 1..4-token "
            "examples (a zero-base row included) and for general n_i, B'",
        ),
        _identity(
            "term-gradient-closed-form",
            "Each term, differentiated alone, has the closed form of MATH.md, "
            "'Gradients'; the two diagnostics do not depend on l.",
            _latex_term_gradients(),
            proofs.prove_term_gradient_closed_form,
            "sympy: diff(R_k, l_it) minus its closed form, and diff(diagnostic, l_it), simplify "
            "to 0 on batches of 1..4-token examples (a zero-base row included) and for general "
            "n_i, B'",
        ),
        _identity(
            "mixed-gradient",
            "For any real a_k and a_J, the gradient of sum_k a_k R_k + a_J J is "
            "sum_k (a_k + a_J w_k) dR_k/dl: one backward through several outputs.",
            _latex_mixed_gradient(),
            proofs.prove_mixed_gradient,
            "sympy: the difference simplifies to 0 with symbolic a_k, a_J on batches of 1..4-token "
            "examples (a zero-base row included)",
        ),
        _identity(
            "b-scale-invariance",
            "Multiplying every b by a factor lambda > 0 leaves the shares pi and kappa unchanged.",
            _latex_scale(),
            proofs.prove_b_scale_invariance,
            _SYMBOLIC_14,
        ),
        _identity(
            "kappa-at-least-one",
            "kappa_i >= 1 for every alpha >= 0 (Chebyshev's sum inequality).",
            _latex_kappa_at_least_one(),
            proofs.prove_kappa_at_least_one,
            "sympy: kappa - 1 equals the sum of pair terms (b_s^a - b_t^a)(b_s - b_t) over a "
            "positive denominator for n = 1..4 and general n; each pair term >= 0 as x^a "
            "increases (and manifestly so, factored, for n = 2, 3 and a = 1, 2, 3)",
        ),
        _identity(
            "kappa-monotone-in-alpha",
            "kappa_i never decreases as alpha grows.",
            _latex_kappa_monotone(),
            proofs.prove_kappa_monotone_in_alpha,
            "sympy: d log kappa/d alpha = psi(alpha+1) - psi(alpha) with psi' a pi-weighted "
            "variance of log b (>= 0), n = 1..4 and general n; rows with some b = 0 reduce to "
            "their positive tokens",
        ),
        _identity(
            "alpha-infinity-concentration",
            "As alpha -> infinity the shares concentrate on the largest surprisal(s), and "
            "kappa_i -> max_t b_it / bbar_i.",
            _latex_alpha_infinity(),
            proofs.prove_alpha_infinity_concentration,
            "sympy: limit of every share and of kappa, n = 2..4, with 1..n tokens at the maximum",
        ),
        _identity(
            "linearity-in-l",
            "Every term and J is linear in l for fixed b.",
            _latex_linearity_in_l(),
            proofs.prove_linearity_in_l,
            _BATCHES,
        ),
        _identity(
            "linearity-in-weights",
            "J is linear in the weights, with dJ/dw_k = R_k.",
            _latex_linearity_in_weights(),
            proofs.prove_linearity_in_weights,
            _BATCHES,
        ),
        _identity(
            "token-permutation-invariance",
            "Permuting the valid tokens of an example (l and b together) changes no output, "
            "and each token keeps its gradient.",
            r"\sigma \in S_{n_i}:\ (l_{i,\sigma(t)}, b_{i,\sigma(t)})_t"
            r" \text{ gives the same outputs}",
            proofs.prove_token_permutation_invariance,
            "sympy: every permutation for n = 2..4, beside a second example",
        ),
        _identity(
            "example-permutation-invariance",
            "Permuting the examples of a batch changes no output.",
            r"\sigma \in S_{B'}:\ (\text{example } \sigma(i))_i \text{ gives the same outputs}",
            proofs.prove_example_permutation_invariance,
            "sympy: every permutation of a batch of 1-, 2- and 3-token examples",
        ),
        _identity(
            "padding-invariance",
            "Adding padded positions or fully padded examples (whatever they hold, NaN and inf "
            "included) changes no output, no share and no gradient.",
            r"m_{i,t} = 0 \Rightarrow (l_{i,t}, b_{i,t}) \text{ is never read}",
            proofs.prove_padding_invariance,
            "oracle: random batches against copies with garbage-filled padded columns and rows",
        ),
        _identity(
            "batch-mean-form",
            "Every output is the mean over kept examples of a per-example contribution x_i.",
            _latex_batch_mean_form(),
            proofs.prove_batch_mean_form,
            "sympy: for general B' and for a batch of 1-, 2- and 3-token examples",
        ),
        _identity(
            "batch-decomposition",
            "Every output of the union of two batches is (B'_1 x_1 + B'_2 x_2)/(B'_1 + B'_2).",
            _latex_batch_decomposition(),
            proofs.prove_batch_decomposition,
            "sympy: two explicit batches, and general B'_1, B'_2 for a per-example mean",
        ),
        _identity(
            "family-instances",
            "Each term is a member L[pi, omega, C] of seed 000's generic family.",
            _latex_family_instances(),
            proofs.prove_family_instances,
            "sympy: on batches of 1..4-token examples, a zero-base row included",
        ),
        _identity(
            "policy-matched-scale-baseline-one",
            "The policy-matched scale C_{pi,omega} makes every family member equal 1 at the "
            "z-free baseline.",
            _latex_policy_matched(),
            proofs.prove_policy_matched_scale_baseline_one,
            "sympy: the instances on batches of 1..4-token examples, and general pi, "
            "omega, n_i, B'",
        ),
        _identity(
            "policy-matched-scale-of-cc",
            "The policy-matched scale of R_cc's (shares, 1/kappa) is that of R_dist's "
            "(uniform, 1): mean_i bbar_i, for every alpha.",
            _latex_policy_matched_cc(),
            proofs.prove_policy_matched_scale_of_cc,
            "sympy: on batches of 1..4-token examples, a zero-base row included",
        ),
    )


#: The catalogue, in the order of MATH.md.
IDENTITIES: tuple[Identity, ...] = _catalogue()
#: The catalogue by id.
IDENTITY_BY_ID: dict[str, Identity] = {identity.id: identity for identity in IDENTITIES}
