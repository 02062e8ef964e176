"""The API of seed 001, sharing no code with ``recon_impl``, with one mistake at a time.

``api(mistake=None)`` is the API object: a namespace holding the five public names of seed
001 (``spec.api.PUBLIC_NAMES``) and ``token_nll_from_logits``. With no mistake it is
correct, and so is this module, whose own names are ``api()``'s: ``recon-spec check-api
properties.zoo.api.correct`` and ``recon-spec check-api properties.zoo.api.correct:api``
(the factory, called with no arguments) must pass. Each name in ``MISTAKES`` switches on one
realistic slip at the line where people make it, and names the invariant that rejects it
(the witness table, ``tests/properties/test_api_zoo.py``); ``properties.zoo.api.wrong``
holds this API with each mistake on, e.g. ``properties.zoo.api.wrong:router_switch_ignored``.

It differs from ``recon_impl`` where the seed leaves room: its configs are built from one
table of fields (name, default, rule), validated by that table; its flags keep argparse's own
destinations (``args.raw_reconstruction_weight``, mapped to the fields by
``reconstruction_loss_config_from_args``); its stack is the zoo's textbook one
(``properties.zoo.textbook``). What a term or a parameter brings (its weight field, its flag,
its value) comes from the spec's registries (``spec.api``, ``spec.terms``), so a new term
needs no edit here; the rest of the seed (the disentanglement config, the auxiliary terms) is
written here once. ``api(choice=...)`` takes one of the choices that docs/API.md, "Number
types", leaves open (``CHOICES``) the other way, and stays correct; ``api_of`` puts this
module's flags and total loss around another API's configs
(``properties.zoo.api.seed_dataclasses``).
"""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Mapping
from dataclasses import field, fields, make_dataclass
from numbers import Number, Real
from types import SimpleNamespace
from typing import Any

import numpy
import torch
from torch import Tensor

from properties.zoo.textbook import textbook_losses
from spec.api import CONFIG_CLASSES, RECONSTRUCTION_CONFIG
from spec.api import FLAGS as SPEC_FLAGS
from spec.terms import DIAGNOSTIC_NAMES, TOTAL
from spec.terms import TERMS as REGISTRY_TERMS

