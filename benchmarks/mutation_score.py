"""Guard power: how many mutants of recon_impl's computation ``recon-spec check`` rejects.

Run from the repository root:

    python benchmarks/mutation_score.py                              # the six files, ~1 h
    python benchmarks/mutation_score.py --file recon_impl/stack.py --sample 30
    python benchmarks/mutation_score.py --list                       # the mutants, no checks
    python benchmarks/mutation_score.py --root ../older-checkout     # that checkout's suite
    python benchmarks/mutation_score.py --keys survivors.txt         # only these mutants

A mutant changes one site of ``recon_impl/stack.py``, ``statistics.py``, ``terms.py``,
``reconstruction.py``, ``validation.py`` or ``logits.py`` (the standard operators: an
arithmetic operator for another, a comparison, a boolean or unary operator, a numeric
constant ``n`` to ``n + 1``, a reduction for its opposite (sum and mean, amax and amin, any
and all, ...), the two branches of a ``torch.where`` or conditional expression swapped),
outside error messages.
Each mutant is checked from a scratch copy of the suite's root (``--root``) with the
mutated file in place: ``recon-spec check --with-validation --profile ci --no-database``
(every invariant, the opt-in validation group included, where the checks of bad inputs
live; derandomized, so the same mutant gets the same verdict every run), stopped at its
first failing invariant, which the line of a killed mutant names. ``token_nll_from_logits``
is not part of the stack a ``check`` target computes: a mutant of ``logits.py`` is checked
by ``recon-spec check-api recon_impl -i logits`` instead, where the suite has that group
(``properties/api/logits.py``), else by the plain check (which cannot see it). A mutant of
the stack that survives is checked once more on the hot path training code takes,
``reconstruction_losses(..., validate=False)`` (the target ``unvalidated.py:losses`` the
scratch copy holds), where the validated call never goes. Verdicts:
``killed`` (the check did not pass: an invariant failed, or the target could not be checked),
``survived``, ``timed out`` (past ``--timeout``), ``equivalent`` (a survivor that
``EQUIVALENT`` below explains: no input can tell it from the original), ``outside`` (a
survivor that ``OUTSIDE_CONTRACT`` explains: only inputs MATH.md's contract does not cover
tell it apart). The score is (killed + timed out) / (mutants - equivalent - outside); each
survivor's diff is printed.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = (
    "recon_impl/stack.py",
    "recon_impl/statistics.py",
    "recon_impl/terms.py",
    "recon_impl/reconstruction.py",
    "recon_impl/validation.py",
    "recon_impl/logits.py",
)
#: what a scratch copy holds: the packages a check imports
COPIED = ("spec", "recon_impl", "properties", "pyproject.toml")

BINARY = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult,
    ast.LShift: ast.RShift, ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitAnd,
}  # fmt: skip
SYMBOLS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
    ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&",
    ast.BitOr: "|", ast.BitXor: "^",
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
}  # fmt: skip
COMPARISON = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}  # fmt: skip
#: reductions and torch's arithmetic by name (``x.sum(1)``, ``torch.mul(a, b)``, ``max(...)``)
CALLS = {
    "sum": "mean", "mean": "sum", "amax": "amin", "amin": "amax", "max": "min",
    "min": "max", "maximum": "minimum", "minimum": "maximum", "any": "all", "all": "any",
    "prod": "sum", "logsumexp": "sum", "add": "sub", "sub": "add", "mul": "div",
    "div": "mul", "add_": "sub_", "sub_": "add_", "mul_": "div_", "div_": "mul_",
}  # fmt: skip

#: survivors no input can tell from the original, each with the reason (classified by hand)
EQUIVALENT: dict[str, str] = {
    "recon_impl/statistics.py::_in_dtype: conditional branches swapped: x <-> x.contiguous() in "
    "`return x if x.is_contiguous() else x.contiguous()`": "the same values either way; "
    "a strided (transposed) input kept as it is may only sum its rows in another order, a "
    "rounding within the tolerance of every comparison (MATH.md promises no bitwise result)",
    "recon_impl/statistics.py::_share_sums: 0 -> 1 in "
    "`b_max = b_valid.amax(1) if b_valid.shape[1] > 0 else b_valid.sum(1)`": "with one "
    "column the sum of a row is its maximum (only T = 1 takes the changed branch)",
    "recon_impl/statistics.py::_share_sums: sum( -> mean( in "
    "`b_max = b_valid.amax(1) if b_valid.shape[1] > 0 else b_valid.sum(1)`": "only T = 0 "
    "takes this branch (amax of nothing raises); its NaN mean feeds only `b_max > 0`, False "
    "for NaN as for the sum's 0, so the scale is 1 either way",
    "recon_impl/statistics.py::_share_sums: 1.0 -> 2.0 in `scale = torch.where(b_max > 0, b_max, "
    "1.0)`": "taken only where a row's valid b are all 0: b/s is 0 for any s > 0, its shares "
    "are 0 (alpha > 0), and the row falls back to uniform shares",
    "recon_impl/terms.py::_inverse_surprisal: 1.0 -> 2.0 in `return torch.where(stats.kept, "
    "stats.b_mean + epsilon, 1.0)`": "taken only on a dropped (fully padded) row, whose "
    "values the means leave out and whose gradient is 0 at every (padded) position; any "
    "finite non-zero divisor does",
    "recon_impl/stack.py::token_gradient: 0.0 -> 1.0 in `v = torch.where(uniform, 0.0, m / "
    '(kept_count * state["share_sum"]))`': "taken only on a row without share mass, whose shares p "
    "are all 0: the gradient p v + u is u whatever v is",
    **{
        f"recon_impl/validation.py::value_checksum: sum( -> mean( in {line}": "the checksum "
        "is only tested for finiteness, and a mean of the parts is finite exactly when their "
        "sum is (a mean that does not overflow where the sum does spares a false alarm, a "
        "scan that finds nothing)"
        for line in (
            "`parts = [*values, b_sum.sum(), *(d.sum() for d in divisors)]`",
            "`parts = [*values, b_sum.sum(), *(d.sum() for d in divisors)]` (#2)",
            "`parts.append(b_min.sqrt().sum())`",
            "`return torch.stack(parts).sum()`",
        )
    },
    "recon_impl/validation.py::raise_for_invalid_values: sum( -> mean( in `zero_base = "
    "(valid_per_example > 0) & (torch.where(mask, zfree_token_nll, 0).sum(1) == 0)`": "b >= 0 "
    "here (checked just before), so a row's mean is 0 exactly when its sum is",
    "recon_impl/validation.py::raise_for_invalid_values: 0.0 -> 1.0 in `valid_values = "
    "torch.where(mask, value.detach().to(dtype), 0.0)`": "1 per padded position cannot "
    "carry a finite row sum past the dtype's maximum (its spacing there is ~1e31), nor make "
    "an overflowed one finite",
    "recon_impl/validation.py::raise_for_invalid_values: sum( -> mean( in `overflowed = "
    "torch.isinf(valid_values.sum(1))`": "torch's mean is the dtype's sum divided by n: it "
    "is inf exactly where the sum overflowed",
    **{
        f"recon_impl/logits.py::{change}": "the half-precision cross-entropy's block of rows "
        "(how many rows each float32 log-softmax takes) changes, and with it the time and "
        "the working set, never a value: rows are independent, and every block size >= 1 "
        "computes each row alike"
        for change in (
            "<module>: << -> >> in `_CPU_BLOCK_ELEMENTS = 1 << 20`",
            "<module>: 1 -> 2 in `_CPU_BLOCK_ELEMENTS = 1 << 20`",
            "<module>: 20 -> 21 in `_CPU_BLOCK_ELEMENTS = 1 << 20`",
            "<module>: << -> >> in `_ACCELERATOR_BLOCK_ELEMENTS = 1 << 26`",
            "<module>: 1 -> 2 in `_ACCELERATOR_BLOCK_ELEMENTS = 1 << 26`",
            "<module>: 26 -> 27 in `_ACCELERATOR_BLOCK_ELEMENTS = 1 << 26`",
            "_block_rows: conditional branches swapped: _CPU_BLOCK_ELEMENTS <-> "
            "_ACCELERATOR_BLOCK_ELEMENTS in `elements = _CPU_BLOCK_ELEMENTS if "
            'logits.device.type == "cpu" else _ACCELERATOR_BLOCK_ELEMENTS`',
            "_block_rows: == -> != in `elements = _CPU_BLOCK_ELEMENTS if logits.device.type "
            '== "cpu" else _ACCELERATOR_BLOCK_ELEMENTS`',
            "_block_rows: max( -> min( in `return max(1, elements // max(logits.shape[1], 1))`",
            "_block_rows: 1 -> 2 in `return max(1, elements // max(logits.shape[1], 1))`",
            "_block_rows: max( -> min( in `return max(1, elements // max(logits.shape[1], 1))` "
            "(#2)",
            "_block_rows: 1 -> 2 in `return max(1, elements // max(logits.shape[1], 1))` (#3)",
        )
    },
    "recon_impl/logits.py::token_nll_from_logits: > -> >= in `if shift and length > 0:` (#2)": (
        "taken anew only for T = 0, where [:, :-1] of an empty dimension is empty too"
    ),
}

#: survivors that inputs outside MATH.md's contract tell apart, each with the reason: the
#: suite checks the contract, so these stay alive by design (classified by hand)
OUTSIDE_CONTRACT: dict[str, str] = {
    "recon_impl/reconstruction.py::compute_dtype: is -> is not in `if token_nll.dtype is "
    "zfree_token_nll.dtype:`": "only losses of two different dtypes see it (the result "
    "then follows token_nll's dtype, not the promoted one), and MATH.md's 'Precision' "
    "states the dtype for inputs of one dtype",
    **{
        f"recon_impl/validation.py::_vmap_active: {change}": "reached only under "
        "torch.func transforms (vmap), which MATH.md does not cover and the suite never "
        "applies; outside them the function returns False either way"
        for change in (
            "not removed in `if not torch._C._are_functorch_transforms_active():`",
            "any( -> all( in `return any(i.key() == TransformType.Vmap for i in "
            "retrieve_all_functorch_interpreters())`",
            "== -> != in `return any(i.key() == TransformType.Vmap for i in "
            "retrieve_all_functorch_interpreters())`",
        )
    },
    **{
        f"recon_impl/validation.py::raise_for_invalid_values: {change}": "recon_impl's own "
        "error for a row whose valid losses sum past the dtype's range (its condition or its "
        "message): MATH.md's 'Errors' lists no such rule, so inputs that overflow a row sum "
        "are outside the contract"
        for change in (
            "any( -> all( in `if bool(overflowed.any()):`",
            "0 -> 1 in `row = int(overflowed.nonzero()[0, 0])`",
            "0 -> 1 in `row = int(overflowed.nonzero()[0, 0])` (#2)",
            "max( -> min( in `largest = valid_values[row].abs().max().item()`",
        )
    },
    **{
        f"recon_impl/validation.py::as_bool_mask: {change} in `bad = mask[(mask != 0) & (mask "
        "!= 1)][0].item()`": "only the value the message quotes changes (an entry that is "
        "not bad may be quoted); MATH.md asks a message for the argument and the rule"
        for change in ("& -> |", "0 -> 1")
    },
}


@dataclass(frozen=True)
class Mutant:
    file: str
    #: a stable name: the enclosing function, what changed, and its occurrence there
    key: str
    line: int
    source: str  # the whole mutated file

    def diff(self, original: str) -> str:
        lines = difflib.unified_diff(
            original.splitlines(keepends=True),
            self.source.splitlines(keepends=True),
            f"a/{self.file}",
            f"b/{self.file}",
            n=1,
        )
        return "".join(lines)


# --- enumerating the mutants -------------------------------------------------------------


class _Sites(ast.NodeVisitor):
    """Every mutation site of one module, as (node path, byte edits, what changed)."""

    def __init__(self, source: bytes) -> None:
        self.source = source
        starts = [0]
        for line in source.splitlines(keepends=True):
            starts.append(starts[-1] + len(line))
        self.starts = starts
        self.scope: list[str] = []
        self.sites: list[tuple[str, int, list[tuple[int, int, bytes]], str]] = []

    # positions
    def offset(self, line: int, column: int) -> int:
        return self.starts[line - 1] + column

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.offset(node.lineno, node.col_offset),
            self.offset(node.end_lineno, node.end_col_offset),
        )

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end].decode()

    def between(self, left: ast.AST, right: ast.AST, token: str) -> tuple[int, int]:
        """The span of operator ``token`` between two operands (brackets may surround it)."""
        start, end = self.span(left)[1], self.span(right)[0]
        gap = self.source[start:end].decode()
        pattern = r"(?<![\w*/<>=!])" + re.escape(token) + r"(?![\w*/<>=])"
        match = re.search(pattern, gap)
        assert match is not None, (token, gap)
        return start + len(gap[: match.start()].encode()), start + len(gap[: match.end()].encode())

    def add(self, node: ast.AST, edits: list[tuple[int, int, bytes]], change: str) -> None:
        where = ".".join(self.scope) or "<module>"
        self.sites.append((where, node.lineno, edits, change))

    # scopes, and what is not computation
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.scope.append(node.name)
        for default in (*node.args.defaults, *node.args.kw_defaults):
            if default is not None:
                self.visit(default)
        for statement in node.body:
            self.visit(statement)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(node.name)
        for statement in node.body:
            self.visit(statement)
        self.scope.pop()

    def visit_Raise(self, node: ast.Raise) -> None:
        """An error's message is not computation (its condition, in the ``if``, is)."""

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        """f-strings: messages."""

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)

    def visit_arg(self, node: ast.arg) -> None:
        """Annotations."""

    # the operators
    def visit_BinOp(self, node: ast.BinOp) -> None:
        new = BINARY.get(type(node.op))
        if new is not None:
            old = SYMBOLS[type(node.op)]
            start, end = self.between(node.left, node.right, old)
            self.add(node, [(start, end, SYMBOLS[new].encode())], f"{old} -> {SYMBOLS[new]}")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        new = BINARY.get(type(node.op))
        if new is not None:
            old = SYMBOLS[type(node.op)] + "="
            start, end = self.between(node.target, node.value, old)
            replacement = SYMBOLS[new] + "="
            self.add(node, [(start, end, replacement.encode())], f"{old} -> {replacement}")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        for left, op, right in zip(operands, node.ops, operands[1:], strict=False):
            new = COMPARISON[type(op)]
            old = SYMBOLS[type(op)]
            start, end = self.between(left, right, old)
            self.add(node, [(start, end, SYMBOLS[new].encode())], f"{old} -> {SYMBOLS[new]}")
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        edits = [
            (*self.between(left, right, old), new.encode())
            for left, right in zip(node.values, node.values[1:], strict=False)
        ]
        self.add(node, edits, f"{old} -> {new}")
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, (ast.USub, ast.Not, ast.Invert)):
            symbol = {ast.USub: "-", ast.Not: "not", ast.Invert: "~"}[type(node.op)]
            start, end = self.span(node)
            operand = f"({self.text(node.operand)})".encode()
            self.add(node, [(start, end, operand)], f"{symbol} removed")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return
        start, end = self.span(node)
        self.add(node, [(start, end, repr(value + 1).encode())], f"{value!r} -> {value + 1!r}")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in CALLS:
            end = self.span(func)[1]
            edit = (end - len(name), end, CALLS[name].encode())
            self.add(node, [edit], f"{name}( -> {CALLS[name]}(")
        if name == "where" and len(node.args) == 3:
            self._swap(node, node.args[1], node.args[2], "torch.where branches swapped")
        self.generic_visit(node)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        def text(branch: ast.expr) -> bool:
            return isinstance(branch, ast.JoinedStr) or (
                isinstance(branch, ast.Constant) and isinstance(branch.value, str)
            )

        if not (text(node.body) and text(node.orelse)):  # a message's wording
            self._swap(node, node.body, node.orelse, "conditional branches swapped")
        self.generic_visit(node)

    def _swap(self, node: ast.AST, first: ast.AST, second: ast.AST, change: str) -> None:
        (a0, a1), (b0, b1) = self.span(first), self.span(second)
        self.add(
            node,
            [(a0, a1, self.source[b0:b1]), (b0, b1, self.source[a0:a1])],
            f"{change}: {self.text(first)} <-> {self.text(second)}",
        )


