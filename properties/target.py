"""The implementation under test: loading it, calling it, and recording every call.

An implementation is any callable ``f(token_nll, zfree_token_nll, mask, config)`` that
returns a mapping with the eight MATH.md names (``config`` is a
``recon_impl.ReconstructionLossConfig``; write a small adapter onto your own config).
Every call an invariant makes goes through a ``Probe``, which keeps the inputs and outputs
so that a failure can be replayed as a standalone script.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from properties.cases import LossCase
from recon_impl import RECONSTRUCTION_LOSS_NAMES

DEFAULT_TARGET = "recon_impl:reconstruction_losses"
ENVIRONMENT_VARIABLE = "RECON_IMPL"

Implementation = Callable[..., Mapping[str, torch.Tensor]]


class TargetLoadError(Exception):
    """The target named on the command line cannot be imported or is not callable."""


class ContractViolation(AssertionError):
    """The target returned something other than the eight 0-dim tensors it must return."""


def load_target(spec: str | None = None) -> tuple[str, Implementation]:
    """Resolve ``MODULE:CALLABLE`` (or ``path/to/file.py:CALLABLE``) to the callable.

    ``None`` means ``$RECON_IMPL``, or the bundled implementation when that is unset.
    """
    spec = spec or os.environ.get(ENVIRONMENT_VARIABLE) or DEFAULT_TARGET
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise TargetLoadError(f"target must look like MODULE:CALLABLE, got {spec!r}")
    # Modules beside the user (and beside a target file) import as they would in a script
    # run from there; a console script's sys.path holds neither.
    is_file = module_name.endswith(".py") or os.sep in module_name
    for folder in (Path.cwd(), Path(module_name).resolve().parent if is_file else None):
        if folder is not None and str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    try:
        if is_file:
            path = Path(module_name).resolve()
            loader_spec = importlib.util.spec_from_file_location(path.stem, path)
            if loader_spec is None or loader_spec.loader is None or not path.exists():
                raise TargetLoadError(f"no Python file at {path}")
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[path.stem] = module
            loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except TargetLoadError:
        raise
    except Exception as error:  # the user's module may fail in any way at import
        raise TargetLoadError(
            f"cannot import {module_name!r}: {type(error).__name__}: {error}"
        ) from error
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise TargetLoadError(f"{module_name!r} has no attribute {attribute!r}")
        value = getattr(value, part)
    if not callable(value):
        raise TargetLoadError(f"{spec} is a {type(value).__name__}, not a callable")
    return spec, value


def check_outputs(outputs: Any, case: LossCase) -> dict[str, torch.Tensor]:
    """The outputs as a dict of the eight names, or ``ContractViolation`` saying what is off."""
    if not isinstance(outputs, Mapping):
        raise ContractViolation(
            f"the target must return a Mapping of the eight names, got {type(outputs).__name__}"
        )
    missing = [name for name in RECONSTRUCTION_LOSS_NAMES if name not in outputs]
    if missing:
        raise ContractViolation(f"the target's result lacks {', '.join(missing)}")
    result = {}
    for name in RECONSTRUCTION_LOSS_NAMES:
        value = outputs[name]
        if not isinstance(value, torch.Tensor):
            raise ContractViolation(f"{name} must be a torch.Tensor, got {type(value).__name__}")
        if value.dim() != 0:
            raise ContractViolation(
                f"{name} must be a 0-dim tensor, got shape {tuple(value.shape)} "
                f"for a [B, T] = {list(case.shape)} batch"
            )
        result[name] = value
    return result


@dataclass
class Call:
    """One recorded call of the target, with what was done with its outputs."""

    case: LossCase
    token_nll_requires_grad: bool = False
    zfree_requires_grad: bool = False
    values: dict[str, float] = field(default_factory=dict)
    backward_of: str | None = None
    token_nll_grad: list[list[float]] | None = None
    zfree_grad: list[list[float]] | None = None
    # outputs differentiated with respect to zfree_token_nll one by one (stop-gradient)
    zfree_gradients_of: tuple[str, ...] = ()
    error: str | None = None


@dataclass
class Probe:
    """Calls the target and records every call, for the failure report's reproduction."""

    implementation: Implementation
    calls: list[Call] = field(default_factory=list)

    def call(
        self,
        case: LossCase,
        *,
        token_nll_requires_grad: bool = False,
        zfree_requires_grad: bool = False,
    ) -> tuple[dict[str, torch.Tensor], tuple[torch.Tensor, ...]]:
        """Call the target on fresh tensors of ``case``; return outputs and the inputs."""
        token_nll, zfree, mask = case.tensors(requires_grad=token_nll_requires_grad)
        if zfree_requires_grad:
            zfree.requires_grad_()
        record = Call(case, token_nll_requires_grad, zfree_requires_grad)
        self.calls.append(record)
        try:
            raw = self.implementation(token_nll, zfree, mask, case.config)
        except Exception as error:
            record.error = f"{type(error).__name__}: {error}"
            raise
        outputs = check_outputs(raw, case)
        record.values = {name: float(value.detach()) for name, value in outputs.items()}
        return outputs, (token_nll, zfree, mask)

    def values(self, case: LossCase) -> dict[str, float]:
        """The eight outputs as Python floats."""
        outputs, _ = self.call(case)
        return {name: float(value.detach()) for name, value in outputs.items()}

    def gradients(
        self, case: LossCase, of: str = "total_reconstruction_loss"
    ) -> tuple[dict[str, float], torch.Tensor, torch.Tensor | None]:
        """Outputs, d(of)/d token_nll, and d(of)/d zfree_token_nll (None when none flows)."""
        outputs, (token_nll, zfree, _) = self.call(
            case, token_nll_requires_grad=True, zfree_requires_grad=True
        )
        record = self.calls[-1]
        record.backward_of = of
        target = outputs[of]
        if not target.requires_grad:
            raise ContractViolation(f"{of} does not require grad: it is not differentiable")
        target.backward()
        grad = token_nll.grad if token_nll.grad is not None else torch.zeros_like(token_nll)
        record.token_nll_grad = grad.double().tolist()
        if zfree.grad is not None:
            record.zfree_grad = zfree.grad.double().tolist()
        return record.values, grad, zfree.grad

    def zfree_gradients(self, case: LossCase) -> dict[str, torch.Tensor | None]:
        """d(output)/d zfree_token_nll for each output that requires grad (None where the
        graph does not reach zfree_token_nll)."""
        outputs, (_, zfree, _) = self.call(
            case, token_nll_requires_grad=True, zfree_requires_grad=True
        )
        differentiable = tuple(name for name, value in outputs.items() if value.requires_grad)
        self.calls[-1].zfree_gradients_of = differentiable
        gradients = {}
        for name in differentiable:
            (gradients[name],) = torch.autograd.grad(
                outputs[name], zfree, retain_graph=True, allow_unused=True
            )
        return gradients