#: mistake -> (the invariant that names it, the mistake)
MISTAKES: dict[str, tuple[str, str]] = {
    "changed-default": ("config-fields", "token_weight_alpha defaults to 0.0, not 1.0"),
    "reordered-fields": (
        "config-fields",
        "alpha, epsilon and c come before the weights in ReconstructionLossConfig",
    ),
    "mutable-config": ("config-frozen", "both configs are plain (mutable) dataclasses"),
    "legacy-field": (
        "config-no-legacy",
        "normalize_reconstruction_loss is kept as an ignored field for old run configs",
    ),
    "sign-only-validation": (
        "config-rejects-invalid",
        "validation checks the sign alone: NaN, inf, strings and bools pass",
    ),
    "float-conversion-validation": (
        "config-rejects-invalid",
        "validation refuses Python bools and converts the rest with float(): numpy.True_ "
        "and torch.tensor(True) pass as 1.0",
    ),
    "numbers-stored-as-given": (
        "config-number-types",
        "a valid numpy.float32 is stored as given, not as a Python float: the run metadata "
        "is no longer JSON",
    ),
    "tensors-stored-as-given": (
        "config-number-types",
        "a 0-dim tensor (a scheduled weight) is validated by its item() and stored as the "
        "tensor: the run metadata is no longer JSON",
    ),
    "numbers-refused-with-type-error": (
        "config-number-types",
        "numpy scalars and tensors are refused with a TypeError, not a ValueError naming the field",
    ),
    "error-without-field-name": (
        "config-rejects-invalid",
        "every invalid value is rejected with ValueError('invalid config'), naming no field",
    ),
    "error-names-longer-field": (
        "config-rejects-invalid",
        "token_weighted_weight's check was copied from the line of "
        "normalized_concentration_corrected_token_weighted_weight and still names it",
    ),
    "metadata-without-alpha": (
        "config-run-metadata",
        "to_dict() logs the weights only: token_weight_alpha is lost from the run metadata",
    ),
    "misspelt-flag": (
        "flags-exist",
        "the concentration-corrected weight's flag lacks '-reconstruction'",
    ),
    "flag-default-differs": (
        "flags-defaults",
        "the epsilon flag defaults to 0.0 instead of the dataclass's 1e-8",
    ),
    "crossed-flags": ("flags-round-trip", "the alpha and epsilon flags set each other's field"),
    "float-flags": ("flags-reject-invalid", "the flags parse with type=float: -1, nan, inf pass"),
    "removed-flag-accepted": (
        "flags-removed",
        "--normalize-reconstruction-loss is kept as a deprecated no-op (store_true)",
    ),
    "removed-flag-deleted": (
        "flags-removed",
        "--normalize-reconstruction-loss is deleted outright: 'unrecognized arguments', no hint",
    ),
    "removed-flag-nargs0": (
        "flags-removed",
        "the removed flag's action takes no value: '=true' gets argparse's own error, no hint",
    ),
    "removed-flag-in-namespace": (
        "flags-namespace-clean",
        "the removed flag errors, but its default False is left in every namespace",
    ),
    "alpha-in-bundle": ("total-loss-bundle", "token_weight_alpha is returned for logging"),
    "per-example-diagnostics": (
        "total-loss-bundle",
        "the two diagnostics are returned per example, [B]",
    ),
    "zero-weight-terms-dropped": (
        "total-loss-bundle",
        "terms weighted 0 are neither computed nor returned",
    ),
    "default-reconstruction-config": (
        "total-loss-reconstruction",
        "the stack runs with ReconstructionLossConfig(), not config.reconstruction",
    ),
    "router-switch-ignored": (
        "total-loss-weighted-sum",
        "router_support counts whatever enable_router_support_loss says",
    ),
    "crossed-auxiliary-weights": (
        "total-loss-weighted-sum",
        "posterior_entropy and posterior_variance are weighted by each other's weight",
    ),
    "zero-weight-terms-required": (
        "total-loss-weighted-sum",
        "router_support must be given whenever its weight is non-zero, even switched off",
    ),
    "inputs-modified": (
        "total-loss-contract",
        "padded positions of the caller's zfree_token_nll are zeroed in place",
    ),
    "float64-results": (
        "total-loss-contract",
        "the stack runs in float64: float32 and half inputs give float64 entries",
    ),
    "auxiliary-terms-detached": (
        "total-loss-gradient",
        "the auxiliary terms enter the total detached: its value is right, no gradient flows",
    ),
    "terms-detached": (
        "total-loss-term-gradients",
        "the terms are returned detached (logged numbers); only total_loss trains",
    ),
    "terms-on-total-graph": (
        "total-loss-term-gradients",
        "each term is returned with J's graph: its value, the total's gradient",
    ),
    "logits-wrapped-labels": (
        "logits-token-nll",
        "labels are compared with ignore_index in their own dtype: uint8 156 is padding",
    ),
    "logits-half-losses": (
        "logits-token-nll",
        "half-precision logits give half-precision losses",
    ),
    "logits-labels-clamped": (
        "logits-rejects-invalid",
        "labels outside [0, V) are clamped into it instead of raising",
    ),
    "missing-term-as-zero": (
        "total-loss-missing-term",
        "a weighted term that is not given counts as 0",
    ),
    "missing-kl-misnamed": (
        "total-loss-missing-term",
        "kl's check was copied from router_marginal_kl_to_prior's: leaving out kl is reported "
        "as a missing router_marginal_kl_to_prior",
    ),
}

