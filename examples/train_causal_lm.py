"""A tiny GPT-2 with a latent z, trained beside a frozen z-free reference GPT-2.

    python examples/train_causal_lm.py --steps 3 --out log.csv
    torchrun --nproc_per_node 2 examples/train_causal_lm.py --steps 3 --out log.csv

Everything is built here, nothing is downloaded: two GPT-2s from a ``GPT2Config`` (about
125K parameters each), a byte-level tokenizer (a byte is a token), and text that ships with
Python (the lines of the source of the standard library's ``textwrap`` module).

* The **z-free reference** is the same task without z: a GPT-2 trained for
  ``--reference-steps`` steps on the data, then frozen. It gives ``zfree_token_nll``.
* The **latent model** starts as a copy of the reference and adds a latent code
  ``z in {1..K}``: a posterior ``q(z | x)`` from the mean input embedding of the sequence,
  whose expected code embedding is added to every position's input embedding. Its KL to a
  uniform prior is the ``kl`` term of the total loss.
* **c** (``zfree_reference_scale``) is measured with ``estimate_zfree_reference_scale`` over
  the training data, the reference in eval mode under autocast, masked as training masks it;
  ``--zfree-reference-scale C`` passes a value measured before instead.
* Each optimizer step takes ``--batch-size`` examples, split into ``--micro-batches``
  micro-batches per rank; ``TrainingStep`` weights them by kept examples, so accumulation
  and data parallelism give the gradient and the values of the full batch.
* The forward passes run under ``torch.autocast`` (bfloat16, ``--no-autocast`` to turn it
  off); ``token_nll_from_logits(..., shift=True)`` returns float32 losses from the bfloat16
  logits, with Hugging Face's label shift (position t predicts ``labels[t + 1]``).
* Every logged value of every step is a row of the CSV ``--out``.

The reconstruction weights come from the trainer flags of ``add_reconstruction_loss_arguments``
(``--help`` lists them); ``--beta`` weighs the KL. Dropout is off, so that the example's
runs with different splits into micro-batches and ranks can be compared value for value.
Torch runs one thread (``--threads``): for models this small, more threads mostly wait on
each other.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import json
import math
import os
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

try:
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as transformers_logging
except ImportError:  # the optional `examples` extra
    sys.exit("this example needs transformers: pip install -e '.[examples]'")

from recon_impl import (
    DisentanglementLossConfig,
    ReconstructionLossConfig,
    TrainingStep,
    add_reconstruction_loss_arguments,
    estimate_zfree_reference_scale,
    kept_example_count,
    reconstruction_loss_config_from_args,
    token_nll_from_logits,
)

IGNORE_INDEX = -100  # the label of padded positions, as in Hugging Face
PAD_ID = 0  # the input id at padded positions (hidden by the attention mask)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps (default: 3)")
    parser.add_argument("--out", type=Path, default=None, help="CSV file of the logged values")
    parser.add_argument("--batch-size", type=int, default=16, help="examples per step")
    parser.add_argument("--micro-batches", type=int, default=2, help="per rank and step")
    parser.add_argument("--seq-len", type=int, default=64, help="bytes per example, at most")
    parser.add_argument("--latent-codes", type=int, default=4, help="K, the values of z")
    # kl is per sequence, the reconstruction terms per token: beta = 1 / (targets per
    # example), about 1/43 here, is the evidence lower bound per token.
    parser.add_argument("--beta", type=float, default=0.02, help="weight on kl")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--reference-steps", type=int, default=60)
    parser.add_argument("--autocast", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (tiny model)")
    parser.add_argument("--seed", type=int, default=0)
    add_reconstruction_loss_arguments(parser)  # the seven weights and --zfree-reference-scale
    args = parser.parse_args(argv)
    for name in ("steps", "batch_size", "micro_batches", "seq_len", "latent_codes", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


# --- data: byte-level tokens of text that ships with Python --------------------------------


def examples(seq_len: int) -> list[list[int]]:
    """Every non-blank line of textwrap.py as byte ids, cut to ``seq_len``."""
    lines = Path(textwrap.__file__).read_bytes().splitlines()
    return [list(line.rstrip()[:seq_len]) for line in lines if line.strip()]


def collate(rows: Sequence[list[int]]) -> dict[str, Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``labels`` (IGNORE_INDEX at pads)."""
    length = max(len(row) for row in rows)
    input_ids = torch.full((len(rows), length), PAD_ID)
    attention_mask = torch.zeros(len(rows), length, dtype=torch.long)
    for i, row in enumerate(rows):
        input_ids[i, : len(row)] = torch.tensor(row)
        attention_mask[i, : len(row)] = 1
    labels = input_ids.masked_fill(attention_mask == 0, IGNORE_INDEX)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def step_rows(data: list[list[int]], seed: int, batch_size: int) -> list[list[int]]:
    """The examples of one optimizer step: ``batch_size`` drawn without replacement."""
    order = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed))
    return [data[i] for i in order[:batch_size].tolist()]


