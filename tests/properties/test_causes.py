"""Failures grouped by cause (properties/causes.py): the evidence each failure gives, the
groups it makes, the failure each group shows, and the line that names it."""

from __future__ import annotations

import re

from properties.causes import describe, group, signature
from properties.runner import Failure, InvariantResult

ORDER = ["a", "b", "c", "d", "e", "f"]


def result(
    invariant_id: str, status: str = "failed", message: str = "x differs", **fields
) -> InvariantResult:
    failure = Failure(message=message, minimal_input="", reproduction="", **fields)
    return InvariantResult(invariant_id, status, 1, 0.0, failure)


def causes(*results: InvariantResult):
    return group(list(results), ORDER.index)


def test_failures_that_name_the_same_variant_are_one_cause_shown_by_the_first() -> None:
    raw = ("reconstruction_loss", "global-token-mean (sum of l over all valid tokens)")
    dist = ("distribution_normalized_reconstruction_loss", "global-token-mean / c")
    found = causes(
        result("c", variants=(raw,)),
        result("a", variants=(raw, dist)),
        result("b", variants=(dist,)),
    )
    assert len(found) == 1
    assert [r.invariant_id for r in found[0].results] == ["a", "b", "c"]
    assert found[0].representative.invariant_id == "a"
    assert found[0].text.startswith("reconstruction_loss matches the known variant global-token")


def test_outputs_off_join_the_variant_that_explains_them_and_others_stay_apart() -> None:
    raw = ("reconstruction_loss", "global-token-mean")
    found = causes(
        result("a", variants=(raw,)),
        result("b", failing=("reconstruction_loss", "total_reconstruction_loss")),
        result("c", failing=("token_concentration_factor",)),
    )
    assert [[r.invariant_id for r in c.results] for c in found] == [["a", "b"], ["c"]]


def test_a_trigger_is_evidence_and_names_the_cause() -> None:
    padding = "NaN at padded positions"
    found = causes(
        result("b", failing=("reconstruction_loss",), triggers=(padding,), trigger_kinds=("pad",)),
        result("d", failing=("token_weighted_base_loss",), trigger_kinds=("pad",)),
        result("a", failing=("kappa",), triggers=("alpha = 0.0",), trigger_kinds=("alpha",)),
    )
    # the cause that broke the most invariants first, then the catalogue's order
    assert [[r.invariant_id for r in c.results] for c in found] == [["b", "d"], ["a"]]
    assert found[0].text.endswith("triggered by NaN at padded positions")


def test_a_failure_with_a_variant_is_shown_before_the_first_of_the_catalogue() -> None:
    raw = ("reconstruction_loss", "global-token-mean")
    found = causes(
        result("a", failing=("reconstruction_loss",)),
        result("e", variants=(raw,), failing=("reconstruction_loss",)),
    )
    assert len(found) == 1 and found[0].representative.invariant_id == "e"


def test_a_crash_and_a_failure_are_two_causes_and_the_failure_comes_first() -> None:
    crashed = result(
        "a", "crashed", "the target's process died (killed by signal SIGSEGV) in a call"
    )
    found = causes(crashed, result("b", failing=("reconstruction_loss",)))
    assert [c.representative.status for c in found] == ["failed", "crashed"]
    assert signature(crashed) == frozenset(
        {("crashed", "the target's process died (killed by signal SIGSEGV)")}
    )


def test_state_between_calls_is_one_cause_whatever_the_outputs() -> None:
    found = causes(
        result("a", failing=("reconstruction_loss",), state="a fails after 1 call"),
        result("b", failing=("token_concentration_factor",), flaky=True),
    )
    assert len(found) == 1
    assert describe(found[0].representative).startswith(
        "the target keeps state between calls: a fails after 1 call"
    )


def test_non_finite_outputs_say_so_with_the_variant_that_gives_the_same_nan() -> None:
    failure = result(
        "a",
        non_finite=("token_concentration_factor",),
        nan_variants=(("token_concentration_factor", "ratio-of-means (mean btok / mean bbar)"),),
        triggers=("a row whose valid b are all 0",),
    )
    text = describe(failure)
    assert text.startswith(
        "token_concentration_factor is NaN or inf as the known variant ratio-of-means is, "
        "where the spec's value is finite"
    )
    assert text.endswith("; triggered by a row whose valid b are all 0")


