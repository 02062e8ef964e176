"""A failure of an API invariant as a standalone script: every use of the module that the
failing input made, in order, with what happened written beside each; no hypothesis."""

from __future__ import annotations

from properties.api.module import api_parts
from properties.api.probe import ApiCall, short
from properties.reproduction import expectation_lines, file_import_lines, layout_imports
from properties.target import is_file_target


def import_lines(target: str) -> list[str]:
    """Lines that bind the API object to ``api``: the module, or its attribute ``NAME``
    (called when it is callable, as ``recon-spec check-api`` does: a factory)."""
    module, attribute = api_parts(target)
    if is_file_target(module):
        lines = file_import_lines(module, "api", attribute)
    elif attribute is None:
        return [f"import {module} as api"]
    elif "." in attribute:
        lines = [f"import {module}", f"api = {module}.{attribute}"]
    else:
        lines = [f"from {module} import {attribute} as api"]
    if attribute is not None:
        lines.append("api = api() if callable(api) else api  # a factory gives the API object")
    return lines


def call_lines(call: ApiCall) -> list[str]:
    """The call's lines, the main one annotated with what happened (an entry of
    ``call.lines`` may span several lines: the annotation goes on its last)."""
    main = call.main % len(call.lines)
    lines: list[str] = []
    for index, entry in enumerate(call.lines):
        lines += entry.split("\n")
        if index == main:
            annotated = len(lines) - 1
    if call.ended:
        comment = call.ended
    elif call.error:
        comment = f"raises {short(call.error)}"
    else:
        comment = call.note
    if comment:
        lines[annotated] += f"  # {comment}"
    if call.error and not call.ended:  # the script goes on to the uses after it
        lines = [
            "try:",
            *(f"    {line}" for line in lines),
            "except Exception as error:",
            "    print(f'{type(error).__name__}: {error}')",
        ]
    return lines


def render_api(
    target: str, invariant_id: str, statement: str, calls: list[ApiCall], message: str
) -> str:
    """The script: imports, each recorded use, and what the spec expects as comments."""
    lines = [
        f"# recon-spec check-api invariant {invariant_id}: {statement}",
        "import argparse",
        "import dataclasses",
        "",
        "import numpy",
        "import torch",
        "",
        *layout_imports([call.case for call in calls]),
        *import_lines(target),
        "",
    ]
    for call in calls:
        lines += [*call_lines(call), ""]
    lines += expectation_lines(message)
    return "\n".join(lines)