def step_micro_batches(
    data: list[list[int]], step: int, args: argparse.Namespace, rank: int, world_size: int
) -> list[dict[str, Tensor]]:
    """This rank's micro-batches of optimizer step ``step``: the step's examples split into
    ``micro_batches * world_size`` chunks, of which rank r takes chunks r, r + W, ... (so
    that one process with 2 micro-batches and 2 ranks with 1 see the same chunks)."""
    rows = step_rows(data, args.seed + step, args.batch_size)
    chunks = torch.arange(len(rows)).tensor_split(args.micro_batches * world_size)
    return [collate([rows[i] for i in chunk.tolist()]) for chunk in chunks[rank::world_size]]


# --- the two models -------------------------------------------------------------------------


def tiny_gpt2(seq_len: int) -> GPT2LMHeadModel:
    config = GPT2Config(
        vocab_size=256,
        n_positions=seq_len,
        n_embd=64,
        n_layer=2,
        n_head=4,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=PAD_ID,
        eos_token_id=PAD_ID,
        pad_token_id=PAD_ID,
    )
    return GPT2LMHeadModel(config)


class LatentGPT2(nn.Module):
    """A GPT-2 whose input embeddings get the expected embedding of a latent code z."""

    def __init__(self, lm: GPT2LMHeadModel, codes: int) -> None:
        super().__init__()
        self.lm = lm
        width = lm.config.n_embd
        # q(z | x) from the mean input embedding, normalized: token embeddings start tiny
        self.posterior = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, codes))
        self.codes = nn.Embedding(codes, width)
        nn.init.normal_(self.codes.weight, std=0.02)  # z starts close to adding nothing

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
        """Logits ``[B, T, V]`` and each example's KL(q(z | x) || uniform) ``[B]``."""
        embeds = self.lm.transformer.wte(input_ids)
        weights = attention_mask[..., None].to(embeds.dtype)
        pooled = (embeds * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        log_q = F.log_softmax(self.posterior(pooled).float(), dim=-1)
        q = log_q.exp()
        z = q.to(self.codes.weight.dtype) @ self.codes.weight
        logits = self.lm(inputs_embeds=embeds + z[:, None, :], attention_mask=attention_mask).logits
        kl = (q * (log_q + math.log(q.shape[-1]))).sum(-1)
        return logits, kl


def autocast(args: argparse.Namespace):
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast)


def train_reference(data: list[list[int]], args: argparse.Namespace) -> GPT2LMHeadModel:
    """The z-free reference: the same task without z, trained briefly, then frozen."""
    torch.manual_seed(args.seed)
    reference = tiny_gpt2(args.seq_len)
    optimizer = torch.optim.AdamW(reference.parameters(), lr=args.lr)
    for step in range(args.reference_steps):
        batch = collate(step_rows(data, 1_000_000 + args.seed + step, args.batch_size))
        # float32: bfloat16 matrix products are slow on CPUs without native support
        logits = reference(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).logits
        token_nll, mask = token_nll_from_logits(logits, batch["labels"], shift=True)
        token_nll[mask].mean().backward()  # Hugging Face's causal-LM loss
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if dist.is_initialized():  # every rank trained the same way; make it bit for bit so
        for tensor in reference.state_dict().values():
            dist.broadcast(tensor, src=0)
    return reference.eval().requires_grad_(False)


