"""The implementation under test: naming it, loading it, calling it, recording every call.

An implementation is any callable ``f(token_nll, zfree_token_nll, mask, config)`` that
returns a mapping with the eight MATH.md names. ``config`` is the suite's own record
(``properties.config.ReconstructionLossConfig``: the seed's fields, by their names); write
a small adapter onto your own config. The bundled ``recon_impl:reconstruction_losses`` is
called through such an adapter (``properties/default_target.py``), named or the default.
Every call an invariant makes goes through a ``Probe``, which keeps the inputs and outputs
so that a failure can be replayed as a standalone script, and tells an observer (the
worker process, ``properties/worker.py``) when each call starts and ends, so that a call
that never ends or kills its process is reported with its input.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from properties.cases import LossCase
from properties.escapes import describe, reraise_escaping
from properties.float_mode import target_mode
from properties.gradient_calls import (
    SecondOrder,
    differentiating_lines,
    gradient_of,
    mixed_gradient_lines,
    output_gradient_lines,
    second_order_lines,
    second_order_weights,
)
from properties.layouts import storage_of
from properties.options import ENVIRONMENT_VARIABLE
from spec.definitions import LOSS_NAMES
from spec.parameters import PARAMETERS
from spec.terms import TOTAL

#: the attributes an adapter may set to declare its own names (docs/GUIDE.md, "An adapter
#: with your own names"): spec name -> the target's name
ARGUMENT_NAMES = "argument_names"
OUTPUT_NAMES = "output_names"
#: what ``argument_names`` may rename: the tensors, and the parameters an error may name
ARGUMENTS: tuple[str, ...] = ("token_nll", "zfree_token_nll", "mask", *(p.name for p in PARAMETERS))

DEFAULT_TARGET = "recon_impl:reconstruction_losses"
#: the adapter that stands for recon_impl's stack: it converts the suite's config record
DEFAULT_TARGET_ADAPTER = "properties.default_target:reconstruction_losses"

Implementation = Callable[..., Mapping[str, torch.Tensor]]


class TargetLoadError(Exception):
    """The target cannot be named, imported or called as the suite needs."""


class ContractViolation(AssertionError):
    """The target returned something other than the eight 0-dim tensors it must return."""


def target_name(given: str | None, environment: Mapping[str, str] = os.environ) -> str:
    """The target to check: ``given``, else ``$RECON_IMPL``, else the bundled one.

    An empty name is an error, never the default: ``RECON_IMPL=`` (a CI variable that was
    never filled in) must not quietly check the bundled implementation instead of yours.
    """
    if given is None:
        given = environment.get(ENVIRONMENT_VARIABLE)
        if given is None:
            return DEFAULT_TARGET
        if not given.strip():
            raise TargetLoadError(
                f"${ENVIRONMENT_VARIABLE} is set but empty: set it to MODULE:CALLABLE, or "
                "unset it to check the bundled implementation"
            )
    if not given.strip():
        raise TargetLoadError("the target is an empty name: give MODULE:CALLABLE")
    module_name, sep, attribute = split_target(given)
    path_after_colon = is_file_target(attribute)  # `run:1/adapter.py`: no callable named
    if not sep or not module_name.strip() or not attribute.strip() or path_after_colon:
        raise TargetLoadError(f"target must look like MODULE:CALLABLE, got {given!r}")
    return given


def split_target(name: str) -> tuple[str, str, str]:
    """``(module, ":", callable)`` of ``MODULE:CALLABLE``, split at the last colon: a file
    path may hold colons (``runs/2026-12-02T10:00/adapter.py:losses``), a callable never."""
    return name.rpartition(":") if ":" in name else (name, "", "")


def adapted_target(name: str) -> str:
    """What the suite imports for the target ``name``: recon_impl's stack (from
    ``recon_impl`` or one of its modules) through its adapter, anything else as named."""
    module, _, attribute = split_target(name)
    in_recon_impl = module == "recon_impl" or module.startswith("recon_impl.")
    is_stack = in_recon_impl and attribute == "reconstruction_losses"
    return DEFAULT_TARGET_ADAPTER if is_stack else name


def is_file_target(module_name: str) -> bool:
    return module_name.endswith(".py") or os.sep in module_name or "/" in module_name


def _private_module_name(path: Path) -> str:
    """A name no other module has: a target file called ``random.py`` must not take the
    place of the standard library's ``random`` in ``sys.modules``."""
    return "_recon_spec_target_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]