def test_the_summary_shows_a_few_causes_and_counts_the_rest() -> None:
    import io

    from properties.report import SUMMARY_LINES, causes_summary

    found = causes(*(result(i, failing=(f"output_{i}",)) for i in ORDER))
    assert len(found) == len(ORDER)
    out = io.StringIO()
    causes_summary(found, "t:f", lambda r: {"seed": 1}, out)
    lines = out.getvalue().strip("\n").splitlines()
    assert len(lines) <= SUMMARY_LINES
    shown = sum(line.startswith("[") for line in lines)
    assert lines[-1].startswith(f"... and {len(ORDER) - shown} more causes ({len(ORDER) - shown} ")


def test_nan_outputs_alone_join_the_cause_whose_trigger_explains_them() -> None:
    found = causes(
        result("a", non_finite=("x",), failing=("x",), triggers=("t",), trigger_kinds=("t",)),
        result("b", non_finite=("x", "y"), failing=("x", "y")),
        result("c", non_finite=("z",), failing=("z",)),
    )
    assert [[r.invariant_id for r in c.results] for c in found] == [["a", "b"], ["c"]]


def test_a_long_cause_keeps_what_it_is_about_and_what_was_found() -> None:
    from properties.causes import TEXT_WIDTH

    rule = "no output may carry a gradient to zfree_token_nll (each weight of b is detached)"
    found = "; ".join(f"output_{k}_of_a_long_name (d/db = [[-0.99999998000{k}]])" for k in range(3))
    text = describe(result("a", message=f"{rule}, but these do: {found}"))
    assert len(text) <= TEXT_WIDTH
    assert "zfree_token_nll" in text and "output_2_of_a_long_name" in text


def test_a_cause_with_long_triggers_keeps_its_short_clause_whole() -> None:
    # the triggers of a layout leave a short line for the message: "token_nll was ...
    # call" lost what the rule found
    failure = Failure(
        "token_nll was modified by the call: it held [[3.0, 4.0]] and holds [[3.0, 0.0]]",
        "",
        "",
    )
    failure.triggers = (
        "token_nll, zfree_token_nll and mask as a slice with a column stride of 2 and a "
        "storage offset of 1 of a wider buffer (a contiguous copy of the same values passes)",
    )
    text = describe(InvariantResult("inputs-unmodified", "failed", 1, 0.0, failure))
    assert text.startswith("token_nll was modified by the call: "), text


def test_a_trigger_found_on_one_failure_does_not_make_it_the_one_shown() -> None:
    # triggers are looked for on the representative only: the catalogue's first failure
    # of the cause stays shown, and is looked at next
    found = causes(
        result("a", failing=("x",), non_finite=("x",)),
        result("b", failing=("x",), non_finite=("x",), triggers=("t",), trigger_kinds=("t",)),
    )
    assert [c.representative.invariant_id for c in found] == ["a"]


def test_a_report_of_many_causes_fits_its_lines_and_heads_a_section_for_each() -> None:
    from properties.invariants import INVARIANTS, by_id
    from properties.report import REPORT_LINES, causes_text

    message = "\n".join(f"line {k} of what was found" for k in range(12))
    ids = [invariant.id for invariant in INVARIANTS[:6]]
    found = group([result(i, message=message, failing=(f"output_{i}",)) for i in ids], ids.index)
    text = causes_text(found, by_id, "t:f", lambda r: {"seed": 1}, REPORT_LINES)
    assert len(text.splitlines()) <= REPORT_LINES
    headings = re.findall(r"^\[(\d+)\] FAILED ([a-z-]+):", text, re.M)
    assert headings == [(str(n), i) for n, i in enumerate(ids, start=1)]
    assert "line 11 of what was found" in text.split("[2] FAILED")[0]  # the first: whole
    assert "(brief, to keep the report short" in text.split("[6] FAILED")[1]  # the last: brief


