"""Calls into an API module, each recorded as the Python lines that repeat it.

``ApiProbe`` is to an API module what ``properties.target.Probe`` is to a stack callable:
every use an invariant makes of the module (building a config, assigning a field, parsing
an argv with a fresh parser, calling ``compute_total_loss`` on written-out tensors) goes
through it, is told to the observer (the worker, so that a use that hangs or kills the
process is reported with its input), and is kept as lines of a script that a user can run
(``properties/api/reproduction.py``). In the lines the module is ``api``.

argparse's usage errors are ``SystemExit`` with the message on stderr: ``parse`` catches
them and captures stderr here, in the worker.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy
import torch

from properties.cases import DTYPE_NAMES, LossCase, format_float
from properties.escapes import reraise_escaping
from properties.float_mode import target_mode
from properties.reproduction import input_lines
from spec.api import (
    ADD_ARGUMENTS,
    COMPUTE_TOTAL_LOSS,
    CONFIG_FROM_ARGS,
    RECONSTRUCTION_CONFIG,
    TOKEN_NLL_FROM_LOGITS,
)
from spec.terms import LOSS_NAMES

#: the program name of the parsers the probe makes (it starts argparse's usage line)
PROG = "train"
#: the width a script's construction fills before it goes on to the next line
SCRIPT_WIDTH = 100


@dataclass(frozen=True)
class Build:
    """``api.<class_name>(**values)``; a value may be a ``Build`` itself (the nested config)."""

    class_name: str
    values: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, class_name: str, values: Mapping[str, Any] | None = None) -> Build:
        return cls(class_name, tuple((values or {}).items()))


@dataclass
class ApiCall:
    """One use of the API module: the lines that repeat it (``lines[main]`` is the use
    itself, annotated with what happened), and what the reports need of it."""

    lines: tuple[str, ...]
    #: the input the use belongs to: a ``LossCase`` for ``compute_total_loss`` (the
    #: diagnosis compares its eight values with the spec's), else the drawn input
    case: Any = None
    #: the drawn input, shown when the process dies in this use
    drawn: Any = None
    main: int = -1
    values: dict[str, float] = field(default_factory=dict)
    #: what happened, as a comment on the main line (filled in after the use)
    note: str | None = None
    error: str | None = None
    #: how a use that never returned ended (its process died, or it timed out)
    ended: str | None = None

    @property
    def shown_input(self) -> Any:
        return self.drawn if self.drawn is not None else self.case


@dataclass(frozen=True)
class Parsed:
    """What parsing one argv gave: the namespace (None when argparse exited), the exit
    status argparse exited with, and what it wrote."""

    namespace: dict[str, Any] | None
    exit_code: Any = None
    stderr: str = ""
    stdout: str = ""

    @property
    def exited(self) -> bool:
        return self.namespace is None

    @property
    def message(self) -> str:
        """What argparse said on stderr after its usage lines: the ``train: error: ...``
        message (the usage lines list every flag, so they name none of them)."""
        marker = f"{PROG}: error:"
        if marker in self.stderr:
            return self.stderr[self.stderr.index(marker) :].strip()
        lines = self.stderr.splitlines()
        if lines and lines[0].startswith("usage:"):
            lines = lines[1:]
            while lines and lines[0].startswith(" "):
                lines = lines[1:]
        return "\n".join(lines).strip()

    @property
    def error_line(self) -> str:
        """The first line of ``message``."""
        return short(self.message)


def literal(value: Any) -> str:
    """A Python literal that reads back as ``value`` (10**400 as written)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return repr(value)
    if isinstance(value, float):
        return format_float(value)
    if isinstance(value, int):
        if abs(value) >= 10**30:
            power = len(str(abs(value))) - 1
            if abs(value) == 10**power:
                return f"{'-' if value < 0 else ''}10**{power}"
        return repr(value)
    if isinstance(value, tuple):
        inner = ", ".join(literal(v) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, numpy.generic):  # numpy.float32(0.5), numpy.True_
        if isinstance(value, numpy.bool_):
            return f"numpy.{bool(value)}_"
        return f"numpy.{type(value).__name__}({literal(value.item())})"
    if isinstance(value, torch.Tensor) and value.dim() == 0:
        return f"torch.tensor({literal(value.item())})"
    return repr(value)


def qualified(kind: type) -> str:
    """``recon_impl.config.ReconstructionLossConfig``: a class by its module and name (two
    classes of one name are told apart)."""
    return f"{kind.__module__}.{kind.__qualname__}"


