"""The run's verdict for machines: JSON for dashboards, JUnit XML for CI systems.

``--json FILE`` and ``--junit-xml FILE`` write what the terminal shows, per invariant: its
id and group, the result, the examples and time, the input shown, the cause it belongs to,
its section of the report and its rerun line; and the summary's causes, each with its
rerun. Both are written after the report, whatever the verdict, and at every other end of
``check`` and ``check-api`` too (a usage error, a target that cannot be checked, a signal),
so that no earlier run's files stay behind to be read as this one's: a run that did not
check everything it was asked to says why, in the JSON's ``reason`` and in a JUnit
testcase with an ``error``, never an empty green report.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from properties.options import rerun_command

if TYPE_CHECKING:  # the run's modules import hypothesis and torch: a usage error needs neither
    from properties.causes import Cause
    from properties.runner import InvariantResult

#: the name and error type of the JUnit testcase that gives why a run, or one of its
#: suites, checked nothing (or not everything)
NOT_CHECKED = "not checked"


def _records(
    command: str,
    target: str,
    invariants: Sequence[Any],
    results: Sequence[InvariantResult],
    causes: Sequence[Cause],
    options_of: Callable[[InvariantResult], dict[str, Any]],
    no_database: bool,
) -> list[dict[str, Any]]:
    from properties import report

    by_id = {invariant.id: invariant for invariant in invariants}
    cause_of = {
        r.invariant_id: (number, cause)
        for number, cause in enumerate(causes, start=1)
        for r in cause.results
    }
    records = []
    for result in results:
        invariant = by_id[result.invariant_id]
        record: dict[str, Any] = {
            "id": result.invariant_id,
            "group": invariant.group,
            "result": result.status,
            "examples": result.examples,
            "seconds": round(result.seconds, 3),
            "seed": result.seed,
        }
        failure = result.failure
        if failure is not None:
            number, cause = cause_of.get(result.invariant_id, (None, None))
            shown = cause is not None and cause.representative is result
            section = io.StringIO()
            report.failure_section(
                invariant,
                result,
                target,
                options_of(result),
                section,
                no_database=no_database,
                command=command,
                title=f"[{number}] " if shown else "",
                verbose=False,
                rerun=False,
            )
            record["rerun"] = rerun_command(
                target, invariant.id, options_of(result), no_database=no_database, command=command
            )
            record.update(
                input=failure.minimal_input,
                shape=list(failure.shape) if failure.shape else None,
                cause=cause.text if cause is not None else failure.message.splitlines()[0],
                cause_number=number,
                shown_for_its_cause=shown,
                message=failure.message,
                section=section.getvalue().strip("\n"),
            )
        records.append(record)
    return records


def _cause_records(causes: Sequence[Cause], records: list[dict[str, Any]]) -> list[dict]:
    """The summary's causes: each one's text, invariants, and rerun (its shown invariant's)."""
    rerun_of = {record["id"]: record.get("rerun") for record in records}
    return [
        {
            "number": number,
            "text": cause.text,
            "shown": cause.representative.invariant_id,
            "invariants": [r.invariant_id for r in cause.results],
            "rerun": rerun_of[cause.representative.invariant_id],
        }
        for number, cause in enumerate(causes, start=1)
    ]


@dataclass
class Part:
    """One run's results, as the report showed them (``check TARGET --api MODULE`` has two);
    ``reason``: why it checked nothing, where it did not (its target cannot be checked, no
    selected invariant applies)."""

    command: str
    target: str
    invariants: Sequence[Any]
    results: Sequence[InvariantResult]
    causes: Sequence[Cause]
    seconds: float
    options_of: Callable[[InvariantResult], dict[str, Any]]
    reason: str | None = None


#: each part of a run with its records
Runs = Sequence[tuple[Part, list[dict[str, Any]]]]


def _json(command: str, runs: Runs, status: int, reason: str | None) -> bytes:
    reasons = [part.reason for part, _ in runs if part.reason is not None]
    document = {
        "exit_status": status,
        # why the run checked nothing, or not everything (None: its invariants say it all)
        "reason": "; ".join([*reasons, *([reason] if reason is not None else [])]) or None,
        "runs": [
            {
                "command": part.command,
                "target": part.target,
                "seconds": round(part.seconds, 3),
                "reason": part.reason,
                "causes": _cause_records(part.causes, records),
                "invariants": records,
            }
            for part, records in runs
        ],
    }
    return (json.dumps(document, indent=2) + "\n").encode()


def _junit_xml(command: str, runs: Runs, status: int, reason: str | None) -> bytes:
    root = ET.Element("testsuites")
    for part, records in runs:
        root.append(_junit(part.command, part.target, records, part.seconds, part.reason))
    if reason is not None:  # the command's own: a suite of its own, red with it
        root.append(_junit(command, "", [], 0.0, reason))
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


#: each report file's option: its help, and what it writes
REPORTS: dict[str, tuple[str, Callable[[str, Runs, int, str | None], bytes]]] = {
    "--json": ("also write the verdict, per invariant, as JSON", _json),
    "--junit-xml": ("also write the verdict as JUnit XML (a testcase per invariant)", _junit_xml),
}


def requested(args: argparse.Namespace) -> dict[str, str]:
    """The report files the parsed command line asks for, by option."""
    named = {option: getattr(args, option[2:].replace("-", "_"), None) for option in REPORTS}
    return {option: name for option, name in named.items() if name is not None}


def requested_in(argv: Sequence[str]) -> dict[str, str]:
    """The report files that a command line argparse refused asks for (its namespace is lost
    with the error): each option spelt in full, given once before any ``--``, with its value
    (``--json FILE``, ``--json=FILE``). One abbreviated, repeated or without a value is left
    out: what argparse would have made of it is a guess, and a guessed path is never written."""
    words = list(argv)
    end = words.index("--") if "--" in words else len(words)
    found: dict[str, list[str | None]] = {option: [] for option in REPORTS}
    for at, word in enumerate(words[:end]):
        option, equals, value = word.partition("=")
        if option not in REPORTS:
            continue
        if not equals:  # the next word, unless argparse would read it as an option
            after = words[at + 1] if at + 1 < end else "-"
            value = after if not after.startswith("-") else ""
        found[option].append(value or None)
    return {option: names[0] for option, names in found.items() if len(names) == 1 and names[0]}


def _cannot_write(path: Path) -> str | None:
    """Why ``path`` cannot be written, found without creating, opening or changing a file:
    a run refused for any reason leaves what was there as it was."""
    if path.is_dir():
        return "it is a folder"
    folder = path.parent
    if not folder.is_dir():
        return f"its folder {folder} does not exist"
    if path.exists():
        return None if os.access(path, os.W_OK) else "no permission to write it"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"no permission to write in its folder {folder}"
    return None


def unwritable(paths: Mapping[str, str]) -> dict[str, str]:
    """Why each report file of ``paths`` (by option) cannot be written: an empty name, a
    folder, a missing folder, no permission, or one file named by both options (``./F`` and
    ``F`` are one: paths are compared resolved)."""
    why: dict[str, str] = {}
    by_file: dict[Path, list[str]] = {}
    for option, name in paths.items():
        if not name:
            why[option] = f"{option} names no file (an empty name)"
            continue
        problem = _cannot_write(Path(name))
        if problem is not None:
            why[option] = f"cannot write {option} {name}: {problem}"
        by_file.setdefault(Path(name).resolve(), []).append(option)
    for file, options in by_file.items():
        if len(options) > 1:
            both = " and ".join(options)
            why.update(dict.fromkeys(options, f"{both} name the same file, {file}"))
    return why


def remove_stale(name: str) -> None:
    """Remove what an earlier run left at ``name``, a report file this run cannot write (a
    folder is left as it is)."""
    path = Path(name)
    if name and (path.is_file() or path.is_symlink()):
        with contextlib.suppress(OSError):
            path.unlink()


def write_reports(
    paths: Mapping[str, str],
    parts: Sequence[Part],
    status: int,
    reason: str | None,
    *,
    command: str,
    no_database: bool,
) -> dict[str, str]:
    """Write each report file of ``paths`` (by option): the parts' results, the exit status,
    and ``reason``, the command's own (a usage error, a signal, a file not written; None
    where its parts say it all). What could not be written, by option, each with its
    message; its file is removed (neither an earlier run's nor half of this one's stays)."""
    if not paths:
        return {}
    runs = [
        (
            part,
            _records(
                part.command,
                part.target,
                part.invariants,
                part.results,
                part.causes,
                part.options_of,
                no_database,
            ),
        )
        for part in parts
    ]
    failed = {}
    for option, name in paths.items():
        render = REPORTS[option][1]
        try:
            Path(name).write_bytes(render(command, runs, status, reason))
        except OSError as error:
            failed[option] = f"cannot write {option} {name}: {error.strerror or error}"
            remove_stale(name)
    return failed


def _junit(
    command: str, target: str, records: list[dict[str, Any]], seconds: float, reason: str | None
) -> ET.Element:
    """JUnit XML: a testsuite for the run, a testcase per invariant (``classname`` its
    group); a failed invariant is a ``failure``, one that could not be checked an
    ``error``, one that did not apply ``skipped``; a run that says why it checked nothing
    (``reason``) has a testcase more, an ``error`` with that reason."""
    failures = sum(r["result"] == "failed" for r in records)
    errors = sum(r["result"] in ("crashed", "timed out", "error", "not checked") for r in records)
    skipped = sum(r["result"] in ("not applicable", "skipped") for r in records)
    suite = ET.Element(
        "testsuite",
        name=f"recon-spec {command} {target}".rstrip(),
        tests=str(len(records) + (reason is not None)),
        failures=str(failures),
        errors=str(errors + (reason is not None)),
        skipped=str(skipped),
        time=f"{seconds:.3f}",
    )
    for record in records:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"recon-spec.{command}.{record['group']}",
            name=record["id"],
            time=f"{record['seconds']:.3f}",
        )
        result = record["result"]
        if result == "failed":
            node = ET.SubElement(case, "failure", message=record["cause"], type="failed")
            node.text = record["section"]
        elif result in ("crashed", "timed out", "error", "not checked"):
            node = ET.SubElement(case, "error", message=record["cause"], type=result)
            node.text = record["section"]
        elif result in ("not applicable", "skipped"):
            ET.SubElement(case, "skipped", message=result)
    if reason is not None:
        case = ET.SubElement(
            suite, "testcase", classname=f"recon-spec.{command}", name=NOT_CHECKED, time="0.000"
        )
        node = ET.SubElement(case, "error", message=reason.splitlines()[0], type=NOT_CHECKED)
        node.text = reason
    return suite
