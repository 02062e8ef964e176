"""A correct API module written from seed 001 alone, sharing no code with ``recon_impl``.

``recon-spec check-api properties.zoo.api.correct`` must pass. It differs from
``recon_impl`` where the seed leaves room: its flags keep argparse's own destinations
(``args.raw_reconstruction_weight``, mapped to the fields by
``reconstruction_loss_config_from_args``), its stack is a few torch lines over the valid
positions (the row maximum of b taken out before the power), and validation is one table
of rules. The wrong modules of ``properties.zoo.api.wrong`` are this module with one
mistake each; the helpers below (``validate``, ``add_flags``, ``config_from_args``,
``total_loss``) are what they build on.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from numbers import Real
from typing import Any, ClassVar

import torch
from torch import Tensor

# --- configs -------------------------------------------------------------------------------

#: what each field accepts (the seed's types, MATH.md "Errors")
NON_NEGATIVE, POSITIVE, SWITCH, NESTED = "a real number >= 0", "a real number > 0", "a bool", ""


def _real(owner: str, name: str, value: Any, rule: str) -> float:
    # every real number but a bool (numpy's included, whose bool is no numbers.Real)
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{owner}.{name} must be {rule}, got {type(value).__name__} {value!r}")
    try:
        number = float(value)
    except OverflowError:
        digits = len(str(abs(value)))
        raise ValueError(f"{owner}.{name} must be finite, got a {digits}-digit integer") from None
    if not math.isfinite(number) or number < 0 or (rule == POSITIVE and number == 0):
        raise ValueError(f"{owner}.{name} must be {rule} (and finite), got {value!r}")
    return number


def validate(config: Any, rules: Mapping[str, str]) -> None:
    """Check every field of a frozen config against its rule; store numbers as floats."""
    owner = type(config).__name__
    for name, rule in rules.items():
        value = getattr(config, name)
        if rule == SWITCH:
            if not isinstance(value, bool):
                raise ValueError(f"{owner}.{name} must be a bool, got {value!r}")
        elif rule == NESTED:
            if not isinstance(value, type(config).nested):
                raise ValueError(
                    f"{owner}.{name} must be a ReconstructionLossConfig, got {value!r}"
                )
        else:
            object.__setattr__(config, name, _real(owner, name, value, rule))


RECONSTRUCTION_RULES = {
    "raw_weight": NON_NEGATIVE,
    "distribution_normalized_weight": NON_NEGATIVE,
    "example_inverse_surprisal_weight": NON_NEGATIVE,
    "token_weighted_weight": NON_NEGATIVE,
    "normalized_concentration_corrected_token_weighted_weight": NON_NEGATIVE,
    "token_weight_alpha": NON_NEGATIVE,
    "example_inverse_surprisal_epsilon": NON_NEGATIVE,
    "zfree_reference_scale": POSITIVE,
}


@dataclass(frozen=True)
class ReconstructionLossConfig:
    raw_weight: float = 1.0
    distribution_normalized_weight: float = 0.0
    example_inverse_surprisal_weight: float = 0.0
    token_weighted_weight: float = 0.0
    normalized_concentration_corrected_token_weighted_weight: float = 0.0
    token_weight_alpha: float = 1.0
    example_inverse_surprisal_epsilon: float = 1e-8
    zfree_reference_scale: float = 1.0

    def __post_init__(self) -> None:
        validate(self, RECONSTRUCTION_RULES)


@dataclass(frozen=True)
class DisentanglementLossConfig:
    #: the class ``reconstruction`` must be (a module with a config of its own sets it)
    nested: ClassVar[type] = ReconstructionLossConfig

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
        rules = {f.name: NON_NEGATIVE for f in fields(self)}
        rules.update(reconstruction=NESTED, enable_router_support_loss=SWITCH)
        validate(self, rules)


# --- trainer flags -------------------------------------------------------------------------

#: flag -> field, the seed's seven
FLAGS = {
    "--raw-reconstruction-weight": "raw_weight",
    "--distribution-normalized-reconstruction-weight": "distribution_normalized_weight",
    "--example-inverse-surprisal-reconstruction-weight": "example_inverse_surprisal_weight",
    "--token-weighted-reconstruction-weight": "token_weighted_weight",
    "--normalized-concentration-corrected-token-weighted-reconstruction-weight": (
        "normalized_concentration_corrected_token_weighted_weight"
    ),
    "--token-weighted-reconstruction-alpha": "token_weight_alpha",
    "--example-inverse-surprisal-epsilon": "example_inverse_surprisal_epsilon",
}
REMOVED_FLAG = "--normalize-reconstruction-loss"


def destination(flag: str) -> str:
    """argparse's own destination of a flag: ``--raw-reconstruction-weight`` ->
    ``raw_reconstruction_weight``."""
    return flag.removeprefix("--").replace("-", "_")


def non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be finite and >= 0, got {text!r}")
    return value


class RemovedFlag(argparse.Action):
    """The old boolean: a usage error that names its replacement, however it is given."""

    def __init__(self, option_strings: Any, dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs="?", default=argparse.SUPPRESS)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        parser.error(
            f"{REMOVED_FLAG} was removed: weigh distribution_normalized_reconstruction_loss "
            "with --distribution-normalized-reconstruction-weight"
        )


def add_flags(
    parser: argparse.ArgumentParser,
    defaults: Any,
    *,
    flags: Mapping[str, str] = FLAGS,
    value_type: Callable[[str], float] = non_negative,
    removed: type[argparse.Action] | None = RemovedFlag,
    **removed_options: Any,
) -> None:
    group = parser.add_argument_group("reconstruction loss")
    for flag, name in flags.items():
        group.add_argument(flag, type=value_type, default=getattr(defaults, name))
    if removed is not None:
        group.add_argument(REMOVED_FLAG, action=removed, help=argparse.SUPPRESS, **removed_options)


def config_from_args(
    args: argparse.Namespace, config_class: type, flags: Mapping[str, str] = FLAGS
) -> Any:
    return config_class(**{name: getattr(args, destination(flag)) for flag, name in flags.items()})


def add_reconstruction_loss_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, ReconstructionLossConfig())


def reconstruction_loss_config_from_args(args: argparse.Namespace) -> ReconstructionLossConfig:
    return config_from_args(args, ReconstructionLossConfig)


# --- the stack -----------------------------------------------------------------------------


def reconstruction_losses(
    token_nll: Tensor, zfree_token_nll: Tensor, mask: Tensor, config: Any
) -> dict[str, Tensor]:
    """The five terms, the two diagnostics and their total, as batch means over the kept
    examples (those with a valid token)."""
    valid = mask.bool()
    dtype = torch.promote_types(
        torch.promote_types(token_nll.dtype, zfree_token_nll.dtype), torch.float32
    )
    l = torch.where(valid, token_nll.to(dtype), 0.0)
    b = torch.where(valid, zfree_token_nll.detach().to(dtype), 0.0)
    n = valid.sum(1).to(dtype)
    kept = n > 0
    lbar, bbar = l.sum(1) / n.clamp(min=1), b.sum(1) / n.clamp(min=1)
    alpha = config.token_weight_alpha
    top = b.amax(1, keepdim=True)
    ratio = torch.where(top > 0, b / top, 1.0)
    powered = torch.where(valid & (ratio > 0) if alpha > 0 else valid, ratio.pow(alpha), 0.0)
    shares = powered / powered.sum(1, keepdim=True).clamp(min=1.0)
    ltok, btok = (shares * l).sum(1), (shares * b).sum(1)
    kappa = torch.where(bbar > 0, btok / bbar, 1.0)
    c = config.zfree_reference_scale

    def batch_mean(x: Tensor) -> Tensor:
        return torch.where(kept, x, 0.0).sum() / kept.sum()

    eps_denominator = torch.where(kept, bbar + config.example_inverse_surprisal_epsilon, 1.0)
    out = {
        "reconstruction_loss": batch_mean(lbar),
        "distribution_normalized_reconstruction_loss": batch_mean(lbar) / c,
        "example_inverse_surprisal_weighted_reconstruction_loss": batch_mean(
            lbar / eps_denominator
        ),
        "token_weighted_reconstruction_loss": batch_mean(ltok),
        "normalized_concentration_corrected_token_weighted_reconstruction_loss": batch_mean(
            ltok / kappa
        )
        / c,
    }
    weights = (
        config.raw_weight,
        config.distribution_normalized_weight,
        config.example_inverse_surprisal_weight,
        config.token_weighted_weight,
        config.normalized_concentration_corrected_token_weighted_weight,
    )
    total = sum(w * term for w, term in zip(weights, out.values(), strict=True))
    out["token_weighted_base_loss"] = batch_mean(btok)
    out["token_concentration_factor"] = batch_mean(kappa)
    out["total_reconstruction_loss"] = total
    return out


# --- the total loss ------------------------------------------------------------------------

#: auxiliary term -> its weight's field
AUXILIARY = {
    "kl": "beta",
    "router_support": "router_support_weight",
    "posterior_entropy": "posterior_entropy_weight",
    "posterior_variance": "posterior_variance_weight",
    "router_marginal_kl_to_prior": "router_marginal_kl_to_prior_weight",
    "router_supervision": "router_supervision_weight",
    "inter_latent_divergence": "inter_latent_divergence_weight",
}


def auxiliary_weights(config: Any) -> dict[str, float]:
    """Each term's effective weight: router support counts only while it is switched on."""
    weights = {name: getattr(config, weight) for name, weight in AUXILIARY.items()}
    if not config.enable_router_support_loss:
        weights["router_support"] = 0.0
    return weights


