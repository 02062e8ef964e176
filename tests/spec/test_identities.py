"""One test per identity of MATH.md, parametrized from the catalogue: each runs the
identity's proof (``spec/identities.py``).

A proof raises AssertionError when the current definitions no longer satisfy the identity,
so these tests fail when a formula changes. ``Identity.test`` is the node id of its test
here, as docs/SPEC.md cites it.
"""

from __future__ import annotations

import pytest

from spec.identities import IDENTITIES, IDENTITY_BY_ID, Identity


@pytest.mark.parametrize("identity", IDENTITIES, ids=[identity.id for identity in IDENTITIES])
def test_identity(identity: Identity) -> None:
    checks = identity.proof()
    assert checks, f"the proof of {identity.id} checked nothing"


def test_the_catalogue_names_its_tests() -> None:
    assert len(IDENTITY_BY_ID) == len(IDENTITIES), "identity ids must be unique"
    for identity in IDENTITIES:
        assert identity.test == f"tests/spec/test_identities.py::test_identity[{identity.id}]"
