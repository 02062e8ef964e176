"""How close the reconstruction stack runs to its cost floor, measured side by side.

Run from the repository root (the figures in README.md, "Performance", come from it):

    python benchmarks/bench_stack.py                 # all sections, on the CPU
    python benchmarks/bench_stack.py --only stack    # one section (repeatable)
    python benchmarks/bench_stack.py --threads 1     # torch's intra-op threads (default: its own)
    python benchmarks/bench_stack.py --device cuda   # the same on a GPU, where there is one

Every section measures its candidates in one process, in interleaved rounds (each round
times every candidate once, in an order rotated from round to round), so that drifts in the
machine's load hit all of them alike. A ratio is taken within each round and the median over
rounds is reported, together with the median time per call. Each section runs in a process
of its own: what one leaves behind (the training step's large allocations, compiled code)
slows the small calls another times, by up to half in the stack section.

Sections:

``stack``
    Forward + backward of ``reconstruction_losses`` as users call it (validation on, every
    weight non-zero) over forward + backward of a plain masked mean of ``token_nll``,
    ``torch.where(mask, l, 0).sum() / mask.sum()``, at B = 64, T = 2048, float32, for
    alpha in {0, 0.5, 1, 2}; also the same stack with ``validate=False``, and its two
    stages differentiated by autograd instead of the analytic backward (what that
    backward earns).
``memory``
    The stack's peak memory in ``[B, T]`` float32 buffers at the stack section's sizes
    (forward + backward, the gradient included), beside the masked mean's.
``logits``
    B = 4, T = 512, V = 32000, float32: the cross-entropy of the model's logits (with grad)
    and of the z-free logits (without grad), then the stack and backward; over the same two
    cross-entropy passes alone (with the plain masked mean as the loss to backward through),
    in time and in peak memory.
``half-logits``
    B = 4, T = 512, V = 32000, bfloat16 logits (with grad), forward + backward of the
    per-token losses: ``token_nll_from_logits`` (float32 losses) beside ``F.cross_entropy``
    on the bfloat16 logits outside autocast (bfloat16 losses) and under CPU autocast (which
    casts the logits to float32 first: float32 losses), in time and in peak memory.
``step``
    One training step of a 2-layer transformer language model (B = 8, T = 256, V = 8000;
    forward, backward and an Adam step) with the stack as its loss, over the same step
    with the plain masked mean of ``token_nll`` as its loss. The z-free token NLL is an
    input, measured once beforehand, as a fixed reference is.
``conformance``
    Examples per second of the conformance run (every default invariant of ``properties``
    against the bundled implementation, in this process, ``--conformance-examples`` each),
    when ``properties.runner`` is importable; otherwise the section says it is skipped.
``compile``
    The stack compiled by ``torch.compile`` (``validate=False``, as inside a compiled
    training step) over the eager masked mean, at the stack section's sizes; skipped where
    compiling fails.

Peak memory. On CUDA it is ``torch.cuda.max_memory_allocated`` over the step, less what was
allocated when it began. On the CPU there is no allocator statistic, so the step runs under
``torch.profiler`` with ``profile_memory=True``: the profiler then records every allocation
and every free the CPU allocator makes, each with its size and time. Their running sum in
time order is what the step holds above what was live when it began (the logits, targets
and z-free logits, allocated beforehand, are not counted), and its maximum is the step's
peak. Both variants are measured the same way in the same process; the figure is exact and
does not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recon_impl import (
    ReconstructionLossConfig,
    reconstruction_losses,
    token_nll_from_logits,
)
from recon_impl.stack import Plan, stack_values
from recon_impl.terms import TERMS, TOTAL_NAME

ALPHAS = (0.0, 0.5, 1.0, 2.0)
WEIGHT_FIELDS = tuple(term.weight_field for term in TERMS)
STEP_TARGET = 1.02
STACK_TARGET = 3.0
MEMORY_TARGET = 4.0  # [B, T] buffers
LOGITS_TIME_TARGET = 1.05
LOGITS_MEMORY_TARGET = 1.1
HALF_LOGITS_MEMORY_TARGET = 1.0  # no more than cross-entropy of the bfloat16 logits


def machine_description() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (
        f"CPU: {model}, {os.cpu_count()} logical cores; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; Python {platform.python_version()}; "
        f"load average {load}"
    )


def config(alpha: float) -> ReconstructionLossConfig:
    """Every weight non-zero (1, 0.5, 0.25, then again, over the term table)."""
    weights = dict(zip(WEIGHT_FIELDS, itertools.cycle((1.0, 0.5, 0.25)), strict=False))
    return ReconstructionLossConfig(
        **weights,
        token_weight_alpha=alpha,
        example_inverse_surprisal_epsilon=1e-3,
        zfree_reference_scale=2.5,
    )


def masked_mean(token_nll: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The floor's unit: a plain masked mean of token_nll."""
    return torch.where(mask, token_nll, 0.0).sum() / mask.sum()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def interleaved(
    candidates: dict[str, Callable[[], object]],
    *,
    rounds: int,
    calls: int,
    device: torch.device,
) -> dict[str, list[float]]:
    """Seconds per call of each candidate, one entry per round."""
    names = list(candidates)
    for name in names:  # warm-up
        candidates[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            fn = candidates[name]
            synchronize(device)
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            synchronize(device)
            times[name].append((time.perf_counter() - start) / calls)
    return times


def median_ratio(times: dict[str, list[float]], name: str, baseline: str) -> float:
    return statistics.median(a / b for a, b in zip(times[name], times[baseline], strict=True))


def microseconds(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1e6:9.0f} us"


#: B and T of the stack, memory and compile sections (``--batch``, ``--length``)
SIZE = {"batch": 64, "length": 2048}


def stack_inputs(device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """B = 64, T = 2048 (``SIZE``) float32 l and b in [0, 8), right padding of 0 to 75 %."""
    batch, length = SIZE["batch"], SIZE["length"]
    generator = torch.Generator().manual_seed(0)
    l = (torch.rand(batch, length, generator=generator) * 8).to(device)
    b = (torch.rand(batch, length, generator=generator) * 8).to(device)
    lengths = torch.randint(length // 4, length + 1, (batch,), generator=generator)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).to(device)
    return l, b, mask


def stack_section(device: torch.device, rounds: int) -> bool:
    l, b, mask = stack_inputs(device)
    batch, length = l.shape

    def baseline() -> None:
        leaf = l.detach().requires_grad_()
        masked_mean(leaf, mask).backward()

    def stack(alpha: float, validate: bool) -> Callable[[], None]:
        cfg = config(alpha)

        def run() -> None:
            leaf = l.detach().requires_grad_()
            losses = reconstruction_losses(leaf, b, mask, cfg, validate=validate)
            losses.total_reconstruction_loss.backward()

        return run

    def autograd(alpha: float) -> Callable[[], None]:
        cfg = config(alpha)
        plan = Plan.of(cfg, torch.float32, validate=True)

        def run() -> None:
            leaf = l.detach().requires_grad_()
            values, checksum, _ = stack_values(leaf, b, mask, plan)
            assert math.isfinite(checksum.item())
            values[TOTAL_NAME].backward()

        return run

    candidates: dict[str, Callable[[], object]] = {"masked mean": baseline}
    for alpha in ALPHAS:
        candidates[f"stack {alpha}"] = stack(alpha, True)
        candidates[f"unvalidated {alpha}"] = stack(alpha, False)
        candidates[f"autograd {alpha}"] = autograd(alpha)
    times = interleaved(candidates, rounds=rounds, calls=10, device=device)

    print(f"\n## stack: forward + backward, B={batch}, T={length}, float32, every weight > 0")
    floor = microseconds(times["masked mean"])
    print(f"masked mean (torch.where(mask, l, 0).sum() / mask.sum()): {floor}")
    print()
    columns = ("stack (validated)", "validate=False", "autograd backward")
    print("| alpha | " + " | ".join(f"{c} | ratio" for c in columns) + " | target |")
    print("| ---: " + "| ---: | ---: " * len(columns) + "| :--- |")
    met = True
    for alpha in ALPHAS:
        ratio = median_ratio(times, f"stack {alpha}", "masked mean")
        ok = ratio <= STACK_TARGET
        met &= ok
        cells = []
        for prefix in ("stack", "unvalidated", "autograd"):
            name = f"{prefix} {alpha}"
            cells.append(
                f"{microseconds(times[name])} | {median_ratio(times, name, 'masked mean'):.2f}x"
            )
        print(
            f"| {alpha:g} | {' | '.join(cells)} | <= {STACK_TARGET}x {'met' if ok else 'MISSED'} |"
        )
    # what the analytic backward earns: the two side by side, within each round
    earned = ", ".join(
        f"{alpha:g}: {median_ratio(times, f'stack {alpha}', f'autograd {alpha}'):.3f}x"
        for alpha in ALPHAS
    )
    print(f"\nstack (validated) over the same stages with autograd's backward, alpha {earned}")
    return met


def compile_section(device: torch.device, rounds: int) -> None:
    """The stack compiled by torch.compile (validate=False, as inside a compiled training
    step) over the eager masked mean; in a process of its own, since compiling changes
    the process in ways that slow eager calls timed beside it."""
    l, b, mask = stack_inputs(device)

    def baseline() -> None:
        leaf = l.detach().requires_grad_()
        masked_mean(leaf, mask).backward()

    candidates: dict[str, Callable[[], object]] = {"masked mean": baseline}
    for alpha in ALPHAS:
        cfg = config(alpha)

        def total(token_nll: torch.Tensor, cfg=cfg) -> torch.Tensor:
            return reconstruction_losses(
                token_nll, b, mask, cfg, validate=False
            ).total_reconstruction_loss

        fn = torch.compile(total, fullgraph=True, dynamic=False)
        try:
            fn(l.detach().requires_grad_()).backward()
        except Exception as error:  # no compiler, or an unsupported platform
            print(f"\n## compile: skipped ({type(error).__name__}: {str(error)[:80]})")
            return
        candidates[f"compiled {alpha}"] = lambda fn=fn: fn(l.detach().requires_grad_()).backward()
    times = interleaved(candidates, rounds=rounds, calls=10, device=device)
    print(f"\n## compile: torch.compile(fullgraph=True) of the stack, validate=False, {l.shape}")
    print(f"masked mean, eager: {microseconds(times['masked mean'])}")
    print()
    print("| alpha | compiled stack | ratio |")
    print("| ---: | ---: | ---: |")
    for alpha in ALPHAS:
        name = f"compiled {alpha}"
        ratio = median_ratio(times, name, "masked mean")
        print(f"| {alpha:g} | {microseconds(times[name])} | {ratio:.2f}x |")


def memory_section(device: torch.device) -> bool:
    l, b, mask = stack_inputs(device)
    buffer = l.numel() * l.element_size()

    def step(loss: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], None]:
        def run() -> None:
            leaf = l.detach().requires_grad_()
            loss(leaf).backward()

        return run

    print(f"\n## memory: peak of forward + backward in [B, T] buffers, B, T = {tuple(l.shape)}")
    print()
    floor = peak_memory(step(lambda x: masked_mean(x, mask)), device) / buffer
    print(f"masked mean: {floor:.3f}")
    print()
    print("| alpha | stack, validated | validate=False | target |")
    print("| ---: | ---: | ---: | :--- |")
    met = True
    for alpha in ALPHAS:
        peaks = []
        for validate in (True, False):
            cfg = config(alpha)

            def loss(x: torch.Tensor, cfg=cfg, validate=validate) -> torch.Tensor:
                values = reconstruction_losses(x, b, mask, cfg, validate=validate)
                return values.total_reconstruction_loss

            peaks.append(peak_memory(step(loss), device) / buffer)
        ok = max(peaks) <= MEMORY_TARGET
        met &= ok
        print(
            f"| {alpha:g} | {peaks[0]:.3f} | {peaks[1]:.3f} | "
            f"<= {MEMORY_TARGET:g} {'met' if ok else 'MISSED'} |"
        )
    return met


class TinyLanguageModel(torch.nn.Module):
    """Token and position embeddings, causal transformer encoder layers, a linear head."""

    def __init__(self, vocab: int, length: int, width: int, layers: int, heads: int) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.position = torch.nn.Parameter(torch.randn(length, width) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(
            width, heads, 4 * width, dropout=0.0, batch_first=True, norm_first=True
        )
        self.body = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(width, vocab)
        causal = torch.nn.Transformer.generate_square_subsequent_mask(length)
        self.register_buffer("causal", causal)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position[: tokens.shape[1]]
        return self.head(self.body(x, mask=self.causal, is_causal=True))


def step_section(device: torch.device, rounds: int) -> bool:
    batch, length, vocab = 8, 256, 8000
    torch.manual_seed(2)
    model = TinyLanguageModel(vocab, length, width=256, layers=2, heads=4).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, vocab, (batch, length), device=device)
    targets = torch.roll(tokens, -1, dims=1)
    lengths = torch.randint(length // 2, length + 1, (batch,))
    targets[torch.arange(length)[None, :] >= lengths[:, None].to(device)] = -100
    with torch.no_grad():  # the z-free reference's NLL: an input of the step, measured once
        reference = TinyLanguageModel(vocab, length, width=256, layers=2, heads=4).to(device)
        zfree_token_nll, _ = token_nll_from_logits(reference(tokens), targets)
    cfg = config(1.0)

    def step(with_stack: bool) -> Callable[[], None]:
        def run() -> None:
            optimizer.zero_grad(set_to_none=True)
            token_nll, mask = token_nll_from_logits(model(tokens), targets)
            if with_stack:
                loss = reconstruction_losses(token_nll, zfree_token_nll, mask, cfg)
                loss.total_reconstruction_loss.backward()
            else:
                masked_mean(token_nll, mask).backward()
            optimizer.step()

        return run

    candidates = {"masked mean": step(False), "stack": step(True)}
    times = interleaved(candidates, rounds=rounds, calls=1, device=device)
    ratio = median_ratio(times, "stack", "masked mean")
    ratios = [a / b for a, b in zip(times["stack"], times["masked mean"], strict=True)]
    low, _, high = statistics.quantiles(ratios, n=4)
    ok = ratio <= STEP_TARGET
    parameters = sum(p.numel() for p in model.parameters())
    print(
        f"\n## training step: 2-layer transformer ({parameters / 1e6:.1f} M parameters), "
        f"B={batch}, T={length}, V={vocab}, float32, Adam, alpha 1"
    )
    print()
    print("| loss | step time | ratio | target |")
    print("| --- | ---: | ---: | :--- |")
    print(f"| masked mean | {microseconds(times['masked mean'])} | 1 | |")
    print(
        f"| the stack | {microseconds(times['stack'])} | {ratio:.3f}x | "
        f"<= {STEP_TARGET}x {'met' if ok else 'MISSED'} |"
    )
    print(f"\nper-round ratios over {rounds} rounds: quartiles {low:.3f}x and {high:.3f}x")
    return ok


def peak_memory(fn: Callable[[], object], device: torch.device) -> int:
    """Bytes the step holds at its peak above what was live when it began (see the docstring)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - start

    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    records = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.tag == _EventType.Allocation and node.extra_fields.device.type == "cpu":
            records.append((node.start_time_ns, node.extra_fields.alloc_size))
    running = peak = 0
    for _, size in sorted(records):
        running += size
        peak = max(peak, running)
    return peak


def logits_section(device: torch.device, rounds: int) -> bool:
    batch, length, vocab = 4, 512, 32000
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(batch, length, vocab, generator=generator).to(device)
    zfree_logits = torch.randn(batch, length, vocab, generator=generator).to(device)
    targets = torch.randint(0, vocab, (batch, length), generator=generator)
    lengths = torch.randint(length // 2, length + 1, (batch,), generator=generator)
    targets[torch.arange(length)[None, :] >= lengths[:, None]] = -100
    targets = targets.to(device)
    cfg = config(1.0)

    def step(with_stack: bool) -> Callable[[], None]:
        def run() -> None:
            leaf = logits.detach().requires_grad_()
            token_nll, mask = token_nll_from_logits(leaf, targets)
            with torch.no_grad():
                zfree_token_nll, _ = token_nll_from_logits(zfree_logits, targets)
            if with_stack:
                loss = reconstruction_losses(token_nll, zfree_token_nll, mask, cfg)
                loss.total_reconstruction_loss.backward()
            else:
                masked_mean(token_nll, mask).backward()

        return run

    candidates = {"cross-entropy alone": step(False), "logits path": step(True)}
    times = interleaved(candidates, rounds=rounds, calls=1, device=device)
    memory = {name: peak_memory(fn, device) for name, fn in candidates.items()}

    time_ratio = median_ratio(times, "logits path", "cross-entropy alone")
    memory_ratio = memory["logits path"] / memory["cross-entropy alone"]
    time_ok = time_ratio <= LOGITS_TIME_TARGET
    memory_ok = memory_ratio <= LOGITS_MEMORY_TARGET
    print(
        f"\n## logits path: B={batch}, T={length}, V={vocab}, float32, alpha 1 "
        "(two cross-entropy passes, the z-free one without grad, then the stack; backward)"
    )
    print()
    print("| | cross-entropy alone | logits path | ratio | target |")
    print("| --- | ---: | ---: | ---: | :--- |")
    print(
        f"| time | {microseconds(times['cross-entropy alone'])} | "
        f"{microseconds(times['logits path'])} | {time_ratio:.3f}x | "
        f"<= {LOGITS_TIME_TARGET}x {'met' if time_ok else 'MISSED'} |"
    )
    print(
        f"| peak memory | {memory['cross-entropy alone'] / 2**20:.1f} MiB | "
        f"{memory['logits path'] / 2**20:.1f} MiB | {memory_ratio:.3f}x | "
        f"<= {LOGITS_MEMORY_TARGET}x {'met' if memory_ok else 'MISSED'} |"
    )
    return time_ok and memory_ok


def half_logits_section(device: torch.device, rounds: int) -> bool:
    batch, length, vocab = 4, 512, 32000
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(batch, length, vocab, generator=generator).to(device, torch.bfloat16)
    targets = torch.randint(0, vocab, (batch, length), generator=generator)
    lengths = torch.randint(length // 2, length + 1, (batch,), generator=generator)
    targets[torch.arange(length)[None, :] >= lengths[:, None]] = -100
    targets = targets.to(device)

    def cross_entropy(autocast: bool) -> Callable[[], None]:
        def run() -> None:
            leaf = logits.detach().requires_grad_()
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
                token_nll = F.cross_entropy(
                    leaf.view(-1, vocab), targets.view(-1), reduction="none"
                )
            token_nll.sum().backward()

        return run

    def ours() -> None:
        leaf = logits.detach().requires_grad_()
        token_nll, _ = token_nll_from_logits(leaf, targets)
        token_nll.sum().backward()

    candidates = {
        "cross-entropy, bfloat16": cross_entropy(False),
        "cross-entropy under autocast": cross_entropy(True),
        "token_nll_from_logits": ours,
    }
    times = interleaved(candidates, rounds=rounds, calls=1, device=device)
    memory = {name: peak_memory(fn, device) for name, fn in candidates.items()}
    baseline = "cross-entropy, bfloat16"
    memory_ratio = memory["token_nll_from_logits"] / memory[baseline]
    memory_ok = memory_ratio <= HALF_LOGITS_MEMORY_TARGET
    print(
        f"\n## bfloat16 logits: B={batch}, T={length}, V={vocab} "
        f"(the logits: {logits.numel() * 2 / 2**20:.1f} MiB); forward + backward"
    )
    print()
    print("| | losses | time | over cross-entropy, bfloat16 | peak memory | ratio |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    dtypes = {baseline: "bfloat16", "cross-entropy under autocast": "float32"}
    for name in candidates:
        print(
            f"| {name} | {dtypes.get(name, 'float32')} | {microseconds(times[name])} | "
            f"{median_ratio(times, name, baseline):.2f}x | {memory[name] / 2**20:.1f} MiB | "
            f"{memory[name] / memory[baseline]:.3f}x |"
        )
    print(
        f"\npeak memory of token_nll_from_logits over cross-entropy, bfloat16: "
        f"{memory_ratio:.3f}x (<= {HALF_LOGITS_MEMORY_TARGET}x "
        f"{'met' if memory_ok else 'MISSED'})"
    )
    return memory_ok


def conformance_section(max_examples: int) -> None:
    """Examples per second of the conformance run: every default invariant of
    ``properties`` against the bundled implementation, in this process, one after another,
    ``max_examples`` each (hypothesis's database off, seed fixed)."""
    print("\n## conformance run")
    try:
        from properties.invariants import select
        from properties.runner import RunRequest, run_request
        from properties.strategies import DEFAULT_DOMAIN
    except ImportError:
        print("skipped: properties.runner not available")
        return
    threads = torch.get_num_threads()  # the runner sets one thread per worker
    target = "recon_impl:reconstruction_losses"
    try:
        invariants = select(None, include_opt_in=False)
        start = time.perf_counter()
        results = [
            run_request(
                RunRequest(
                    invariant.id,
                    target,
                    "dev",
                    max_examples,
                    0,
                    DEFAULT_DOMAIN,
                    use_database=False,
                )
            )
            for invariant in invariants
        ]
        seconds = time.perf_counter() - start
    except Exception as error:  # an API this script does not know yet
        print(f"skipped: properties.runner could not be driven ({type(error).__name__}: {error})")
        return
    finally:
        torch.set_num_threads(threads)
    examples = sum(result.examples for result in results)
    failed = [result.invariant_id for result in results if result.status == "failed"]
    print(
        f"{len(results)} invariants, {examples} examples in {seconds:.1f} s: "
        f"{examples / seconds:.0f} examples per second (one process, one thread)"
        + (f"; FAILED: {', '.join(failed)}" if failed else "; all hold")
    )


SECTIONS = ("stack", "memory", "logits", "half-logits", "step", "conformance", "compile")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=SECTIONS, action="append", default=None)
    parser.add_argument("--rounds", type=int, default=15, help="rounds of the stack section")
    parser.add_argument("--step-rounds", type=int, default=21)
    parser.add_argument("--logits-rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument(
        "--conformance-examples", type=int, default=50, help="examples per invariant"
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=SIZE["batch"], help="B of the stack")
    parser.add_argument("--length", type=int, default=SIZE["length"], help="T of the stack")
    args = parser.parse_args(argv)
    SIZE.update(batch=args.batch, length=args.length)
    chosen = [section for section in SECTIONS if section in (args.only or SECTIONS)]
    if len(chosen) > 1:
        # Each section in a process of its own: what one section leaves behind (the
        # training step's large allocations, compiled code) slows small calls timed after
        # it, by up to half in the stack section.
        options = [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items() if k != "only"]
        options = [o for o in options if not o.endswith("=None")]
        codes = [
            subprocess.run([sys.executable, __file__, "--only", s, *options], check=False)
            for s in chosen
        ]
        return max(code.returncode for code in codes)

    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"# recon-spec benchmarks on {device}: {chosen[0]}")
    print(machine_description())
    section = chosen[0]
    met = True
    if section == "stack":
        met = stack_section(device, args.rounds)
    elif section == "memory":
        met = memory_section(device)
    elif section == "logits":
        met = logits_section(device, args.logits_rounds)
    elif section == "half-logits":
        met = half_logits_section(device, args.logits_rounds)
    elif section == "step":
        met = step_section(device, args.step_rounds)
    elif section == "conformance":
        conformance_section(args.conformance_examples)
    else:
        compile_section(device, args.rounds)
    print(f"\ntargets: {'met' if met else 'NOT met'}")
    print(machine_description().split("; ")[-1])  # the load at the end
    return 0


if __name__ == "__main__":
    sys.exit(main())