#: the open choices of docs/API.md, "Number types", each taken the other way than api()'s
#: (which stores every number as a float, takes numpy's scalars and refuses 0-dim tensors):
#: with one of them the API is correct too
CHOICES: dict[str, str] = {
    "ints-stored-as-given": "a Python int is stored as the int it is: raw_weight=1 holds 1",
    "numpy-scalars-refused": "numpy scalars are refused with a ValueError naming the field",
    "tensors-accepted": "a 0-dim tensor is taken as the Python number its item() is",
}

# --- configs -------------------------------------------------------------------------------

#: what each field accepts (the seed's types, MATH.md "Errors")
NON_NEGATIVE, POSITIVE, SWITCH, NESTED = "a real number >= 0", "a real number > 0", "a bool", ""

#: the rule text of each of the registries' rules
_RULE_TEXTS = {"non-negative": NON_NEGATIVE, "positive": POSITIVE, "bool": SWITCH, "nested": NESTED}
#: ReconstructionLossConfig's fields in the seed's order: name -> (default, rule). A term's
#: weight and a parameter are the registries' (spec.api), so that a new one needs no edit here.
RECONSTRUCTION_FIELDS: dict[str, tuple[Any, str | None]] = {
    f.name: (f.default, _RULE_TEXTS[f.rule]) for f in CONFIG_CLASSES[RECONSTRUCTION_CONFIG]
}
#: DisentanglementLossConfig's (``reconstruction`` defaults to a fresh
#: ReconstructionLossConfig)
DISENTANGLEMENT_FIELDS: dict[str, tuple[Any, str | None]] = {
    "reconstruction": (None, NESTED),
    "beta": (1.0, NON_NEGATIVE),
    "router_support_weight": (1.0, NON_NEGATIVE),
    "posterior_entropy_weight": (0.0, NON_NEGATIVE),
    "posterior_variance_weight": (0.0, NON_NEGATIVE),
    "router_marginal_kl_to_prior_weight": (0.0, NON_NEGATIVE),
    "router_supervision_weight": (0.0, NON_NEGATIVE),
    "enable_router_support_loss": (True, SWITCH),
    "inter_latent_divergence_weight": (0.0, NON_NEGATIVE),
}
LEGACY_FIELD = "normalize_reconstruction_loss"


def reconstruction_fields(mistake: str | None) -> dict[str, tuple[Any, str | None]]:
    """ReconstructionLossConfig's fields as this API declares them."""
    table = dict(RECONSTRUCTION_FIELDS)
    if mistake == "changed-default":
        table["token_weight_alpha"] = (0.0, NON_NEGATIVE)  # uniform shares, not the seed's 1.0
    if mistake == "reordered-fields":  # grouped "parameters before weights"
        parameters = [name for name in table if not name.endswith("_weight")]
        table = {name: table[name] for name in sorted(table, key=lambda n: n not in parameters)}
    if mistake == "legacy-field":
        table[LEGACY_FIELD] = (False, None)  # ignored, kept so that old run configs still load
    return table


def _real(
    owner: str, name: str, value: Any, rule: str, mistake: str | None, choice: str | None
) -> Any:
    """``value`` as the config stores it (a float; an int as given with the choice
    ints-stored-as-given), or a ValueError naming the field."""
    given = value
    if mistake == "numbers-refused-with-type-error" and isinstance(value, (numpy.generic, Tensor)):
        raise TypeError(f"{owner}.{name} must be an int or a float, got {type(value).__name__}")
    if choice == "numpy-scalars-refused" and isinstance(value, numpy.generic):
        raise ValueError(f"{owner}.{name} must be a Python number, got {type(value).__name__}")
    tensors = mistake == "tensors-stored-as-given" or choice == "tensors-accepted"
    if tensors and isinstance(value, Tensor) and value.dim() == 0:
        value = value.item()  # a scheduled weight handed over as a tensor; True stays a bool
    if mistake == "float-conversion-validation":
        if isinstance(value, (bool, str)) or value is None:  # numpy.True_ is no Python bool
            raise ValueError(f"{owner}.{name} must be a real number, got {value!r}")
    # every real number but a bool (numpy's included, whose bool is no numbers.Real)
    elif isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{owner}.{name} must be {rule}, got {type(value).__name__} {value!r}")
    try:
        number = float(value)
    except OverflowError:
        digits = len(str(abs(value)))
        raise ValueError(f"{owner}.{name} must be finite, got a {digits}-digit integer") from None
    if not math.isfinite(number) or number < 0 or (rule == POSITIVE and number == 0):
        raise ValueError(f"{owner}.{name} must be {rule} (and finite), got {value!r}")
    if mistake == "numbers-stored-as-given" or (
        mistake == "tensors-stored-as-given" and isinstance(given, Tensor)
    ):
        return given
    return value if choice == "ints-stored-as-given" and type(value) is int else number


