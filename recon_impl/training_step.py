r"""One optimizer step over micro-batches and data-parallel ranks, through compute_total_loss.

An optimizer step sees shards ``k``: the micro-batches of gradient accumulation on each
rank of data parallelism. ``TrainingStep`` weights shard ``k`` by its kept examples,
:math:`w_k = B'_k / \sum_j B'_j` over every shard of every rank (``shard_weights``), and
backpropagates :math:`w_k \cdot \mathrm{total\_loss}_k` from
``compute_total_loss(..., weight=w_k)``. By the batch-decomposition identity (MATH.md) the
accumulated gradient is the gradient of ``total_loss`` on the union of the shards, and the
logged values are the union's values, exactly, whatever the shards' sizes and lengths and
however many of their rows are padding:

.. math::

    \nabla \mathrm{total\_loss}(\cup_k S_k) = \sum_k w_k \nabla \mathrm{total\_loss}(S_k),
    \qquad x(\cup_k S_k) = \sum_k w_k\, x(S_k).

The auxiliary terms are weighted by the same :math:`w_k`: pass each as a mean over the
micro-batch's kept examples (rows with at least one valid token), as the reconstruction
terms are, and its union value is the mean over all kept examples of the step. A
micro-batch without a valid token has weight 0 and contributes exactly nothing; its loss is
a zero connected to ``token_nll`` and the auxiliary terms, so that a data-parallel rank
holding only padding runs the same backward pass as its peers.

Under ``torch.distributed`` (a ``group`` given, or the default group initialized) the
weights' denominator is all-reduced when the step is made, and ``log()`` all-reduces the
values: both are collectives that every rank must call. DistributedDataParallel *averages*
gradients over the ``W`` ranks, so the loss to backpropagate is multiplied by ``W``
(``ranks_average_gradients=False`` for gradients that are summed instead).

Example (two micro-batches, one of them padding only):
    >>> import torch
    >>> from recon_impl import DisentanglementLossConfig, kept_example_count
    >>> config = DisentanglementLossConfig(beta=0.5, enable_router_support_loss=False)
    >>> theta = torch.tensor(2.0, requires_grad=True)
    >>> micro_batches = [
    ...     (torch.tensor([[1.0, 3.0], [2.0, 0.0]]), torch.tensor([[1, 1], [1, 0]])),
    ...     (torch.tensor([[5.0, 5.0]]), torch.tensor([[0, 0]])),
    ... ]
    >>> step = TrainingStep(config, [kept_example_count(mask) for _, mask in micro_batches])
    >>> for x, mask in micro_batches:
    ...     kl = theta.square() / 8 if mask.any() else torch.tensor(float("nan"))
    ...     _ = step.backward(theta * x, x, mask, kl=kl)
    >>> log = step.log(prefix="train/")
    >>> log["train/reconstruction_loss"], log["train/kl"], log["train/total_loss"]
    (4.0, 0.5, 4.25)
    >>> float(theta.grad)  # d/dtheta of theta * mean(2, 2) + 0.5 * theta^2 / 8
    2.25
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from recon_impl.batch_decomposition import kept_count_list, kept_example_count, shard_weights
from recon_impl.config import DisentanglementLossConfig, check_config_type
from recon_impl.distributed import collective_device, process_group_in_use
from recon_impl.total_loss import AUXILIARY_TERM_NAMES, TOTAL_LOSS_NAMES, compute_total_loss

__all__ = ["TrainingStep"]

_INDEX = {name: index for index, name in enumerate(TOTAL_LOSS_NAMES)}


class TrainingStep:
    """Kept-example-weighted losses, backward passes and logging for one optimizer step.

    Args:
        config: the weights of every term of the total loss.
        kept_counts: ``B'_k`` of each of this rank's micro-batches, in the order they will
            be given (``kept_example_count(mask)``, known before the forward pass from the
            labels: ``kept_example_count(labels[:, 1:] != -100)`` for a causal LM).
        group: a ``torch.distributed`` process group; by default the default group when
            ``torch.distributed`` is initialized, otherwise none.
        ranks_average_gradients: whether the data-parallel wrapper averages gradients
            over the ranks (DistributedDataParallel and FSDP do); then ``loss()`` is
            multiplied by the world size. Ignored without ``torch.distributed``.

    Raises:
        ValueError: a bad ``config`` or count, or no micro-batch of any rank keeps an
            example (when distributed, every rank raises).

    Use: for each micro-batch, in order, ``loss(...)`` (then your own backward, a
    ``GradScaler``'s or an accelerator's) or ``backward(...)``, inside
    ``gradient_sync(ddp_model)``; after the last one, ``log()``. A step is used once.
    """

    def __init__(
        self,
        config: DisentanglementLossConfig,
        kept_counts: Sequence[int],
        *,
        group: Any = None,
        ranks_average_gradients: bool = True,
    ) -> None:
        check_config_type("config", config, DisentanglementLossConfig)
        if not isinstance(ranks_average_gradients, bool):
            raise ValueError(
                f"ranks_average_gradients must be a bool, got {ranks_average_gradients!r}"
            )
        self.config = config
        self.kept_counts = tuple(kept_count_list(kept_counts))
        self.weights: list[float] = shard_weights(self.kept_counts, group=group)
        self.kept_counts = tuple(int(count) for count in self.kept_counts)
        self.group = group
        self.distributed = process_group_in_use(group)
        self.world_size = dist.get_world_size(group) if self.distributed else 1
        self.loss_scale = self.world_size if ranks_average_gradients else 1
        self._given = 0
        self._sums: Tensor | None = None  # float64: the values in TOTAL_LOSS_NAMES order
        self._present: frozenset[str] = frozenset()  # the terms each micro-batch gives

    def gradient_sync(self, model: torch.nn.Module) -> AbstractContextManager[Any]:
        """``model.no_sync()`` for every micro-batch but this rank's last, so that the
        gradients are all-reduced once per step; a no-op for a model without ``no_sync``.
        Enter it before the forward pass of the micro-batch it is for."""
        no_sync = getattr(model, "no_sync", None)
        if no_sync is None or self._given >= len(self.weights) - 1:
            return contextlib.nullcontext()
        return no_sync()

    def loss(
        self,
        token_nll: Tensor,
        zfree_token_nll: Tensor,
        mask: Tensor,
        *,
        validate: bool = True,
        **auxiliary_terms: Tensor,
    ) -> Tensor:
        """The next micro-batch's loss to backpropagate: ``scale * w_k * total_loss_k``.

        Args:
            token_nll, zfree_token_nll, mask, validate: as ``compute_total_loss``.
            **auxiliary_terms: ``kl=...``, ``router_support=...`` and the other terms of
                ``AUXILIARY_TERM_NAMES`` as ``compute_total_loss`` takes them, each a
                0-dim mean over this micro-batch's kept examples.

        Raises:
            ValueError: every micro-batch was already given, ``mask`` keeps another
                number of examples than ``kept_counts`` said, an unknown term is named,
                a term is given here but not on the micro-batches before (or the other
                way round), or ``compute_total_loss`` rejects the input.
        """
        index = self._given
        if index >= len(self.weights):
            raise ValueError(
                f"all {len(self.weights)} micro-batches of kept_counts were already given; "
                "make a new TrainingStep for the next optimizer step"
            )
        unknown = sorted(set(auxiliary_terms) - set(AUXILIARY_TERM_NAMES))
        if unknown:
            raise ValueError(
                f"unknown auxiliary term(s) {unknown}: expected names of {AUXILIARY_TERM_NAMES}"
            )
        given = frozenset(name for name, term in auxiliary_terms.items() if term is not None)
        if index > 0 and given != self._present:
            # the union value of a term given on only some micro-batches would be a part sum
            name = sorted(given ^ self._present)[0]
            where = (index, "an earlier one") if name in given else ("an earlier one", index)
            raise ValueError(
                f"{name} is given on micro-batch {where[0]} but not on {where[1]}: give each "
                "auxiliary term on every micro-batch of a step, or on none"
            )
        kept = kept_example_count(mask)
        if kept != self.kept_counts[index]:
            raise ValueError(
                f"mask of micro-batch {index} keeps {kept} examples, but kept_counts[{index}] "
                f"is {self.kept_counts[index]}: the weights would not be those of this data"
            )
        out = compute_total_loss(
            token_nll,
            zfree_token_nll,
            mask,
            self.config,
            weight=self.weights[index],
            validate=validate,
            **auxiliary_terms,
        )
        self._accumulate(out)
        self._given += 1
        return self.loss_scale * out["total_loss"]

    def backward(
        self,
        token_nll: Tensor,
        zfree_token_nll: Tensor,
        mask: Tensor,
        *,
        validate: bool = True,
        **auxiliary_terms: Tensor,
    ) -> Tensor:
        """``loss(...)`` and its backward pass; returns the loss, detached."""
        loss = self.loss(token_nll, zfree_token_nll, mask, validate=validate, **auxiliary_terms)
        loss.backward()
        return loss.detach()

    def log(self, prefix: str = "") -> dict[str, float]:
        """The step's values as floats: the reconstruction entries, every auxiliary
        term given (on any micro-batch of any rank), and ``total_loss``, each named
        ``prefix + name``, in ``TOTAL_LOSS_NAMES`` order. They are the union's values
        (unscaled: the world-size factor of ``loss()`` is for the gradients only), the
        same on every rank. A collective when distributed: every rank calls it.

        Raises:
            ValueError: ``prefix`` is not a string, not every micro-batch was given, or
                an auxiliary term was given on some ranks but not on others.
        """
        if not isinstance(prefix, str):
            raise ValueError(f"prefix must be a str, got {type(prefix).__name__}")
        if self._given != len(self.weights):
            raise ValueError(
                f"log() needs every micro-batch: {self._given} of {len(self.weights)} given"
            )
        sums = self._sums
        if sums is None:  # no micro-batch on this rank: it still takes part in the reduction
            sums = torch.zeros(len(TOTAL_LOSS_NAMES), dtype=torch.float64)
        # how many ranks give each term, and how many have micro-batches at all
        present = torch.tensor(
            [float(name in self._present) for name in AUXILIARY_TERM_NAMES]
            + [float(len(self.weights) > 0)],
            dtype=torch.float64,
            device=sums.device,
        )
        values = torch.cat([sums, present])
        if self.distributed:
            values = values.to(collective_device(self.group))
            dist.all_reduce(values, op=dist.ReduceOp.SUM, group=self.group)
        numbers = values.tolist()
        *counts, ranks = numbers[len(TOTAL_LOSS_NAMES) :]
        by_term = dict(zip(AUXILIARY_TERM_NAMES, counts, strict=True))
        given = {name for name, count in by_term.items() if count}
        partial = sorted(name for name, count in by_term.items() if 0 < count < ranks)
        if partial:  # every rank raises: the reduction above was every rank's
            raise ValueError(
                f"{partial[0]} is given on some ranks but not on others: give each auxiliary "
                "term on every micro-batch of every rank, or on none"
            )
        return {
            prefix + name: numbers[index]
            for name, index in _INDEX.items()
            if name not in AUXILIARY_TERM_NAMES or name in given
        }

    def _accumulate(self, out: dict[str, Tensor]) -> None:
        # On the values' device, in float64: one host sync per step, in log().
        reference = out["total_loss"]
        zero = torch.zeros((), dtype=torch.float64, device=reference.device)
        row = torch.stack(
            [out[name].detach().to(torch.float64) if name in out else zero for name in _INDEX]
        )
        self._sums = row if self._sums is None else self._sums + row
        self._present = frozenset(name for name in AUXILIARY_TERM_NAMES if name in out)
