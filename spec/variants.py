"""Known wrong variants of the outputs: what each would be under a common mistake.

The term registry (``spec/terms.py``) gives every output its variants; the conformance
suite's diagnosis (``properties/diagnosis.py``) recomputes them on a failing input to name
the mistake behind a failure ("your reconstruction_loss matches the global-token-mean
variant"). A variant is plain float64 arithmetic on the batch (``VariantBatch``): it
explains failures and never decides them, so it needs none of the oracle's precision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from spec.parameters import PARAMETERS


@dataclass(frozen=True)
class Variant:
    """One known mistake in one output: a short id, what it is, and what it computes."""

    name: str
    description: str
    compute: Callable[[VariantBatch], float]

    @property
    def title(self) -> str:
        """``name (description)``, as a report writes it."""
        return f"{self.name} ({self.description})" if self.description else self.name


@dataclass(frozen=True)
class VariantBatch:
    """A batch as float64 arrays with zeros at padded positions, and its config values:
    each parameter of the registry (``spec.parameters``) by name, read as ``x.alpha``,
    ``x.epsilon``, ``x.c``."""

    l: np.ndarray
    b: np.ndarray
    m: np.ndarray
    parameters: Mapping[str, float]

    def __getattr__(self, name: str) -> float:
        # called only for a name that is no attribute: a parameter's
        parameters = self.__dict__.get("parameters", {})
        if name in parameters:
            return parameters[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    @classmethod
    def of(
        cls,
        token_nll: Sequence[Sequence[float]],
        zfree_token_nll: Sequence[Sequence[float]],
        mask: Sequence[Sequence[bool]],
        **parameters: float,
    ) -> VariantBatch:
        """``parameters``: every parameter of the registry, by name (a ValueError names
        those missing or unknown)."""
        expected = {p.name for p in PARAMETERS}
        if set(parameters) != expected:
            raise ValueError(
                f"parameters must be {', '.join(sorted(expected))}, got "
                f"{', '.join(sorted(parameters)) or 'none'}"
            )
        m = np.array(mask, dtype=bool).reshape(len(mask), -1)
        l = np.where(m, np.array(token_nll, dtype=np.float64).reshape(m.shape), 0.0)
        b = np.where(m, np.array(zfree_token_nll, dtype=np.float64).reshape(m.shape), 0.0)
        return cls(l=l, b=b, m=m, parameters=dict(parameters))

    @property
    def n(self) -> np.ndarray:
        return self.m.sum(1)

    @property
    def kept(self) -> np.ndarray:
        return self.n > 0

    def per_example_mean(self, x: np.ndarray) -> np.ndarray:
        return x.sum(1)[self.kept] / self.n[self.kept]

    @property
    def lbar(self) -> np.ndarray:
        return self.per_example_mean(self.l)

    @property
    def bbar(self) -> np.ndarray:
        return self.per_example_mean(self.b)

    def shares(self, alpha: float | None = None, values: np.ndarray | None = None) -> np.ndarray:
        """Per-example tempered shares of ``values`` (b by default), with the spec's
        conventions (0^0 = 1, all-zero rows uniform)."""
        alpha = self.alpha if alpha is None else alpha
        values = self.b if values is None else values
        top = np.where(self.m, values, 0.0).max(1, keepdims=True)
        ratio = np.where(top > 0, values / np.where(top > 0, top, 1.0), 1.0)
        with np.errstate(all="ignore"):
            numerator = np.where(self.m, ratio**alpha, 0.0)
        return numerator / np.maximum(numerator.sum(1, keepdims=True), 1e-300)

    def ltok(self, shares: np.ndarray) -> np.ndarray:
        return (shares * self.l).sum(1)[self.kept]

    def btok(self, shares: np.ndarray) -> np.ndarray:
        return (shares * self.b).sum(1)[self.kept]

    def kappa(self, shares: np.ndarray) -> np.ndarray:
        bbar = self.bbar
        return np.where(bbar > 0, self.btok(shares) / np.where(bbar > 0, bbar, 1.0), 1.0)


def _batch_normalized_shares(x: VariantBatch) -> np.ndarray:
    """b^alpha over its sum over the whole batch (``sum(...)`` without ``dim=1``)."""
    top = x.b[x.m].max() if x.m.any() else 0.0
    with np.errstate(all="ignore"):
        numerator = np.where(x.m, (x.b / top if top > 0 else 1.0) ** x.alpha, 0.0)
    return numerator / numerator.sum()


def _unnormalized_shares(x: VariantBatch) -> np.ndarray:
    """The weights (b / max_t b)^alpha as they are, not divided by their sum."""
    top = np.where(x.m, x.b, 0.0).max(1, keepdims=True)
    ratio = np.where(top > 0, x.b / np.where(top > 0, top, 1.0), 1.0)
    present = x.m & ((ratio > 0) | (x.alpha == 0))
    with np.errstate(all="ignore"):
        return np.where(present, ratio**x.alpha, 0.0)


def _shares_over_padding(x: VariantBatch) -> np.ndarray:
    """The shares normalised over every position, a padded one counted as b = 0 (so with
    weight 0^0 = 1 at alpha = 0), and the l and b of padded positions taken as 0."""
    b = np.where(x.m, x.b, 0.0)
    top = b.max(1, keepdims=True)
    ratio = np.where(top > 0, b / np.where(top > 0, top, 1.0), 1.0)
    present = (ratio > 0) | (x.alpha == 0)
    with np.errstate(all="ignore"):
        numerator = np.where(present, ratio**x.alpha, 0.0)
    kept = x.m.any(1, keepdims=True)
    return np.where(kept, numerator / np.maximum(numerator.sum(1, keepdims=True), 1e-300), 0.0)


#: mistakes in the shares; each reaches every share-weighted output (``share_variants``)
SHARE_MISTAKES: tuple[tuple[str, str, Callable[[VariantBatch], np.ndarray]], ...] = (
    ("alpha-ignored", "linear shares whatever alpha", lambda x: x.shares(1.0)),
    ("uniform-shares", "alpha treated as 0", lambda x: x.shares(0.0)),
    ("shares-from-token_nll", "pi built from l, not b", lambda x: x.shares(values=x.l)),
    (
        "batch-normalized-shares",
        "b^alpha normalized over the whole batch",
        _batch_normalized_shares,
    ),
    ("unnormalized-shares", "(b / max b)^alpha not divided by their sum", _unnormalized_shares),
    ("shares-over-padding", "normalised over padded positions too", _shares_over_padding),
)


def share_variants(
    of_shares: Callable[[VariantBatch, np.ndarray], float],
) -> tuple[Variant, ...]:
    """The variants of a share-weighted output, ``of_shares(batch, shares)``, one per share
    mistake."""
    return tuple(
        Variant(name, description, lambda x, make=make: of_shares(x, make(x)))
        for name, description, make in SHARE_MISTAKES
    )
