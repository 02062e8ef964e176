"""The seven trainer flags (seed 001, "CLI surface"; API.md, "Trainer flags"), each checked
on a fresh ``argparse.ArgumentParser(prog="train")`` that ``add_reconstruction_loss_arguments``
filled: they exist, their defaults are the dataclass defaults, each sets its own field and
only that one, a bad value is argparse's usage error, and the removed boolean is a usage
error that names its replacement, however it is spelt, leaving nothing in the namespace."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from properties.api.invariant import ApiInvariant
from properties.api.probe import ApiProbe, Parsed, literal, qualified, same_value, short
from properties.api.strategies import (
    REMOVED_SUFFIXES,
    FlagValue,
    FlagValues,
    InvalidFlag,
    RemovedSpelling,
    flag_values,
    invalid_flags,
    removed_spellings,
)
from properties.invariant import InvariantViolation, NamedInput
from spec.api import (
    ADD_ARGUMENTS,
    CONFIG_FROM_ARGS,
    FLAGS,
    LEGACY_NAMESPACE_KEYS,
    RECONSTRUCTION_CONFIG,
    RECONSTRUCTION_DEFAULTS,
    REMOVED_FLAG,
    REPLACEMENT_FLAG,
)

FLAG_REFS = ("API.md#trainer-flags",)
#: a usage error of argparse starts with this line
USAGE = "usage:"


@dataclass(frozen=True)
class Fixed:
    """The input of an invariant with one input: what it is, in words."""

    what: str

    def __repr__(self) -> str:
        return self.what


FRESH_PARSER = Fixed(
    f"a fresh argparse.ArgumentParser(prog='train') after the module's {ADD_ARGUMENTS}(parser)"
)
NO_ARGUMENTS = Fixed("argv=[]")


def _violation(message: str, drawn: Any, *failing: str) -> InvariantViolation:
    return InvariantViolation(message, case=drawn, failing=failing)


def _refused(parsed: Parsed) -> str:
    return f"exits with status {parsed.exit_code}: {short(parsed.error_line)}"


def _config_or_violation(probe: ApiProbe, argv: tuple[str, ...], drawn: Any) -> Any:
    parsed, config = probe.parse(argv, to_config=True, drawn=drawn)
    if parsed.exited:
        raise _violation(
            f"argparse refused a valid argv {list(argv)}: {_refused(parsed)}", drawn, "flags"
        )
    return config


def _field_problems(config: Any, expected: dict[str, float], given: dict[str, str]) -> list[str]:
    flag_of = {field: flag for flag, field in FLAGS.items()}
    problems = []
    for name, value in expected.items():
        if not hasattr(config, name):
            problems.append(f"the config has no field {name}")
            continue
        got = getattr(config, name)
        if same_value(got, value):
            continue
        if name in given:
            problems.append(
                f"{name} is {literal(got)}, but {flag_of[name]} {given[name]} was given"
            )
        else:
            flag = flag_of.get(name)
            source = f"{flag} was not given" if flag else "it has no flag of the seed's"
            problems.append(
                f"{name} is {literal(got)}, not its default {literal(value)} ({source})"
            )
    return problems


# --- flags-exist ---------------------------------------------------------------------------


def check_exist(probe: ApiProbe, drawn: Fixed) -> None:
    options = probe.option_strings(drawn=drawn)
    missing = [flag for flag in FLAGS if flag not in options]
    if missing:
        hints = []
        for flag in missing:
            near = difflib.get_close_matches(flag, sorted(options), n=1, cutoff=0.6)
            hints.append(f"{flag}" + (f" (the parser has {near[0]})" if near else ""))
        raise _violation(
            f"the parser lacks {len(missing)} of the flags: {', '.join(hints)}",
            drawn,
            "flags",
        )


# --- flags-defaults ------------------------------------------------------------------------


def check_defaults(probe: ApiProbe, drawn: Fixed) -> None:
    config = _config_or_violation(probe, (), drawn)
    nested_class = probe.attribute(RECONSTRUCTION_CONFIG)
    if not isinstance(config, nested_class):
        raise _violation(
            f"{CONFIG_FROM_ARGS} returned a {qualified(type(config))}, not the module's "
            f"{RECONSTRUCTION_CONFIG} ({qualified(nested_class)})",
            drawn,
            "flags",
        )
    problems = _field_problems(config, RECONSTRUCTION_DEFAULTS, {})
    if problems:
        raise _violation(
            "parsing no arguments must give the dataclass defaults: " + "; ".join(problems),
            drawn,
            "flags",
        )


# --- flags-round-trip ----------------------------------------------------------------------


def check_round_trip(probe: ApiProbe, drawn: FlagValues) -> None:
    config = _config_or_violation(probe, drawn.argv(), drawn)
    given = {FLAGS[v.flag]: v.text for v in drawn.given}
    problems = _field_problems(config, drawn.expected(), given)
    if problems:
        raise _violation(
            "each flag must set its own field, and only that one: " + "; ".join(problems),
            drawn,
            "flags",
        )


# --- flags-reject-invalid ------------------------------------------------------------------


def check_reject_invalid(probe: ApiProbe, drawn: InvalidFlag) -> None:
    flag, text = drawn.bad.flag, drawn.bad.text
    has_from_args = callable(getattr(probe.module, CONFIG_FROM_ARGS, None))
    try:
        result = probe.parse(drawn.argv(), to_config=has_from_args, drawn=drawn)
    except Exception as error:  # argparse let it through; making the config failed
        raise _violation(
            f"{flag} {text!r} was parsed without a usage error: {CONFIG_FROM_ARGS} then "
            f"raised {type(error).__name__}: {short(str(error))}: a value the config rejects "
            "must end in argparse's usage error (exit status 2, the message on stderr)",
            drawn,
            "flags",
        ) from error
    parsed = result[0] if has_from_args else result
    if parsed.exited:
        problems = []
        if parsed.exit_code != 2:
            problems.append(f"exit status {parsed.exit_code!r}, not argparse's 2")
        if USAGE not in parsed.stderr:
            problems.append("no usage line on stderr")
        if flag not in parsed.message:
            problems.append(f"the message does not name {flag}: {parsed.error_line}")
        if problems:
            raise _violation(
                f"{flag} {text!r} must be argparse's usage error naming the flag: "
                + "; ".join(problems),
                drawn,
                "flags",
            )
        return
    probe.note("parses")
    field = FLAGS[flag]
    config = result[1] if has_from_args else None
    stored = (
        f"; the config holds {field} = {literal(getattr(config, field, '?'))}"
        if (config is not None)
        else ""
    )
    raise _violation(
        f"{flag} {text!r} was parsed without a usage error{stored}: a value the config "
        "rejects must end in argparse's usage error (exit status 2, the message on stderr)",
        drawn,
        "flags",
    )


# --- flags-removed -------------------------------------------------------------------------


def check_removed(probe: ApiProbe, drawn: RemovedSpelling) -> None:
    if drawn.option != REMOVED_FLAG:  # a prefix: argparse takes it only where it is unique
        others = probe.option_strings(drawn=drawn) - {REMOVED_FLAG}
        assume(not any(option.startswith(drawn.option) for option in others))
    parsed = probe.parse(drawn.argv(), drawn=drawn)
    spelling = " ".join(drawn.words())
    if not parsed.exited:
        probe.note("parses")
        raise _violation(
            f"{spelling!r} was accepted: the removed {REMOVED_FLAG} must be a usage error "
            f"naming {REPLACEMENT_FLAG}",
            drawn,
            "flags",
        )
    problems = []
    if parsed.exit_code != 2:
        problems.append(f"exit status {parsed.exit_code!r}, not argparse's 2")
    if USAGE not in parsed.stderr:
        problems.append("no usage line on stderr")
    if REPLACEMENT_FLAG not in parsed.message:
        problems.append(f"its message does not ({parsed.error_line})")
    if problems:
        raise _violation(
            f"{spelling!r} must be a usage error naming {REPLACEMENT_FLAG}: " + "; ".join(problems),
            drawn,
            "flags",
        )


# --- flags-namespace-clean -----------------------------------------------------------------


def check_namespace_clean(probe: ApiProbe, drawn: FlagValues) -> None:
    parsed = probe.parse(drawn.argv(), drawn=drawn)
    if parsed.exited:
        raise _violation(
            f"argparse refused a valid argv {list(drawn.argv())}: {_refused(parsed)}",
            drawn,
            "flags",
        )
    assert parsed.namespace is not None
    left = sorted(
        key
        for key in parsed.namespace
        if key in LEGACY_NAMESPACE_KEYS or any(old in key for old in LEGACY_NAMESPACE_KEYS)
    )
    if left:
        values = ", ".join(f"{key}={parsed.namespace[key]!r}" for key in left)
        raise _violation(
            f"the parsed namespace holds {values}: nothing of the removed {REMOVED_FLAG} may "
            "be left in it (its action needs default=argparse.SUPPRESS)",
            drawn,
            "flags",
        )


def _spelling(length: int, suffix: tuple[str, ...]) -> RemovedSpelling:
    return RemovedSpelling(length, suffix, FlagValues(()), FlagValues(()))


INVARIANTS = (
    ApiInvariant(
        id="flags-exist",
        group="flags",
        statement="add_reconstruction_loss_arguments adds the flags of the seed, spelt "
        "exactly, to a fresh argparse parser",
        spec_refs=FLAG_REFS,
        strategy=lambda domain: st.just(FRESH_PARSER),
        check=check_exist,
        needs=(ADD_ARGUMENTS,),
    ),
    ApiInvariant(
        id="flags-defaults",
        group="flags",
        statement="parsing no arguments gives a ReconstructionLossConfig with the dataclass "
        "defaults of the seed",
        spec_refs=FLAG_REFS,
        strategy=lambda domain: st.just(NO_ARGUMENTS),
        check=check_defaults,
        needs=(ADD_ARGUMENTS, CONFIG_FROM_ARGS, RECONSTRUCTION_CONFIG),
    ),
    ApiInvariant(
        id="flags-round-trip",
        group="flags",
        statement="each flag sets its own field and only that one: drawn values come back as "
        "float(value), every other field keeps its default",
        spec_refs=FLAG_REFS,
        strategy=lambda domain: flag_values(),
        check=check_round_trip,
        needs=(ADD_ARGUMENTS, CONFIG_FROM_ARGS),
        examples=(
            NamedInput(
                "every-flag",
                "all of them at once, each with a value of its own: a crossed pair shows",
                FlagValues(tuple(FlagValue(flag, str(i + 2)) for i, flag in enumerate(FLAGS))),
            ),
        ),
    ),
    ApiInvariant(
        id="flags-reject-invalid",
        group="flags",
        statement="a value the config rejects (negative, nan, inf, not a number) is argparse's "
        "usage error: exit status 2, usage on stderr, the flag named",
        spec_refs=(*FLAG_REFS, "MATH.md#errors"),
        strategy=lambda domain: invalid_flags(),
        check=check_reject_invalid,
        needs=(ADD_ARGUMENTS,),
    ),
    ApiInvariant(
        id="flags-removed",
        group="flags",
        statement=f"{REMOVED_FLAG} in every spelling (bare, =value, a prefix) is a usage error "
        f"naming {REPLACEMENT_FLAG}",
        spec_refs=FLAG_REFS,
        strategy=lambda domain: removed_spellings(),
        check=check_removed,
        needs=(ADD_ARGUMENTS,),
        examples=tuple(
            NamedInput(name, why, _spelling(length, suffix))
            for name, why, length, suffix in (
                ("bare", "the old boolean as scripts pass it", len(REMOVED_FLAG), ()),
                (
                    "explicit-true",
                    "an action with nargs=0 lets argparse answer '=true' itself, unhelpfully",
                    len(REMOVED_FLAG),
                    REMOVED_SUFFIXES[1],
                ),
                ("prefix", "argparse expands a unique prefix to the flag", 15, ()),
            )
        ),
    ),
    ApiInvariant(
        id="flags-namespace-clean",
        group="flags",
        statement="the parsed namespace holds nothing of the removed flag "
        "(no normalize_reconstruction_loss)",
        spec_refs=FLAG_REFS,
        strategy=lambda domain: flag_values(min_size=0),
        check=check_namespace_clean,
        needs=(ADD_ARGUMENTS,),
    ),
)