def _checked(
    owner: str,
    name: str,
    value: Any,
    rule: str,
    nested: Any,
    mistake: str | None,
    choice: str | None,
) -> Any:
    if mistake == "sign-only-validation":  # NaN < 0 is False; strings, None, bools pass
        if isinstance(value, Number) and (value < 0 or (rule == POSITIVE and value == 0)):
            raise ValueError(f"{owner}.{name} must not be {value!r}")
        return value
    if rule == SWITCH:
        if not isinstance(value, bool):
            raise ValueError(f"{owner}.{name} must be a bool, got {value!r}")
        return value
    if rule == NESTED:
        if not isinstance(value, nested):
            raise ValueError(f"{owner}.{name} must be a ReconstructionLossConfig, got {value!r}")
        return value
    return _real(owner, name, value, rule, mistake, choice)


def validate(
    config: Any,
    table: Mapping[str, tuple[Any, str | None]],
    nested: Any,
    mistake: str | None,
    choice: str | None = None,
) -> None:
    """Check every field of a config against its rule; store numbers as floats."""
    owner = type(config).__name__
    for name, (_, rule) in table.items():
        if rule is None:
            continue
        # the name an error says: another field's, where its line was copied
        said = name
        if mistake == "error-names-longer-field" and name == "token_weighted_weight":
            said = "normalized_concentration_corrected_token_weighted_weight"
        try:
            value = _checked(owner, said, getattr(config, name), rule, nested, mistake, choice)
        except ValueError:
            if mistake == "error-without-field-name":
                raise ValueError("invalid config") from None  # naming no field to fix
            raise
        object.__setattr__(config, name, value)


def _weights_only(config: Any) -> dict[str, Any]:
    """``to_dict()`` as "the numbers that are trained on": ReconstructionLossConfig's weights."""
    values = {f.name: getattr(config, f.name) for f in fields(config)}
    if "reconstruction" in values:
        return {**values, "reconstruction": config.reconstruction.to_dict()}
    return {name: value for name, value in values.items() if name.endswith("_weight")}


def config_class(
    name: str,
    table: Mapping[str, tuple[Any, str | None]],
    mistake: str | None,
    nested: Any = None,
    choice: str | None = None,
) -> type:
    """A config dataclass with ``table``'s fields, validated by their rules."""

    def __post_init__(self: Any) -> None:
        validate(self, table, nested, mistake, choice)

    namespace: dict[str, Any] = {"__post_init__": __post_init__}
    if mistake == "metadata-without-alpha":
        namespace["to_dict"] = _weights_only
    declared = [
        (field_name, nested, field(default_factory=nested))
        if rule == NESTED
        else (field_name, type(default), field(default=default))
        for field_name, (default, rule) in table.items()
    ]
    frozen = mistake != "mutable-config"  # a plain dataclass: configs changed after logging
    cls = make_dataclass(name, declared, namespace=namespace, frozen=frozen)
    cls.__module__ = __name__
    return cls


# --- trainer flags -------------------------------------------------------------------------

