"""The ``recon-spec`` command line: ``check`` an implementation of the stack, ``check-api``
an API module (seed 001's configs, trainer flags and ``compute_total_loss``), regenerate
the ``doc``.

Exit status of ``check`` and ``check-api``:

* 0: every selected invariant ran against the named target and held;
* 1: an invariant failed (a counterexample is reported);
* 2: the target could not be checked: its name is empty or malformed, it does not import,
  it raises (or dies, or hangs) on a plain valid input (a stack target), it lacks one of
  the five names that an invariant needs and ``--skip`` does not leave out (an API
  module), its process died, a call raised SystemExit or KeyboardInterrupt or timed out
  during an invariant (docs/API.md, "What a target may raise"), no selected
  invariant applies to the chosen domain, an option is bad (a usage error), the run was
  interrupted (Ctrl-C, at any point of the run, start-up included) or terminated
  (SIGTERM), or its output went to a closed pipe, or ``--json`` or ``--junit-xml`` cannot
  be written (before the run: a usage error). 2 wins over 1: a run that could not check
  everything says so.

Every end of ``check`` and ``check-api`` but ``--list`` and ``--help`` writes the report
files asked for, with the exit status and, where the run checked nothing or not all it was
asked to, why (properties/outputs.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import NoReturn

from properties.interrupts import Terminated, raise_if_received, signals_end_the_run

USAGE_OR_UNCHECKED = 2
#: the commands that check a target, and so write the report files
CHECKS = ("check", "check-api")
#: how the report files word the reason of each kind of end that checked nothing
USAGE_ERROR, UNCHECKABLE = "usage error", "target cannot be checked"
NOTHING_CHECKED = (
    "nothing was checked: no selected invariant applies to this domain or run "
    "(see --max-alpha, --dtypes, --skip)"
)


class NotChecked(Exception):
    """The command ends before it checks anything: its line on stderr, its reason for the
    report files."""

    def __init__(self, kind: str, message: str, command: str = "check") -> None:
        super().__init__(message)
        self.message, self.command, self.reason = message, command, f"{kind}: {message}"


class UsageError(SystemExit):
    """argparse's exit on a usage error, with its message: the report files say it too."""

    def __init__(self, message: str) -> None:
        super().__init__(USAGE_OR_UNCHECKED)
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors keep their message (its subcommands' too)."""

    def error(self, message: str) -> NoReturn:
        try:
            super().error(message)
        except SystemExit:
            raise UsageError(message) from None
        raise AssertionError("argparse's error() returned")  # it always exits


def _doc(args: argparse.Namespace) -> int:
    from spec.document import write_spec_document

    return write_spec_document(check=args.check)


def _list_invariants() -> int:
    from properties.invariants import INVARIANTS

    for invariant in INVARIANTS:
        extra = " (opt-in)" if invariant.opt_in else ""
        print(f"{invariant.id:<32} {invariant.group:<11} {invariant.statement}{extra}")
        witness = f"; rejects properties.zoo.wrong:{invariant.witness}" if invariant.witness else ""
        print(f"{'':<32} {'':<11} spec: {', '.join(invariant.all_refs)}{witness}")
    return 0


def _list_api_invariants() -> int:
    from properties.api import INVARIANTS

    for invariant in INVARIANTS:
        print(f"{invariant.id:<36} {invariant.group:<11} {invariant.statement}")
        extra = " (opt-in: --with-logits)" if invariant.opt_in else ""
        print(f"{'':<36} {'':<11} needs {', '.join(invariant.needs)}{extra}")
    return 0


def _error(message: str, command: str = "check") -> int:
    print(f"recon-spec {command}: {message}", file=sys.stderr)
    return USAGE_OR_UNCHECKED


def exit_status(statuses: Sequence[str]) -> int:
    """The verdict of a run from the status of each selected invariant (module docstring)."""
    if any(status in ("crashed", "timed out", "error", "not checked") for status in statuses):
        return USAGE_OR_UNCHECKED
    if not any(status in ("passed", "failed") for status in statuses):
        return USAGE_OR_UNCHECKED  # nothing was checked
    return 1 if "failed" in statuses else 0


def _check(args: argparse.Namespace) -> int:
    if args.list:
        return _list_invariants()
    return _with_reports(args, _check_suites)


def _check_suites(args: argparse.Namespace, parts: list) -> int:
    """``check``, and with ``--api`` ``check-api`` after it: their combined exit status."""
    from properties.api.module import api_parts, api_target_name
    from properties.invariants import by_id, select
    from properties.invariants.contract import plain_input
    from properties.options import domain_from, domain_options
    from properties.target import (
        TargetLoadError,
        adapted_target,
        locate_module,
        split_target,
        target_name,
    )

    try:
        target = target_name(args.target)
        locate_module(split_target(adapted_target(target))[0])
    except TargetLoadError as error:
        raise NotChecked(UNCHECKABLE, str(error)) from None
    try:  # an API that cannot be had fails the command before the stack's check runs
        if args.api is not None:
            locate_module(api_parts(api_target_name(args.api))[0])
    except TargetLoadError as error:
        raise NotChecked(UNCHECKABLE, str(error), "check-api") from None
    try:
        stack_names, api_names = _split_selection(args.invariant, with_api=args.api is not None)
        invariants = select(stack_names, include_opt_in=args.with_validation)
    except KeyError as error:
        raise NotChecked(USAGE_ERROR, error.args[0]) from None
    domain = domain_from(**domain_options(args))
    plain = plain_input(domain)
    suites: dict[str, int | None] = {}  # each suite's command -> its status (None: not run)
    if args.api is None or not args.invariant or stack_names:
        suites[f"check {target}"] = _run(
            args, target, invariants, by_id, domain, kind="stack", plain=plain, parts=parts
        )
    if args.api is not None and (not args.invariant or api_names):
        module, args.maxfail = args.api, _maxfail_left(args.maxfail, parts)
        if args.maxfail == 0:
            print(f"\nrecon-spec check-api {module}: not run (--maxfail reached in check)")
            suites[f"check-api {module}"] = None
        else:
            args.module, args.invariant, args.with_logits, args.skip = module, api_names, False, []
            print()
            suites[f"check-api {module}"] = _check_api(args, parts=parts)
    status = combined([s for s in suites.values() if s is not None])
    if len(suites) > 1:  # the last lines are the API's: the verdict of both follows them
        print(f"\n{verdict_line(suites, status)}")
    return status


def _with_reports(args: argparse.Namespace, run: Callable[[argparse.Namespace, list], int]) -> int:
    """Run the command, its results added to a list of parts, then write ``--json`` and
    ``--junit-xml`` whatever its end; report files that cannot be written (or that are one
    file) are a usage error found before anything runs."""
    from properties.outputs import requested

    paths, reason = _writable_reports(args.command, requested(args))
    parts: list = []
    status = USAGE_OR_UNCHECKED
    if reason is None:
        try:
            status = run(args, parts)
        except NotChecked as error:
            status, reason = _error(error.message, error.command), error.reason
    return _write_reports(args.command, paths, parts, status, reason, args.no_database)


def _writable_reports(command: str, paths: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """The report files of ``paths`` (by option) that can be written, and the usage error
    of the others (None if none): each on stderr, each one's stale file removed (no other
    report of this run can take its place)."""
    from properties.outputs import remove_stale, unwritable

    why = unwritable(paths)
    messages = list(dict.fromkeys(why.values()))  # two options naming one file: one message
    for message in messages:
        _error(message, command)
    for option in why:
        remove_stale(paths[option])
    usable = {option: name for option, name in paths.items() if option not in why}
    return usable, f"{USAGE_ERROR}: {'; '.join(messages)}" if messages else None


def _write_reports(
    command: str,
    paths: dict[str, str],
    parts: Sequence,
    status: int,
    reason: str | None,
    no_database: bool,
) -> int:
    """Write the report files; the exit status: ``status``, or 2 where one could not be
    written (said on stderr, and in the ones that could)."""
    from properties.outputs import write_reports

    while failed := write_reports(
        paths, parts, status, reason, command=command, no_database=no_database
    ):
        for message in failed.values():
            _error(message, command)
        paths = {option: name for option, name in paths.items() if option not in failed}
        status = USAGE_OR_UNCHECKED
        unwritten = f"report not written: {'; '.join(failed.values())}"
        reason = unwritten if reason is None else f"{reason}; {unwritten}"
    return status


def _report_end(args: argparse.Namespace | None, given: list[str], reason: str) -> None:
    """Write the report files of a check that ``main`` ends with 2 (argparse's usage error,
    a signal, a closed pipe), so that an earlier run's do not stay behind. Where argparse
    refused the command line, its namespace is lost: the files are read from the raw words,
    where they can be found unambiguously (``outputs.requested_in``)."""
    from properties.outputs import requested, requested_in

    if args is None:
        if not _runs_a_check(given):
            return
        command, paths = given[0], requested_in(given[1:])
    else:
        if args.command not in CHECKS or args.list:
            return
        command, paths = args.command, requested(args)
    paths, usage = _writable_reports(command, paths)
    reason = reason if usage is None else f"{reason}; {usage}"
    _write_reports(command, paths, [], USAGE_OR_UNCHECKED, reason, no_database=True)


def _runs_a_check(given: Sequence[str]) -> bool:
    """Whether the command line runs a check (``check`` or ``check-api``, without a
    ``--help`` or ``--list`` that ends it before)."""
    return bool(given) and given[0] in CHECKS and not {"-h", "--help", "--list"} & {*given}


#: what each exit status of one suite says (the module docstring)
STATUS_WORDS = {0: "held", 1: "failed", 2: "not checked"}


def verdict_line(suites: dict[str, int | None], status: int) -> str:
    """The combined verdict of ``check TARGET --api MODULE``, each suite's beside it."""
    each = "; ".join(
        f"{command}: {'not run' if s is None else f'{STATUS_WORDS[s]} ({s})'}"
        for command, s in suites.items()
    )
    return f"recon-spec check, both suites: exit {status} ({each})"


def _maxfail_left(maxfail: int | None, parts: Sequence) -> int | None:
    """``--maxfail`` counts over both suites: what the stack's run leaves for the API's."""
    from properties.supervisor import NOT_HOLDING

    if maxfail is None:
        return None
    failing = sum(r.status in NOT_HOLDING for part in parts for r in part.results)
    return max(0, maxfail - failing)


def combined(statuses: Sequence[int]) -> int:
    """The verdict of several runs by the same rules: 2 wins over 1, 1 over 0."""
    return max(statuses, default=USAGE_OR_UNCHECKED)


def _split_selection(
    names: list[str] | None, *, with_api: bool
) -> tuple[list[str] | None, list[str] | None]:
    """``-i`` names as the stack's and the API's (``check TARGET --api MODULE`` runs both
    catalogues); a name neither knows is a KeyError."""
    if not with_api or not names:
        return names, names
    from properties import api, invariants

    def known(catalogue, groups) -> set[str]:
        return {i.id for i in catalogue} | set(groups)

    stack = known(invariants.INVARIANTS, invariants.GROUPS)
    surface = known(api.INVARIANTS, api.API_GROUPS)
    unknown = [name for name in names if name not in stack | surface]
    if unknown:
        raise KeyError(f"no invariant or group {unknown[0]!r} in either catalogue (see --list)")
    return [n for n in names if n in stack], [n for n in names if n in surface]


def _check_api(args: argparse.Namespace, parts: list | None = None) -> int:
    if args.list:
        return _list_api_invariants()
    if parts is None:  # the command itself: its report files are written here
        return _with_reports(args, _check_api)
    from properties.api import by_id, select, skipped_by
    from properties.api.module import api_target_name
    from properties.options import domain_from, domain_options
    from properties.target import TargetLoadError

    try:
        module = api_target_name(args.module)
    except TargetLoadError as error:
        raise NotChecked(UNCHECKABLE, str(error), "check-api") from None
    try:
        invariants = select(args.invariant, include_opt_in=args.with_logits)
    except KeyError as error:
        raise NotChecked(USAGE_ERROR, error.args[0], "check-api") from None
    domain = domain_from(**domain_options(args))
    skip = tuple(args.skip or ())
    skipped = {i.id for i in invariants if skipped_by(i, skip)}
    return _run(
        args,
        module,
        invariants,
        by_id,
        domain,
        kind="api",
        skipped=skipped,
        skip=skip,
        parts=parts,
    )


def _run(
    args: argparse.Namespace,
    target: str,
    invariants: list,
    by_id,
    domain,
    *,
    kind: str,
    plain=None,
    skipped: set[str] | frozenset[str] = frozenset(),
    skip: tuple[str, ...] = (),
    parts: list,
) -> int:
    """Run ``invariants`` against ``target`` in worker processes; report; the exit status.
    What ``--json`` and ``--junit-xml`` write of it is added to ``parts``."""
    from properties import report
    from properties.database import run_storage
    from properties.followup import follow_up
    from properties.options import SIZE_OPTIONS
    from properties.outputs import Part
    from properties.profiles import default_profile, profile_settings
    from properties.runner import InvariantResult, invariant_seed
    from properties.supervisor import Supervisor, TargetUnusable
    from properties.worker import SearchSettings, WorkRequest

    command = "check-api" if kind == "api" else "check"
    profile = args.profile or default_profile()
    settings = profile_settings(profile, max_examples=args.max_examples)
    search = SearchSettings.of(settings)
    seeds = {i.id: invariant_seed(i, args.seed, settings) for i in invariants}
    requests = [
        WorkRequest(i.id, search, seeds[i.id], domain, use_database=not args.no_database)
        for i in invariants
        if i.applies(domain) and i.id not in skipped
    ]
    draw_options = {
        "profile": profile,
        "max-examples": settings.max_examples,
        "max-alpha": args.max_alpha,
        "max-loss": args.max_loss,
        **{name: getattr(args, name.replace("-", "_")) for name in SIZE_OPTIONS},
        "dtypes": args.dtypes,
        "device": args.device,
    }

    def options_of(result: InvariantResult) -> dict:
        return {**draw_options, "seed": result.seed}

    out = sys.stdout
    note = f"; --skip {', '.join(skip)}: {len(skipped)} left out" if skip else ""
    report.header(
        target, profile, len(invariants), out, command=command, note=note, verbose=args.verbose
    )
    start = time.perf_counter()
    progress = report.Progress(invariants, out, verbose=args.verbose)
    results: dict[str, InvariantResult] = {}
    for i in invariants:
        if i.id in skipped:
            results[i.id] = InvariantResult(i.id, "skipped", 0, 0.0)
        elif not i.applies(domain):
            results[i.id] = InvariantResult(i.id, "not applicable", 0, 0.0)
    for result in results.values():
        progress.record(result)
    jobs = min(args.jobs, max(1, len(requests)))
    causes = []
    try:
        with (
            run_storage(not args.no_database) as environment,
            Supervisor(
                target,
                plain_input=plain,
                statement_of=lambda invariant_id: by_id(invariant_id).statement,
                jobs=jobs,
                call_timeout=args.call_timeout,
                environment=environment,
                threads=max(1, (os.cpu_count() or 1) // jobs),
                kind=kind,
            ) as supervisor,
        ):
            for result in supervisor.run(requests, maxfail=args.maxfail):
                results[result.invariant_id] = result
                progress.record(result)
            progress.finish()
            ran = [results[i.id] for i in invariants if i.id in results]
            causes = follow_up(supervisor, ran, invariants, requests, kind=kind)
            results.update({r.invariant_id: r for c in causes for r in c.results})
    except TargetUnusable as error:
        ran = [results[i.id] for i in invariants if i.id in results]
        reason = f"{UNCHECKABLE}: {target}: {error}"
        seconds = time.perf_counter() - start
        parts.append(Part(command, target, invariants, ran, [], seconds, options_of, reason))
        return _error(f"{target} cannot be checked: {error}", command)
    ordered = [results[i.id] for i in invariants if i.id in results]
    not_run = len(invariants) - len(ordered)
    sections = dict(no_database=args.no_database, command=command)
    if args.verbose:
        for result in ordered:
            if result.failure is not None:
                invariant, options = by_id(result.invariant_id), options_of(result)
                report.failure_section(invariant, result, target, options, out, **sections)
    else:
        used = progress.lines + 2  # the tally's blank line and line
        room, aim = report.REPORT_LINES - used, report.AIM_LINES - used
        out.write(report.causes_text(causes, by_id, target, options_of, room, aim, **sections))
    seconds = time.perf_counter() - start
    report.summary(ordered, seconds, out)
    if not_run:
        print(
            f"stopped after {args.maxfail} invariant{'s' if args.maxfail > 1 else ''} that did "
            f"not hold (--maxfail): {not_run} not run"
        )
    status = exit_status([r.status for r in ordered])
    nothing = all(r.status in ("not applicable", "skipped") for r in ordered)
    reason = NOTHING_CHECKED if nothing else None
    parts.append(Part(command, target, invariants, ordered, causes, seconds, options_of, reason))
    if nothing:
        print(f"recon-spec {command}: {NOTHING_CHECKED}; exit 2, never a pass", file=sys.stderr)
    unsaved = [r.invariant_id for r in ordered if r.failure is not None and r.failure.unsaved]
    if unsaved:
        from properties.database import storage_directory

        print(
            f"recon-spec {command}: warning: the example database "
            f"({storage_directory().resolve() / 'examples'}) cannot be written: nothing was "
            f"saved of {', '.join(unsaved)}",
            file=sys.stderr,
        )
    return status


def _add_selection(command: argparse.ArgumentParser) -> None:
    """``-i`` and ``--list``, the same for ``check`` and ``check-api``."""
    command.add_argument(
        "-i",
        "--invariant",
        action="append",
        metavar="ID_OR_GROUP",
        help="run only these invariants (an id or a group; repeatable); see --list",
    )
    command.add_argument("--list", action="store_true", help="list the invariants and exit")


def _add_run_options(command: argparse.ArgumentParser) -> None:
    """What every run takes: the draw and domain options, the timeout, ``-j``."""
    from properties.options import RUN_OPTIONS, positive_int

    for name, options in RUN_OPTIONS:
        command.add_argument(f"--{name}", **options)
    command.add_argument(
        "-j",
        "--jobs",
        type=positive_int,
        default=min(2, os.cpu_count() or 1),
        help="worker processes (default: 2, or 1 on a single core)",
    )
    command.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="a row per invariant, and a full section for every one that did not hold "
        "(default: a line per group, then one section per cause)",
    )
    command.add_argument(
        "--maxfail",
        type=positive_int,
        metavar="N",
        help="stop after N invariants that did not hold (failed, crashed, timed out); the "
        "exit status is the one a full run gives for what ran",
    )
    command.add_argument(
        "-x",
        "--exitfirst",
        dest="maxfail",
        action="store_const",
        const=1,
        help="stop at the first invariant that does not hold (--maxfail 1)",
    )
    from properties.outputs import REPORTS

    for option, (help_, _) in REPORTS.items():
        command.add_argument(option, metavar="FILE", help=help_)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="recon-spec",
        description="Specification and conformance suite of the reconstruction loss stack.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser(
        "check",
        help="check an implementation against the spec's invariants",
        description="Run the invariants against TARGET, a callable f(token_nll, "
        "zfree_token_nll, mask, config) given as MODULE:CALLABLE or path/to/file.py:CALLABLE "
        "(default: $RECON_IMPL, else the bundled recon_impl:reconstruction_losses). The "
        "target runs in worker processes. Exit 0: every selected invariant ran and held; "
        "1: one failed; 2: the target could not be checked (it does not import, raises on "
        "a plain input, crashes or times out) or an option is bad.",
    )
    check.add_argument("target", nargs="?", help="MODULE:CALLABLE or path/to/file.py:CALLABLE")
    _add_selection(check)
    check.add_argument(
        "--api",
        metavar="API",
        help="also run check-api on API (MODULE or path/to/file.py, optionally :NAME): one "
        "command, one exit status for both (2 wins over 1); -i may name invariants of either",
    )
    check.add_argument(
        "--with-validation",
        action="store_true",
        help="also run the opt-in validation group (bad inputs must raise ValueError)",
    )
    _add_run_options(check)
    check.set_defaults(run=_check)

    from spec.api import PUBLIC_NAMES, TOKEN_NLL_FROM_LOGITS

    check_api = commands.add_parser(
        "check-api",
        help="check an API module (configs, trainer flags, compute_total_loss) against seed 001",
        description="Run the API invariants against API, a module (MODULE or "
        f"path/to/file.py) that exposes {', '.join(PUBLIC_NAMES)} under recon_impl's names, "
        "or an object of one (MODULE:NAME or path/to/file.py:NAME, NAME an attribute holding "
        "the API object, or a callable that returns it when called with no arguments) "
        "(default: $RECON_API, else recon_impl). The module runs in worker processes. Exit 0: "
        "every selected invariant ran and held; 1: one failed; 2: the module could not be "
        "checked (an empty or malformed name, it does not import, it lacks one of the five "
        "names without --skip, a crash or a timeout) or an option is bad.",
    )
    check_api.add_argument(
        "module", nargs="?", metavar="API", help="MODULE or path/to/file.py, optionally :NAME"
    )
    _add_selection(check_api)
    check_api.add_argument(
        "--with-logits",
        action="store_true",
        help=f"also run the opt-in logits group (the module's {TOKEN_NLL_FROM_LOGITS}, "
        "recon_impl's helper beyond the seed)",
    )
    check_api.add_argument(
        "--skip",
        action="append",
        choices=(*PUBLIC_NAMES, TOKEN_NLL_FROM_LOGITS),
        metavar="NAME",
        help="leave out the invariants that need NAME (one of the five; repeatable): for a "
        "module that does not implement it",
    )
    _add_run_options(check_api)
    check_api.set_defaults(run=_check_api)

    doc = commands.add_parser("doc", help="regenerate docs/SPEC.md from the sympy spec")
    doc.add_argument(
        "--check", action="store_true", help="exit 1 if the committed document is stale"
    )
    doc.set_defaults(run=_doc)
    parser.set_defaults(parsers=commands.choices)
    return parser


def _parse(parser: argparse.ArgumentParser, given: list[str]) -> argparse.Namespace:
    """The command line's options; an option the command does not know is an error with
    that command's usage (argparse would show the top level's, which names no option). A
    usage error is written to the report files too (``_report_end``)."""
    args = None
    try:
        args, unknown = parser.parse_known_args(given)
        if unknown:
            args.parsers[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    except UsageError as error:
        _report_end(args, given, f"{USAGE_ERROR}: {error.message}")
        raise
    return args


def _quiet_stdout() -> None:
    """After the reader of stdout went away: drop whatever else would be written there."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    args = None  # until parsed: an end before then finds the report files in ``given``
    try:
        with signals_end_the_run():
            if _runs_a_check(given):
                from properties.fork_server import start_early

                start_early()  # its imports overlap this process's, from here on
            # parsing is part of the run: it imports the spec (and torch, for --device)
            args = _parse(build_parser(), given)
            raise_if_received()
            status = args.run(args)
            raise_if_received()
            sys.stdout.flush()
            return status
    except BrokenPipeError:  # `recon-spec check | head -1`: end quietly
        _quiet_stdout()
        _report_end(args, given, "its output went to a closed pipe")
        return USAGE_OR_UNCHECKED
    except KeyboardInterrupt:
        print("\nrecon-spec: interrupted", file=sys.stderr)
        _report_end(args, given, "interrupted (Ctrl-C)")
        return USAGE_OR_UNCHECKED
    except Terminated:
        print("\nrecon-spec: terminated (SIGTERM)", file=sys.stderr)
        _report_end(args, given, "terminated (SIGTERM)")
        return USAGE_OR_UNCHECKED


if __name__ == "__main__":
    sys.exit(main())
