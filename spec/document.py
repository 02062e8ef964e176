"""Render docs/SPEC.md from the sympy expressions of the specification.

``recon-spec doc`` calls ``write_spec_document``; ``recon-spec doc --check`` reports a
committed document that differs from what the current ``spec`` renders. The document is
deterministic (no dates, no absolute paths): the same ``spec`` and the same sympy render
the same bytes. sympy's LaTeX can change between releases, so the header records the
sympy version that rendered it.
"""

from __future__ import annotations

import re
from pathlib import Path

import sympy as sp

from spec import symbols as sym
from spec.definitions import (
    IndexedBatch,
    indexed_example,
    loss_terms,
    token_gradient,
)
from spec.family import FAMILY_INSTANCES, generic_matched_scale, generic_member
from spec.identities import IDENTITIES
from spec.notation import NamedExample, statistic_formula
from spec.oracle import DEFAULT_PRECISION, evaluate_details
from spec.parameters import PARAMETERS, RULES, WEIGHT_RULE
from spec.plots import (
    EPSILON_FIGURE,
    SAMPLE_BATCH,
    SAMPLE_SEQUENCE,
    SHARES_FIGURE,
    shares_and_kappa,
)
from spec.statistics import STATISTICS
from spec.terms import BY_NAME, DIAGNOSTICS, OUTPUTS, TERMS, TOTAL, config_mapping, distinct_weights

#: Where the document lives, relative to the repository root.
DOCUMENT = Path("docs") / "SPEC.md"
_VERSION_LINE = re.compile(r"Rendered with sympy (\S+)\.")


def default_path() -> Path:
    """``docs/SPEC.md`` of the repository holding the ``spec`` package."""
    return Path(__file__).resolve().parent.parent / DOCUMENT


def recorded_sympy_version(text: str) -> str | None:
    """The sympy version recorded in a rendered document's header, if any."""
    match = _VERSION_LINE.search(text)
    return match.group(1) if match else None


def _math(*lines: str) -> str:
    # ```math blocks: markdown leaves the LaTeX inside alone.
    return "```math\n" + "\n".join(lines) + "\n```"


def _per_example_section() -> list[str]:
    example = indexed_example(sym.i)
    token = example.tokens.token(sym.t)
    rows = [
        (sym.pi_indexed[sym.i, sym.t], example.share(token)),
        *((s.indexed[sym.i], statistic_formula(s.name)) for s in STATISTICS),
    ]
    equations = [f"{sym.latex(lhs)} &= {sym.latex(rhs)} \\\\" for lhs, rhs in rows]
    return [
        "## Per example",
        "",
        "Example $i$ has $n_i$ valid tokens $t = 1, \\dots, n_i$ (the positions where the "
        "mask is true); examples with $n_i = 0$ are dropped and the means below run over "
        "the $B'$ kept ones.",
        "",
        _math("\\begin{aligned}", *equations, "\\end{aligned}"),
        "",
        "- $0^0 = 1$: at $\\alpha = 0$ the shares are uniform, $1/n_i$, even where $b = 0$.",
        "- A kept example whose valid $b$ are all 0 gets uniform shares $1/n_i$ and "
        "$\\kappa_i = 1$ (identity `zero-base-uniform-fallback`).",
        "- Everything built from $b$ ($\\pi$, $\\kappa$, $\\bar b$, $1/(\\bar b + \\varepsilon)$) "
        "is a fixed reference: no gradient flows to $b$.",
        "",
    ]


_NUMBER_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
]


def _count(records: tuple) -> str:
    """How many ``records`` there are, in words where the registry is small: "five"."""
    return _NUMBER_WORDS[len(records)] if len(records) < len(_NUMBER_WORDS) else str(len(records))


