"""``token_nll_from_logits`` (API.md, "token_nll_from_logits"): recon_impl's per-token
cross-entropy with the causal-LM shift, beyond the seed, so opt-in (``check-api
--with-logits``): the losses, the mask, the precision and the gradient against a float64
log-softmax, and the errors of bad arguments.

The logits come from a seeded generator (a drawn seed, shape and spread), as in the
``oracle-agreement-logits`` invariant of the stack: ``B*T*V`` drawn floats would be slow to
draw and no easier to read. The labels are drawn one by one, each shrinking to class 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import torch
from hypothesis import strategies as st

from properties.api.invariant import ApiInvariant
from properties.api.probe import ApiProbe, short
from properties.cases import DTYPE_NAMES
from properties.invariant import InvariantViolation, NamedInput
from properties.messages import naming
from properties.reproduction import inputs_after_lines
from properties.strategies import DEFAULT_DOMAIN, Domain, shapes
from properties.tolerances import computation_dtype, cross_entropy_tolerance
from spec.api import DEFAULT_IGNORE_INDEX, DEFAULT_SHIFT, TOKEN_NLL_FROM_LOGITS

REFS = ("API.md#token_nll_from_logits",)
NEEDS = (TOKEN_NLL_FROM_LOGITS,)
#: label dtypes drawn: int64 first (what tokenizers give), then narrower ones
LABEL_DTYPES: tuple[torch.dtype, ...] = (torch.int64, torch.int32, torch.uint8)
#: vocabulary sizes beyond the small ones: where uint8 labels meet ignore_index modulo 256
LARGE_VOCABULARIES: tuple[int, ...] = (200, 256)


@dataclass(frozen=True)
class LogitsCase:
    """One call: ``[B, T, V]`` logits from ``seed`` (standard normal times ``spread``, in
    ``dtype``), the labels (Python ints, ``ignore_index`` at padding) in ``label_dtype``."""

    vocab: int
    seed: int
    spread: float
    dtype: torch.dtype
    labels: tuple[tuple[int, ...], ...]
    label_dtype: torch.dtype = torch.int64
    ignore_index: int = DEFAULT_IGNORE_INDEX
    shift: bool = DEFAULT_SHIFT

    @property
    def shape(self) -> tuple[int, int, int]:
        return len(self.labels), len(self.labels[0]), self.vocab

    def logits(self) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed)
        values = torch.randn(*self.shape, generator=generator, dtype=torch.float64)
        return (values * self.spread).to(self.dtype)

    def tensors(self, *, requires_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.logits().requires_grad_(requires_grad)
        return logits, torch.tensor(self.labels, dtype=self.label_dtype)

    def lines(self, k: int, *, requires_grad: bool = False) -> list[str]:
        grad = ".requires_grad_()" if requires_grad else ""
        return [
            f"generator_{k} = torch.Generator().manual_seed({self.seed})",
            f"logits_{k} = (torch.randn({', '.join(map(str, self.shape))}, "
            f"generator=generator_{k}, "
            f"dtype=torch.float64) * {self.spread!r}).to(torch.{DTYPE_NAMES[self.dtype]}){grad}",
            f"labels_{k} = torch.tensor({list(map(list, self.labels))}, dtype={self.label_dtype})",
        ]

    @property
    def has_valid_token(self) -> bool:
        """Whether some label past the shift is a target (not ``ignore_index``): what a
        row or column taken away (``properties.runner``) must leave."""
        return any(y != self.ignore_index for row in self.labels for y in row[int(self.shift) :])

    def without_row(self, i: int) -> LogitsCase:
        """The call without example ``i`` (its logits are drawn anew, from the same seed)."""
        return replace(self, labels=self.labels[:i] + self.labels[i + 1 :])

    def without_column(self, t: int) -> LogitsCase:
        """The call without position ``t`` of every row."""
        return replace(self, labels=tuple(row[:t] + row[t + 1 :] for row in self.labels))

    def arguments(self) -> dict[str, Any]:
        """The keywords of the call: those that differ from the defaults (which are then
        checked too)."""
        given = {"ignore_index": self.ignore_index, "shift": self.shift}
        defaults = {"ignore_index": DEFAULT_IGNORE_INDEX, "shift": DEFAULT_SHIFT}
        return {name: value for name, value in given.items() if value != defaults[name]}

    def __repr__(self) -> str:
        return (
            f"LogitsCase(logits=[B, T, V] = {list(self.shape)} {DTYPE_NAMES[self.dtype]} from "
            f"seed {self.seed} times {self.spread}, labels={list(map(list, self.labels))} "
            f"{self.label_dtype}, ignore_index={self.ignore_index}, shift={self.shift})"
        )


def _representable(value: int, dtype: torch.dtype) -> bool:
    info = torch.iinfo(dtype)
    return info.min <= value <= info.max


@st.composite
def logits_cases(draw: st.DrawFn, domain: Domain = DEFAULT_DOMAIN) -> LogitsCase:
    """Small logits (T = 0 included), labels of every integer dtype with padding where the
    dtype holds ``ignore_index`` (a uint8 label cannot be -100: it is a class there), the
    default ``ignore_index`` or a class id, with and without the shift (which never reads
    ``labels[:, 0]``: it may hold anything, an id out of range included)."""
    batch, length = draw(shapes(domain, min_length=0))
    vocab = draw(st.one_of(st.integers(2, 16), st.sampled_from(LARGE_VOCABULARIES)))
    label_dtype = draw(st.sampled_from(LABEL_DTYPES))
    ignore_index = draw(st.sampled_from([DEFAULT_IGNORE_INDEX, vocab, 0, vocab - 1]))
    # the label that equals ignore_index modulo the label dtype's range, where it is a class
    wrapped = ignore_index % 2 ** torch.iinfo(label_dtype).bits
    edges = [v for v in (vocab - 1, wrapped) if v < vocab and v != ignore_index]
    label = st.one_of(st.integers(0, vocab - 1), st.sampled_from(edges or [0]))
    can_pad = _representable(ignore_index, label_dtype)
    labels = []
    for _ in range(batch):
        row = []
        for _ in range(length):
            value = draw(label)
            padded = can_pad and draw(st.booleans())
            row.append(ignore_index if padded or value == ignore_index else value)
        labels.append(tuple(row))
    shift = draw(st.booleans())
    if shift and length > 0:
        info = torch.iinfo(label_dtype)
        junk = st.sampled_from([v for v in (info.max, info.min, vocab) if v <= info.max])
        labels = [(draw(junk) if draw(st.booleans()) else row[0], *row[1:]) for row in labels]
    return LogitsCase(
        vocab=vocab,
        seed=draw(st.integers(0, 2**31 - 1)),
        spread=draw(st.sampled_from([1.0, 0.1, 10.0])),
        dtype=draw(st.sampled_from(domain.dtypes)),
        labels=tuple(labels),
        label_dtype=label_dtype,
        ignore_index=ignore_index,
        shift=shift,
    )


# --- the reference -------------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    token_nll: torch.Tensor  # float64, 0 at ignored positions
    mask: torch.Tensor  # bool
    softmax: torch.Tensor  # float64 [B, T', V]
    targets: torch.Tensor  # int64 [B, T'] (0 where ignored)


def expected_losses(case: LogitsCase) -> Expected:
    """-log softmax(z_it)[y_it] in float64 of the logits' exact values, where y is the
    labels (``labels[:, 1:]`` under the shift) and not ``ignore_index``."""
    logits = case.logits().double()
    labels = torch.tensor(case.labels, dtype=torch.int64)
    if case.shift:
        logits, labels = logits[:, :-1], labels[:, 1:]
    mask = labels != case.ignore_index
    targets = torch.where(mask, labels, 0)
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, targets[..., None])[..., 0]
    return Expected(torch.where(mask, nll, 0.0), mask, log_p.exp(), targets)


def upstream_weights(shape: Sequence[int]) -> torch.Tensor:
    """u_t = 1/4, 1/2, 3/4, 1, ... in row-major order (exact in every dtype)."""
    count = math.prod(shape)
    return ((torch.arange(count) % 4 + 1).double() / 4).reshape(*shape)


GRADIENT_LINES = (
    "u_{k} = ((torch.arange(token_nll_{k}.numel()) % 4 + 1) / 4).reshape(token_nll_{k}.shape)",
    "(grad_{k},) = torch.autograd.grad((token_nll_{k} * u_{k}).sum(), logits_{k})",
    "print('d (sum u token_nll) / d logits:', grad_{k})",
)


def expected_gradient(case: LogitsCase, reference: Expected) -> torch.Tensor:
    """d(sum_t u_t l_t)/dz = u_t (softmax(z_t) - onehot(y_t)) at valid positions, else 0."""
    u = upstream_weights(reference.mask.shape)
    onehot = torch.nn.functional.one_hot(reference.targets, case.vocab).double()
    part = torch.where(reference.mask[..., None], (reference.softmax - onehot) * u[..., None], 0.0)
    full = torch.zeros(case.shape, dtype=torch.float64)
    full[:, : part.shape[1]] = part
    return full


# --- logits-token-nll ----------------------------------------------------------------------


def _unchanged(before: torch.Tensor, after: torch.Tensor) -> bool:
    return before.dtype == after.dtype and torch.equal(before.detach(), after.detach())


def check_token_nll(probe: ApiProbe, case: LogitsCase) -> None:
    then = inputs_after_lines(("logits", "labels"))
    returned, (logits, labels) = probe.logits_call(case, gradients=True, then=then)
    if not isinstance(returned, tuple) or len(returned) != 2:
        raise InvariantViolation(
            f"{TOKEN_NLL_FROM_LOGITS} returns the pair (token_nll, mask), got "
            f"{type(returned).__name__}",
            case=case,
            failing=("token_nll",),
        )
    token_nll, mask = returned
    reference = expected_losses(case)
    shape = tuple(reference.mask.shape)
    dtype = computation_dtype(case.dtype)
    problems = []
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != shape:
        problems.append(f"mask must be a bool {list(shape)} tensor, got {_describe(mask)}")
    elif not torch.equal(mask, reference.mask):
        problems.append(
            f"mask is {mask.tolist()}, expected {reference.mask.tolist()} (True where the "
            f"target{', labels[:, 1:] under the shift,' if case.shift else ''} is not "
            f"ignore_index={case.ignore_index}, compared as integers)"
        )
    if not isinstance(token_nll, torch.Tensor) or token_nll.shape != shape:
        problems.append(f"token_nll must be a {list(shape)} tensor, got {_describe(token_nll)}")
    else:
        if token_nll.dtype != dtype:
            problems.append(
                f"token_nll is {DTYPE_NAMES.get(token_nll.dtype, token_nll.dtype)}, expected "
                f"{DTYPE_NAMES[dtype]} for {DTYPE_NAMES[case.dtype]} logits"
            )
        largest = float(case.logits().double().abs().max()) if logits.numel() else 0.0
        tolerance = cross_entropy_tolerance(case.dtype, vocab=case.vocab, largest=largest)
        observed = token_nll.detach().double()
        off = (observed - reference.token_nll).abs() > tolerance.atol
        off |= ~reference.mask & (observed != 0)  # exactly 0 where ignored
        off |= observed.isnan()
        if bool(off.any()):
            where = tuple(off.nonzero()[0].tolist())
            problems.append(
                f"token_nll differs from -log softmax(z)[y] (float64; 0 where ignored) at "
                f"{int(off.sum())} of {off.numel()} positions, first {list(where)}: observed "
                f"{float(observed[where]):.9g}, expected {float(reference.token_nll[where]):.9g} "
                f"(allowed |diff| {tolerance.atol:.3g})\n  observed {observed.tolist()}\n"
                f"  expected {reference.token_nll.tolist()}"
            )
        elif token_nll.requires_grad:
            problems += _gradient_problems(case, reference, token_nll, logits, largest)
        else:
            problems.append("token_nll does not require grad although the logits do")
    fresh_logits, fresh_labels = case.tensors()
    problems += [
        f"it modified the caller's {name}: {short(str(after.tolist()))}, was "
        f"{short(str(before.tolist()))}"
        for name, before, after in (
            ("logits", fresh_logits, logits),
            ("labels", fresh_labels, labels),
        )
        if not _unchanged(before, after)
    ]
    if problems:
        raise InvariantViolation(
            f"{TOKEN_NLL_FROM_LOGITS}(logits, labels, ignore_index={case.ignore_index}, "
            f"shift={case.shift}): " + "; ".join(problems),
            case=case,
            failing=("token_nll",),
        )


def _gradient_problems(
    case: LogitsCase, reference: Expected, token_nll: torch.Tensor, logits: torch.Tensor,
    largest: float,
) -> list[str]:  # fmt: skip
    u = upstream_weights(token_nll.shape).to(token_nll.dtype)
    (grad,) = torch.autograd.grad((token_nll * u).sum(), logits, allow_unused=True)
    grad = torch.zeros_like(logits) if grad is None else grad
    want = expected_gradient(case, reference)
    tolerance = cross_entropy_tolerance(
        case.dtype, vocab=case.vocab, largest=largest, gradient=True
    )
    difference = (grad.detach().double() - want).abs()
    if grad.dtype != case.dtype:
        return [f"the gradient is {grad.dtype}, not the logits' {case.dtype}"]
    if not bool((difference <= tolerance.atol).all()):
        where = tuple((~(difference <= tolerance.atol)).nonzero()[0].tolist())
        return [
            f"d(sum_t u_t token_nll_t)/d logits differs from u_t (softmax(z_t) - onehot(y_t)) "
            f"(0 where ignored) first at {list(where)}: observed {float(grad[where]):.9g}, "
            f"expected {float(want[where]):.9g} (allowed |diff| {tolerance.atol:.3g}; u = 1/4, "
            "1/2, 3/4, 1, ... row by row)"
        ]
    return []


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{DTYPE_NAMES.get(value.dtype, value.dtype)} {list(value.shape)}"
    return type(value).__name__


# --- logits-rejects-invalid ----------------------------------------------------------------

Change = Callable[[torch.Tensor, torch.Tensor, dict[str, Any]], tuple[Any, Any, dict[str, Any]]]


def _out_of_range(case: LogitsCase) -> int:
    return case.vocab + 1 if case.ignore_index == case.vocab else case.vocab


class Corruption(NamedTuple):
    """A way to break a valid logits call, and what the ``ValueError`` names."""

    #: the argument the message must name
    argument: str
    #: the change of the call, and the same in Python
    build: Callable[[LogitsCase], tuple[Change, str]]
    #: the other arguments the broken rule relates to it, which the message may name too
    #: (API.md, "What an error names"): labels are indices into the logits, so each rule of
    #: theirs may name the logits (and the range, ignore_index); the logits' shape is the
    #: labels' [B, T]
    related: tuple[str, ...] = ()


#: the arguments of a call of token_nll_from_logits
ARGUMENTS = ("logits", "labels", "ignore_index", "shift")

#: kind -> the corruption
CORRUPTIONS: dict[str, Corruption] = {
    "a label outside [0, V) that is not ignore_index": Corruption(
        "labels",
        lambda case: (
            lambda z, y, kw: (z, _set_targets(y, _out_of_range(case), case.shift), kw),
            f"labels_{{k}} = labels_{{k}}.long(); "
            f"labels_{{k}}[0, {1 if case.shift else 0}] = {_out_of_range(case)}",
        ),
        ("logits", "ignore_index"),
    ),
    "labels of a floating dtype": Corruption(
        "labels",
        lambda case: (lambda z, y, kw: (z, y.double(), kw), "labels_{k} = labels_{k}.double()"),
        ("logits",),
    ),
    "labels of dtype bool": Corruption(
        "labels",
        lambda case: (lambda z, y, kw: (z, y != 0, kw), "labels_{k} = labels_{k} != 0"),
        ("logits",),
    ),
    "labels of another shape": Corruption(
        "labels",
        lambda case: (
            lambda z, y, kw: (z, torch.cat([y, y], dim=1), kw),
            "labels_{k} = torch.cat([labels_{k}] * 2, dim=1)",
        ),
        ("logits",),
    ),
    "labels that are not a tensor": Corruption(
        "labels",
        lambda case: (lambda z, y, kw: (z, y.tolist(), kw), "labels_{k} = labels_{k}.tolist()"),
        ("logits",),
    ),
    "labels on another device than the logits": Corruption(
        "labels",
        lambda case: (
            lambda z, y, kw: (z, y.to("meta"), kw),
            "labels_{k} = labels_{k}.to('meta')",
        ),
        ("logits",),
    ),
    "logits that are not a tensor": Corruption(
        "logits",
        lambda case: (
            lambda z, y, kw: (z.detach().tolist(), y, kw),
            "logits_{k} = logits_{k}.detach().tolist()",
        ),
    ),
    "logits that are not 3-D": Corruption(
        "logits",
        lambda case: (lambda z, y, kw: (z[..., 0], y, kw), "logits_{k} = logits_{k}[..., 0]"),
        ("labels",),
    ),
    "logits of an integer dtype": Corruption(
        "logits",
        lambda case: (
            lambda z, y, kw: (z.round().long(), y, kw),
            "logits_{k} = logits_{k}.round().long()",
        ),
    ),
    "ignore_index a bool": Corruption(
        "ignore_index",
        lambda case: (lambda z, y, kw: (z, y, {**kw, "ignore_index": True}), ""),
    ),
    "shift not a bool": Corruption(
        "shift",
        lambda case: (lambda z, y, kw: (z, y, {**kw, "shift": int(case.shift)}), ""),
    ),
}


def _set_targets(labels: torch.Tensor, value: int, shift: bool) -> torch.Tensor:
    # one target out of range, among targets in range: a check must look at each of them
    changed = labels.long().clone()
    changed[0, 1 if shift else 0] = value
    return changed


@dataclass(frozen=True)
class BadLogits:
    kind: str
    case: LogitsCase

    def with_case(self, case: LogitsCase) -> BadLogits:
        return replace(self, case=case)


@st.composite
def bad_logits(draw: st.DrawFn, domain: Domain = DEFAULT_DOMAIN) -> BadLogits:
    # a case where some label is a target, so that one can be out of range
    case = draw(logits_cases(domain).filter(lambda c: len(c.labels[0]) > int(c.shift)))
    return BadLogits(draw(st.sampled_from(list(CORRUPTIONS))), case)


def check_rejects_invalid(probe: ApiProbe, drawn: BadLogits) -> None:
    corruption = CORRUPTIONS[drawn.kind]
    argument = corruption.argument
    change, code = corruption.build(drawn.case)
    try:
        probe.logits_call(drawn.case, change=change, code=code)
    except ValueError as error:
        others = [(a,) for a in ARGUMENTS if a not in (argument, *corruption.related)]
        problem = naming(str(error), (argument,), others).problem
        if problem is None:
            return
        message = f"the ValueError {problem}; it says: {short(str(error))}"
    except Exception as error:
        message = f"expected ValueError naming {argument}, got {type(error).__name__}: {error}"
    else:
        probe.note("returns normally")
        message = f"expected ValueError naming {argument}, nothing was raised"
    raise InvariantViolation(f"{drawn.kind}: {message}", case=drawn.case, failing=("ValueError",))


# --- named inputs ----------------------------------------------------------------------------

UINT8_LABELS = LogitsCase(
    vocab=200,
    seed=0,
    spread=1.0,
    dtype=torch.float32,
    labels=((156, 3, 199),),
    label_dtype=torch.uint8,
)

INVARIANTS = (
    ApiInvariant(
        id="logits-token-nll",
        group="logits",
        statement="per-token -log softmax(z)[y] and its mask (shift, ignore_index, any integer "
        "labels), float32 or better, its gradient; the inputs unchanged",
        spec_refs=REFS,
        strategy=lambda domain: logits_cases(domain),
        check=check_token_nll,
        needs=NEEDS,
        opt_in=True,
        examples=(
            NamedInput(
                "uint8-labels",
                "uint8 labels compared with -100 in their own dtype compare with 156, so "
                "class 156 is taken for padding.",
                UINT8_LABELS,
            ),
            NamedInput(
                "bfloat16-shifted",
                "bfloat16 logits give float32 losses, and the shift ignores the last position",
                replace(
                    UINT8_LABELS,
                    vocab=7,
                    dtype=torch.bfloat16,
                    labels=((5, 1, -100, 6), (-100, 0, 2, 3)),
                    label_dtype=torch.int64,
                    shift=True,
                ),
            ),
            NamedInput(
                "more-rows-than-classes",
                "half-precision logits whose B*T rows outnumber the V classes: a loop over "
                "blocks of rows bounded by V leaves rows unwritten",
                replace(
                    UINT8_LABELS,
                    vocab=2,
                    dtype=torch.bfloat16,
                    labels=((0, 1, 1), (1, 0, -100)),
                    label_dtype=torch.int64,
                ),
            ),
            NamedInput(
                "rows-past-two-blocks",
                "half-precision logits of more rows than the V classes plus a block of rows "
                "(2^20 / V on the CPU): every block, to the last row, is computed",
                replace(
                    UINT8_LABELS,
                    vocab=1024,
                    dtype=torch.bfloat16,
                    labels=(tuple(i % 1024 for i in range(2100)),),
                    label_dtype=torch.int64,
                ),
            ),
            NamedInput(
                "one-class",
                "a vocabulary of one class with an ignored position: the index an ignored "
                "row stands in with must be a class too",
                replace(
                    UINT8_LABELS,
                    vocab=1,
                    dtype=torch.bfloat16,
                    labels=((0, -100),),
                    label_dtype=torch.int64,
                ),
            ),
        ),
    ),
    ApiInvariant(
        id="logits-rejects-invalid",
        group="logits",
        statement="labels out of range, not an integer tensor or elsewhere, logits not a "
        "3-D floating tensor, a bool ignore_index or a non-bool shift: ValueError naming it",
        spec_refs=REFS,
        strategy=lambda domain: bad_logits(domain),
        check=check_rejects_invalid,
        needs=NEEDS,
        opt_in=True,
    ),
)