#: flag -> field, the trainer flags (the registries', as spec.api lists them)
FLAGS: dict[str, str] = dict(SPEC_FLAGS)
REMOVED_FLAG = "--normalize-reconstruction-loss"


def flags_of(mistake: str | None) -> dict[str, str]:
    """Flag -> field, as this API spells them."""
    if mistake == "misspelt-flag":  # after the field's name, without "-reconstruction"
        corrected = "normalized_concentration_corrected_token_weighted_weight"
        return {
            ("--" + name.replace("_", "-") if name == corrected else f): name
            for f, name in FLAGS.items()
        }
    if mistake == "crossed-flags":  # a copy-paste slip: with neither given, defaults hide it
        return {
            **FLAGS,
            "--token-weighted-reconstruction-alpha": "example_inverse_surprisal_epsilon",
            "--example-inverse-surprisal-epsilon": "token_weight_alpha",
        }
    return dict(FLAGS)


def destination(flag: str) -> str:
    """argparse's own destination of a flag: ``--raw-reconstruction-weight`` ->
    ``raw_reconstruction_weight``."""
    return flag.removeprefix("--").replace("-", "_")


def flag_value(rule: str | None) -> Any:
    """argparse's type of a flag whose field keeps ``rule``: a finite number keeping it."""
    positive = rule == POSITIVE

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not (math.isfinite(value) and (value > 0 if positive else value >= 0)):
            raise argparse.ArgumentTypeError(f"must be finite and {rule}, got {text!r}")
        return value

    return parse


class RemovedFlag(argparse.Action):
    """The old boolean: a usage error that names its replacement, however it is given."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        parser.error(
            f"{REMOVED_FLAG} was removed: weigh distribution_normalized_reconstruction_loss "
            "with --distribution-normalized-reconstruction-weight"
        )


def add_flags(
    parser: argparse.ArgumentParser, defaults: Any, flags: Mapping[str, str], mistake: str | None
) -> None:
    group = parser.add_argument_group("reconstruction loss")
    for flag, name in flags.items():
        # float: -1, nan, inf
        value_type = (
            float if mistake == "float-flags" else flag_value(RECONSTRUCTION_FIELDS[name][1])
        )
        group.add_argument(flag, type=value_type, default=getattr(defaults, name))
    if mistake == "flag-default-differs":  # "no stabilizer": not the dataclass's default
        parser.set_defaults(example_inverse_surprisal_epsilon=0.0)
    if mistake == "removed-flag-accepted":  # so that old launch scripts still run, silently
        parser.add_argument(REMOVED_FLAG, action="store_true", help="deprecated, ignored")
    elif mistake != "removed-flag-deleted":  # deleted: "unrecognized arguments", no hint
        group.add_argument(
            REMOVED_FLAG,
            action=RemovedFlag,
            nargs=0 if mistake == "removed-flag-nargs0" else "?",  # 0: '=true' never reaches it
            default=False if mistake == "removed-flag-in-namespace" else argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )


# --- the stack -----------------------------------------------------------------------------

#: the terms, each with its weight's field, in the registry's order
TERMS: dict[str, str] = {term.name: term.weight_field for term in REGISTRY_TERMS}  # type: ignore[misc]
TOTAL_RECONSTRUCTION = TOTAL.name


def reconstruction_losses(
    token_nll: Tensor, zfree_token_nll: Tensor, mask: Tensor, config: Any, mistake: str | None
) -> dict[str, Tensor]:
    """The terms, the diagnostics and their total: the zoo's textbook stack
    (``properties.zoo.textbook``, correct), with this API's own slips in what it returns."""
    if mistake == "float64-results":  # "for accuracy", whatever the inputs
        return textbook_losses(token_nll, zfree_token_nll, mask, config, mistake="float64-outputs")
    out = textbook_losses(token_nll, zfree_token_nll, mask, config)
    if mistake == "per-example-diagnostics":  # each row's own value, NaN for an empty row
        for name in DIAGNOSTIC_NAMES:
            out[name] = torch.stack(
                [
                    textbook_losses(l[None], b[None], m[None], config)[name]
                    if m.any()
                    else torch.tensor(math.nan, dtype=out[name].dtype)
                    for l, b, m in zip(token_nll, zfree_token_nll, mask.bool(), strict=True)
                ]
            )
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


