"""The gradients the gradient invariants take through one call of the target, and the
lines of the reproduction script that take them again (``{k}`` is the call's number there).

``properties.target.Probe`` runs them (``output_gradients``, ``mixed_gradient``,
``second_order``); the lines are what ``Call.then`` holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def gradient_of(
    output: torch.Tensor, token_nll: torch.Tensor, *, retain_graph: bool = False
) -> torch.Tensor | None:
    """d output / d token_nll: None where ``output`` does not require grad, zeros where its
    graph does not reach token_nll."""
    if not output.requires_grad:
        return None
    (grad,) = torch.autograd.grad(output, token_nll, retain_graph=retain_graph, allow_unused=True)
    return torch.zeros_like(token_nll) if grad is None else grad


def output_gradient_lines(names: tuple[str, ...]) -> tuple[str, ...]:
    """The script's lines for ``Probe.output_gradients``."""
    return (
        f"for name in {list(names)!r}:  # each differentiated alone",
        "    value = out_{k}[name]",
        "    if not value.requires_grad:",
        "        print(f'{{name}} is detached (no grad_fn)')",
        "        continue",
        "    (grad,) = torch.autograd.grad(value, token_nll_{k}, retain_graph=True, "
        "allow_unused=True)",
        "    print(f'd {{name}} / d token_nll:', grad)",
    )


def mixed_gradient_lines(coefficients: tuple[tuple[str, float], ...]) -> tuple[str, ...]:
    """The script's lines for ``Probe.mixed_gradient``: one backward through the mix."""
    parts = [f"    {a!r} * out_{{k}}[{name!r}]" for name, a in coefficients]
    return (
        "mix_{k} = (  # one backward through every output of the mix",
        *(part + (" +" if i < len(parts) - 1 else "") for i, part in enumerate(parts)),
        ")",
        "mix_{k}.backward()",
        "print('d mix / d token_nll:', token_nll_{k}.grad)",
    )


def differentiating_lines(lines: tuple[str, ...]) -> list[int]:
    """The indices of the lines that differentiate: where an error of a backward is shown."""
    return [i for i, line in enumerate(lines) if "autograd.grad(" in line or ".backward()" in line]


def second_order_lines(name: str, upstream: float) -> tuple[str, ...]:
    """The script's lines for ``Probe.second_order``."""
    return (
        f"v_{{k}} = torch.tensor({upstream!r}, dtype=out_{{k}}[{name!r}].dtype, "
        "requires_grad=True)",
        f"(g_{{k}},) = torch.autograd.grad(out_{{k}}[{name!r}], token_nll_{{k}}, "
        "grad_outputs=v_{k}, create_graph=True)",
        "print('d output / d token_nll (create_graph=True):', g_{k})",
        "print('g depends on v (it must: g = v * d output / d token_nll):', g_{k}.requires_grad)",
        "u_{k} = (torch.arange(g_{k}.numel()) % 4 + 1).reshape(g_{k}.shape).double() / 4",
        "d_v_{k}, d_l_{k} = torch.autograd.grad((g_{k}.double() * u_{k}).sum(), "
        "(v_{k}, token_nll_{k}), allow_unused=True)",
        "print('d (sum u g) / d v:', d_v_{k}, ' d (sum u g) / d token_nll:', d_l_{k})",
    )


def second_order_weights(like: torch.Tensor) -> torch.Tensor:
    """u_t = 1/4, 1/2, 3/4, 1, 1/4, ... in row-major order (float64, exact in every dtype)."""
    count = like.numel()
    return ((torch.arange(count) % 4 + 1).double() / 4).reshape(like.shape).to(like.device)


@dataclass
class SecondOrder:
    """What ``Probe.second_order`` saw: g, its derivatives by v and by token_nll (None where
    unused), or the error one of the two steps raised (g is None when the first did)."""

    detached: bool = False
    gradient: torch.Tensor | None = None
    by_upstream: torch.Tensor | None = None
    by_token_nll: torch.Tensor | None = None
    error: Exception | None = None