def _terms_section() -> list[str]:
    terms = loss_terms(IndexedBatch())
    lines = [
        f"## The {_count(TERMS)} terms, the {_count(DIAGNOSTICS)} diagnostics and the total",
        "",
        "One record per output in the term registry (`spec/terms.py`); everything else "
        "derives from it.",
        "",
        "| returned name | definition | what it measures |",
        "| --- | --- | --- |",
    ]
    for output in OUTPUTS:
        equation = f"{sym.latex(output.symbol)} = {sym.latex(terms[output.name])}"
        if output is TOTAL:
            weighted = " + ".join(f"{sym.latex(t.weight)} {sym.latex(t.symbol)}" for t in TERMS)
            equation = f"J = {weighted}"
        lines.append(f"| `{output.name}` | ${equation}$ | {output.summary} |")
    lines += [
        "",
        f"All {_count(OUTPUTS)} are always computed, whatever the weights. The weights, and "
        "the known "
        "wrong variants a failure report can name (`spec/variants.py`):",
        "",
        "| output | weight | config field | trainer flag | known wrong variants |",
        "| --- | --- | --- | --- | --- |",
    ]
    for output in (*TERMS, *DIAGNOSTICS):
        weight = f"${sym.latex(output.weight)}$" if output.weight is not None else ""
        field = f"`{output.weight_field}`" if output.weight_field else ""
        flag = f"`{output.flag}`" if output.flag else ""
        variants = ", ".join(f"`{v.name}`" for v in output.variants)
        lines.append(f"| ${sym.latex(output.symbol)}$ | {weight} | {field} | {flag} | {variants} |")
    lines.append("")
    return lines


