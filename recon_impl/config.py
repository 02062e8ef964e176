"""Configuration of the reconstruction loss stack and of the total disentanglement loss.

Both dataclasses are frozen and validated at construction (MATH.md, "Errors"): a bad value
raises ``ValueError`` naming the field and the rule it breaks. ``to_dict()`` gives the
nested run metadata; ``token_weight_alpha`` is logged there and never in the loss bundle.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass, make_dataclass
from numbers import Real
from typing import Any

from recon_impl.terms import CONFIG_FIELDS, DEFAULTS, PARAMETERS, RULES, TERMS


def finite_float(name: str, value: Any) -> float:
    """``value`` as a float, or ``ValueError`` naming ``name``: it must be a real number
    (numpy scalars included) that converts to a finite float; not a bool, a string, NaN,
    an infinity or an integer too large for a float (10**400)."""
    # bool is an int subclass; a weight of True is a typo, not a number.
    if isinstance(value, bool) or not isinstance(value, Real):
        kind = type(value).__name__
        raise ValueError(f"{name} must be a real number, got {kind} {_short(value)}")
    try:
        converted = float(value)
    except OverflowError:
        converted = math.inf
    if not math.isfinite(converted):
        raise ValueError(
            f"{name} must be finite (a real number that converts to a finite float), "
            f"got {_short(value)}"
        )
    return converted


def check_config_type(argument: str, value: Any, expected: type) -> None:
    """``ValueError`` naming ``argument`` unless ``value`` is an ``expected`` (a config class
    of this module). Both classes are named with their modules, since a config of another
    package (a conformance suite's record, say) may share the class name, and the message
    says how to convert ``value`` where ``recon_impl``'s constructor accepts its fields."""
    if isinstance(value, expected):
        return
    wanted, got = _qualified_name(expected), _qualified_name(type(value))
    if type(value).__name__ == expected.__name__:
        got += (
            " (another class object of the same module and name: that module was loaded twice)"
            if got == wanted
            else " (another class of the same name)"
        )
    message = f"{argument} must be a {wanted}, got {got}"
    try:
        conversion = _conversion(argument.rpartition(".")[2], value, expected)
    except Exception:  # the hint is optional: whatever fails in it, this ValueError stands
        conversion = None
    raise ValueError(message + (f"; convert it with {conversion}" if conversion else ""))


def _qualified_name(cls: type) -> str:
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _conversion(name: str, value: Any, expected: type) -> str | None:
    """The expression that builds an ``expected`` from ``value`` (called ``name``): from a
    dataclass with exactly ``expected``'s fields or a mapping of some of them, and only
    where the constructor takes them as they are (``asdict`` turns a nested config into a
    dict, which ``DisentanglementLossConfig`` refuses); raises where it does not."""
    names = {f.name for f in fields(expected)}
    if is_dataclass(value) and not isinstance(value, type):
        if {f.name for f in fields(value)} != names:
            return None
        expression = f"recon_impl.{expected.__name__}(**dataclasses.asdict({name}))"
        as_keywords: Callable[[Any], dict[str, Any]] = asdict
    elif isinstance(value, Mapping) and set(value) <= names:
        expression = f"recon_impl.{expected.__name__}(**{name})"
        as_keywords = dict
    else:
        return None
    expected(**as_keywords(value))  # the conversion is suggested only where it works
    return expression


def _check_real(owner: str, name: str, value: Any) -> float:
    return finite_float(f"{owner}.{name}", value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...{text[-8:]} ({len(text)} characters)"


def _check_non_negative(owner: str, name: str, value: Any) -> float:
    value = _check_real(owner, name, value)
    if value < 0:
        raise ValueError(f"{owner}.{name} must be >= 0, got {value!r}")
    return value


def _check_positive(owner: str, name: str, value: Any) -> float:
    value = _check_real(owner, name, value)
    if value <= 0:
        raise ValueError(f"{owner}.{name} must be > 0, got {value!r}")
    return value


_CHECKS: dict[str, Callable[[str, str, Any], float]] = {
    "non-negative": _check_non_negative,
    "positive": _check_positive,
}
_COUNT = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _reconstruction_doc() -> str:
    """The config's docstring, from the term table."""
    parts = [rf"w_\mathrm{{{t.symbol}}} R_\mathrm{{{t.symbol}}}" for t in TERMS]
    lines = [" + ".join(parts[i : i + 2]) for i in range(0, len(parts), 2)]
    formula = "\n            + ".join(lines)
    args = [f"{t.weight_field}: w_{t.symbol}, on ``{t.name}``." for t in TERMS]
    args += [f"{p.field}: {p.doc}" for p in PARAMETERS]
    wrapped = "\n".join(
        textwrap.fill(
            a,
            88,
            initial_indent=" " * 8,
            subsequent_indent=" " * 12,
            break_long_words=False,
            break_on_hyphens=False,
        )
        for a in args
    )
    count = _COUNT[len(TERMS)] if len(TERMS) < len(_COUNT) else str(len(TERMS))
    return f"""Weights and parameters of the {count} reconstruction terms.

    The total reconstruction loss is

    .. math::

        J = {formula}

    Args:
{wrapped}

    Example:
        >>> cfg = ReconstructionLossConfig(token_weighted_weight=0.5, token_weight_alpha=2.0)
        >>> cfg.to_dict()["token_weight_alpha"]
        2.0
    """


def _validate_reconstruction(self: Any) -> None:
    owner = type(self).__name__
    for name, rule in RULES.items():
        # Stored as float so that run metadata has one type per field.
        object.__setattr__(self, name, _CHECKS[rule](owner, name, getattr(self, name)))


def _to_dict(self: Any) -> dict[str, float]:
    """The config as run metadata: every field, by name."""
    return asdict(self)


# A frozen dataclass whose fields (in CONFIG_FIELDS order), defaults and rules are the
# term table's: a term or parameter added there is a field here, validated, with no edit.
ReconstructionLossConfig = make_dataclass(
    "ReconstructionLossConfig",
    [(name, "float", field(default=DEFAULTS[name])) for name in CONFIG_FIELDS],
    namespace={
        "__doc__": _reconstruction_doc(),
        "__post_init__": _validate_reconstruction,
        "to_dict": _to_dict,
    },
    frozen=True,
)
ReconstructionLossConfig.__module__ = __name__


@dataclass(frozen=True)
class DisentanglementLossConfig:
    """Weights of every term of the total loss; see ``compute_total_loss``.

    ``total_loss = J + beta * kl + [enable_router_support_loss] * router_support_weight *
    router_support + posterior_entropy_weight * posterior_entropy + ...``, one weight per
    auxiliary term, with J the ``total_reconstruction_loss`` of ``reconstruction``.

    The auxiliary terms are computed by the model and passed to ``compute_total_loss`` as
    0-dim tensors; this package only weighs them, and what each one measures is the
    model's (the descriptions below say what the names stand for). A term whose weight is
    non-zero must be passed; a zero-weight term may be left out, and is logged but not added
    when passed. Weights are >= 0, so a term the model wants to *increase* (an entropy
    bonus, say) is passed with its sign flipped.

    Args:
        reconstruction: the ``ReconstructionLossConfig`` of the reconstruction terms
            (their weights, alpha, epsilon and the z-free reference scale c); their
            weighted sum is ``total_reconstruction_loss`` (J).
        beta: weight on ``kl``, the KL divergence of the latent posterior q(z | x) from the
            prior p(z) (beta = 1: the plain evidence lower bound; beta != 1: a beta-VAE).
        router_support_weight: weight on ``router_support``. In a model with a *router*,
            the part that gives each example a distribution over latent components (or
            codes, or experts), ``router_support`` is the model's loss on the support of
            that distribution: which components receive probability mass. Counts only
            when ``enable_router_support_loss`` is true.
        posterior_entropy_weight: weight on ``posterior_entropy``, the model's term on the
            entropy of its posterior over z.
        posterior_variance_weight: weight on ``posterior_variance``, the model's term on
            the variance of its posterior over z.
        router_marginal_kl_to_prior_weight: weight on ``router_marginal_kl_to_prior``, the
            KL divergence of the router's marginal distribution over components (its
            per-example distributions averaged over the batch) from a prior over them.
        router_supervision_weight: weight on ``router_supervision``, a supervised loss on
            the router's choice where the right component is known.
        enable_router_support_loss: the switch of ``router_support``: when False, its
            weight is 0 whatever ``router_support_weight`` says, and the term may be left
            out.
        inter_latent_divergence_weight: weight on ``inter_latent_divergence``, the model's
            divergence between its latent components (their posteriors, say).

    The defaults are the design's: ``beta = 1`` and ``router_support_weight = 1`` with
    ``enable_router_support_loss = True``. A model without a router (a plain VAE) must
    therefore switch router support off, ``enable_router_support_loss=False`` (or
    ``router_support_weight=0.0``); otherwise ``compute_total_loss`` raises
    ``ValueError: router_support must be given: its weight is 1.0``.

    Example:
        >>> cfg = DisentanglementLossConfig(beta=0.5, enable_router_support_loss=False)
        >>> cfg.to_dict()["reconstruction"]["raw_weight"], cfg.router_support_weight
        (1.0, 1.0)
    """

    reconstruction: ReconstructionLossConfig = field(default_factory=ReconstructionLossConfig)
    beta: float = 1.0
    router_support_weight: float = 1.0
    posterior_entropy_weight: float = 0.0
    posterior_variance_weight: float = 0.0
    router_marginal_kl_to_prior_weight: float = 0.0
    router_supervision_weight: float = 0.0
    enable_router_support_loss: bool = True
    inter_latent_divergence_weight: float = 0.0

    def __post_init__(self) -> None:
        owner = type(self).__name__
        check_config_type(f"{owner}.reconstruction", self.reconstruction, ReconstructionLossConfig)
        if not isinstance(self.enable_router_support_loss, bool):
            raise ValueError(
                f"{owner}.enable_router_support_loss must be a bool, "
                f"got {self.enable_router_support_loss!r}"
            )
        for f in fields(self):
            if f.name not in ("reconstruction", "enable_router_support_loss"):
                value = _check_non_negative(owner, f.name, getattr(self, f.name))
                object.__setattr__(self, f.name, value)

    def to_dict(self) -> dict[str, Any]:
        """The config as nested run metadata (``reconstruction`` is a dict of its own)."""
        return asdict(self)
