"""Input checks of the reconstruction stack (MATH.md, "Errors").

Two stages keep validation off the hot path:

* ``check_tensor_metadata`` looks at shapes, dtypes and devices only (no data is read);
  it also turns an integer 0/1 mask into a bool mask.
* The value rules (finite at valid positions, b >= 0, some valid token, bbar > 0 when
  epsilon = 0) are read off per-example reductions the stack computes anyway; only when
  one of them trips does ``raise_for_invalid_values`` scan the data to name the position.
  The same reductions show arithmetic that overflowed the compute dtype, which is
  reported too: with validation on, no output is NaN and no mean is an overflowed sum.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
from torch import Tensor


def check_tensor_metadata(token_nll: Tensor, zfree_token_nll: Tensor, mask: Tensor) -> Tensor:
    """Check shapes, dtypes and devices; return the mask as a bool tensor."""
    if (
        isinstance(token_nll, Tensor)
        and isinstance(zfree_token_nll, Tensor)
        and isinstance(mask, Tensor)
        and token_nll.dim() == 2
        and token_nll.shape == zfree_token_nll.shape == mask.shape
        and token_nll.is_floating_point()
        and zfree_token_nll.is_floating_point()
        and token_nll.device == zfree_token_nll.device == mask.device
    ):
        # every rule below holds: the common case, in as few attribute reads as possible
        return as_bool_mask(mask)
    for name, value in (
        ("token_nll", token_nll),
        ("zfree_token_nll", zfree_token_nll),
        ("mask", mask),
    ):
        if not isinstance(value, Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
        if value.dim() != 2:
            raise ValueError(
                f"{name} must be 2-D [B, T], got {value.dim()}-D with shape {tuple(value.shape)}"
            )
    if zfree_token_nll.shape != token_nll.shape or mask.shape != token_nll.shape:
        raise ValueError(
            "token_nll, zfree_token_nll and mask must have the same shape, got "
            f"{tuple(token_nll.shape)}, {tuple(zfree_token_nll.shape)} and {tuple(mask.shape)}"
        )
    for name, value in (("token_nll", token_nll), ("zfree_token_nll", zfree_token_nll)):
        if not value.is_floating_point():
            raise ValueError(f"{name} must have a floating dtype, got {value.dtype}")
    if not (token_nll.device == zfree_token_nll.device == mask.device):
        raise ValueError(
            "token_nll, zfree_token_nll and mask must be on the same device, got "
            f"{token_nll.device}, {zfree_token_nll.device} and {mask.device}"
        )
    return as_bool_mask(mask)


def as_bool_mask(mask: Tensor) -> Tensor:
    """The mask as bool: bool masks pass through, integer masks must hold only 0 and 1."""
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point() or mask.is_complex():
        raise ValueError(f"mask must be bool or an integer 0/1 tensor, got dtype {mask.dtype}")
    # The only full pass validation makes, and only for integer masks.
    if mask.numel() and bool(((mask != 0) & (mask != 1)).any()):
        bad = mask[(mask != 0) & (mask != 1)][0].item()
        raise ValueError(f"mask must hold only 0 and 1 when it is an integer tensor, found {bad}")
    return mask != 0


def _first_position(where: Tensor) -> str:
    index = where.nonzero()[0].tolist()
    count = int(where.sum())
    return f"at [{index[0]}, {index[1]}] ({count} such position{'s' if count != 1 else ''})"


def check_values_readable(token_nll: Tensor, zfree_token_nll: Tensor, mask: Tensor) -> None:
    """Raise ``ValueError`` where validation cannot read the values it checks: on meta
    tensors (they hold none) and under ``torch.func.vmap`` (a check per example would be
    data-dependent control flow, which vmap cannot batch)."""
    if token_nll.device.type == "meta":
        raise ValueError(
            "validate=True reads the values of token_nll, zfree_token_nll and mask, and meta "
            "tensors hold none: pass validate=False to compute the outputs' shapes and dtypes"
        )
    if _vmap_active():
        raise ValueError(
            "validate=True cannot run under torch.func.vmap (its checks branch on the data): "
            "validate the batch once outside vmap and pass validate=False inside"
        )


def _vmap_active() -> bool:
    if not torch._C._are_functorch_transforms_active():
        return False
    from torch._C._functorch import TransformType
    from torch._functorch.pyfunctorch import retrieve_all_functorch_interpreters

    return any(i.key() == TransformType.Vmap for i in retrieve_all_functorch_interpreters())


def value_checksum(
    values: Sequence[Tensor],
    b_sum: Tensor,
    b_min: Tensor | None,
    divisors: Sequence[Tensor] = (),
) -> Tensor:
    """A 0-dim float, finite unless a value rule may be broken, from the stack's
    ``values``, its per-example sums of b, row minima of b (None where T = 0) and the
    per-example divisors it builds from b (``ExampleDivisor.from_tokens``).

    A NaN or inf at a valid position makes a per-example sum non-finite and with it an
    output (every kept example counts in R_raw, and b reaches a diagnostic) or the sum of
    b; so does an overflowing sum, a batch without a valid token (0/0) and eps = 0 with
    bbar_i = 0 (R_ex), and a divisor built from b that overflows (its term would be 0). A
    negative b makes the square root of its row's minimum NaN. A false alarm (an output
    that is inf because its value exceeds the dtype) costs a scan that finds nothing.
    """
    parts = [*values, b_sum.sum(), *(d.sum() for d in divisors)]
    if b_min is not None:
        parts.append(b_min.sqrt().sum())
    return torch.stack(parts).sum()


# Eager even under torch.compile: dynamo (dynamic=True) rebuilt a message's f-string, cut by
# the graph break of a value read, with the symbolic float in place of its text (a TypeError).
@torch.compiler.disable
def raise_for_invalid_values(
    token_nll: Tensor,
    zfree_token_nll: Tensor,
    mask: Tensor,
    values: Mapping[str, Tensor],
    *,
    dtype: torch.dtype,
    epsilon: float,
    scale: float,
    token_divisors: Callable[[], Mapping[str, Tensor]] | None = None,
) -> None:
    """Scan the data and raise the ``ValueError`` of the first broken value rule.

    Called only after the cheap per-example checks flagged a problem. Beyond the rules of
    MATH.md "Errors", it raises where the ``dtype`` arithmetic cannot give the stack's
    values: an example whose valid losses sum past the range of ``dtype`` (their mean
    would be inf, and what is built from it inf or NaN), a per-example divisor built from
    b past that range (``token_divisors`` computes them, by name: a term divided by an
    overflowing divisor would be 0), and any NaN among ``values``.
    It returns silently when none of that holds: an output that is inf because its exact
    value exceeds ``dtype`` (a huge weight, a tiny c) is the rounding of that value.
    """
    _raise_if_not_finite("token_nll", token_nll, mask)
    raise_for_invalid_zfree_values(zfree_token_nll, mask)
    valid_per_example = mask.sum(dim=1)
    if not bool((valid_per_example > 0).any()):
        raise ValueError("mask must select at least one valid token in the batch; it selects none")
    if epsilon == 0:
        zero_base = (valid_per_example > 0) & (torch.where(mask, zfree_token_nll, 0).sum(1) == 0)
        if bool(zero_base.any()):
            row = int(zero_base.nonzero()[0, 0])
            raise ValueError(
                "example_inverse_surprisal_epsilon = 0 needs bbar_i > 0 for every kept example; "
                f"example {row} has zfree_token_nll = 0 at all of its valid positions"
            )
    arithmetic = str(dtype).removeprefix("torch.")
    for name, value in (("token_nll", token_nll), ("zfree_token_nll", zfree_token_nll)):
        valid_values = torch.where(mask, value.detach().to(dtype), 0.0)
        overflowed = torch.isinf(valid_values.sum(1))
        if bool(overflowed.any()):
            row = int(overflowed.nonzero()[0, 0])
            largest = valid_values[row].abs().max().item()
            raise ValueError(
                f"{name} is too large for the stack's {arithmetic} arithmetic: the sum over "
                f"example {row}'s valid positions overflows {arithmetic} (its largest value is "
                f"{largest:.4g}); pass float64 tensors, or losses of a smaller magnitude"
            )
    for name, divisor in (token_divisors() if token_divisors is not None else {}).items():
        overflowed = torch.isinf(divisor) & mask.any(1)
        if bool(overflowed.any()):
            row = int(overflowed.nonzero()[0, 0])
            raise ValueError(
                f"zfree_token_nll is too large for the stack's {arithmetic} arithmetic: "
                f"example {row}'s divisor {name} overflows {arithmetic}; pass float64 "
                "tensors, or losses of a smaller magnitude"
            )
    nan = [name for name, value in values.items() if bool(torch.isnan(value))]
    if nan:
        raise ValueError(
            f"{', '.join(nan)} came out NaN in {arithmetic} although the inputs are valid: "
            f"the config divides by zfree_reference_scale = {scale!r} and by bbar_i + "
            f"example_inverse_surprisal_epsilon (= {epsilon!r}), beyond what {arithmetic} "
            "holds; pass float64 tensors to compute in float64"
        )


@torch.compiler.disable  # eager under torch.compile, as raise_for_invalid_values is
def raise_for_invalid_zfree_values(
    zfree_token_nll: Tensor, mask: Tensor, *, where: str = ""
) -> None:
    """Scan ``zfree_token_nll`` alone: finite and >= 0 at every valid position.

    ``where`` prefixes the message (``"batch 3: "``) for callers that stream many batches.
    Returns silently when both rules hold.
    """
    _raise_if_not_finite("zfree_token_nll", zfree_token_nll, mask, where=where)
    negative = mask & (zfree_token_nll < 0)
    if bool(negative.any()):
        first = zfree_token_nll[negative][0].item()
        raise ValueError(
            f"{where}zfree_token_nll must be >= 0 at every position where mask is True; "
            f"found {first} {_first_position(negative)}"
        )


def _raise_if_not_finite(name: str, value: Tensor, mask: Tensor, *, where: str = "") -> None:
    bad = mask & ~torch.isfinite(value)
    if bool(bad.any()):
        first = value[bad][0].item()
        raise ValueError(
            f"{where}{name} must be finite at every position where mask is True; "
            f"found {first} {_first_position(bad)}"
        )