def mutants(root: Path, files: tuple[str, ...]) -> list[Mutant]:
    found = []
    for file in files:
        source = (root / file).read_bytes()
        sites = _Sites(source)
        sites.visit(ast.parse(source))
        seen: Counter[str] = Counter()
        for where, line, edits, change in sites.sites:
            mutated = source
            for start, end, replacement in sorted(edits, reverse=True):
                mutated = mutated[:start] + replacement + mutated[end:]
            text = mutated.decode()
            if mutated == source:
                continue
            ast.parse(text)  # every mutant is valid Python
            code = source.decode().splitlines()[line - 1].split("  # ")[0]
            snippet = " ".join(code.split())
            name = f"{file}::{where}: {change} in `{snippet}`"
            seen[name] += 1
            key = name if seen[name] == 1 else f"{name} (#{seen[name]})"
            found.append(Mutant(file, key, line, text))
    return found


# --- checking them -----------------------------------------------------------------------


@dataclass
class Verdict:
    mutant: Mutant
    status: str  # killed, survived, timed out, equivalent, outside
    how: str  # what killed it (the first failing row, or the exit status)
    seconds: float


FAILING_ROW = re.compile(r"^(\S+)\s+\S+\s+(FAILED|CRASHED|TIMEOUT|ERROR)\s")


