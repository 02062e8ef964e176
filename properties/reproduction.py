"""A failure as a standalone Python script: tensors written out, no hypothesis needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from properties.cases import DTYPE_NAMES, INPUT_NAMES, LossCase, format_config, format_rows
from properties.layouts import CONTIGUOUS
from properties.scale import ScaleCase
from properties.target import Call, adapted_target, is_file_target, split_target


def import_lines(target: str) -> list[str]:
    """Lines that bind the target to ``impl`` (recon_impl's stack: its adapter, which takes
    the suite's config record)."""
    module, _, attribute = split_target(adapted_target(target))
    if is_file_target(module):
        return file_import_lines(module, "impl", attribute)
    if "." in attribute:
        return [f"import {module}", f"impl = {module}.{attribute}"]
    return [f"from {module} import {attribute} as impl"]


def file_import_lines(path: str, name: str, attribute: str | None) -> list[str]:
    """Lines that bind the module of the target file ``path`` (as the check named it), or
    its ``attribute``, to ``name``, imported as the check imported it wherever the script is
    saved and run from: by its absolute path, with the check's folder, then the file's, on
    ``sys.path`` (so that the file imports its neighbours).

    The script calls the suite's ``import_module_named`` (it imports ``properties`` anyway),
    so that the module gets the private name and the ``sys.modules`` entry it had in the
    check. The folders are written out: that function appends the folder the script runs
    from, which is not the check's.
    """
    file = Path(path).resolve()
    folders = list(dict.fromkeys([str(Path.cwd()), str(file.parent)]))
    bound = f"import_module_named({str(file)!r})" + (f".{attribute}" if attribute else "")
    return [
        "import sys",
        "from properties.target import import_module_named",
        f"sys.path += {folders!r}  # the check's folder and the file's, as in the check",
        f"{name} = {bound}",
    ]


def _dtype(dtype) -> str:
    return f"torch.{DTYPE_NAMES.get(dtype, str(dtype).removeprefix('torch.'))}"


def input_lines(
    case: LossCase,
    k: int,
    *,
    token_nll_requires_grad: bool = False,
    zfree_requires_grad: bool = False,
) -> list[str]:
    """``token_nll_k``, ``zfree_token_nll_k`` and ``mask_k`` of ``case``, written out (a view
    built by ``properties.layouts.lay_out``, as the check built it); a ``ScaleCase`` built
    from its description (``properties.scale``)."""
    if isinstance(case, ScaleCase):
        return case.construction_lines(
            k,
            token_nll_requires_grad=token_nll_requires_grad,
            zfree_requires_grad=zfree_requires_grad,
        )
    device = "" if case.device == "cpu" else f", device={case.device!r}"
    shape = f".reshape({case.shape[0]}, {case.shape[1]})" if 0 in case.shape else ""
    made = (
        (case.token_nll, case.dtype, token_nll_requires_grad),
        (case.zfree_token_nll, case.dtype, zfree_requires_grad),
        (case.mask, case.mask_dtype, False),
    )
    lines = []
    for name, layout, (rows, dtype, grad) in zip(INPUT_NAMES, case.layouts, made, strict=True):
        tensor = f"torch.tensor({format_rows(rows)}, dtype={_dtype(dtype)}{device}"
        if layout == CONTIGUOUS:
            value = f"{tensor}{', requires_grad=True' if grad else ''}){shape}"
        else:  # a leaf with the view's strides, as LossCase.tensors makes it
            grad_part = ".requires_grad_()" if grad else ""
            value = f"lay_out({tensor}){shape}, {layout!r}).detach(){grad_part}"
        lines.append(f"{name}_{k} = {value}")
    return lines


def layout_imports(cases: list[Any]) -> list[str]:
    """The import the script's views need, where one of its cases (its calls') has one."""
    views = any(isinstance(case, (LossCase, ScaleCase)) and case.views for case in cases)
    return ["from properties.layouts import lay_out"] if views else []


def render_call(index: int, call: Call) -> list[str]:
    case, k = call.case, index
    lines = [
        *input_lines(
            case,
            k,
            token_nll_requires_grad=call.token_nll_requires_grad,
            zfree_requires_grad=call.zfree_requires_grad,
        ),
        f"config_{k} = {format_config(case.config)}",
        *(line.format(k=k) for line in call.adjust),
        f"out_{k} = impl(token_nll_{k}, zfree_token_nll_{k}, mask_{k}, config_{k})",
    ]
    if call.ended:  # the call that killed the process, or never returned
        lines[-1] += f"  # {call.ended}"
        return lines
    if call.error and not (call.values and call.then):
        lines[-1] += f"  # raises {call.error.splitlines()[0][:200]}"
        return lines
    if call.adjust:  # an input the target must reject
        lines[-1] += "  # returns normally"
        return lines
    lines.append(f"print({{name: value.item() for name, value in out_{k}.items()}})")
    if call.backward_of:
        lines += [
            f'out_{k}["{call.backward_of}"].backward()',
            f"print('d {call.backward_of} / d token_nll:', token_nll_{k}.grad)",
        ]
        if call.zfree_requires_grad:
            lines.append(
                f"print('d {call.backward_of} / d zfree_token_nll:', zfree_token_nll_{k}.grad)"
            )
    then = [line.format(k=k, before=k - 1) for line in call.then]
    if call.error and call.error_line is not None:  # a line after the call raised
        then = then[: call.error_line + 1]
        then[-1] += f"  # raises {call.error.splitlines()[0][:200]}"
    lines += then
    if call.zfree_gradients:
        lines += [
            f"for name, value in out_{k}.items():  # the spec: None or all zeros for each",
            "    if value.requires_grad:",
            f"        (grad,) = torch.autograd.grad(value, zfree_token_nll_{k}, "
            "retain_graph=True, allow_unused=True)",
            "        print(f'd {name} / d zfree_token_nll:', grad)",
        ]
    return lines


def inputs_after_lines(
    names: tuple[str, ...], *, call: str = "{k}", label: str = "the inputs after the call:"
) -> tuple[str, ...]:
    """A line that prints the input tensors ``{name}_{k}`` of a call as they are after it,
    for an invariant that checks the call leaves them unchanged (``{k}``: the call's number;
    ``call="{before}"`` for the call before it, which ``label`` then says)."""
    held = ", ".join(f"{name}={name}_{call}.tolist()" for name in names)
    return (f"print({label!r}, dict({held}))",)


#: what starts the script's closing comments (``expectation_lines``)
EXPECTS = "# What the spec expects: "


def expectation_lines(message: str) -> list[str]:
    """The failure's message as the script's closing comments: what the spec expects."""
    first, *rest = message.splitlines() or [""]
    return [f"{EXPECTS}{first}".rstrip(), *(f"# {line}".rstrip() for line in rest)]


def replay_call(probe, call: Call) -> None:
    """Make a recorded call again through ``probe``: its input, and the gradients it asked
    for (a call on tensors a ``LossCase`` cannot hold is left out)."""
    if call.adjust:
        return
    probe.call(
        call.case,
        token_nll_requires_grad=call.token_nll_requires_grad,
        zfree_requires_grad=call.zfree_requires_grad,
        backward_of=call.backward_of,
    )


def render(
    target: str,
    invariant_id: str,
    statement: str,
    calls: list[Call],
    message: str,
    *,
    before: int = 0,
) -> str:
    """The script: imports, each recorded call, and what the spec expects as comments.

    The first ``before`` calls are earlier calls of the run that the failure needs (the
    target keeps state between calls): each one's tensors are freed after it, as the run
    freed them, so that the calls that follow meet the memory they met there."""
    lines = [
        f"# recon-spec invariant {invariant_id}: {statement}",
        "import torch",
        "",
        "from properties.config import ReconstructionLossConfig",
        *layout_imports([call.case for call in calls]),
        *import_lines(target),
        "",
    ]
    if before:
        lines += [
            f"# The target keeps state between calls: the failure needs the {before} "
            f"call{'s' if before > 1 else ''} the run made before it (a fresh process passes "
            f"without {'them' if before > 1 else 'it'}).",
            "",
        ]
    for index, call in enumerate(calls, start=1):
        lines += render_call(index, call)
        if index <= before:
            k = index
            lines.append(f"del token_nll_{k}, zfree_token_nll_{k}, mask_{k}, out_{k}")
        if index == before:
            lines += ["", "# The failing check:"]
        lines.append("")
    lines += expectation_lines(message)
    return "\n".join(lines)