def _inputs_section() -> list[str]:
    rule_of = {
        **{term.weight: WEIGHT_RULE for term in TERMS},
        **{parameter.symbol: parameter.rule for parameter in PARAMETERS},
    }
    field_of = {
        **{term.weight: term.weight_field for term in TERMS},
        **{parameter.symbol: parameter.field for parameter in PARAMETERS},
    }
    lines = [
        "## Inputs and parameters",
        "",
        "$l_{i,t}$ is `token_nll` (the model with the latent $z$), $b_{i,t} \\ge 0$ is "
        "`zfree_token_nll` (the z-free reference: the token's surprisal), and the mask "
        "selects the valid positions; values at other positions are never read.",
        "",
        "| symbol | `ReconstructionLossConfig` field | rule |",
        "| --- | --- | --- |",
    ]
    for symbol, rule in rule_of.items():
        lines.append(f"| ${sym.latex(symbol)}$ | `{field_of[symbol]}` | ${RULES[rule].latex}$ |")
    lines += [
        "",
        "| symbol | field | trainer flag | default | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for parameter in PARAMETERS:
        flag = f"`{parameter.flag}`" if parameter.flag else "none"
        lines.append(
            f"| ${parameter.latex}$ | `{parameter.field}` | {flag} | {parameter.default:g} "
            f"| {parameter.summary} |"
        )
    lines.append("")
    return lines


def _gradient_section() -> list[str]:
    closed = token_gradient(NamedExample(), None, sym.kept_count)
    derivative = sp.Derivative(TOTAL.symbol, sym.l_indexed[sym.i, sym.t])
    return [
        "## Gradient",
        "",
        "For a valid token $t$ of a kept example $i$ (0 everywhere else):",
        "",
        _math(f"{sym.latex(derivative)} = {sym.latex(closed)}"),
        "",
        "So the token weights an implementation uses can be read off its gradient "
        "(`spec.evaluate_details(...).token_gradient`).",
        "",
    ]


def _family_section() -> list[str]:
    lines = [
        "## The generic family (seed 000)",
        "",
        "A token policy $\\pi$, an example weight $\\omega$ and a scale $C$ define",
        "",
        _math(f"L[\\pi, \\omega, C] = {sym.latex(generic_member())}"),
        "",
        f"and each of the {_count(TERMS)} terms is a member (identity `family-instances`):",
        "",
        "| term | $\\pi_{i,t}$ | $\\omega_i$ | $C$ |",
        "| --- | --- | --- | --- |",
    ]
    for instance in FAMILY_INSTANCES:
        policy = "\\frac{1}{n_i}" if instance.policy_name == "uniform" else "\\pi_{i,t}"
        term = sym.latex(BY_NAME[instance.term].symbol)
        lines.append(
            f"| ${term}$ | ${policy}$ | ${instance.omega_latex}$ | ${instance.scale_latex}$ |"
        )
    lines += [
        "",
        "The seed's policy-matched scale is the member's own value at the z-free baseline,",
        "",
        _math(f"C_{{\\pi,\\omega}} = {sym.latex(generic_matched_scale())},"),
        "",
        "so $L[\\pi, \\omega, C_{\\pi,\\omega}] = 1$ at $l = b$ for every policy "
        "(identity `policy-matched-scale-baseline-one`). For $R_{\\mathrm{cc}}$ it is "
        "$\\operatorname{mean}_i \\bar b_i$ whatever $\\alpha$, the same as for "
        "$R_{\\mathrm{dist}}$ (identity `policy-matched-scale-of-cc`): the concentration "
        "correction is what makes one fixed $c$ policy-matched for both.",
        "",
    ]
    return lines


def _identities_section() -> list[str]:
    lines = [
        "## Identities",
        "",
        "Each identity has a stable id, a proof in `spec/proofs.py` and a test that runs "
        "it; the test fails when a formula changes so that the identity no longer holds. "
        "`spec.IDENTITIES` is this list as data.",
        "",
        "| id | statement | test |",
        "| --- | --- | --- |",
    ]
    for identity in IDENTITIES:
        lines.append(
            f"| [`{identity.id}`](#{identity.id}) | {identity.statement} | `{identity.test_name}` |"
        )
    lines.append("")
    for identity in IDENTITIES:
        lines += [
            f"### {identity.id}",
            "",
            identity.statement,
            "",
            _math(identity.latex),
            "",
            f"Proof: {identity.method}. Test: `{identity.test}`.",
            "",
        ]
    return lines


def _figures_section() -> list[str]:
    sequence = ", ".join(f"{x:g}" for x in SAMPLE_SEQUENCE)
    alphas = (0.0, 0.5, 1.0, 2.0, 5.0)
    shares, kappa = shares_and_kappa(alphas)
    header = "| $\\alpha$ | " + " | ".join(f"$b_t = {x:g}$" for x in SAMPLE_SEQUENCE)
    lines = [
        "## Figures",
        "",
        f"Shares and $\\kappa$ of one example, $b = ({sequence})$, as $\\alpha$ moves. At "
        "$\\alpha = 0$ the shares are uniform and $\\kappa = 1$; as $\\alpha$ grows they "
        "move to the largest surprisal and $\\kappa$ rises to $\\max_t b_t / \\bar b$.",
        "",
        f"![Token shares and kappa as alpha moves](img/{SHARES_FIGURE})",
        "",
        header + " | $\\kappa$ |",
        "| --- " * (len(SAMPLE_SEQUENCE) + 2) + "|",
    ]
    for k, alpha in enumerate(alphas):
        cells = " | ".join(f"{series[k]:.4f}" for series in shares)
        lines.append(f"| {alpha:g} | {cells} | {kappa[k]:.4f} |")
    bbars = ", ".join(f"{sum(row) / len(row):.3g}" for row in SAMPLE_BATCH)
    lines += [
        "",
        "$R_{\\mathrm{ex}}$ against $\\varepsilon$ at the z-free baseline ($l = b$) for a "
        f"batch with $\\bar b_i = {bbars}$. It is 1 at $\\varepsilon = 0$ and falls once "
        "$\\varepsilon$ reaches the scale of the $\\bar b_i$: each example's "
        "$\\bar b_i / (\\bar b_i + \\varepsilon)$ is $1/2$ at $\\varepsilon = \\bar b_i$.",
        "",
        f"![R_ex against epsilon at the baseline](img/{EPSILON_FIGURE})",
        "",
        "The figures are drawn from the oracle by `python -m spec.plots` (it needs the "
        "`plots` extra, matplotlib).",
        "",
    ]
    return lines


def _oracle_section() -> list[str]:
    nan = float("nan")
    token_nll = [[2.0, 4.0, 1.0], [0.5, 1.5, nan]]
    zfree_token_nll = [[1.0, 3.0, 0.5], [1.0, 2.0, nan]]
    mask = [[True, True, True], [True, True, False]]
    config = config_mapping(
        # every term weighted, each by a weight of its own
        **distinct_weights((1.0, 0.5, 0.25, 2.0, 0.75, 1.5, 3.0, 1.25, 0.125, 4.0)),
        token_weight_alpha=2.0,
        example_inverse_surprisal_epsilon=0.1,
        zfree_reference_scale=1.5,
    )
    result = evaluate_details(token_nll, zfree_token_nll, mask, config)
    # Double quotes: the block is formatted as ruff format would (it checks markdown too).
    config_lines = [f'    "{key}": {value!r},' for key, value in config.items()]
    lines = [
        "## The oracle",
        "",
        "`spec.evaluate(token_nll, zfree_token_nll, mask, config)` evaluates the expressions "
        f"above, lambdified for mpmath, at {DEFAULT_PRECISION} significant digits, and rounds "
        "each output once to float64; `spec.evaluate_details` adds the shares, $\\kappa_i$, "
        "the other per-example quantities and $\\partial J / \\partial l_{i,t}$. Inputs may "
        "be torch tensors, numpy arrays or nested lists; `config` is a "
        "`ReconstructionLossConfig` or any object or mapping with its fields.",
        "",
        "```python",
        "import spec",
        "",
        'nan = float("nan")',
        f"token_nll = {token_nll!r}",
        f"zfree_token_nll = {zfree_token_nll!r}",
        f"mask = {mask!r}",
        "config = {",
        *config_lines,
        "}",
        "result = spec.evaluate_details(token_nll, zfree_token_nll, mask, config)",
        "```",
        "",
        "| output | value |",
        "| --- | --- |",
    ]
    for name, value in result.values.items():
        lines.append(f"| `{name}` | `{value!r}` |")
    shares = [[round(float(x), 6) for x in row] for row in result.shares]
    gradient = [[round(float(x), 6) for x in row] for row in result.token_gradient]
    lines += [
        "",
        f"with shares `{shares}` (rounded to 6 places), $\\kappa$ = "
        f"`{[round(float(x), 6) for x in result.kappa]}` and token gradient `{gradient}`; "
        "the padded position holds NaN and is never read.",
        "",
    ]
    return lines


def render_spec_document() -> str:
    """The text of docs/SPEC.md."""
    lines = [
        "# The reconstruction loss stack: specification",
        "",
        "<!-- Generated by `recon-spec doc` from the `spec` package. Do not edit by hand: "
        f"change `spec/` and run `recon-spec doc`. Rendered with sympy {sp.__version__}. -->",
        "",
        "This document is rendered from the sympy expressions of the `spec` package, the "
        "executable form of [MATH.md](MATH.md). Every formula below is the LaTeX of the expression "
        "that the proofs and the oracle use, and every identity names the test that proves "
        "it.",
        "",
        f"{_count(TERMS).capitalize()} reconstruction terms, {_count(DIAGNOSTICS)} "
        "diagnostics and their weighted total compare a "
        "latent-variable sequence model (token losses $l$) with a z-free reference trained "
        "beside it (token losses $b$, the tokens' surprisals).",
        "",
    ]
    lines += _inputs_section()
    lines += _per_example_section()
    lines += _terms_section()
    lines += _gradient_section()
    lines += _family_section()
    lines += _identities_section()
    lines += _figures_section()
    lines += _oracle_section()
    return "\n".join(lines).rstrip("\n") + "\n"


def write_spec_document(*, check: bool = False, path: Path | str | None = None) -> int:
    """Write docs/SPEC.md; with ``check``, write nothing and return 1 if it is stale.

    Args:
        check: compare instead of writing; print one line and return 1 when the file
            differs from what the current ``spec`` renders (or is missing), else return 0.
        path: the document (default: ``docs/SPEC.md`` beside the ``spec`` package).
    """
    target = default_path() if path is None else Path(path)
    text = render_spec_document()
    if check:
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current != text:
            print(f"{target} is stale: run `recon-spec doc` to regenerate it")
            return 1
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return 0