def auxiliary_weights(config: Any, mistake: str | None) -> dict[str, float]:
    """Each term's effective weight: router support counts only while it is switched on."""
    table = AUXILIARY
    if mistake == "crossed-auxiliary-weights":  # two neighbouring lines of the table, swapped
        table = {
            **AUXILIARY,
            "posterior_entropy": AUXILIARY["posterior_variance"],
            "posterior_variance": AUXILIARY["posterior_entropy"],
        }
    weights = {name: getattr(config, weight) for name, weight in table.items()}
    if not config.enable_router_support_loss and mistake != "router-switch-ignored":
        weights["router_support"] = 0.0
    return weights


def total_loss(
    token_nll: Tensor,
    zfree_token_nll: Tensor,
    mask: Tensor,
    config: Any,
    terms: Mapping[str, Tensor | None],
    mistake: str | None,
    default_reconstruction: Any,
) -> dict[str, Tensor]:
    unknown = [name for name in terms if name not in AUXILIARY]
    if unknown:
        raise TypeError(f"compute_total_loss() got an unexpected keyword argument {unknown[0]!r}")
    given = {name: value for name, value in terms.items() if value is not None}
    weights = auxiliary_weights(config, mistake)
    # the switch not looked at: a plain VAE that switched router support off must pass one
    required = (
        auxiliary_weights(config, "router-switch-ignored")
        if (mistake == "zero-weight-terms-required")
        else weights
    )
    for name, weight in required.items():
        if weight != 0 and name not in given and mistake != "missing-term-as-zero":
            said = (
                "router_marginal_kl_to_prior"
                if mistake == "missing-kl-misnamed" and name == "kl"
                else name
            )
            raise ValueError(f"{said} must be given: its weight is {weight}")
    if mistake == "inputs-modified":  # "cleaning" NaN padding, in the caller's tensor
        zfree_token_nll.data.masked_fill_(~mask.bool(), 0.0)
    reconstruction = config.reconstruction
    if mistake == "default-reconstruction-config":  # the run's weights, alpha, eps, c unused
        reconstruction = default_reconstruction()
    out = reconstruction_losses(token_nll, zfree_token_nll, mask, reconstruction, mistake)
    total = out[TOTAL_RECONSTRUCTION]
    for name, value in given.items():
        if weights[name] != 0:
            logged = value.detach() if mistake == "auxiliary-terms-detached" else value
            total = total + weights[name] * logged
    if mistake == "terms-detached":  # logged numbers: only total_loss trains
        out.update({name: out[name].detach() for name in TERMS})
    if mistake == "terms-on-total-graph":  # J's graph, value 0, to keep logged terms attached
        graph = out[TOTAL_RECONSTRUCTION] - out[TOTAL_RECONSTRUCTION].detach()
        out.update({name: out[name].detach() + graph for name in TERMS})
    if mistake == "zero-weight-terms-dropped":  # "it is not trained on"
        out = {
            k: v for k, v in out.items() if k not in TERMS or getattr(reconstruction, TERMS[k]) != 0
        }
    if mistake == "alpha-in-bundle":  # "so that it is logged with them"
        out["token_weight_alpha"] = torch.tensor(reconstruction.token_weight_alpha)
    return {**out, **given, "total_loss": total}


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