def total_loss(
    token_nll: Tensor,
    zfree_token_nll: Tensor,
    mask: Tensor,
    config: Any,
    terms: Mapping[str, Tensor | None],
    *,
    weights_of: Callable[[Any], dict[str, float]] = auxiliary_weights,
) -> dict[str, Tensor]:
    given = {name: value for name, value in terms.items() if value is not None}
    weights = weights_of(config)
    for name, weight in weights.items():
        if weight != 0 and name not in given:
            raise ValueError(f"{name} must be given: its weight is {weight}")
    out = reconstruction_losses(token_nll, zfree_token_nll, mask, config.reconstruction)
    total = out["total_reconstruction_loss"]
    for name, value in given.items():
        if weights[name] != 0:
            total = total + weights[name] * value
    return {**out, **given, "total_loss": total}


def compute_total_loss(
    token_nll: Tensor,
    zfree_token_nll: Tensor,
    mask: Tensor,
    config: DisentanglementLossConfig,
    *,
    kl: Tensor | None = None,
    router_support: Tensor | None = None,
    posterior_entropy: Tensor | None = None,
    posterior_variance: Tensor | None = None,
    router_marginal_kl_to_prior: Tensor | None = None,
    router_supervision: Tensor | None = None,
    inter_latent_divergence: Tensor | None = None,
) -> dict[str, Tensor]:
    terms = {
        "kl": kl,
        "router_support": router_support,
        "posterior_entropy": posterior_entropy,
        "posterior_variance": posterior_variance,
        "router_marginal_kl_to_prior": router_marginal_kl_to_prior,
        "router_supervision": router_supervision,
        "inter_latent_divergence": inter_latent_divergence,
    }
    return total_loss(token_nll, zfree_token_nll, mask, config, terms)