#: the hot path's target, written into each scratch copy
UNVALIDATED = (
    "unvalidated.py",
    "from functools import partial\n\nfrom recon_impl import reconstruction_losses\n\n"
    "losses = partial(reconstruction_losses, validate=False)\n",
)


def check_arguments(mutant: Mutant, scratch: Path) -> list[tuple[str, ...]]:
    """The ``recon-spec`` command lines that check ``mutant``, in turn (module docstring)."""
    if mutant.file.endswith("logits.py"):
        if (scratch / "properties/api/logits.py").exists():
            return [("check-api", "recon_impl", "-i", "logits")]
        return [("check", "--with-validation")]
    return [("check", "--with-validation"), ("check", f"{UNVALIDATED[0]}:losses")]


def _run_check(
    scratch: Path, arguments: tuple[str, ...], jobs: int, timeout: float
) -> tuple[str, str]:
    """One ``recon-spec`` run from ``scratch``: ("killed", how), ("survived", "") or
    ("timed out", "")."""
    command = [
        sys.executable, "-m", "properties.cli", *arguments, "--profile", "ci", "--no-database",
        "-j", str(jobs),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("RECON_IMPL", None)
    process = subprocess.Popen(
        command,
        cwd=scratch,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    verdict: tuple[str, str] | None = None
    with ThreadPoolExecutor(1) as reader:
        pending = reader.submit(process.stdout.readline)  # type: ignore[union-attr]
        while verdict is None:
            try:
                line = pending.result(timeout=max(deadline - time.monotonic(), 0.01))
            except TimeoutError:
                verdict = ("timed out", "")
                break
            if not line:
                break
            match = FAILING_ROW.match(line)
            if match:
                verdict = ("killed", f"{match.group(2)} {match.group(1)}")
                break
            pending = reader.submit(process.stdout.readline)  # type: ignore[union-attr]
        with _quiet():
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stdout.close()  # type: ignore[union-attr]
    if verdict is not None:
        return verdict
    if process.returncode == 0:
        return ("survived", "")
    return ("killed", f"exit {process.returncode}")


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, value, trace) -> bool:
        return kind is ProcessLookupError


def _scratch(root: Path) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="mutants-"))
    for name in COPIED:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, folder / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, folder / name)
    (folder / UNVALIDATED[0]).write_text(UNVALIDATED[1])
    return folder


