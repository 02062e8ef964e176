"""Failures grouped by cause: one mistake, one finding, however many invariants it breaks.

A wrong implementation usually breaks several invariants at once: a raw term averaged over
all tokens of the batch misses the oracle, the alpha = 0 identity, the batch decomposition
and every gradient of that term. The report names the mistake once: each failure gives the
evidence it has (its ``signature``), and failures that share evidence share a cause.

Evidence, from the most telling:

* a known variant the diagnosis matched (``("variant", output, variant)``);
* the state between calls a fresh process's replay found, or an input that failed and then
  passed (``("state",)``);
* the exception a call of the target raised (``("raised", type)``), and the error message
  of any call of the target on the input shown (``("target error", first line)``);
* the features of the input that trigger it (``("trigger", feature)``,
  ``properties.features``);
* otherwise the outputs it finds off (``("output", name)``), the total aside (it follows
  from the terms);
* for a run that could not check an invariant (a crash, a timeout, a missing name, the
  suite's own error): that outcome.

A cause's *representative* is its most telling failure: one whose state between calls a
replay found, else one that names a variant (by its number, or by the NaN it gives too
where another failure of the cause gives its number), else one with an exception; among
those, the one of the fewest cells, then the first in the catalogue. The report shows it
in full and gives each other failure of the cause one line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from properties.cases import LossCase
from properties.runner import InvariantResult
from spec.api import (
    AUXILIARY_NAMES,
    CONFIG_CLASSES,
    FLAGS,
    LEGACY_FIELDS,
    LEGACY_NAMESPACE_KEYS,
    REMOVED_FLAG,
    TOTAL_LOSS,
)
from spec.terms import LOSS_NAMES, TOTAL_NAME

#: the statuses that make a cause (a passing, skipped or inapplicable invariant does not)
PROBLEMS = ("failed", "crashed", "timed out", "error", "not checked")
#: how much of a cause's text the summary shows
TEXT_WIDTH = 160
#: an aside in parentheses, which a cause too long for its line leaves out
_ASIDE = re.compile(r" \([^()]*\)")

Token = tuple[str, ...]


def _first_line(text: str) -> str:
    stripped = text.strip()
    return stripped.splitlines()[0] if stripped else ""


#: the two totals, J and compute_total_loss's total_loss
TOTALS = (TOTAL_NAME, TOTAL_LOSS)
#: every name an output, a config field, a flag or an auxiliary term goes by
VOCABULARY: tuple[str, ...] = tuple(
    dict.fromkeys(
        (
            *LOSS_NAMES,
            *(f.name for fields in CONFIG_CLASSES.values() for f in fields),
            *FLAGS,
            *AUXILIARY_NAMES,
            TOTAL_LOSS,
            *LEGACY_FIELDS,
            *LEGACY_NAMESPACE_KEYS,
            REMOVED_FLAG,
        )
    )
)
_NAMES = re.compile("|".join(rf"\b{re.escape(n)}\b" for n in sorted(VOCABULARY, key=len)[::-1]))
_NUMBERS = re.compile(r"-?\d+(\.\d+)?(e[-+]?\d+)?")


def _error_form(text: str) -> str:
    """An error's words with the names and numbers in it left out: the same check of the
    target's, whichever field or value it met (``posterior_entropy must be given: its
    weight is 1.0`` and the same of posterior_variance)."""
    return _NUMBERS.sub("#", _NAMES.sub("<name>", text))


def signature(result: InvariantResult) -> frozenset[Token]:
    """The evidence of one failure (module docstring)."""
    failure = result.failure
    assert failure is not None
    if result.status == "crashed":
        return frozenset({("crashed", _first_line(failure.message).split(" in a call")[0])})
    if result.status in ("timed out", "error", "not checked"):
        return frozenset({(result.status, _first_line(failure.message))})
    tokens: set[Token] = {("variant", output, name) for output, name in failure.variants}
    if failure.state is not None or failure.flaky:
        tokens.add(("state",))
    if failure.raised is not None:
        tokens.add(("raised", failure.raised))
    tokens |= {("target error", _error_form(text)) for text in failure.target_errors}
    if not failure.variants:
        tokens |= {("trigger", kind) for kind in failure.trigger_kinds}
    if not tokens:
        # a NaN or inf where the spec's value is finite fails every invariant that reads it
        tokens |= {("non-finite", name) for name in failure.non_finite if name not in TOTALS}
    if not tokens:
        failing = [name for name in failure.failing if name in VOCABULARY]
        if not failing:  # a record's part ("bundle", "fields"): the names its message says
            failing = [n for n in VOCABULARY if re.search(rf"\b{n}\b", failure.message)]
        # the totals follow from the terms: named only where nothing else is, as one
        names = [name for name in failing if name not in TOTALS]
        names = names or [TOTAL_NAME for _ in failing[:1]] or list(failure.failing)
        tokens |= {("output", name) for name in names} or {("invariant", result.invariant_id)}
    return frozenset(tokens)


@dataclass
class Cause:
    """The failures that share a cause, in catalogue order, and the one the report shows."""

    results: list[InvariantResult]
    representative: InvariantResult
    evidence: frozenset[Token]

    @property
    def others(self) -> list[InvariantResult]:
        return [r for r in self.results if r is not self.representative]

    @property
    def text(self) -> str:
        shown = self.representative.failure
        assert shown is not None
        numbered = {t[1:] for t in self.evidence if t[0] == "variant"}
        if shown.variants or not numbered & set(shown.nan_variants):
            return describe(self.representative)
        # the smallest input shows the variant's NaN: a failure that gives its number names it
        named = next(r.failure for r in self.results if r.failure and r.failure.variants)
        triggers = "".join(f"; shown where {t} triggers it" for t in shown.triggers[:1])
        return _clip(_variant_text(named.variants) + triggers)


def _rank(
    result: InvariantResult, position: int, numbered: frozenset[tuple[str, str]] = frozenset()
) -> tuple[int, ...]:
    """How telling ``result`` is, least first; ``numbered``: the variants its cause's
    failures match by number, whose NaN on a degenerate row names them as well."""
    failure = result.failure
    assert failure is not None
    # triggers are not looked for on every failure (properties.followup), so they do not
    # rank: a failure would be shown for being the one looked at first
    named = bool(failure.raised or failure.state or failure.flaky)
    plain = failure.shown is None or isinstance(failure.shown, LossCase)
    batch, length = failure.shape or (0, 0)
    return (
        PROBLEMS.index(result.status),
        # state a replay found: the variants that stale values match say nothing more
        0 if failure.state is not None else 1,
        0 if failure.state or failure.variants or numbered & set(failure.nan_variants) else 1,
        0 if named else 1,
        0 if plain else 1,  # one batch reads faster than a record of several
        batch * length,  # the smallest input that shows the cause
        position,
    )


def group(results: Sequence[InvariantResult], order: Callable[[str], int]) -> list[Cause]:
    """The causes of the problems among ``results``, in the order of their representatives
    in the catalogue (``order``: an invariant id's position there)."""
    problems = sorted(
        (r for r in results if r.status in PROBLEMS and r.failure is not None),
        key=lambda r: order(r.invariant_id),
    )
    groups: list[tuple[set[Token], list[InvariantResult]]] = []
    for result in problems:
        tokens = set(signature(result))
        joined = [g for g in groups if g[0] & tokens]
        for g in joined:
            groups.remove(g)
            tokens |= g[0]
        members = [r for g in joined for r in g[1]] + [result]
        groups.append((tokens, members))
    groups = _absorb_explained(_join_variant_nans(groups))
    causes = []
    for tokens, members in groups:
        members.sort(key=lambda r: order(r.invariant_id))
        numbered = frozenset(t[1:] for t in tokens if t[0] == "variant")
        best = min(members, key=lambda r: _rank(r, order(r.invariant_id), numbered))
        causes.append(Cause(members, best, frozenset(tokens)))
    # the cause that broke the most invariants first: a variant that one input matches by
    # coincidence breaks one or two, the mistake itself most of them
    causes.sort(
        key=lambda c: (
            -len(c.results),
            _rank(c.representative, order(c.representative.invariant_id), frozenset()),
        )
    )
    return causes


def _join_variant_nans(
    groups: list[tuple[set[Token], list[InvariantResult]]],
) -> list[tuple[set[Token], list[InvariantResult]]]:
    """A group whose NaN a known variant gives too (and that matches no variant's number)
    joins the group that matches that variant's number: on a degenerate row (all b = 0)
    the mistake shows as NaN, elsewhere as a wrong number. A NaN alone does not group (many
    variants are NaN on the same row): it only joins a variant the numbers name."""
    numbers = [g for g in groups if any(t[0] == "variant" for t in g[0])]
    kept = []
    for tokens, members in groups:
        nans = {
            ("variant", *pair)
            for r in members
            if r.failure is not None and not r.failure.variants
            for pair in r.failure.nan_variants
        }
        home = next((g for g in numbers if g[0] & nans), None) if nans else None
        if home is None or any(t[0] == "variant" for t in tokens):
            kept.append((tokens, members))
            continue
        home[0].update(tokens)
        home[1].extend(members)
    return kept


def _absorb_explained(
    groups: list[tuple[set[Token], list[InvariantResult]]],
) -> list[tuple[set[Token], list[InvariantResult]]]:
    """A group with nothing but outputs off or NaN (the weakest evidence) joins the group
    of stronger evidence (a variant, a trigger, an exception, state) whose failures find
    the most of those outputs off, where one does: that evidence explains them."""
    strong = [g for g in groups if not _weak(g[0])]
    outputs = {id(g[1]): _outputs_off(g[1]) for g in strong}
    kept = []
    for tokens, members in groups:
        if not _weak(tokens):
            kept.append((tokens, members))
            continue
        mine = {t[1] for t in tokens}  # the outputs its tokens name
        overlaps = [(len(mine & outputs[id(g[1])]), n) for n, g in enumerate(strong)]
        best = max(overlaps, default=(0, -1))
        if best[0] > 0:
            home = strong[best[1]]
            home[0].update(tokens)
            home[1].extend(members)
            continue
        kept.append((tokens, members))
    return kept


#: evidence that only says what is off, not why: a group of it alone joins a group of more
WEAK = ("output", "non-finite")


def _weak(tokens: set[Token]) -> bool:
    return all(t[0] in WEAK for t in tokens)


def _outputs_off(results: list[InvariantResult]) -> set[str]:
    """The outputs the failures of a group find off (the total aside)."""
    found: set[str] = set()
    for result in results:
        failure = result.failure
        assert failure is not None
        found |= set(failure.failing) | set(failure.non_finite)
        found |= {output for output, _ in failure.variants}
    return found - set(TOTALS)


def _has(tokens: set[Token], kind: str) -> bool:
    return any(t[0] == kind for t in tokens)


def describe(result: InvariantResult) -> str:
    """One line that names the cause of ``result``'s failure, from its evidence."""
    failure = result.failure
    assert failure is not None
    if failure.state is not None:
        return _clip(f"the target keeps state between calls: {failure.state}")
    if failure.flaky:
        return _clip(
            "the same input failed, then passed when tried again: the target keeps state "
            "between calls or is not deterministic"
        )
    if failure.variants:
        return _clip(_variant_text(failure.variants))
    if result.status != "failed":
        return _clip(_first_line(failure.message))
    suffix = ""
    if failure.raised is not None:
        text = _first_line(failure.message)
    elif failure.non_finite:
        # the outputs a known variant gives the same NaN first: the one the mistake is in
        named = [o for o, _ in failure.nan_variants if o in failure.non_finite]
        outputs = list(dict.fromkeys([*named, *failure.non_finite]))
        text = f"{_outputs(outputs)} NaN or inf where the spec's value is finite"
        if failure.nan_variants:  # what names it before what a short line may cut
            variant = failure.nan_variants[0][1].split(" (")[0]
            text = f"{_outputs(outputs)} NaN or inf as the known variant {variant} is, where "
            text += "the spec's value is finite"
    else:
        text = _first_line(failure.message)
    if failure.triggers:
        suffix = f"; triggered by {' and by '.join(failure.triggers)}" + suffix
    return _clip(text, TEXT_WIDTH - len(suffix)) + suffix


def _variant_text(variants: Sequence[tuple[str, str]]) -> str:
    """The known variant that the most outputs match (a mistake shows in every output built
    the wrong way: kappa taken from l moves kappa and R_cc), and those outputs."""
    families: dict[str, list[tuple[str, str]]] = {}
    for output, title in variants:
        families.setdefault(title.split()[0], []).append((output, title))
    most = max(len(family) for family in families.values())
    tied = [family for family in families.values() if len(family) == most]
    chosen = tied[0]
    outputs = list(dict.fromkeys(output for output, _ in chosen))
    more = f" (and {len(outputs) - 1} more output{'s' if len(outputs) > 2 else ''})"
    # on a small input two variants can give the same values: each is named
    titles = " or the known variant ".join(family[0][1] for family in tied[:2])
    return f"{outputs[0]} matches the known variant {titles}" + (more if len(outputs) > 1 else "")


def _outputs(names: Sequence[str]) -> str:
    """``a``, ``a and b``, or ``a and 3 more outputs``: a cause's line stays short."""
    if len(names) <= 2:
        return " and ".join(names) + (" are" if len(names) == 2 else " is")
    return f"{names[0]} and {len(names) - 1} more outputs are"


def _clip(text: str, width: int = TEXT_WIDTH) -> str:
    """``text`` within ``width``: where it is longer, without its asides in parentheses
    (numbers, reasons); then its first clause (what the rule is about, up to two thirds
    of the line) and the start of the rest (what was found), each shortened to its share."""
    width = max(width, 40)
    if len(text) <= width:
        return text
    text = _ASIDE.sub("", text)
    if len(text) <= width:
        return text
    head, colon, rest = text.partition(": ")
    if colon:
        # a short line (long triggers after it) keeps a clause that fits whole: a middle cut
        # of "token_nll was modified by the call" loses what the rule found
        kept = len(head) if len(head) + 5 <= width < TEXT_WIDTH // 2 else 0
        head = _cut_middle(head, max(width * 2 // 3, width - len(rest) - 2, kept))
        left = width - len(head) - 2
        return head + colon + (_cut(rest, left) if left >= 8 else "...")
    return _cut(text, width)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _cut_middle(text: str, width: int) -> str:
    """``text`` within ``width``, its middle left out: a clause's subject and its last
    words (what is said of it: "... detached") both stay."""
    if len(text) <= width:
        return text
    end = (width - 5) // 3
    start, last = text[: width - 5 - end], text[-end:]
    # whole words, where that keeps most of each part (an identifier is one long word)
    space = start.rfind(" ")
    start = start[:space] if space >= len(start) * 2 // 3 else start
    space = last.find(" ")
    last = last[space + 1 :] if 0 <= space <= len(last) // 3 else last
    return start + " ... " + last
