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