def import_module_named(module_name: str) -> Any:
    """Import ``module_name`` (a dotted name, or ``path/to/file.py`` under a private name),
    as a script run from the working directory would; ``TargetLoadError`` if it fails.

    Runs the module: call it in a worker process, never in the one that reports.
    """
    is_file = is_file_target(module_name)
    # Modules beside the user (and beside a target file) import as they would in a script
    # run from there; a console script's sys.path holds neither. Appended, not prepended:
    # a file of the user's named like a standard module must not shadow it.
    for folder in (Path.cwd(), Path(module_name).resolve().parent if is_file else None):
        if folder is not None and str(folder) not in sys.path:
            sys.path.append(str(folder))
    try:
        if not is_file:
            return importlib.import_module(module_name)
        path = Path(module_name).resolve()
        if not path.is_file():
            raise TargetLoadError(f"no Python file at {path}")
        private = _private_module_name(path)
        loader_spec = importlib.util.spec_from_file_location(private, path)
        if loader_spec is None or loader_spec.loader is None:
            raise TargetLoadError(f"{path} cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[private] = module
        loader_spec.loader.exec_module(module)
        return module
    except TargetLoadError:
        raise
    except BaseException as error:  # the user's module may fail in any way at import,
        # sys.exit() and a stray KeyboardInterrupt included (only workers import targets)
        raise TargetLoadError(f"cannot import {module_name!r}: {describe(error)}") from error


def locate_module(module_name: str) -> None:
    """``TargetLoadError`` where ``module_name`` cannot be found, worded as its import
    would fail; runs none of its code (a dotted name's top-level package is looked up, not
    imported), so the reporting process may call it before any check starts."""
    if is_file_target(module_name):
        path = Path(module_name).resolve()
        if not path.is_file():
            raise TargetLoadError(f"no Python file at {path}")
        return
    top = module_name.partition(".")[0]
    if top in sys.modules or importlib.machinery.PathFinder.find_spec(
        top, [str(Path.cwd()), *sys.path]
    ):
        return
    if importlib.util.find_spec(top) is None:  # builtin and frozen modules included
        message = f"ModuleNotFoundError: No module named {top!r}"
        raise TargetLoadError(f"cannot import {module_name!r}: {message}")


def load_target(name: str | None = None) -> tuple[str, Implementation]:
    """Resolve ``MODULE:CALLABLE`` (or ``path/to/file.py:CALLABLE``) to the callable.

    ``None`` means ``$RECON_IMPL``, or the bundled implementation when that is unset.
    Runs the target's module: call it in a worker process, never in the one that reports.
    """
    name = target_name(name)
    module_name, _, attribute = split_target(adapted_target(name))
    value: Any = import_module_named(module_name)
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise TargetLoadError(f"{module_name!r} has no attribute {attribute!r}")
        value = getattr(value, part)
    if not callable(value):
        raise TargetLoadError(f"{name} is a {type(value).__name__}, not a callable")
    for attribute, allowed in ((ARGUMENT_NAMES, ARGUMENTS), (OUTPUT_NAMES, LOSS_NAMES)):
        problem = _bad_declaration(getattr(value, attribute, {}), allowed)
        if problem:
            raise TargetLoadError(f"{name}.{attribute} {problem}")
    return name, value


def _bad_declaration(names: Any, allowed: tuple[str, ...]) -> str | None:
    """What is wrong with a declaration of names (None: nothing)."""
    if not isinstance(names, Mapping):
        return f"must be a dict from the spec's names to yours, got {type(names).__name__}"
    unknown = sorted(set(map(str, names)) - set(allowed))
    if unknown:
        return f"names {', '.join(unknown)}, which are none of {', '.join(allowed)}"
    if not all(isinstance(v, str) and v.strip() for v in names.values()):
        return "must map each name to a non-empty string"
    if len(set(names.values())) != len(names):
        return "gives two names the same one of yours"
    return None


def declared(implementation: Any, attribute: str) -> Mapping[str, str]:
    """The names ``implementation`` declares under ``attribute`` (spec name -> its own)."""
    names = getattr(implementation, attribute, None)
    return names if isinstance(names, Mapping) else {}


def check_outputs(
    outputs: Any, case: LossCase, keys: Mapping[str, str] | None = None
) -> dict[str, torch.Tensor]:
    """The outputs as a dict by output name, or ``ContractViolation`` saying what is off;
    ``keys``: the target's own key of an output, where it declares one (``OUTPUT_NAMES``)."""
    keys = keys or {}
    if not isinstance(outputs, Mapping):
        raise ContractViolation(
            "the target must return a Mapping with an entry per output, got "
            f"{type(outputs).__name__}"
        )
    missing = [keys.get(name, name) for name in LOSS_NAMES if keys.get(name, name) not in outputs]
    if missing:
        raise ContractViolation(f"the target's result lacks {', '.join(missing)}")
    result = {}
    for name in LOSS_NAMES:
        value = outputs[keys.get(name, name)]
        if not isinstance(value, torch.Tensor):
            raise ContractViolation(f"{name} must be a torch.Tensor, got {type(value).__name__}")
        if value.dim() != 0:
            raise ContractViolation(
                f"{name} must be a 0-dim tensor, got shape {tuple(value.shape)} "
                f"for a [B, T] = {list(case.shape)} batch"
            )
        if value.device.type != torch.device(case.device).type:
            # checked before any value is read: a meta tensor holds none to read
            raise ContractViolation(
                f"{name} is on {value.device}, the inputs on {case.device}: results live on "
                "the inputs' device (MATH.md, Precision)"
            )
        result[name] = value
    return result


@dataclass
class Call:
    """One call of the target: what it was given and what was done with its outputs, all
    known before the call starts (so that a call that never returns can be replayed)."""

    case: LossCase
    token_nll_requires_grad: bool = False
    zfree_requires_grad: bool = False
    #: the output whose backward was taken (its gradients then printed)
    backward_of: str | None = None
    #: whether each output was differentiated with respect to zfree_token_nll (stop-gradient)
    zfree_gradients: bool = False
    #: Python lines that change the tensors before the call (``{k}`` is the call's number),
    #: for inputs a LossCase cannot hold: a 1-D token_nll, an integer one, ...
    adjust: tuple[str, ...] = ()
    #: Python lines run on ``out_{k}`` after the call (gradients of several outputs, a mix,
    #: second order), printing what the check compares; ``{k}`` is the call's number
    then: tuple[str, ...] = ()
    #: filled in after the call
    values: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    #: the line of ``then`` that raised ``error`` (None: the call itself raised)
    error_line: int | None = None
    #: how a call that never returned ended (its process died, or it timed out)
    ended: str | None = None

    @property
    def shown_input(self) -> LossCase:
        """The input a report shows for this call."""
        return self.case


class CallObserver(Protocol):
    """Told about every input and call of the target (the worker reports them)."""

    def example_started(self) -> None: ...
    def call_started(self, call: Call) -> None: ...
    def call_finished(self) -> None: ...


@dataclass
class Observed:
    """What one call gave: the outputs, the tensors it was given, their gradients."""

    outputs: dict[str, torch.Tensor]
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    values: dict[str, float]
    token_nll_grad: torch.Tensor | None = None
    zfree_grad: torch.Tensor | None = None
    #: the keys of the result beyond the eight (outputs-contract rejects them)
    extra: tuple[str, ...] = ()
    #: every byte of the storage each input views, as it was before the call
    storages: tuple[torch.Tensor, ...] = ()


@dataclass
class Probe:
    """Calls the target and records every call, for the failure report's reproduction."""

    implementation: Implementation
    observer: CallObserver | None = None
    calls: list[Call] = field(default_factory=list)
    #: the first exception a call raised that is not an answer (``properties/escapes.py``)
    escaped: BaseException | None = None

    def _outputs(
        self, token_nll: torch.Tensor, zfree: torch.Tensor, mask: torch.Tensor, case: LossCase
    ) -> dict[str, torch.Tensor]:
        returned = self.implementation(token_nll, zfree, mask, case.config)
        return check_outputs(returned, case, declared(self.implementation, OUTPUT_NAMES))

    def argument_names(self, argument: str) -> tuple[str, ...]:
        """The names an error about ``argument`` may use: the spec's, and the target's own
        where it declares one (``ARGUMENT_NAMES``)."""
        own = declared(self.implementation, ARGUMENT_NAMES).get(argument)
        return (argument,) if own is None else (argument, own)

    def script(self, target: str, invariant_id: str, statement: str, message: str) -> str:
        """The recorded calls as a standalone script (``properties/reproduction.py``)."""
        from properties.reproduction import render

        return render(target, invariant_id, statement, self.calls, message)

    @contextlib.contextmanager
    def _calling(self, call: Call) -> Iterator[None]:
        self.calls.append(call)
        if self.observer is not None:
            self.observer.call_started(call)
        try:
            with target_mode():  # the floating-point mode the target set, for its call only
                yield
        except BaseException as error:
            if not isinstance(error, ContractViolation):  # the suite's reading, not a raise
                call.error = f"{type(error).__name__}: {error}"
            reraise_escaping(self, error)  # a skip, an exit, hypothesis's own: no answer
            raise
        finally:
            if self.observer is not None:
                self.observer.call_finished()

    def call(
        self,
        case: LossCase,
        *,
        token_nll_requires_grad: bool = False,
        zfree_requires_grad: bool = False,
        backward_of: str | None = None,
        then: tuple[str, ...] = (),
    ) -> Observed:
        """Call the target on fresh tensors of ``case`` (and take the backward of
        ``backward_of``, which needs ``token_nll_requires_grad``); ``then``: lines the
        script runs after it (``Call.then``), what the check looks at that the outputs
        do not show."""
        token_nll, zfree, mask = case.tensors(requires_grad=token_nll_requires_grad)
        if zfree_requires_grad:
            zfree.requires_grad_()
        # a view's buffer is the caller's too: none of its bytes may change (MATH.md)
        storages = tuple(storage_of(t).clone() for t in (token_nll, zfree, mask))
        call = Call(case, token_nll_requires_grad, zfree_requires_grad, backward_of, then=then)
        with self._calling(call):
            returned = self.implementation(token_nll, zfree, mask, case.config)
            keys = declared(self.implementation, OUTPUT_NAMES)
            outputs = check_outputs(returned, case, keys)
            known = {keys.get(name, name) for name in outputs}
            extra = tuple(str(key) for key in returned if key not in known)
            call.values = {name: float(value.detach()) for name, value in outputs.items()}
            if backward_of is not None:
                if not outputs[backward_of].requires_grad:
                    raise ContractViolation(
                        f"{backward_of} does not require grad: it is not differentiable"
                    )
                outputs[backward_of].backward()
        return Observed(
            outputs,
            (token_nll, zfree, mask),
            call.values,
            token_nll.grad,
            zfree.grad,
            extra,
            storages,
        )

    def values(self, case: LossCase) -> dict[str, float]:
        """The outputs as Python floats."""
        return self.call(case).values

    def gradients(
        self, case: LossCase, of: str = TOTAL.name
    ) -> tuple[dict[str, float], torch.Tensor, torch.Tensor | None]:
        """Outputs, d(of)/d token_nll, and d(of)/d zfree_token_nll (None when none flows)."""
        seen = self.call(
            case, token_nll_requires_grad=True, zfree_requires_grad=True, backward_of=of
        )
        token_nll = seen.inputs[0]
        grad = (
            seen.token_nll_grad if seen.token_nll_grad is not None else torch.zeros_like(token_nll)
        )
        return seen.values, grad, seen.zfree_grad

    def zfree_gradients(self, case: LossCase) -> dict[str, torch.Tensor | None]:
        """d(output)/d zfree_token_nll for each output that requires grad (None where the
        graph does not reach zfree_token_nll)."""
        token_nll, zfree, mask = case.tensors(requires_grad=True)
        zfree.requires_grad_()
        call = Call(case, True, True, zfree_gradients=True)
        gradients = {}
        with self._calling(call):
            outputs = self._outputs(token_nll, zfree, mask, case)
            call.values = {name: float(value.detach()) for name, value in outputs.items()}
            for name, value in outputs.items():
                if value.requires_grad:
                    (gradients[name],) = torch.autograd.grad(
                        value, zfree, retain_graph=True, allow_unused=True
                    )
        return gradients

    @contextlib.contextmanager
    def _differentiated(
        self, case: LossCase, then: tuple[str, ...]
    ) -> Iterator[tuple[Call, torch.Tensor, dict[str, torch.Tensor]]]:
        """Call the target on ``case`` with token_nll requiring grad; what the caller then
        differentiates is recorded as ``then`` (an error there is shown at its first
        differentiating line, unless the caller names another)."""
        token_nll, zfree, mask = case.tensors(requires_grad=True)
        call = Call(case, True, then=then)
        with self._calling(call):
            outputs = self._outputs(token_nll, zfree, mask, case)
            call.values = {name: float(value.detach()) for name, value in outputs.items()}
            call.error_line = differentiating_lines(then)[0]
            yield call, token_nll, outputs

    def output_gradients(
        self, case: LossCase, names: tuple[str, ...]
    ) -> dict[str, torch.Tensor | None]:
        """d(name)/d token_nll of each of ``names`` differentiated alone (one backward each,
        through the same call); None where the output does not require grad (it is
        detached), zeros where its graph does not reach token_nll."""
        with self._differentiated(case, output_gradient_lines(names)) as (_, token_nll, outputs):
            return {
                name: gradient_of(outputs[name], token_nll, retain_graph=True) for name in names
            }

    def mixed_gradient(
        self, case: LossCase, coefficients: tuple[tuple[str, float], ...]
    ) -> tuple[torch.Tensor, tuple[str, ...]]:
        """d(sum_k a_k output_k)/d token_nll from one backward through all of them, and the
        outputs among them that do not require grad (detached)."""
        lines = mixed_gradient_lines(coefficients)
        with self._differentiated(case, lines) as (_, token_nll, outputs):
            detached = tuple(name for name, _ in coefficients if not outputs[name].requires_grad)
            mix = sum(a * outputs[name] for name, a in coefficients)
            grad = gradient_of(mix, token_nll) if isinstance(mix, torch.Tensor) else None
            return (torch.zeros_like(token_nll) if grad is None else grad), detached

    def second_order(self, case: LossCase, name: str, upstream: float) -> SecondOrder:
        """``g = torch.autograd.grad(name, token_nll, grad_outputs=v, create_graph=True)``
        with ``v`` a leaf holding ``upstream``, then d(sum_t u_t g_t)/d(v, token_nll) for the
        fixed weights ``u`` of ``second_order_weights``. An error of either step is
        returned, not raised: it is the implementation's answer to second-order use."""
        lines = second_order_lines(name, upstream)
        with self._differentiated(case, lines) as (call, token_nll, outputs):
            output = outputs[name]
            if not output.requires_grad:
                return SecondOrder(detached=True)
            v = torch.tensor(upstream, dtype=output.dtype, device=output.device, requires_grad=True)
            seen = SecondOrder()
            second = differentiating_lines(lines)[1]
            try:
                (seen.gradient,) = torch.autograd.grad(
                    output, token_nll, grad_outputs=v, create_graph=True
                )
                if seen.gradient.requires_grad:
                    call.error_line = second
                    weights = second_order_weights(token_nll)
                    seen.by_upstream, seen.by_token_nll = torch.autograd.grad(
                        (seen.gradient.double() * weights).sum(), (v, token_nll), allow_unused=True
                    )
            except Exception as error:
                seen.error = error
                call.error = f"{type(error).__name__}: {error}"
            return seen

    def call_adjusted(
        self,
        case: LossCase,
        adjust: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, ...]],
        code: tuple[str, ...],
    ) -> Any:
        """Call the target on the tensors of ``case`` changed by ``adjust`` (``code`` says
        the same in Python, for the reproduction); return what it returns, unchecked."""
        token_nll, zfree, mask = adjust(*case.tensors())
        call = Call(case, adjust=code)
        with self._calling(call):
            return self.implementation(token_nll, zfree, mask, case.config)
