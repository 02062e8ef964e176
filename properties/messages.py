"""What an error message names: the rule of docs/API.md, "What an error names".

A ``ValueError`` about a bad argument names *that* argument: its name as a whole word (not
inside a longer identifier: ``token_nll`` is not named by ``zfree_token_nll``, ``kl`` not by
``router_marginal_kl_to_prior``), and no other argument of the same call, unless the rule
that was broken relates them (a shape or a device shared by several tensors, a parameter
whose error needs some inputs). A message that names the wrong argument, or the right one
and a wrong one, sends its reader to the wrong line.

Only the target's own text is searched here (its error messages), never the suite's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

#: a character of an identifier: a name is whole where neither neighbour is one
_IDENTIFIER = r"[A-Za-z0-9_]"


def names_word(message: str, name: str) -> bool:
    """Whether ``message`` holds ``name`` as a whole word (case as written)."""
    return re.search(rf"(?<!{_IDENTIFIER}){re.escape(name)}(?!{_IDENTIFIER})", message) is not None


@dataclass(frozen=True)
class Naming:
    """How a message names an argument: whether it names it, and which other arguments it
    names that it should not."""

    argument: tuple[str, ...]
    named: bool
    wrong: tuple[str, ...]

    @property
    def problem(self) -> str | None:
        """What is wrong, in words (None: nothing)."""
        named = " or ".join(self.argument)
        wrong = " and ".join(self.wrong)
        if not self.named:
            return f"must name {named}" + (f", but names {wrong} instead" if wrong else "")
        if self.wrong:
            return f"must name {named} alone, but names {wrong} as well (another argument)"
        return None


def naming(message: str, names: tuple[str, ...], others: Iterable[tuple[str, ...]] = ()) -> Naming:
    """How ``message`` names the argument called ``names`` (the spec's name, the target's
    own), given the names of each other argument of the call that the broken rule does not
    relate to it (``others``), none of which it may hold."""
    wrong = tuple(
        next(name for name in other if names_word(message, name))
        for other in others
        if any(names_word(message, name) for name in other)
    )
    return Naming(names, any(names_word(message, name) for name in names), wrong)