def nll_from_logits(
    logits: Tensor, labels: Tensor, ignore_index: int, shift: bool, mistake: str | None
) -> tuple[Tensor, Tensor]:
    """-log softmax(z)[y] in float32 or better, 0 where ``labels == ignore_index``."""
    check_logits_arguments(logits, labels, ignore_index, shift)
    if mistake == "logits-wrapped-labels":  # compared in their own dtype: uint8 -100 is 156
        padded = labels == torch.tensor(ignore_index).to(labels.dtype)
        labels = torch.where(padded, ignore_index, labels.to(torch.int64))
    labels = labels.to(torch.int64)  # uint8 labels compared as integers, never wrapped
    if shift:
        logits, labels = logits[:, :-1], labels[:, 1:]
    mask = labels != ignore_index
    if mistake == "logits-labels-clamped":  # ids beyond the vocabulary train on its last class
        labels = torch.where(mask, labels.clamp(0, logits.shape[-1] - 1), labels)
    bad = mask & ((labels < 0) | (labels >= logits.shape[-1]))
    if bool(bad.any()):
        raise ValueError(f"labels must lie in [0, {logits.shape[-1]}) or be ignore_index")
    if mistake != "logits-half-losses":  # as F.cross_entropy outside autocast, if it were not
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    log_p = torch.log_softmax(logits, -1)
    nll = -log_p.gather(-1, torch.where(mask, labels, 0)[..., None])[..., 0]
    return torch.where(mask, nll, 0.0), mask


# --- the API object ------------------------------------------------------------------------


def api_of(
    reconstruction_class: type, disentanglement_class: type, mistake: str | None = None
) -> SimpleNamespace:
    """The API object around two config classes (this module's, or another API's own):
    this module's flags, total loss and logits helper, with ``mistake`` switched on."""
    flags = flags_of(mistake)

    def add_reconstruction_loss_arguments(parser: argparse.ArgumentParser) -> None:
        add_flags(parser, reconstruction_class(), flags, mistake)

    def reconstruction_loss_config_from_args(args: argparse.Namespace) -> Any:
        return reconstruction_class(
            **{name: getattr(args, destination(flag)) for flag, name in flags.items()}
        )

    def compute_total_loss(
        token_nll: Tensor, zfree_token_nll: Tensor, mask: Tensor, config: Any, **terms: Any
    ) -> dict[str, Tensor]:
        return total_loss(
            token_nll, zfree_token_nll, mask, config, terms, mistake, reconstruction_class
        )

    def token_nll_from_logits(
        logits: Tensor, labels: Tensor, ignore_index: int = -100, shift: bool = False
    ) -> tuple[Tensor, Tensor]:
        return nll_from_logits(logits, labels, ignore_index, shift, mistake)

    return SimpleNamespace(
        ReconstructionLossConfig=reconstruction_class,
        DisentanglementLossConfig=disentanglement_class,
        add_reconstruction_loss_arguments=add_reconstruction_loss_arguments,
        reconstruction_loss_config_from_args=reconstruction_loss_config_from_args,
        compute_total_loss=compute_total_loss,
        token_nll_from_logits=token_nll_from_logits,
    )


@functools.cache
def api(mistake: str | None = None, choice: str | None = None) -> SimpleNamespace:
    """The API object with ``mistake`` switched on (None: the correct one) and an open
    ``choice`` of ``CHOICES`` taken the other way; the same object for the same arguments."""
    if mistake is not None and mistake not in MISTAKES:
        raise ValueError(f"mistake must be None or one of {', '.join(MISTAKES)}, got {mistake!r}")
    if choice is not None and choice not in CHOICES:
        raise ValueError(f"choice must be None or one of {', '.join(CHOICES)}, got {choice!r}")
    reconstruction_class = config_class(
        "ReconstructionLossConfig", reconstruction_fields(mistake), mistake, choice=choice
    )
    disentanglement_class = config_class(
        "DisentanglementLossConfig",
        DISENTANGLEMENT_FIELDS,
        mistake,
        nested=reconstruction_class,
        choice=choice,
    )
    return api_of(reconstruction_class, disentanglement_class, mistake)


#: this module is the correct API too (``recon-spec check-api properties.zoo.api.correct``)
globals().update(vars(api()))