def short(text: str, limit: int = 200) -> str:
    """The first line of ``text``, cut to ``limit`` characters."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _fill(pieces: list[str], width: int) -> list[str]:
    """``pieces`` joined by spaces on as few lines of ``width`` as they fit; a piece of
    several lines (a nested construction) on lines of its own."""
    lines: list[str] = []
    for piece in pieces:
        if "\n" in piece or not lines or "\n" in lines[-1]:
            lines.append(piece)
        elif len(lines[-1]) + 1 + len(piece) <= width:
            lines[-1] += " " + piece
        else:
            lines.append(piece)
    return lines


def _argv_code(argv: tuple[str, ...]) -> str:
    return "[" + ", ".join(repr(word) for word in argv) + "]"


class ApiProbe:
    """Uses the API module and records every use (module docstring)."""

    def __init__(self, module: Any, observer: Any = None) -> None:
        self.module = module
        self.observer = observer
        self.calls: list[ApiCall] = []
        #: the first exception a use raised that is not an answer (``properties/escapes.py``)
        self.escaped: BaseException | None = None
        self._names: dict[int, str] = {}
        self._kept: list[Any] = []  # objects named in the lines stay alive (ids stay theirs)
        self._counter = itertools.count(1)

    # --- bookkeeping -----------------------------------------------------------------------

    def script(self, target: str, invariant_id: str, statement: str, message: str) -> str:
        from properties.api.reproduction import render_api

        return render_api(target, invariant_id, statement, self.calls, message)

    def _name(self, value: Any, name: str) -> None:
        self._names[id(value)] = name
        self._kept.append(value)

    def code(self, value: Any, indent: str = "") -> str:
        """``value`` in the lines: a name for an object the probe made, else a literal (a
        construction too long for a line gets its arguments on as few lines as they fit, a
        nested construction on lines of its own)."""
        if id(value) in self._names:
            return self._names[id(value)]
        if isinstance(value, Build):
            arguments = [f"{name}={self.code(v)}" for name, v in value.values]
            one_line = f"api.{value.class_name}({', '.join(arguments)})"
            if len(one_line) + len(indent) <= 80:
                return one_line
            inner = indent + "    "
            arguments = [f"{name}={self.code(v, inner)}" for name, v in value.values]
            lines = _fill([f"{argument}," for argument in arguments], SCRIPT_WIDTH - len(inner))
            return (
                f"api.{value.class_name}(\n"
                + "".join(f"{inner}{line}\n" for line in lines)
                + f"{indent})"
            )
        return literal(value)

    @contextlib.contextmanager
    def _use(self, call: ApiCall) -> Iterator[ApiCall]:
        self.calls.append(call)
        if self.observer is not None:
            self.observer.call_started(call)
        try:
            with target_mode():  # the floating-point mode the target set, for its call only
                yield call
        except BaseException as error:
            call.error = f"{type(error).__name__}: {error}"
            reraise_escaping(self, error)  # a skip, an exit, hypothesis's own: no answer
            raise
        finally:
            if self.observer is not None:
                self.observer.call_finished()

    def note(self, text: str) -> None:
        """Say on the last use's line what it did that the spec does not expect."""
        if self.calls:
            self.calls[-1].note = text

    def attribute(self, name: str) -> Any:
        return getattr(self.module, name)

    # --- configs ---------------------------------------------------------------------------

    def _make(self, build: Build) -> Any:
        values = {
            name: self._make(value) if isinstance(value, Build) else value
            for name, value in build.values
        }
        return self.attribute(build.class_name)(**values)

    def build(self, build: Build, *, drawn: Any = None) -> Any:
        """``config_k = api.X(...)``: the instance (or the exception construction raises)."""
        k = next(self._counter)
        with self._use(ApiCall((f"config_{k} = {self.code(build)}",), drawn, drawn)):
            value = self._make(build)
        self._name(value, f"config_{k}")
        return value

    def fields(self, class_name: str, *, drawn: Any = None) -> list[tuple[str, Any]]:
        """``dataclasses.fields`` of a class: (name, default) each, the default factory called
        (``dataclasses.MISSING`` where there is no default); TypeError if not a dataclass."""
        line = (
            f"print([(f.name, f.default, f.default_factory) for f in "
            f"dataclasses.fields(api.{class_name})])"
        )
        with self._use(ApiCall((line,), drawn, drawn)):
            result = []
            for f in dataclasses.fields(self.attribute(class_name)):
                if f.default is not dataclasses.MISSING:
                    default = f.default
                elif f.default_factory is not dataclasses.MISSING:
                    default = f.default_factory()
                else:
                    default = dataclasses.MISSING
                result.append((f.name, default))
            return result

    def assign(self, instance: Any, name: str, value: Any, *, drawn: Any = None) -> None:
        line = f"{self.code(instance)}.{name} = {self.code(value)}"
        with self._use(ApiCall((line,), drawn, drawn)):
            setattr(instance, name, value)

    def replace(self, instance: Any, name: str, value: Any, *, drawn: Any = None) -> Any:
        k = next(self._counter)
        line = f"config_{k} = dataclasses.replace({self.code(instance)}, {name}={self.code(value)})"
        with self._use(ApiCall((line,), drawn, drawn)):
            changed = dataclasses.replace(instance, **{name: value})
        self._name(changed, f"config_{k}")
        return changed

    def as_dict(self, instance: Any, *, drawn: Any = None) -> dict[str, Any]:
        line = f"print(dataclasses.asdict({self.code(instance)}))"
        with self._use(ApiCall((line,), drawn, drawn)):
            return dataclasses.asdict(instance)

    def to_dict(self, instance: Any, *, drawn: Any = None) -> Any:
        line = f"print({self.code(instance)}.to_dict())"
        with self._use(ApiCall((line,), drawn, drawn)):
            return instance.to_dict()

    # --- flags -----------------------------------------------------------------------------

    def _parser_lines(self, k: int) -> list[str]:
        return [
            f"parser_{k} = argparse.ArgumentParser(prog={PROG!r})",
            f"api.{ADD_ARGUMENTS}(parser_{k})",
        ]

    def _fresh_parser(self) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog=PROG)
        self.attribute(ADD_ARGUMENTS)(parser)
        return parser

    def option_strings(self, *, drawn: Any = None) -> set[str]:
        """Every option string a fresh parser knows after ``add_reconstruction_loss_arguments``."""
        k = next(self._counter)
        lines = (*self._parser_lines(k), f"print(sorted(parser_{k}._option_string_actions))")
        with self._use(ApiCall(lines, drawn, drawn)):
            return set(self._fresh_parser()._option_string_actions)

    def parse(self, argv: tuple[str, ...], *, to_config: bool = False, drawn: Any = None):
        """Parse ``argv`` with a fresh parser, and with ``to_config`` turn the namespace into
        a config with ``reconstruction_loss_config_from_args``. Returns ``Parsed`` (and the
        config, or None when argparse exited, with ``to_config``)."""
        k = next(self._counter)
        lines = [
            *self._parser_lines(k),
            "try:",
            f"    args_{k} = parser_{k}.parse_args({_argv_code(argv)})",
            f"    print(vars(args_{k}))",
        ]
        main = 3
        if to_config:
            lines += [
                f"    config_{k} = api.{CONFIG_FROM_ARGS}(args_{k})",
                f"    print(config_{k})",
            ]
        lines += [
            f"except SystemExit as exit_{k}:  # argparse wrote its message on stderr",
            f"    print('exit status', exit_{k}.code)",
        ]
        with self._use(ApiCall(tuple(lines), drawn, drawn, main=main)) as call:
            parser = self._fresh_parser()
            err, out = io.StringIO(), io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                try:
                    namespace = parser.parse_args(list(argv))
                except SystemExit as exit_:
                    parsed = Parsed(None, exit_.code, err.getvalue(), out.getvalue())
                    call.note = f"exits with status {exit_.code}: {short(parsed.error_line)}"
                    return (parsed, None) if to_config else parsed
            parsed = Parsed(dict(vars(namespace)), None, err.getvalue(), out.getvalue())
            if not to_config:
                return parsed
            call.main = 5  # the config's line
            config = self.attribute(CONFIG_FROM_ARGS)(namespace)
        self._name(config, f"config_{k}")
        return parsed, config

    # --- compute_total_loss ----------------------------------------------------------------

    def total_loss(
        self,
        drawn: Any,
        *,
        omit: tuple[str, ...] = (),
        token_nll_requires_grad: bool = False,
    ) -> Any:
        """``api.compute_total_loss`` on fresh tensors of ``drawn`` (a ``TotalLossCase``),
        with its auxiliary terms but those in ``omit``; what it returns, unchecked."""
        outputs, _ = self.total_loss_call(
            drawn, omit=omit, token_nll_requires_grad=token_nll_requires_grad
        )
        return outputs

    def total_loss_call(
        self,
        drawn: Any,
        *,
        omit: tuple[str, ...] = (),
        token_nll_requires_grad: bool = False,
        gradients: bool = False,
        then: tuple[str, ...] = (),
    ) -> tuple[Any, dict[str, torch.Tensor]]:
        """``total_loss``, and the tensors it was given by name (``token_nll``,
        ``zfree_token_nll``, ``mask`` and each auxiliary term). With ``gradients`` every
        floating input requires grad, and the lines end with the gradient of ``total_loss``
        with respect to each of them; ``then`` are lines the script runs on ``out_{k}``
        after that (what the check does with the outputs; ``{k}`` is the call's number)."""
        case: LossCase = drawn.case
        k = next(self._counter)
        auxiliary = {n: v for n, v in drawn.auxiliary if n not in omit}
        dtype = f"torch.{DTYPE_NAMES[drawn.auxiliary_dtype]}"
        device = "" if case.device == "cpu" else f", device={case.device!r}"
        grad = ", requires_grad=True" if gradients else ""
        lines = [
            *input_lines(
                case,
                k,
                token_nll_requires_grad=token_nll_requires_grad or gradients,
                zfree_requires_grad=gradients,
            ),
            *(
                f"{n}_{k} = torch.tensor({format_float(v)}, dtype={dtype}{device}{grad})"
                for n, v in auxiliary.items()
            ),
            f"config_{k} = {self.code(drawn.build())}",
            f"out_{k} = api.{COMPUTE_TOTAL_LOSS}(token_nll_{k}, zfree_token_nll_{k}, mask_{k}, "
            f"config_{k}{''.join(f', {n}={n}_{k}' for n in auxiliary)})",
            f"print({{name: value.tolist() for name, value in out_{k}.items()}})",
        ]
        main = len(lines) - 2
        if gradients:
            inputs = ["token_nll", "zfree_token_nll", *auxiliary]
            lines += [
                f"inputs_{k} = {{{', '.join(f'{n!r}: {n}_{k}' for n in inputs)}}}",
                f"grads_{k} = torch.autograd.grad(out_{k}['total_loss'], "
                f"list(inputs_{k}.values()), allow_unused=True)",
                f"print({{n: g if g is None else g.tolist() for n, g in "
                f"zip(inputs_{k}, grads_{k})}})",
            ]
        lines += [line.format(k=k) for line in then]
        token_nll, zfree, mask = case.tensors(requires_grad=token_nll_requires_grad or gradients)
        if gradients:
            zfree.requires_grad_(True)
        tensors = {"token_nll": token_nll, "zfree_token_nll": zfree, "mask": mask}
        terms = {
            n: torch.tensor(
                v, dtype=drawn.auxiliary_dtype, device=case.device, requires_grad=gradients
            )
            for n, v in auxiliary.items()
        }
        with self._use(ApiCall(tuple(lines), case, drawn, main=main)) as call:
            config = self._make(drawn.build())
            outputs = self.attribute(COMPUTE_TOTAL_LOSS)(token_nll, zfree, mask, config, **terms)
            call.values = scalar_values(outputs)
        return outputs, {**tensors, **terms}

    # --- token_nll_from_logits -------------------------------------------------------------

    def logits_call(
        self,
        case: Any,
        *,
        gradients: bool = False,
        change: Any = None,
        code: str = "",
        then: tuple[str, ...] = (),
    ) -> tuple[Any, tuple[Any, Any]]:
        """``api.token_nll_from_logits`` on the tensors of ``case`` (a ``LogitsCase``), after
        ``change(logits, labels, keywords)`` (``code`` says the same in Python): what it
        returns, unchecked, and the tensors it was given. With ``gradients`` the logits
        require grad and the lines end with the gradient the check takes; ``then``: lines
        after those (``{k}`` is the call's number)."""
        from properties.api.logits import GRADIENT_LINES

        k = next(self._counter)
        logits, labels = case.tensors(requires_grad=gradients)
        keywords = case.arguments()
        if change is not None:
            logits, labels, keywords = change(logits, labels, keywords)
        arguments = "".join(f", {name}={value!r}" for name, value in keywords.items())
        lines = [
            *case.lines(k, requires_grad=gradients),
            *([code.format(k=k)] if code else []),
            f"out_{k} = api.{TOKEN_NLL_FROM_LOGITS}(logits_{k}, labels_{k}{arguments})",
        ]
        main = len(lines) - 1
        if gradients:
            lines += [
                f"token_nll_{k}, mask_{k} = out_{k}",
                f"print('token_nll:', token_nll_{k}, 'mask:', mask_{k})",
                *(line.format(k=k) for line in GRADIENT_LINES),
            ]
        lines += [line.format(k=k) for line in then]
        with self._use(ApiCall(tuple(lines), case, case, main=main)):
            returned = self.attribute(TOKEN_NLL_FROM_LOGITS)(logits, labels, **keywords)
        return returned, (logits, labels)


def scalar_values(outputs: Any) -> dict[str, float]:
    """The reconstruction values of a returned mapping, where they are 0-dim tensors."""
    if not isinstance(outputs, Mapping):
        return {}
    values = {}
    for name in LOSS_NAMES:
        value = outputs.get(name)
        if isinstance(value, torch.Tensor) and value.dim() == 0:
            values[name] = float(value.detach())
    return values


def is_real_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def same_value(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN, and of the same kind (a bool is not the number 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


__all__ = [
    "PROG",
    "RECONSTRUCTION_CONFIG",
    "ApiCall",
    "ApiProbe",
    "Build",
    "Parsed",
    "is_real_number",
    "literal",
    "same_value",
    "scalar_values",
    "short",
]
