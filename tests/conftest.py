"""Every module of the project is loaded before any test draws.

Hypothesis mixes constants of every loaded local module into its draws, so a module first
imported by one test (a zoo module, a failure's reproduction) would change what every later
test of that process draws, derandomized ones included; and which tests ran earlier in a
process is pytest-xdist's choice. Loaded up front, the modules are the same for every
test: a derandomized test draws the same inputs on every run of the same code.
"""

from __future__ import annotations

import importlib
import pkgutil

import properties
import recon_impl
import spec


def project_modules() -> list[str]:
    """The modules of the three packages, less the conformance tests pytest collects."""
    return [
        module.name
        for package in (spec, recon_impl, properties)
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")
        if not module.name.rpartition(".")[2].startswith("test_")
    ]


for _name in project_modules():
    importlib.import_module(_name)


def pytest_configure(config) -> None:
    # pytest-xdist hands out tests in chunks of up to a quarter of a worker's share, so the
    # heavy tests that lead the order (below) would all land on the first worker; one at a
    # time (with two queued), the next test always goes to the worker that is free, and the
    # run ends on light tests. An explicit --maxschedchunk is kept.
    if getattr(config.option, "maxschedchunk", 0) is None:
        config.option.maxschedchunk = 1


#: the marker of the second tier: tests of a process of its own (signals, pipes, worker
#: deaths, the plugin run as pytest, two ranks) and the longest whole checks (correct
#: implementations and the GUIDE's adapter over the catalogue, the bundled API over the
#: API catalogue, the narrowest domains, shrinking to the smallest
#: input), which ``.ci/run`` runs after the README's command, with ``-m slow``
SLOW = "slow"


def _whole_suite_by_default(config) -> bool:
    """The README's command as written: no paths, no ``-m``: the first tier alone."""
    return config.args_source == config.ArgsSource.TESTPATHS and not config.option.markexpr


def pytest_collection_modifyitems(config, items) -> None:
    """The tests marked ``heavy`` (many seconds: subprocesses, whole checks, compiles) run
    first, in their collected order, so that a parallel run does not end on a long one; the
    README's command leaves the ``slow`` tier to CI (any path or ``-m`` given runs it)."""
    if _whole_suite_by_default(config):
        slow = [item for item in items if item.get_closest_marker(SLOW)]
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker(SLOW)]
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)


_LEFT_OUT = (
    f"the slow tier (tests marked {SLOW!r}: separate processes, signals, two ranks, the "
    "longest whole checks) is left "
    "out; `python -m pytest -n 2 -m slow` runs it, and CI does"
)


def pytest_report_header(config) -> str | None:
    return _LEFT_OUT if _whole_suite_by_default(config) else None


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if _whole_suite_by_default(config):
        terminalreporter.write_line(_LEFT_OUT)