def check(mutant: Mutant, scratch: Path, jobs: int, timeout: float) -> Verdict:
    target = scratch / mutant.file
    original = target.read_text()
    start = time.perf_counter()
    target.write_text(mutant.source)
    try:
        for arguments in check_arguments(mutant, scratch):
            status, how = _run_check(scratch, arguments, jobs, timeout)
            if status != "survived":
                if arguments[1:2] == (f"{UNVALIDATED[0]}:losses",):
                    how += " with validate=False"
                break
    finally:
        target.write_text(original)
    if status == "survived" and mutant.key in EQUIVALENT:
        status = "equivalent"
    elif status == "survived" and mutant.key in OUTSIDE_CONTRACT:
        status = "outside"
    return Verdict(mutant, status, how, time.perf_counter() - start)


def run(chosen: list[Mutant], root: Path, workers: int, jobs: int, timeout: float) -> Iterator:
    scratches = [_scratch(root) for _ in range(workers)]
    free = list(scratches)
    try:
        with ThreadPoolExecutor(workers) as pool:

            def one(mutant: Mutant) -> Verdict:
                scratch = free.pop()
                try:
                    return check(mutant, scratch, jobs, timeout)
                finally:
                    free.append(scratch)

            yield from pool.map(one, chosen)
    finally:
        for scratch in scratches:
            shutil.rmtree(scratch, ignore_errors=True)