# --- token_nll_from_logits (recon_impl's, beyond the seed) ---------------------------------


def check_logits_arguments(logits: Any, labels: Any, ignore_index: Any, shift: Any) -> None:
    if not isinstance(logits, Tensor) or logits.dim() != 3 or not logits.is_floating_point():
        raise ValueError("logits must be a floating [B, T, V] tensor")
    integer = isinstance(labels, Tensor) and not (
        labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool
    )
    if not integer or labels.shape != logits.shape[:2] or labels.device != logits.device:
        raise ValueError("labels must be an integer [B, T] tensor, as the logits' and beside them")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise ValueError("ignore_index must be an int")
    if not isinstance(shift, bool):
        raise ValueError("shift must be a bool")


def log_softmax_nll(logits: Tensor, labels: Tensor, ignore_index: int) -> tuple[Tensor, Tensor]:
    """-log softmax(z)[y] in float32 or better, 0 where ``labels == ignore_index``."""
    mask = labels != ignore_index
    bad = mask & ((labels < 0) | (labels >= logits.shape[-1]))
    if bool(bad.any()):
        raise ValueError(f"labels must lie in [0, {logits.shape[-1]}) or be ignore_index")
    log_p = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), -1)
    nll = -log_p.gather(-1, torch.where(mask, labels, 0)[..., None])[..., 0]
    return torch.where(mask, nll, 0.0), mask


def token_nll_from_logits(
    logits: Tensor, labels: Tensor, ignore_index: int = -100, shift: bool = False
) -> tuple[Tensor, Tensor]:
    check_logits_arguments(logits, labels, ignore_index, shift)
    labels = labels.to(torch.int64)  # uint8 labels compared as integers, never wrapped
    if shift:
        logits, labels = logits[:, :-1], labels[:, 1:]
    return log_softmax_nll(logits, labels, ignore_index)
