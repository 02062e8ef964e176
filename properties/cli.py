"""The ``recon-spec`` command line: ``check`` an implementation, regenerate the ``doc``.

Exit status of ``check``: 0 when every invariant holds, 1 when any fails, 2 when the
target cannot be imported or called.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Sequence


def _doc(args: argparse.Namespace) -> int:
    from spec.document import write_spec_document

    return write_spec_document(check=args.check)


def _list_invariants() -> int:
    from properties.invariants import INVARIANTS

    for invariant in INVARIANTS:
        extra = " (opt-in)" if invariant.opt_in else ""
        print(f"{invariant.id:<32} {invariant.group:<11} {invariant.statement}{extra}")
    return 0


def _domain(args: argparse.Namespace):
    from properties.options import domain_from

    return domain_from(
        max_alpha=args.max_alpha, max_loss=args.max_loss, dtypes=args.dtypes, device=args.device
    )


def _smoke_test(implementation, domain) -> str | None:
    """Why the target cannot be called on a plain valid input, or None when it can."""
    from dataclasses import replace

    from properties.invariants.edge_cases import EDGE_CASES

    case = replace(EDGE_CASES["single-token-rows"], dtype=domain.dtypes[0], device=domain.device)
    token_nll, zfree, mask = case.tensors()
    try:
        implementation(token_nll, zfree, mask, case.config)
    except Exception:
        return traceback.format_exc()
    return None


def _check(args: argparse.Namespace) -> int:
    from properties import report
    from properties.invariants import by_id, select
    from properties.profiles import default_profile
    from properties.runner import InvariantResult, RunRequest
    from properties.target import TargetLoadError, load_target

    if args.list:
        return _list_invariants()
    try:
        target, implementation = load_target(args.target)
    except TargetLoadError as error:
        print(f"recon-spec check: {error}", file=sys.stderr)
        return 2
    domain = _domain(args)
    problem = _smoke_test(implementation, domain)
    if problem:
        print(
            f"recon-spec check: {target} cannot be called as f(token_nll, zfree_token_nll, "
            f"mask, config) on a plain valid input:\n{problem}",
            file=sys.stderr,
        )
        return 2
    try:
        invariants = select(args.invariant, include_opt_in=args.with_validation)
    except KeyError as error:
        print(f"recon-spec check: {error.args[0]}", file=sys.stderr)
        return 2
    profile = args.profile or default_profile()
    requests = [
        RunRequest(
            invariant.id,
            target,
            profile,
            args.max_examples,
            args.seed,
            domain,
            use_database=not args.no_database,
        )
        for invariant in invariants
    ]
    out = sys.stdout
    report.header(target, profile, len(invariants), out)
    start = time.perf_counter()
    results: dict[str, InvariantResult] = {}
    for result in _run_all(requests, args.jobs):
        results[result.invariant_id] = result
        report.row(by_id(result.invariant_id), result, out)
    ordered = [results[invariant.id] for invariant in invariants]
    for invariant, result in zip(invariants, ordered, strict=True):
        if result.status == "failed":
            report.failure_section(invariant, result, target, profile, out)
    report.summary(ordered, time.perf_counter() - start, out)
    return 1 if any(r.status == "failed" for r in ordered) else 0


def _run_all(requests, jobs: int):
    """Results as they finish: in this process for one job, else in worker processes
    (spawned, not forked: torch's thread pools do not survive a fork)."""
    from properties.runner import run_request

    if jobs <= 1 or len(requests) <= 1:
        yield from map(run_request, requests)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = [pool.submit(run_request, request) for request in requests]
        for future in as_completed(futures):
            yield future.result()


def build_parser() -> argparse.ArgumentParser:
    from properties.options import RUN_OPTIONS

    parser = argparse.ArgumentParser(
        prog="recon-spec",
        description="Specification and conformance suite of the reconstruction loss stack.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser(
        "check",
        help="check an implementation against the spec's invariants",
        description="Run the invariants against TARGET, a callable f(token_nll, "
        "zfree_token_nll, mask, config) given as MODULE:CALLABLE or path/to/file.py:CALLABLE "
        "(default: $RECON_IMPL, else the bundled recon_impl:reconstruction_losses). "
        "Exit 0: all hold; 1: some fail; 2: the target cannot be imported or called.",
    )
    check.add_argument("target", nargs="?", help="MODULE:CALLABLE or path/to/file.py:CALLABLE")
    check.add_argument(
        "-i",
        "--invariant",
        action="append",
        metavar="ID_OR_GROUP",
        help="run only these invariants (an id or a group; repeatable); see --list",
    )
    check.add_argument("--list", action="store_true", help="list the invariants and exit")
    check.add_argument(
        "--with-validation",
        action="store_true",
        help="also run the opt-in validation group (bad inputs must raise ValueError)",
    )
    for name, options in RUN_OPTIONS:
        check.add_argument(f"--{name}", **options)
    check.add_argument(
        "--no-database",
        action="store_true",
        help="do not read or write hypothesis's example database (.hypothesis/)",
    )
    check.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="worker processes (default: 2, or 1 on a single core)",
    )
    check.set_defaults(run=_check)

    doc = commands.add_parser("doc", help="regenerate docs/SPEC.md from the sympy spec")
    doc.add_argument(
        "--check", action="store_true", help="exit 1 if the committed document is stale"
    )
    doc.set_defaults(run=_doc)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