def zfree_batches(
    reference: GPT2LMHeadModel,
    data: list[list[int]],
    args: argparse.Namespace,
    rank: int,
    world_size: int,
) -> Iterator[tuple[Tensor, Tensor]]:
    """(zfree_token_nll, mask) over this rank's share of the data, as training computes them."""
    shard = data[rank::world_size]  # every example once over all ranks
    for start in range(0, len(shard), args.batch_size):
        batch = collate(shard[start : start + args.batch_size])
        with torch.no_grad(), autocast(args):
            logits = reference(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).logits
        yield token_nll_from_logits(logits, batch["labels"], shift=True)


# --- training ----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> list[dict[str, float]]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    transformers_logging.set_verbosity_error()
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1:  # launched by torchrun
        dist.init_process_group("gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    try:
        return train(args, rank, world_size)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def train(args: argparse.Namespace, rank: int, world_size: int) -> list[dict[str, float]]:
    started = time.perf_counter()
    data = examples(args.seq_len)
    reference = train_reference(data, args)

    if args.zfree_reference_scale is None:
        c = estimate_zfree_reference_scale(zfree_batches(reference, data, args, rank, world_size))
        say(
            rank,
            f"c = {c:.6f} measured over {len(data)} examples "
            f"(--zfree-reference-scale {c:.6f} skips this)",
        )
    else:
        c = args.zfree_reference_scale
    reconstruction = reconstruction_loss_config_from_args(
        args, base=ReconstructionLossConfig(zfree_reference_scale=c)
    )
    # No router in this model: router support is switched off (its default weight is 1).
    config = DisentanglementLossConfig(
        reconstruction=reconstruction, beta=args.beta, enable_router_support_loss=False
    )
    say(rank, "config: " + json.dumps(config.to_dict()))

    torch.manual_seed(args.seed + 1)
    model: nn.Module = LatentGPT2(
        copy.deepcopy(reference).train().requires_grad_(True), args.latent_codes
    )
    if world_size > 1:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    rows: list[dict[str, float]] = []
    with contextlib.ExitStack() as files:
        out = None
        if args.out is not None and rank == 0:
            out = csv.writer(files.enter_context(open(args.out, "w", newline="")))
        for step in range(1, args.steps + 1):
            step_started = time.perf_counter()
            micro_batches = step_micro_batches(data, step, args, rank, world_size)
            logged = optimizer_step(model, reference, optimizer, config, micro_batches, args)
            row = {"step": step, **logged, "seconds": time.perf_counter() - step_started}
            rows.append(row)
            if out is not None:
                if step == 1:
                    out.writerow(row)  # the header: every logged name
                out.writerow(row.values())
            say(
                rank,
                f"step {step}: total_loss {row['total_loss']:.5f}, "
                f"reconstruction_loss {row['reconstruction_loss']:.5f}, kl {row['kl']:.5f}",
            )
    say(rank, f"{args.steps} steps in {time.perf_counter() - started:.1f} s")
    return rows


def optimizer_step(
    model: nn.Module,
    reference: GPT2LMHeadModel,
    optimizer: torch.optim.Optimizer,
    config: DisentanglementLossConfig,
    micro_batches: list[dict[str, Tensor]],
    args: argparse.Namespace,
) -> dict[str, float]:
    """One optimizer step over this rank's micro-batches; the step's logged values."""
    # B'_k from the labels, before any forward pass: what the weights need.
    kept = [kept_example_count(b["labels"][:, 1:] != IGNORE_INDEX) for b in micro_batches]
    step = TrainingStep(config, kept)
    for batch in micro_batches:
        with step.gradient_sync(model):  # under DDP: gradients all-reduced on the last only
            with autocast(args):
                logits, kl = model(batch["input_ids"], batch["attention_mask"])
                with torch.no_grad():
                    zfree_logits = reference(
                        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
                    ).logits
            # float32 losses from the bfloat16 logits, with the causal-LM shift
            token_nll, mask = token_nll_from_logits(logits, batch["labels"], shift=True)
            zfree_token_nll, _ = token_nll_from_logits(zfree_logits, batch["labels"], shift=True)
            # kl as a mean over the kept examples, as the reconstruction terms are
            step.backward(token_nll, zfree_token_nll, mask, kl=kl[mask.any(dim=1)].mean())
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return step.log()  # the full batch's values, the same on every rank


def say(rank: int, message: str) -> None:
    if rank == 0:
        print(message, flush=True)


if __name__ == "__main__":
    main()