def test_two_variants_that_give_the_same_values_are_both_named() -> None:
    # l constant: shares from l are uniform, as with alpha treated as 0
    variants = (
        ("token_weighted_reconstruction_loss", "uniform-shares (alpha treated as 0)"),
        ("token_weighted_reconstruction_loss", "shares-from-token_nll (l for b)"),
    )
    text = describe(result("a", variants=variants, failing=(variants[0][0],)))
    assert "uniform-shares" in text and "shares-from-token_nll" in text


def test_a_nan_the_variant_gives_joins_its_cause_and_its_smaller_input_is_shown() -> None:
    from properties.zoo.smallest import ONE_CELL, loss_case

    ratio = ("token_concentration_factor", "ratio-of-means (mean btok / mean bbar)")
    two_rows = loss_case([[1.0, 2.0], [1.0, 1.0]], [[1.0, 0.0], [1.0, 2.0]], [[True] * 2] * 2)
    found = causes(
        result("a", failing=(ratio[0],), variants=(ratio,), shown=two_rows),
        result(
            "b",
            non_finite=(ratio[0],),
            nan_variants=(ratio,),
            triggers=("a row whose valid b are all 0",),
            trigger_kinds=("zero-b",),
            shown=ONE_CELL,
        ),
        result("c", failing=(ratio[0],), variants=(ratio,), shown=two_rows),
    )
    assert len(found) == 1
    assert found[0].representative.invariant_id == "b"  # 1 cell, where "a" shows 4
    assert found[0].text == (
        "token_concentration_factor matches the known variant ratio-of-means (mean btok / "
        "mean bbar); shown where a row whose valid b are all 0 triggers it"
    )


def test_a_nan_alone_does_not_join_a_variant_it_does_not_give() -> None:
    ratio = ("token_concentration_factor", "ratio-of-means (mean btok / mean bbar)")
    other = ("token_concentration_factor", "from-token-nll (pi from l)")
    found = causes(
        result("a", failing=(ratio[0],), variants=(ratio,)),
        result("b", non_finite=(ratio[0],), nan_variants=(other,), trigger_kinds=("zero-b",)),
    )
    assert [[r.invariant_id for r in c.results] for c in found] == [["a"], ["b"]]


def test_a_second_order_cause_keeps_create_graph_in_its_line() -> None:
    # the upstream gradient's value is an aside: the line drops it, not "create_graph"
    from properties.invariants import by_id
    from properties.profiles import profile_settings
    from properties.runner import run_invariant
    from properties.zoo import wrong

    for seed in (1, 2):
        found = run_invariant(
            by_id("second-order"),
            wrong.fused_no_grad_backward,
            target="t",
            settings=profile_settings("dev"),
            seed=seed,
        )
        assert found.status == "failed"
        assert "differentiated with create_graph=True: g is detached" in describe(found)


def test_a_nan_that_a_variant_gives_does_not_lead_where_no_failure_gives_its_number() -> None:
    # many variants are NaN on a row of b = 0: only a number names one
    from properties.zoo.smallest import ONE_CELL, loss_case

    shares = ("token_weighted_reconstruction_loss", "batch-normalized-shares")
    larger = loss_case([[1.0, 2.0], [1.0, 1.0]], [[0.0, 0.0], [1.0, 2.0]], [[True] * 2] * 2)
    nan = {"non_finite": (shares[0],), "trigger_kinds": ("zero-b",)}
    found = causes(
        result("e", nan_variants=(shares,), shown=larger, **nan),
        result("a", shown=ONE_CELL, **nan),
    )
    assert len(found) == 1 and found[0].representative.invariant_id == "a"


def test_state_leads_its_cause_on_its_fewest_cells_whatever_variants_stale_values_match() -> None:
    from properties.zoo.smallest import ONE_CELL, loss_case

    uniform = ("token_weighted_reconstruction_loss", "uniform-shares (alpha treated as 0)")
    two_tokens = loss_case([[1.0, 0.0]], [[1.0, 1.0]], [[True, True]])
    found = causes(
        result("a", variants=(uniform,), state="a fails after 1 call", shown=two_tokens),
        result("b", failing=("token_weighted_base_loss",), variants=(uniform,)),
        result("c", failing=("token_weighted_base_loss",), state="c fails after 1 call",
               shown=ONE_CELL),
    )  # fmt: skip
    assert len(found) == 1 and found[0].representative.invariant_id == "c"
    assert found[0].text.startswith("the target keeps state between calls: c fails")


