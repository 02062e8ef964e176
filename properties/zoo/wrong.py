"""Realistic wrong implementations: each is the textbook stack with one mistake, or the
fused stack with one slip in its backward (``properties.zoo.fused``).

Each is an attribute of this module, named after its mistake (``alpha_ignored``) or slip
(``fused_no_grad_backward``). ``recon-spec check`` must reject every one of them
(``tests/properties/test_zoo.py``); each fused slip is rejected by the invariant that names
it (``NAMED_BY``).
"""

from __future__ import annotations

from functools import partial

from properties.zoo import fused, textbook
from properties.zoo.fused import SLIPS, fused_losses
from properties.zoo.smallest import Smallest
from properties.zoo.textbook import MISTAKES, textbook_losses

WRONG_IMPLEMENTATIONS: dict[str, str] = {}
#: wrong implementation -> the smallest input that shows its mistake (its module's SMALLEST)
SMALLEST: dict[str, Smallest] = {}
#: wrong implementation -> the invariant that names its mistake (beyond the witnesses)
NAMED_BY: dict[str, str] = {
    "terms_detached": "output-gradients",
    "alpha_in_result": "outputs-contract",
    # the tiled kernels' mistakes: each first seen at a size, by the invariant of its smallest
    # input (textbook.SMALLEST)
    **{
        mistake.replace("-", "_"): textbook.SMALLEST[mistake].invariant
        for mistake in textbook.AT_SCALE
    },
}


def _wrong(mistake: str):
    implementation = partial(textbook_losses, mistake=mistake)
    name = mistake.replace("-", "_")
    WRONG_IMPLEMENTATIONS[name] = MISTAKES[mistake]
    if mistake in textbook.SMALLEST:
        SMALLEST[name] = textbook.SMALLEST[mistake]
    return implementation


def _fused(slip: str):
    implementation = partial(fused_losses, slip=slip)
    name = "fused_" + slip.replace("-", "_")
    NAMED_BY[name], WRONG_IMPLEMENTATIONS[name] = SLIPS[slip]
    if slip in fused.SMALLEST:
        SMALLEST[name] = fused.SMALLEST[slip]
    return implementation


# one module attribute per mistake and per slip, spelt with "_" for "-": the entry a user
# names on the command line, properties.zoo.wrong:alpha_ignored
for _mistake in MISTAKES:
    globals()[_mistake.replace("-", "_")] = _wrong(_mistake)
for _slip in SLIPS:
    globals()["fused_" + _slip.replace("-", "_")] = _fused(_slip)
