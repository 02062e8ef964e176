"""The run's verdict for machines: JSON for dashboards, JUnit XML for CI systems.

``--json FILE`` and ``--junit-xml FILE`` write what the terminal shows, per invariant: its
id and group, the result, the examples and time, the input shown, the cause it belongs to,
its section of the report and its rerun line; and the summary's causes, each with its
rerun. Both are written after the report, whatever the verdict.
"""

from __future__ import annotations

import argparse
import io
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from properties import report
from properties.causes import Cause
from properties.options import rerun_command
from properties.runner import InvariantResult


def _records(
    command: str,
    target: str,
    invariants: Sequence[Any],
    results: Sequence[InvariantResult],
    causes: Sequence[Cause],
    options_of: Callable[[InvariantResult], dict[str, Any]],
    no_database: bool,
) -> list[dict[str, Any]]:
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
    """One run's results, as the report showed them (``check TARGET --api MODULE`` has two)."""

    command: str
    target: str
    invariants: Sequence[Any]
    results: Sequence[InvariantResult]
    causes: Sequence[Cause]
    seconds: float
    options_of: Callable[[InvariantResult], dict[str, Any]]


def write_outputs(args: argparse.Namespace, parts: Sequence[Part], status: int) -> None:
    """Write ``--json`` and ``--junit-xml`` where they were asked for."""
    json_path, junit_path = getattr(args, "json", None), getattr(args, "junit_xml", None)
    if json_path is None and junit_path is None:
        return
    runs = []
    for part in parts:
        records = _records(
            part.command,
            part.target,
            part.invariants,
            part.results,
            part.causes,
            part.options_of,
            args.no_database,
        )
        runs.append((part, records))
    if json_path is not None:
        document = {
            "exit_status": status,
            "runs": [
                {
                    "command": part.command,
                    "target": part.target,
                    "seconds": round(part.seconds, 3),
                    "causes": _cause_records(part.causes, records),
                    "invariants": records,
                }
                for part, records in runs
            ],
        }
        Path(json_path).write_text(json.dumps(document, indent=2) + "\n")
    if junit_path is not None:
        root = ET.Element("testsuites")
        for part, records in runs:
            root.append(_junit(part.command, part.target, records, part.seconds))
        ET.indent(root)
        Path(junit_path).write_bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))


def _junit(command: str, target: str, records: list[dict[str, Any]], seconds: float) -> ET.Element:
    """JUnit XML: a testsuite for the run, a testcase per invariant (``classname`` its
    group); a failed invariant is a ``failure``, one that could not be checked an
    ``error``, one that did not apply ``skipped``."""
    failures = sum(r["result"] == "failed" for r in records)
    errors = sum(r["result"] in ("crashed", "timed out", "error", "not checked") for r in records)
    skipped = sum(r["result"] in ("not applicable", "skipped") for r in records)
    suite = ET.Element(
        "testsuite",
        name=f"recon-spec {command} {target}",
        tests=str(len(records)),
        failures=str(failures),
        errors=str(errors),
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
    return suite