def report(verdicts: list[Verdict], root: Path) -> None:
    statuses = ("killed", "survived", "timed out", "equivalent", "outside")
    print(f"\n{'file':<32} {'mutants':>7} " + " ".join(f"{s:>10}" for s in statuses) + "  score")
    for file in (*FILES, "all"):
        mine = [v for v in verdicts if file in ("all", v.mutant.file)]
        if not mine:
            continue
        counts = Counter(v.status for v in mine)
        decided = len(mine) - counts["equivalent"] - counts["outside"]
        score = (counts["killed"] + counts["timed out"]) / decided if decided else 1.0
        cells = " ".join(f"{counts[s]:>10}" for s in statuses)
        print(f"{file:<32} {len(mine):>7} {cells}  {score:.1%}")
    originals = {file: (root / file).read_text() for file in FILES}
    for verdict in verdicts:
        if verdict.status == "survived":
            diff = verdict.mutant.diff(originals[verdict.mutant.file])
            print(f"\nsurvived: {verdict.mutant.key}\n{diff}")
    classified = {v.mutant.key for v in verdicts if v.status in ("equivalent", "outside")}
    unused = sorted((set(EQUIVALENT) | set(OUTSIDE_CONTRACT)) - classified)
    if unused and len(verdicts) == len(mutants(root, FILES)):
        print("\nclassified entries that matched no surviving mutant:\n  " + "\n  ".join(unused))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose suite checks")
    parser.add_argument("--file", action="append", choices=FILES, help="only this file")
    parser.add_argument("--sample", type=int, help="a random sample of this many mutants")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed")
    parser.add_argument("--match", help="only mutants whose key contains this")
    parser.add_argument(
        "--keys", type=Path, help="only the mutants whose keys this file lists (one a line)"
    )
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--workers", type=int, default=1, help="mutants checked at once")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="workers of each check")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per check")
    args = parser.parse_args()
    root = args.root.resolve()
    chosen = mutants(root, tuple(args.file or FILES))
    if args.match:
        chosen = [m for m in chosen if args.match in m.key]
    if args.keys:
        wanted = set(args.keys.read_text().splitlines())
        chosen = [m for m in chosen if m.key in wanted]
    if args.sample is not None and args.sample < len(chosen):
        chosen = sorted(random.Random(args.seed).sample(chosen, args.sample), key=chosen.index)
    if args.list:
        for mutant in chosen:
            print(mutant.key)
        print(f"{len(chosen)} mutants")
        return
    print(f"{len(chosen)} mutants, checked by the suite of {root}", flush=True)
    verdicts = []
    for verdict in run(chosen, root, args.workers, args.jobs, args.timeout):
        verdicts.append(verdict)
        how = f"  ({verdict.how})" if verdict.how else ""
        print(
            f"{verdict.status:<10} {verdict.seconds:6.1f}s  {verdict.mutant.key}{how}", flush=True
        )
    report(verdicts, root)


if __name__ == "__main__":
    main()