def test_a_cause_that_broke_many_keeps_a_line_each_for_as_many_as_the_aim_has_room() -> None:
    from properties.invariants import INVARIANTS, by_id
    from properties.report import REPORT_LINES, causes_text

    ids = [invariant.id for invariant in INVARIANTS[:14]]
    found = group([result(i, failing=("reconstruction_loss",)) for i in ids], ids.index)
    assert len(found) == 1
    whole = causes_text(found, by_id, "t:f", lambda r: {"seed": 1}, REPORT_LINES)
    lined = re.findall(r"^  FAILED ([a-z0-9-]+): ", whole, re.M)
    assert lined == ids[1:]  # room for a line each
    aim = whole.count("\n") - 4
    text = causes_text(found, by_id, "t:f", lambda r: {"seed": 1}, REPORT_LINES, aim)
    assert text.count("\n") <= aim
    lined = re.findall(r"^  FAILED ([a-z0-9-]+): ", text, re.M)
    folded = re.search(r"^  and (\d+) more: (.*)", text, re.M | re.S)
    assert lined and folded is not None, text
    # every other invariant is named once: the first with a line each, the rest by id
    named = lined + re.split(r",\s*", folded[2].strip())
    assert named == ids[1:] and int(folded[1]) == len(ids) - 1 - len(lined)
    # an aim that not even the folded sections meet: as short as the room allows
    text = causes_text(found, by_id, "t:f", lambda r: {"seed": 1}, REPORT_LINES, 5)
    assert not re.findall(r"^  FAILED ", text, re.M)
    assert f"broke {len(ids) - 1} more (--verbose shows each): {ids[1]}" in text


def test_a_long_clause_is_cut_between_words_where_words_are_short_and_inside_one_if_not() -> None:
    # prose: the cut leaves whole words; an output's long name: its start and end stay
    prose = "'--flag' must be a usage error naming --the-new-flag-of-a-long-name-and-more-words"
    text = describe(result("a", message=f"{prose} {'x' * 60}: its message does not"))
    head = text.split(": ")[0]
    assert " ... " in head and all(w in prose + " " + "x" * 60 for w in head.split(" ... "))
    output = "normalized_concentration_corrected_token_weighted_reconstruction_loss"
    message = f"d {output}/d l_it = pi_it/(B'*c*kappa_i) (alone): " + "1 of 1 differ, " * 8
    text = describe(result("a", message=message))
    assert text.startswith("d normalized_concentration") and "/d l_it = pi_it" in text


def test_the_rerun_of_a_state_cause_says_its_calls_are_its_own() -> None:
    import io

    from properties.report import causes_summary

    state = "x fails on this input after 1 call the run made before it"
    # said where the script replays calls of the run (a process's first call replays none)
    for failure_state, before, said in ((state, 1, True), (state, 0, False), (None, 0, False)):
        out = io.StringIO()
        shown = result("a", state=failure_state)
        shown.failure.calls_before = before
        causes_summary(causes(shown), "t:f", lambda r: {}, out)
        rerun = [line for line in out.getvalue().splitlines() if "rerun" in line]
        assert len(rerun) == 1 and rerun[0].endswith("recon-spec check t:f --invariant a")
        assert ("after calls of its own, not this run's" in rerun[0]) is said, rerun


def test_a_groups_line_names_its_invariants_in_the_catalogues_order() -> None:
    import io

    from properties.invariants import INVARIANTS
    from properties.report import Progress

    group = [i for i in INVARIANTS if i.group == INVARIANTS[0].group][:3]
    out = io.StringIO()
    progress = Progress(group, out, verbose=False)
    for invariant in reversed(group):  # finished last to first
        progress.record(InvariantResult(invariant.id, "failed", 1, 0.0, None))
    assert out.getvalue().rstrip().endswith(f"({', '.join(i.id for i in group)})")
